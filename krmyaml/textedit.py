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
* In a document that is written out again, every entry whose data the edit did not change keeps
  its lines as they were (trailing whitespace, CRLF, tabs, alignment, its own indentation and
  sequence style and all). The lines an edit adds follow the file's style (`_style.py`): its
  indentation, sequence style, spelling of null and preferred quote; a changed string keeps its
  quotes; long strings are never wrapped; a `---` line and anything after `...` are kept.
* A comment on a line of its own belongs to the node after it (the last one in a block belongs to
  the block), so removing, adding or reordering entries with the helpers below takes each comment
  along with the entry it describes (`_ownership.py` decides whose each line is).

The edit works on plain data (dicts, lists, str, int, float, bool, None), read with the YAML 1.2
core schema that Go's yaml.v3 uses, and the document is written by the same splicer and writer that
krmfn writes edited resources with (`_splice.py`, `_emit.py`). A layout the splicer cannot place
(or a result that would not read back as the edited data) is written anew in the file's style.

`load_fast` is the read-only path: libyaml through PyYAML's C loader (`yes` and `on` are strings,
`0o17` is an int, dates stay strings), for scanning files that may not need editing at all.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

import yaml
from yaml.nodes import Node

from krmyaml import _ownership, schema
from krmyaml._emit import emit_block
from krmyaml._shape import Path
from krmyaml._splice import splice_block
from krmyaml._style import Style, detect_style
from krmyaml.errors import UnwritableValue, YamlError

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
    "scalar_span",
    "set_key",
    "split_documents",
]


class YamlTextError(YamlError):
    """A package file's text is not valid YAML. str() is one line, `yaml: line N: <problem>`, as Go's
    yaml.v3 says it in Porch's messages, which PackageVariant conditions repeat."""


# --- the fast, read-only path -----------------------------------------------------------------------


class _PackageLoader(schema.Loader):
    """krmyaml's reader, with `<<` an ordinary key and every alias the very object of its anchor:
    kpt edits a package's files as nodes, where a merge key is not resolved and an alias is its
    anchor, and so does the round-trip path here."""

    share_aliases = True

    yaml_implicit_resolvers = {first: [(tag, rx) for tag, rx in entries if tag != "tag:yaml.org,2002:merge"]
                               for first, entries in schema.Loader.yaml_implicit_resolvers.items()}


def load_fast(text: str, *, first_line: int = 1) -> list[Any]:
    """Every document of `text` as plain Python data (empty documents give None). Never edits.

    Raises YamlTextError; `first_line` is the line number of `text` in its file, for the message.
    """
    return _reading(lambda: list(yaml.load_all(text, Loader=_PackageLoader)), first_line)


def _compose(text: str, first_line: int) -> tuple[Node | None, Any]:
    """The single document of `text`: its node graph and its data, read as `load_fast` reads it."""

    def read() -> tuple[Node | None, Any]:
        loader = _PackageLoader(text)
        try:
            node = loader.get_single_node()
            return node, None if node is None else loader.construct_document(node)
        finally:
            loader.dispose()

    return _reading(read, first_line)


def _reading(read: Callable[[], Any], first_line: int) -> Any:
    """read(), with the reader's errors as YamlTextError (lines counted from `first_line`)."""
    try:
        return read()
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
    """Run `edit` on the data of one document's text and give back the new text.

    `edit` changes the data in place (use `set_key`, `remove_key`, `replace_items` for anything
    that adds, removes or reorders entries, so comments stay with their entries). When the data is
    the same afterwards, `document` itself is returned. `style` defaults to the document's own.
    Raises YamlTextError if the text is not YAML.
    """
    parts = _cut(document)
    bom = "\ufeff" if parts.body.startswith("\ufeff") else ""
    body = parts.body[len(bom):]
    node, data = _compose(body, 1 + parts.head.count("\n"))
    try:
        edited, origin = _copy(data)
    except RecursionError as err:
        raise YamlTextError(f"yaml: {TOO_DEEP}") from err
    edit(edited)
    if same_data(data, edited):
        return document
    try:
        text = _write(body, node, data, edited, origin, style or detect_style(document))
    except RecursionError as err:
        raise YamlTextError(f"yaml: {TOO_DEEP}") from err
    except UnwritableValue as err:
        raise YamlTextError(f"yaml: {err}") from err
    return parts.head + bom + text + parts.tail


def edit_file_document(text: str, index: int, edit: Callable[[Any], None]) -> str:
    """`text` with its document number `index` (as `split_documents` counts) edited by `edit`.

    The file's own style is used; the other documents keep their text. Raises YamlTextError."""
    documents = split_documents(text)
    documents[index] = edit_document(documents[index], edit, style=detect_style(text))
    return "".join(documents)


# Line breaks other than "\n" and "\r\n", which libyaml counts as lines and str.split("\n") does not.
_OTHER_BREAKS = re.compile("\r(?!\n)|[\x85\u2028\u2029]")


def _write(body: str, node: Node | None, data: Any, edited: Any, origin: dict[int, Path], style: Style) -> str:
    """The document `body` (read as `node` and `data`) written to hold `edited`: spliced, else anew."""
    final_newline = body.endswith("\n") or not body
    crlf = body.count("\r\n") * 2 >= body.count("\n") > 0
    if node is not None and not _OTHER_BREAKS.search(body):
        lines = body.split("\n")
        if final_newline:
            lines.pop()
        try:
            shape = _ownership.build(node, data, body, lines)
        except _ownership.Unsupported:
            shape = None
        if shape is not None:
            kept = {id(line) for line in (lines if final_newline else lines[:-1])}
            text = _join(splice_block(edited, shape, style=style, origin=origin), crlf, final_newline, kept)
            if _reads_as(text, edited):
                return text
    if isinstance(edited, dict | list) and edited:
        out = emit_block(edited, style=style)
    else:
        out = ["\n".join(emit_block([edited], style=style))[2:]]
    return _join(out, crlf, final_newline)


def _join(lines: list[str], crlf: bool, final_newline: bool, kept: AbstractSet[int] = frozenset()) -> str:
    """Lines as one text in the file's line ends; the lines copied from it (their ids in `kept`)
    keep their own ("\r" or not)."""
    if crlf:
        lines = [line if line.endswith("\r") or id(line) in kept else line + "\r" for line in lines]
        if lines and not final_newline:
            lines[-1] = lines[-1].removesuffix("\r")
    return "\n".join(lines) + ("\n" if final_newline and lines else "")


def _reads_as(text: str, data: Any) -> bool:
    try:
        documents = load_fast(text)
    except YamlTextError:
        return False
    return len(documents) == 1 and same_data(documents[0], data)


def _copy(data: Any) -> tuple[Any, dict[int, Path]]:
    """A copy of `data` for the edit (shared parts stay shared), and where each of its mappings and
    lists was read from, by id (the originals stay alive in `data`, so the ids stay theirs)."""
    origin: dict[int, Path] = {}
    copies: dict[int, Any] = {}

    def copied(value: Any, path: Path) -> Any:
        if not isinstance(value, dict | list):
            return value
        if id(value) in copies:
            return copies[id(value)]
        if isinstance(value, dict):
            out: Any = {}
            copies[id(value)] = out
            for key, child in value.items():
                out[key] = copied(child, path + (key,))
        else:
            out = []
            copies[id(value)] = out
            out.extend(copied(child, path + (index,)) for index, child in enumerate(value))
        origin[id(out)] = path
        return out

    return copied(data, ()), origin


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
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    return type(value).__name__ if not isinstance(value, str) else "str"


# --- editing helpers --------------------------------------------------------------------------------


def set_key(mapping: dict[Any, Any], key: Any, value: Any, *, before: Sequence[Any] = ()) -> None:
    """Set mapping[key] to `value`, keeping whatever part of the old value is unchanged.

    An existing key keeps its place and comments, and so does every entry inside its value whose
    data is unchanged (`value` is merged into the old value, not swapped in). A new key goes right
    before the first key of `before` that the mapping has, else at the end. `value` is copied.
    """
    if key in mapping:
        mapping[key] = _merge(mapping[key], value)
        return
    position = next((list(mapping).index(k) for k in before if k in mapping), len(mapping))
    entries = list(mapping.items())
    entries.insert(position, (key, copy.deepcopy(value)))
    mapping.clear()
    mapping.update(entries)


def remove_key(mapping: dict[Any, Any], key: Any) -> None:
    """Delete mapping[key] with the comments above it; comments below it stay where they are."""
    mapping.pop(key, None)


def replace_items(seq: list[Any], items: Sequence[tuple[int | None, Any]]) -> None:
    """Make the list `seq` hold `items`, in order: `(i, _)` is the old i-th item, kept with its
    comments; `(None, value)` is a new item, a copy of `value`."""
    if not isinstance(seq, list):
        raise TypeError(f"not a sequence: {type(seq).__name__}")
    old = list(seq)
    seq[:] = [old[index] if index is not None else copy.deepcopy(value) for index, value in items]


def _merge(old: Any, new: Any) -> Any:
    """`new`, reusing the parts of `old` (the same objects: their comments stay) that equal it."""
    if same_data(old, new):
        return old
    if isinstance(old, dict) and isinstance(new, Mapping):
        for key in [k for k in old if k not in new]:
            del old[key]
        for key, value in new.items():
            set_key(old, key, value)
        return old
    if isinstance(old, list) and isinstance(new, list):
        kept = min(len(old), len(new))
        for i in range(kept):
            old[i] = _merge(old[i], new[i])
        old[kept:] = copy.deepcopy(new[kept:])
        return old
    return copy.deepcopy(new)
