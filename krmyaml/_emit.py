"""Writing edited and new objects as block-style YAML, keeping every value's meaning.

The output is what go-yaml itself would accept and kpt writes back sensibly: block mappings,
compact block sequences (`key:` then `- ` at the key's column), two-space indentation, `{}` and
`[]` for empty collections, `|` block scalars for ordinary multi-line text, and no comments
(kpt copies comments back from its own copy of the input, spec §7).

Scalars: a field that still holds what it held when read is written with its original text
(from the item's `Shape`); everything else gets `_scalars.scalar_text`, which quotes any string
that a YAML 1.1 or 1.2 reader could take for something else. Collections that were in flow style
stay in flow style.

Given a file's `Style` (textedit's package files), new lines follow it instead: its indentation
and sequence style, its spelling of null, its preferred quote for strings that need one; and a
changed string keeps the quote it was written with, as does a new string given a `quote`.

This is a deliberately small emitter written in Python: building PyYAML events costs more than
the whole budget for 5,000 resources, and the subset above is all an object needs.
"""

from __future__ import annotations

from typing import Any

from krmyaml._scalars import double_quoted, literal_ok, plain_safe, quoted, same_value, scalar_text
from krmyaml._shape import Path, Shape
from krmyaml._style import Style
from krmyaml.errors import UnwritableValue

_MISSING: Any = object()
_MAX_KEY = 1024  # YAML limits implicit keys to 1024 characters
_NO_RAW: dict[Path, str] = {}
_NO_FLOW: set[Path] = set()


def emit_block(
    value: dict[Any, Any] | list[Any], shape: Shape | None = None, *, indent: int = 0, style: Style | None = None
) -> list[str]:
    """Lines of YAML for a non-empty mapping or sequence written in block style at `indent`.

    `shape`, when given, describes the same node as it was read (paths from this node's root).
    Raises UnwritableValue for a value YAML cannot carry (a set, an arbitrary object, a key that is
    a collection or longer than 1024 characters).
    """
    writer = Writer(shape, style=style)
    pristine = shape.value if shape is not None else _MISSING
    if isinstance(value, dict):
        writer.mapping(value, (), pristine, indent, None)
    else:
        writer.sequence(value, (), pristine, indent)
    return writer.lines


class Writer:
    """Appends YAML lines to `lines`; `_splice.py` shares the list to mix copied and new entries."""

    __slots__ = ("lines", "raw", "keys", "flow", "step", "dash", "null", "quote", "styled")

    def __init__(self, shape: Shape | None, lines: list[str] | None = None, *, style: Style | None = None) -> None:
        self.lines: list[str] = [] if lines is None else lines
        self.raw = shape.raw if shape is not None else _NO_RAW
        self.keys = shape.keys if shape is not None else _NO_RAW
        self.flow = shape.flow if shape is not None else _NO_FLOW
        # Without a style: go-yaml's layout (two spaces, compact sequences) and krmfn's quoting.
        self.step, self.dash = (style.mapping_indent, style.dash_offset) if style is not None else (2, 0)
        self.null = style.null if style is not None else "null"
        self.quote = style.quote if style is not None else '"'
        self.styled = style is not None

    def mapping(self, value: dict[Any, Any], path: Path, orig: Any, indent: int, first: str | None) -> None:
        """Entries at column `indent`; the first line starts with `first` instead, if given."""
        start = len(self.lines)
        orig_map = orig if type(orig) is dict else None
        for key, child in value.items():
            child_orig = orig_map.get(key, _MISSING) if orig_map is not None else _MISSING
            self.entry(key, child, path + (key,), child_orig, indent)
        if first is not None:
            self.lines[start] = first + self.lines[start][indent:]

    def entry(self, key: Any, value: Any, path: Path, orig: Any, indent: int) -> None:
        """One mapping entry `key: value` at column `indent` (`path` ends with `key`)."""
        head = " " * indent + self.key(key, path, flow=False) + ":"
        if isinstance(value, dict) and value and self._block(path):
            self.lines.append(head)
            self.mapping(value, path, orig, indent + self.step, None)
        elif isinstance(value, list | tuple) and value and self._block(path):
            self.lines.append(head)
            self.sequence(value, path, orig, indent + self.dash)
        else:
            self.inline(head + " ", value, path, orig, indent + self.step)

    def sequence(self, value: list[Any] | tuple[Any, ...], path: Path, orig: Any, indent: int) -> None:
        orig_list = orig if type(orig) is list else None
        for index, child in enumerate(value):
            child_orig = orig_list[index] if orig_list is not None and index < len(orig_list) else _MISSING
            self.item(child, path + (index,), child_orig, indent)

    def item(self, value: Any, path: Path, orig: Any, indent: int, quote: str | None = None) -> None:
        """One sequence entry `- value` with its dash at column `indent` (a string in `quote`, if given)."""
        dash = " " * indent + "- "
        if isinstance(value, dict) and value and self._block(path):
            self.mapping(value, path, orig, indent + 2, dash)
        elif isinstance(value, list | tuple) and value and self._block(path):
            start = len(self.lines)
            self.sequence(value, path, orig, indent + 2)
            self.lines[start] = dash + self.lines[start][indent + 2 :]
        else:
            self.inline(dash, value, path, orig, indent + 2, quote)

    def inline(self, head: str, value: Any, path: Path, orig: Any, indent: int, quote: str | None = None) -> None:
        """A scalar, an empty or flow collection, or a `|` block, after `head` on one line."""
        raw = self.raw.get(path)
        if raw is not None and orig is not _MISSING and same_value(value, orig):
            self.lines.append(head + raw if raw else head.rstrip())
        elif isinstance(value, str) and (quote or self._old_quote(raw, orig)):
            self.lines.append(head + _quoted_with(value, quote or self._old_quote(raw, orig)))
        elif isinstance(value, dict | list | tuple):
            self.lines.append(head + self.flow_text(value, path, orig))
        elif isinstance(value, str) and "\n" in value and literal_ok(value):
            chomp = "-" if value[-1] != "\n" else ("+" if value.endswith("\n\n") else "")
            self.lines.append(head + "|" + chomp)
            pad = " " * indent
            body = value[:-1] if value[-1] == "\n" else value
            self.lines.extend(pad + line if line else "" for line in body.split("\n"))
        else:
            text = self.scalar(value, path, flow=False)
            self.lines.append(head + text if text else head.rstrip())

    def _block(self, path: Path) -> bool:
        """Whether a collection is written in block style: unless it was in flow style, and (with a
        style, as kpt does) an empty `{}` or `[]` that gains entries grows into a block."""
        return path not in self.flow or self.styled and self.raw.get(path, "")[1:2] in ("}", "]")

    def _old_quote(self, raw: str | None, orig: Any) -> str:
        """The quote a changed string keeps: the one its old text was written in (with a style only)."""
        if self.styled and raw and type(orig) is str and raw[0] in "'\"":
            return raw[0]
        return ""

    def flow_text(self, value: Any, path: Path, orig: Any) -> str:
        raw = self.raw.get(path)
        if raw and orig is not _MISSING and _flow_safe(raw) and same_value(value, orig):
            return raw
        if isinstance(value, str) and self._old_quote(raw, orig):
            return _quoted_with(value, self._old_quote(raw, orig))
        if isinstance(value, dict):
            orig_map = orig if type(orig) is dict else None
            parts = []
            for key, child in value.items():
                child_path = path + (key,)
                child_orig = orig_map.get(key, _MISSING) if orig_map is not None else _MISSING
                parts.append(f"{self.key(key, child_path, flow=True)}: {self.flow_text(child, child_path, child_orig)}")
            return "{" + ", ".join(parts) + "}"
        if isinstance(value, list | tuple) and self.styled and type(orig) is list:
            quote = self.common_quote(orig, path)
            return "[" + ", ".join(self._moved_flow_item(child, path, orig, quote) for child in value) + "]"
        if isinstance(value, list | tuple):
            orig_list = orig if type(orig) is list else None
            return (
                "["
                + ", ".join(
                    self.flow_text(
                        child,
                        path + (index,),
                        orig_list[index] if orig_list is not None and index < len(orig_list) else _MISSING,
                    )
                    for index, child in enumerate(value)
                )
                + "]"
            )
        return self.scalar(value, path, flow=True)

    def _moved_flow_item(self, child: Any, path: Path, orig: list[Any], quote: str | None) -> str:
        """An element of a flow list, in the text of an equal old element wherever it stood."""
        was = next((n for n, item in enumerate(orig) if same_value(child, item)), None)
        if was is None and quote is not None and isinstance(child, str):
            return _quoted_with(child, quote)
        return self.flow_text(child, path + (was if was is not None else _MISSING,), orig[was] if was is not None
                              else _MISSING)

    def common_quote(self, orig: list[Any], path: Path) -> str | None:
        """The quote every string of the old list `orig` (at `path`) is written in, if they all are alike."""
        marks = {(self.raw.get(path + (n,)) or " ")[0] for n, item in enumerate(orig) if type(item) is str}
        mark = marks.pop() if len(marks) == 1 else None
        return mark if mark in ("'", '"') else None

    def key(self, key: Any, path: Path, *, flow: bool) -> str:
        if type(key) is str:
            raw = self.keys.get(path)
            if raw is not None and (not flow or _flow_safe(raw)):
                return raw
            text = key if plain_safe(key, flow=flow, exact=self.styled) else self._quoted(key)
        elif isinstance(key, dict | list | tuple | set):
            raise UnwritableValue(f"a mapping key cannot be a {type(key).__name__}", where=_where(path[:-1]))
        else:
            text = self.scalar(key, path, flow=flow)
        if len(text) > _MAX_KEY:
            raise UnwritableValue("a mapping key longer than 1024 characters", where=_where(path[:-1]))
        return text

    def scalar(self, value: Any, path: Path, *, flow: bool) -> str:
        """A scalar's text; "" for a null written as nothing (`key:`), outside flow collections."""
        if self.styled:
            if isinstance(value, str):
                return value if plain_safe(value, flow=flow, exact=True) else self._quoted(value)
            if value is None:
                return self.null or ("null" if flow else "")
        try:
            return scalar_text(value, flow=flow)
        except (TypeError, ValueError) as err:
            raise UnwritableValue(str(err), where=_where(path)) from None

    def _quoted(self, text: str) -> str:
        return _quoted_with(text, self.quote) if self.styled else quoted(text)


def _quoted_with(text: str, quote: str) -> str:
    """`text` in double quotes, or in single quotes if asked and it needs no escapes."""
    if quote == "'":
        single = quoted(text)
        if single[0] == "'":
            return single
    return double_quoted(text)


def _flow_safe(raw: str) -> bool:
    """True if source text taken from block context may be pasted inside `[...]` or `{...}`."""
    return raw[0] in "'\"[{" or not any(char in ",[]{}#:" for char in raw)


def _where(path: Path) -> str:
    return "field " + ".".join(str(part) for part in path) if path else ""
