"""Round-trip YAML for objects read, changed by a function and written back (krmfn builds on it):
go-yaml's meaning, and the bookkeeping that writes untouched objects back verbatim.

Three guarantees:

1. **Meaning.** Every scalar is read as go-yaml v3 (YAML 1.2) reads it: `yes`, `on` and `NO` are
   strings, `0755` is 493, `1e3` is a float, `~` is None (`_scalars.py`). Every value written
   reads back the same under YAML 1.1 and 1.2: new strings that could be misread are quoted.
2. **Text.** An object the function did not change is written back as the very text it was read
   from (`Original`): same quotes, same block scalars, same flow lists, same anchors, its
   comments still inside it. An object it changed is spliced from its original lines and new
   ones for what changed (`_splice.py`), or, if libyaml read it, written anew with the old text
   of every scalar that still holds its old value (`_shape.py`, `_emit.py`).
3. **Speed.** The block-style YAML kpt writes is read by a line parser (`_blockparse.py`) and
   the rest by libyaml (`_libyaml.py`); "unchanged" is a comparison of `marshal` fingerprints.
   A 5,000-resource ResourceList reads in about a quarter of a second.

`load` and `dump` offer the same semantics for one YAML document held as text (krmfn.yamlio
hands them to function authors, with krmfn's errors).
"""

from __future__ import annotations

import marshal
import re
from collections.abc import Callable, Iterator
from typing import Any

from krmyaml import _blockparse
from krmyaml._emit import emit_block
from krmyaml._shape import Shape
from krmyaml.errors import YamlError

__all__ = ["Original", "dump", "fingerprint", "line_parser_can_read", "load", "read_chunk", "split_lines"]


def load(text: str) -> Any:
    """The value of the single YAML document in `text`, with go-yaml (YAML 1.2) meaning.

    Returns None for an empty document. Raises YamlError for invalid YAML or several documents.
    """
    if not line_parser_can_read(text):
        return _load_with_libyaml(text)
    lines, rows = split_lines(text)
    try:
        value, _ = _blockparse.parse_block(lines, rows, 0, len(lines))
    except _blockparse.Unsupported:
        return _load_with_libyaml(text)
    return value


def dump(value: Any) -> str:
    """`value` as a YAML document in block style, ending with a newline.

    Strings that a YAML 1.1 or 1.2 reader could take for another type are quoted. Raises
    UnwritableValue for values YAML cannot carry (sets, arbitrary objects).
    """
    if isinstance(value, dict | list | tuple) and value:
        return "\n".join(emit_block(value if not isinstance(value, tuple) else list(value))) + "\n"
    return "\n".join(emit_block([value]))[2:] + "\n"


def _load_with_libyaml(text: str) -> Any:
    from krmyaml import _libyaml

    node = _libyaml.compose(text)
    return None if node is None else _libyaml.construct(node, text)


# Characters that send a whole text to libyaml: line breaks other than \n (YAML 1.1 also breaks
# lines at CR, NEL, LS and PS), a byte-order mark past the start, and the non-printable
# characters YAML forbids (libyaml reports them).
_NOT_FOR_LINE_PARSER = re.compile(
    "[\r\x85\u2028\u2029\ufeff\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x84\x86-\x9f\ud800-\udfff\ufffe\uffff]"
)


def line_parser_can_read(text: str) -> bool:
    """False if `text` holds a character only libyaml handles right (see `_NOT_FOR_LINE_PARSER`)."""
    return _NOT_FOR_LINE_PARSER.search(text) is None


def split_lines(text: str) -> tuple[list[str], list[tuple[str, str, str, str]]]:
    """The lines of `text` (a last line without a newline counts as one) and their parser rows."""
    if not text.endswith("\n"):
        text += "\n"
    lines, rows = text.split("\n"), _blockparse.rows_of(text)
    # Both end with an empty entry for the position after the final newline: not a line.
    return lines[:-1], rows[:-1]


def fingerprint(value: Any) -> bytes | None:
    """Bytes equal for two values exactly when they are equal with the same types throughout.

    marshal format 2 has no back-references, so the bytes do not depend on which objects
    happen to be shared. None if the value holds something marshal cannot write.
    """
    try:
        return marshal.dumps(value, 2)
    except ValueError:
        return None


class Original:
    """How one node (an item, or a top-level section) was read.

    Knows its source text when it has one, the fingerprint of its value as read, and how to
    rebuild its `Shape` (paths from the chunk's root, e.g. `(0, "metadata", "name")` for an
    item read as the one-entry sequence `- ...`). The shape is built on first use only.
    """

    __slots__ = ("_lines", "_start", "_stop", "fingerprint", "_factory", "_shape", "foot")

    def __init__(
        self,
        *,
        fingerprint: bytes | None,
        factory: Callable[[], Shape],
        lines: list[str] | None = None,
        start: int = 0,
        stop: int = 0,
    ) -> None:
        self._lines, self._start, self._stop = lines, start, stop
        self.fingerprint = fingerprint
        self._factory = factory
        self._shape: Shape | None = None
        self.foot: list[str] = []  # comment lines after the node that belong to it (an item's foot comment)

    @property
    def end(self) -> int:
        """The index of the line after the node's last line of content."""
        return self._stop

    @property
    def text(self) -> str | None:
        """The node's source lines, without trailing comments and blank lines; None if none."""
        if self._lines is None:
            return None
        return "\n".join(self._lines[self._start : self._stop])

    def unchanged(self, value: Any) -> bool:
        """True if `value` is, type for type, what was read, and the source text is at hand."""
        return self._lines is not None and self.fingerprint is not None and fingerprint(value) == self.fingerprint

    def shape(self) -> Shape:
        if self._shape is None:
            self._shape = self._factory()
        return self._shape


def read_chunk(lines: list[str], rows: list[tuple[str, str, str, str]], start: int, stop: int) -> tuple[Any, Original]:
    """Read `lines[start:stop]` as one block node: (value, its Original).

    Tries the line parser first, then libyaml on the same lines. Raises YamlError when libyaml
    refuses the text too (the caller may then retry with the whole document, for a better
    message: a chunk's line numbers are its own).
    """
    try:
        value, last = _blockparse.parse_block(lines, rows, start, stop)
    except (_blockparse.Unsupported, RecursionError):  # libyaml decides, and words depth errors as the others do
        return _read_chunk_with_libyaml(lines, start, stop)

    def factory() -> Shape:
        shape = Shape()
        shape.value, _ = _blockparse.parse_block(lines, rows, start, stop, shape)
        return shape

    return value, Original(fingerprint=None, factory=factory, lines=lines, start=start, stop=last + 1)


def _read_chunk_with_libyaml(lines: list[str], start: int, stop: int) -> tuple[Any, Original]:
    from krmyaml import _libyaml

    text = "\n".join(lines[start:stop]) + "\n"
    node = _libyaml.compose(text)
    if node is None:
        raise YamlError("invalid YAML: empty node")
    value = _libyaml.construct(node, text)
    last = start + _last_content_line(lines[start:stop], node)

    def factory() -> Shape:
        shape = Shape()
        shape.value = _libyaml.construct(node, text, shape)
        return shape

    return value, Original(fingerprint=None, factory=factory, lines=lines, start=start, stop=last + 1)


def _last_content_line(lines: list[str], node: Any) -> int:
    """The last line of `lines` that holds part of `node`, trailing comments excluded.

    libyaml's end mark for the node lies past any trailing comments, so those are stripped
    textually; but a line that looks like a comment may be inside a quoted or block scalar, so
    the result is never before the end of the node's last scalar (aliases have no position of
    their own, hence not that alone).
    """
    last = _line_of(node.end_mark)
    while last > 0 and (not lines[last].strip() or lines[last].lstrip().startswith("#")):
        last -= 1
    return max(last, _line_of(max(_leaves(node), key=lambda leaf: leaf.end_mark.index).end_mark))


def _line_of(mark: Any) -> int:
    """The line a node ending at `mark` ends on (a mark at a line's start ends the line before)."""
    return int(mark.line) - (1 if mark.column == 0 and mark.line > 0 else 0)


def _leaves(node: Any) -> Iterator[Any]:
    value = node.value
    if isinstance(value, list) and value and not getattr(node, "flow_style", False):
        for child in value:
            if isinstance(child, tuple):
                yield from _leaves(child[0])
                yield from _leaves(child[1])
            else:
                yield from _leaves(child)
    else:
        yield node
