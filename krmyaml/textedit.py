"""Editing YAML files as text, so that what was not edited stays as it was written.

Porch hands a package over as `{path: file text}`, and a published package is edited again only if
some file's text changed (spec b.6). So a mutation must give back every file it did not change as
the very same string, and the files it did change must keep their comments and layout, or a human
reviewing the draft sees noise and the next reconcile sees a change that is not there.

What this module promises:

* `edit_document` gives back the text it was given (the same object) when the edit left the data
  as it was; only a document whose data changed is written out again.
* A multi-document file is cut into its documents (`split_documents`), and each is edited on its
  own, so the documents nobody touched keep their text byte for byte.
* In a document that is written out again, every line the edit did not change is the line as it
  was (trailing whitespace, CRLF, tabs, alignment and all: _textmerge.py). The lines it did change
  follow the file's style (_editstyle.py): its indentation, sequence style, spelling of null and
  preferred quote; long strings are never wrapped; a `---` line and anything after `...` are kept.
* A comment on a line of its own belongs to the node after it (the last one in a block belongs to
  the block), so removing, adding or reordering entries with the helpers below takes each comment
  along with the entry it describes (_editcomments.py does this bookkeeping on ruamel's structures).

`load_fast` is the read-only path: libyaml through PyYAML's C loader, with the YAML 1.2 core schema
that Go's yaml.v3 and ruamel.yaml use (`yes` and `on` are strings, `0o17` is an int, dates stay
strings), for scanning files that may not need editing at all. ruamel.yaml is about thirty times
slower, so it only ever sees the documents that are about to change.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import yaml
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError
from ruamel.yaml.scalarbool import ScalarBoolean
from ruamel.yaml.scalarstring import (
    DoubleQuotedScalarString,
    FoldedScalarString,
    LiteralScalarString,
    ScalarString,
    SingleQuotedScalarString,
)

from krmyaml import _editcomments, _editstyle, _textmerge, schema
from krmyaml._editstyle import Style, detect_style
from krmyaml.errors import YamlError

__all__ = [
    "Style",
    "YamlTextError",
    "detect_style",
    "edit_document",
    "edit_file_document",
    "load_fast",
    "load_objects",
    "remove_key",
    "replace_items",
    "same_data",
    "set_key",
    "split_documents",
    "to_plain",
]


class YamlTextError(YamlError):
    """A package file's text is not valid YAML. str() is one line, `yaml: line N: <problem>`, as Go's
    yaml.v3 says it in Porch's messages, which PackageVariant conditions repeat."""


# --- the fast, read-only path -----------------------------------------------------------------------


class _PackageLoader(schema.Loader):
    """krmyaml's reader, with `<<` an ordinary key: kpt edits a package's files as nodes, where a
    merge key is not resolved, and so does the round-trip path here."""

    yaml_implicit_resolvers = {first: [(tag, rx) for tag, rx in entries if tag != "tag:yaml.org,2002:merge"]
                               for first, entries in schema.Loader.yaml_implicit_resolvers.items()}


def load_fast(text: str, *, first_line: int = 1) -> list[Any]:
    """Every document of `text` as plain Python data (empty documents give None). Never edits.

    Raises YamlTextError; `first_line` is the line number of `text` in its file, for the message.
    """
    try:
        return list(yaml.load_all(text, Loader=_PackageLoader))
    except yaml.MarkedYAMLError as err:
        line = err.problem_mark.line + first_line if err.problem_mark else first_line
        raise YamlTextError(f"yaml: line {line}: {_problem(err.problem or err.context)}") from err
    except yaml.YAMLError as err:
        raise YamlTextError(f"yaml: {err}") from err
    except RecursionError as err:
        raise YamlTextError(f"yaml: {TOO_DEEP}") from err


TOO_DEEP = schema.TOO_DEEP


def _problem(problem: str | None) -> str:
    return TOO_DEEP if problem and "maximum nesting depth" in problem else str(problem)


def scalar_span(document: str, keys: Sequence[str]) -> tuple[int, int] | None:
    """Where the scalar at `keys` (mapping keys from the root) is written in `document`: its first
    and past-the-end character offsets, quotes included; None if it is missing, not a scalar, or
    the text is not YAML."""
    try:
        node = yaml.compose(document, Loader=yaml.CSafeLoader)  # marks count characters, as str does
    except (yaml.YAMLError, RecursionError, UnicodeEncodeError):
        return None
    for key in keys:
        if not isinstance(node, yaml.MappingNode):
            return None
        node = next((v for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == key), None)
    if not isinstance(node, yaml.ScalarNode):
        return None
    return node.start_mark.index, node.end_mark.index


# --- documents ----------------------------------------------------------------------------------------

_DOCUMENT_START = re.compile(r"^---(?=[ \t\r\n]|$)", re.MULTILINE)
_DOCUMENT_END = re.compile(r"^\.\.\.(?=[ \t\r\n]|$)[^\n]*(?:\n|\Z)", re.MULTILINE)
_ONLY_COMMENTS = re.compile(r"\A(?:[ \t\r]*(?:[#%][^\n]*)?(?:\n|\Z))*\Z")


def split_documents(text: str) -> list[str]:
    """Cut a file into its documents' texts: `"".join(result) == text`, and each holds at most one document.

    A document's text starts at its `---` line (comments and directives before the first `---`
    belong to the first document) and ends before the next `---` or after a `...` line.
    """
    cuts = {m.start() for m in _DOCUMENT_START.finditer(text)} | {m.end() for m in _DOCUMENT_END.finditer(text)}
    starts = sorted(cut for cut in cuts if 0 < cut < len(text))
    if starts and _ONLY_COMMENTS.match(text[: starts[0]]) and _DOCUMENT_START.match(text, starts[0]):
        starts.pop(0)
    bounds = [0, *starts, len(text)]
    return [text[begin:end] for begin, end in zip(bounds, bounds[1:], strict=False)]


def load_objects(text: str) -> list[tuple[int, dict[str, Any]]]:
    """A file's objects (its non-empty documents), each with its position in `split_documents(text)`.

    Raises YamlTextError as kpt's fn.ParseKubeObjects words it: `failed to parse input bytes: yaml:
    line N: ...` for bad syntax, `failed to extract objects: ...` for a document that is not a mapping.
    """
    objects = []
    line = 1
    for index, document in enumerate(split_documents(text)):
        try:
            documents = load_fast(document, first_line=line)
        except YamlTextError as err:
            raise YamlTextError(f"failed to parse input bytes: {err}") from err
        for data in documents:
            if data is None:
                continue
            if not isinstance(data, dict):
                kind = "sequence" if isinstance(data, list) else "scalar"
                raise YamlTextError(f"failed to extract objects: document at line {line} is a {kind}, not a mapping")
            objects.append((index, data))
        line += document.count("\n")
    return objects


@dataclass(frozen=True, slots=True)
class _Parts:
    """One document's text as: its `---` line (and anything above it), the YAML body, its `...` line."""

    head: str
    body: str
    tail: str


_HEAD = re.compile(r"\A(?:[ \t\r]*(?:[#%][^\n]*)?\n)*---[ \t\r]*(?:#[^\n]*)?(?:\n|\Z)")


def _cut(document: str) -> _Parts:
    head_match = _HEAD.match(document)
    head = head_match.group(0) if head_match else ""
    rest = document[len(head):]
    end = _DOCUMENT_END.search(rest)
    if end is None:
        return _Parts(head, rest, "")
    return _Parts(head, rest[: end.start()], rest[end.start():])


# --- round trip -----------------------------------------------------------------------------------------


def edit_document(document: str, edit: Callable[[Any], None], *, style: Style | None = None) -> str:
    """Run `edit` on the round-trip data of one document's text and give back the new text.

    `edit` changes the data in place (use `set_key`, `remove_key`, `replace_items` for anything
    that adds, removes or reorders entries, so comments stay with their entries); it may be run
    more than once, each time on freshly read data. When the data is the same afterwards,
    `document` itself is returned. `style` defaults to the document's own.
    Raises YamlTextError if the text is not YAML.
    """
    parts = _cut(document)
    first = style or detect_style(document)
    fallback = ""
    for candidate in _styles_to_try(first):
        edited = _Edited.run(parts, edit, candidate)
        if edited is None:
            return document
        body = _textmerge.carry_over(parts.body, edited.read, edited.unedited, edited.text)
        if _same_fast(body, edited.text):
            return parts.head + body + parts.tail
        # Original lines beside new ones indented otherwise can change what a block holds; a block
        # written in the file's minority style is kept when the new lines are written in its style.
        fallback = fallback or _textmerge.carry_over(parts.body, edited.read, "", edited.text)
    return parts.head + fallback + parts.tail


def edit_file_document(text: str, index: int, edit: Callable[[Any], None]) -> str:
    """`text` with its document number `index` (as `split_documents` counts) edited by `edit`.

    The file's own style is used; the other documents keep their text. Raises YamlTextError."""
    documents = split_documents(text)
    documents[index] = edit_document(documents[index], edit, style=detect_style(text))
    return "".join(documents)


def _styles_to_try(style: Style) -> list[Style]:
    """`style`, then the other sequence style, then the other common mapping indentation."""
    out = [style]
    for indent in (style.mapping_indent, 4 if style.mapping_indent == 2 else 2):
        for compact in (style.dash_offset == 0, style.dash_offset != 0):
            candidate = replace(style, mapping_indent=indent, dash_offset=0 if compact else indent)
            if candidate not in out:
                out.append(candidate)
    return out


@dataclass(frozen=True, slots=True)
class _Edited:
    """One run of an edit: the text ruamel read, and its rendering before and after the edit."""

    read: str
    unedited: str
    text: str

    @staticmethod
    def run(parts: _Parts, edit: Callable[[Any], None], style: Style) -> _Edited | None:
        """The edit's result in `style`, or None if it leaves the data as it was."""
        engine = _editstyle.engine(style)
        read, data = _load_round_trip(engine, parts)
        before = to_plain(data)
        _editcomments.settle(data)
        unedited = _dump(engine, data)
        edit(data)
        after = to_plain(data)
        if same_data(before, after):
            return None
        _editcomments.tidy(data)
        return _Edited(read, unedited, _dump(engine, data))


def _load_round_trip(engine: YAML, parts: _Parts) -> tuple[str, Any]:
    """(the text ruamel read, its data): the body with LF line ends, and if ruamel rejects tabs
    that YAML allows as separators (`key:<tab>value`, `value<tab># comment`), with those tabs
    turned into spaces, provided that reads as the same data. Raises YamlTextError, also for
    nesting deeper than ruamel's recursion reaches (a few hundred levels, where libyaml allows 1,000)."""
    read = parts.body.replace("\r\n", "\n")
    try:
        return read, engine.load(read)
    except RecursionError as err:
        raise YamlTextError(f"yaml: {TOO_DEEP}") from err
    except YAMLError as err:
        untabbed = read.replace("\t", " ")
        if "\t" in read and _same_fast(untabbed, read):
            try:
                return untabbed, engine.load(untabbed)
            except YAMLError:
                pass
        raise _ruamel_error(err, parts) from err
    except Exception as err:
        # ruamel's constructors crash on some scalars that are not what their tag says (IndexError
        # for `!!int` without digits, KeyError for `!!bool maybe`): the fast loader refuses those, in
        # words. A ValueError is an integer longer than int() converts, even one the fast loader
        # reads (`000…0` is octal to it, and Python converts octal at any length). Anything else is a bug.
        load_fast(read, first_line=1 + parts.head.count("\n"))
        if isinstance(err, ValueError):
            raise YamlTextError(f"yaml: {str(err).split(';')[0]}") from err
        raise


def _same_fast(a: str, b: str) -> bool:
    """Whether two texts read as the same data (both by the fast loader, so that they are read alike)."""
    try:
        return same_data(load_fast(a), load_fast(b))
    except YamlTextError:
        return False


def _dump(engine: YAML, data: Any) -> str:
    """`data` written by ruamel; YamlTextError if it is nested deeper than ruamel's recursion reaches."""
    out = io.StringIO()
    try:
        engine.dump(data, out)
    except RecursionError as err:
        raise YamlTextError(f"yaml: {TOO_DEEP}") from err
    return out.getvalue()


def _ruamel_error(err: YAMLError, parts: _Parts) -> YamlTextError:
    mark = getattr(err, "problem_mark", None)
    problem = _problem(getattr(err, "problem", None) or str(err).splitlines()[0])
    if mark is None:
        return YamlTextError(f"yaml: {problem}")
    return YamlTextError(f"yaml: line {mark.line + 1 + parts.head.count(chr(10))}: {problem}")


def to_plain(node: Any) -> Any:
    """Round-trip data as plain dicts, lists, str, int, float, bool and None."""
    if isinstance(node, Mapping):
        return {str(k) if isinstance(k, str) else k: to_plain(v) for k, v in node.items()}
    if isinstance(node, list | tuple):
        return [to_plain(v) for v in node]
    if isinstance(node, ScalarBoolean):
        return bool(node)
    if isinstance(node, bool | None):
        return node
    if isinstance(node, _editstyle.WrittenNull):
        return None
    if isinstance(node, str):
        return str(node)
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    return getattr(node, "value", node)


def same_data(a: Any, b: Any) -> bool:
    """Equal as YAML data: like ==, except that true is not 1 and 1.0 is not 1."""
    if isinstance(a, Mapping) or isinstance(b, Mapping):
        return (isinstance(a, Mapping) and isinstance(b, Mapping) and a.keys() == b.keys()
                and all(same_data(a[k], b[k]) for k in a))
    if isinstance(a, list) or isinstance(b, list):
        return (isinstance(a, list) and isinstance(b, list) and len(a) == len(b)
                and all(same_data(x, y) for x, y in zip(a, b, strict=True)))
    return _kind(a) == _kind(b) and (a == b or a != a and b != b)  # .nan is .nan


def _kind(value: Any) -> str:
    if isinstance(value, bool | ScalarBoolean):
        return "bool"
    if isinstance(value, int):
        return "int"
    return type(value).__name__ if not isinstance(value, str) else "str"


# --- editing helpers --------------------------------------------------------------------------------


def set_key(mapping: CommentedMap, key: str, value: Any, *, before: Sequence[str] = ()) -> None:
    """Set mapping[key] to the plain `value`, keeping whatever part of the old value is unchanged.

    An existing key keeps its place and comments, and so does every entry inside its value whose
    data is unchanged (`value` is merged into the old node, not swapped in). A new key goes right
    before the first key of `before` that the mapping has, else at the end.
    """
    if key in mapping:
        mapping[key] = _merge(mapping[key], value)
        return
    position = next((list(mapping).index(k) for k in before if k in mapping), len(mapping))
    if not mapping and mapping.fa.flow_style():
        mapping.fa.set_block_style()  # `data: {}` grows into a block, as kpt writes it
    # Comments above the key that was at `position` stay above it, after the new key.
    mapping.insert(position, _fresh(key), _fresh(value))


def remove_key(mapping: CommentedMap, key: str) -> None:
    """Delete mapping[key] with the comments above it; comments below it stay where they are."""
    if key not in mapping:
        return
    del mapping[key]
    mapping.ca.items.pop(key, None)  # ruamel keeps them, and would give them to a key of that name added later


def replace_items(seq: list[Any], items: Sequence[tuple[int | None, Any]]) -> None:
    """Make the round-trip sequence `seq` hold `items`, in order: `(i, _)` is the old i-th item,
    kept with its comments; `(None, value)` is a new item made from the plain `value`."""
    if not isinstance(seq, CommentedSeq):
        raise TypeError(f"not a round-trip sequence: {type(seq).__name__}")
    old = list(seq)
    comments = {i: seq.ca.items.get(i) for i in range(len(old))}
    seq.ca.items.clear()
    del seq[:]
    for position, (index, value) in enumerate(items):
        if index is None:
            seq.append(_fresh(value))
            continue
        seq.append(old[index])
        if comments[index] is not None:
            seq.ca.items[position] = comments[index]
    if seq and seq.fa.flow_style() and not old:
        seq.fa.set_block_style()


def common_quoting(seq: list[Any]) -> Callable[[str], str] | None:
    """What writes a new string as every string of `seq` is written, when they are all quoted
    alike (all single or all double quotes); None otherwise."""
    kinds = {type(item) for item in seq if isinstance(item, str)}
    kind = kinds.pop() if len(kinds) == 1 else None
    return kind if kind in (DoubleQuotedScalarString, SingleQuotedScalarString) else None


def _merge(old: Any, new: Any) -> Any:
    """`new` as round-trip data, reusing the parts of `old` (with their comments) that equal it."""
    if same_data(to_plain(old), new):
        return old
    if isinstance(old, CommentedMap) and isinstance(new, Mapping):
        for key in [k for k in old if k not in new]:
            remove_key(old, key)
        for key, value in new.items():
            set_key(old, key, value)
        return old
    if isinstance(old, CommentedSeq) and isinstance(new, list):
        kept = min(len(old), len(new))
        for i in range(kept):
            old[i] = _merge(old[i], new[i])
        replace_items(old, [(i, None) for i in range(kept)] + [(None, v) for v in new[kept:]])
        return old
    return _fresh(new, like=old)


def _fresh(value: Any, *, like: Any = None) -> Any:
    """Plain data as round-trip data; a string keeps the quoting of the string it replaces, and
    is quoted where a YAML 1.1 reader would take it for something else (`_editstyle.fresh_text`)."""
    if isinstance(value, Mapping):
        out = CommentedMap()
        for key, item in value.items():
            out[_fresh(key)] = _fresh(item)
        return out
    if isinstance(value, list | tuple):
        return CommentedSeq(_fresh(item) for item in value)
    if isinstance(value, str) and not isinstance(value, ScalarString):
        if isinstance(like, DoubleQuotedScalarString | SingleQuotedScalarString):
            return type(like)(value)
        if "\n" in value and _literal_ok(value):
            return (FoldedScalarString if isinstance(like, FoldedScalarString) else LiteralScalarString)(value)
        return _editstyle.fresh_text(value)
    return value


def _literal_ok(text: str) -> bool:
    # A literal block cannot show trailing spaces on a line or a leading blank-then-indented line.
    return not any(line != line.rstrip(" \t") for line in text.split("\n")) and not text.startswith((" ", "\n"))
