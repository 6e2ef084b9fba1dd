"""Reading and writing the ResourceList that kpt sends a function and reads back.

Reading accepts any `config.kubernetes.io/*` version (kpt beta.56 sends v1; v1beta1 and
v1alpha1 are the older spellings), as YAML or JSON, and refuses everything else with an
`InputError` whose message is one line: empty input, invalid UTF-8, invalid YAML, a document that
is not a ResourceList, `items` that is not a list of mappings, a `functionConfig` that is not a
mapping.

JSON is YAML, and reads as kpt (go-yaml) reads it: Python's JSON reader is only a fast path,
used when it gives the very values the YAML reader gives. Numbers take go-yaml's meaning (an
integer past 64 bits is a float, a float past Go's range stays text); anything else it would
read otherwise goes to the YAML reader, which refuses a key given twice, a `\\uD800`-`\\uDFFF`
escape (a surrogate) and a character YAML does not allow unescaped (`\\x7f`, say) with their
line, as go-yaml does, reads `NaN` and `Infinity` as the strings go-yaml reads, and bounds depth
as for any YAML.

Writing always produces block-style YAML with an `items` list (`items: []` when empty: an
empty output would make kpt delete every file of the package, spec §2.2), then the
`functionConfig` and the results. Items keep the order the function left them in. An item the
function did not change is written back as the text it was read from; a changed one is spliced
from its original lines and new ones for what changed (krmyaml's splicer), and a new one is
written by krmyaml's emitter. kpt's opaque annotations are restored if the function lost them
(`annotations.py`).
"""

from __future__ import annotations

import gc
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from krmfn import annotations as kpt_annotations
from krmfn.errors import InputError, OutputError, YamlError
from krmfn.results import Result
from krmyaml import roundtrip as yamlio
from krmyaml._emit import emit_block
from krmyaml._scalars import resolve_plain
from krmyaml._shape import Shape
from krmyaml._splice import splice_block
from krmyaml.errors import UnwritableValue
from krmyaml.errors import YamlError as UnreadableYaml

ModelT = TypeVar("ModelT")
API_VERSION = "config.kubernetes.io/v1"
KIND = "ResourceList"
MAX_INPUT = 256 * 2**20  # bytes (or characters) of ResourceList read at most, as krmyaml reads YAML
_API_GROUP = "config.kubernetes.io/"

_SECTION = re.compile(r"([A-Za-z][A-Za-z0-9_]*):(?:[ \t]|\Z)")
_DOCUMENT_START = re.compile(r"---(?:[ \t]+#.*)?[ \t]*")


class ResourceList:
    """A ResourceList: the items a function edits, its config, and the results it reports.

    `items` are plain dicts in the function's hands: edit them in place, replace them, drop
    them (leave them out of the list), or append new ones. `results` is where the function
    reports (`krmfn.results.error(...)` and friends).
    """

    __slots__ = ("items", "function_config", "results", "_source")

    def __init__(self, items: list[dict[str, Any]] | None = None, function_config: dict[str, Any] | None = None,
                 results: list[Result] | None = None, _source: _Source | None = None) -> None:
        self.items = [] if items is None else items
        self.function_config = function_config
        self.results = [] if results is None else results
        self._source = _source

    def __repr__(self) -> str:
        return (f"ResourceList(items=<{len(self.items)} items>, function_config={self.function_config!r}, "
                f"results={self.results!r})")

    def config(self, model: type[ModelT], *, kind: str | None = None) -> ModelT:
        """The functionConfig as a validated `model` (see `krmfn.config.load_config`)."""
        from krmfn.config import load_config

        return load_config(self.function_config, model, kind=kind)


class _Source:
    """What `write` needs to know about how a ResourceList was read."""

    __slots__ = ("indent", "by_identity", "by_id", "function_config")

    def __init__(self, indent: int = 0) -> None:
        self.indent = indent  # the column of the items' dashes
        self.by_identity: dict[int, tuple[Any, yamlio.Original]] = {}
        self.by_id: dict[str, yamlio.Original | None] = {}  # None: the id was not unique
        self.function_config: tuple[Any, yamlio.Original] | None = None

    def remember(self, item: Any, original: yamlio.Original) -> None:
        self.by_identity[id(item)] = (item, original)
        if isinstance(item, dict):
            annotations = kpt_annotations.annotations_of(item)
            kpt_id = annotations.get(kpt_annotations.ID, annotations.get(kpt_annotations.LEGACY_ID))
            if kpt_id is not None:
                key = str(kpt_id)
                self.by_id[key] = None if key in self.by_id else original

    def original_of(self, item: dict[str, Any]) -> yamlio.Original | None:
        """The item as it was read: the same object, or else the one with the same kpt id."""
        entry = self.by_identity.get(id(item))
        if entry is not None and entry[0] is item:
            return entry[1]
        if not self.by_id:
            return None
        annotations = kpt_annotations.annotations_of(item)
        kpt_id = annotations.get(kpt_annotations.ID, annotations.get(kpt_annotations.LEGACY_ID))
        return self.by_id.get(str(kpt_id)) if kpt_id is not None else None


# ---------------------------------------------------------------------------------------------
# Reading


def read(data: bytes | str) -> ResourceList:
    """The ResourceList in `data` (YAML or JSON; bytes must be UTF-8).

    Raises InputError (YamlError for invalid YAML) with a one-line message for anything that is
    not a readable ResourceList. Never returns a partial list.
    """
    if len(data) > MAX_INPUT:
        raise InputError(f"the input is larger than {MAX_INPUT // 2**20} MiB, more than a package can hold")
    text = _decode(data)
    if not text.strip():
        raise InputError("empty input: expected a ResourceList")
    with _no_cyclic_gc():
        if text.lstrip()[:1] in ("{", "[") and yamlio.line_parser_can_read(text) and not _SURROGATE_ESCAPE.search(text):
            try:
                return _read_json(text)
            except (ValueError, RecursionError, _NotAsYaml):
                # Flow-style YAML that is not JSON (JSONDecodeError), JSON that Python's reader cannot
                # take (deep nesting), or reads otherwise than YAML: libyaml reads or refuses it.
                pass
        try:
            return _read_block(text)
        except _WholeDocument:
            pass
        try:
            return _read_whole(text)
        except UnreadableYaml as err:
            raise YamlError(err.message, where=err.where) from None


@contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector: reading and writing build hundreds of thousands of
    acyclic objects, and each collection would walk all of them again (a third of the time)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class _WholeDocument(Exception):
    """The text needs libyaml's view of the whole document."""


def _decode(data: bytes | str) -> str:
    if isinstance(data, str):
        text = data
    else:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as err:
            raise InputError(f"input is not valid UTF-8 (byte 0x{data[err.start]:02x} at offset {err.start})") from None
    return text[1:] if text.startswith("\ufeff") else text


def _read_block(text: str) -> ResourceList:
    if not yamlio.line_parser_can_read(text):
        raise _WholeDocument
    lines, rows = yamlio.split_lines(text)
    if len(rows) != len(lines):  # cannot happen: one row per line; but never trust it blindly
        raise _WholeDocument
    sections = _sections(lines)
    document: dict[str, Any] = {}
    source = _Source()
    item_originals: list[yamlio.Original] = []
    for key, start, stop in sections:
        if key == "items":
            document[key] = _read_items(lines, rows, start, stop, source, item_originals)
            continue
        try:
            value, original = yamlio.read_chunk(lines, rows, start, stop)
        except UnreadableYaml:
            raise _WholeDocument from None
        if not isinstance(value, dict) or list(value) != [key]:  # (`null:` is the key None)
            raise _WholeDocument
        document[key] = value[key]
        if key == "functionConfig":
            original.fingerprint = yamlio.fingerprint(value)
            source.function_config = (value[key], original)
    rl = _resource_list(document)
    if len(item_originals) == len(rl.items):  # else `items` was one flow list: no text per item
        for item, original in zip(rl.items, item_originals, strict=True):
            source.remember(item, original)
    rl._source = source
    return rl


def _sections(lines: list[str]) -> list[tuple[str, int, int]]:
    """Top-level keys of a block mapping at column 0: (key, first line, end line)."""
    starts: list[tuple[str, int]] = []
    seen: set[str] = set()
    for number in [i for i, line in enumerate(lines) if line and line[0] not in " #"]:
        line = lines[number]
        if line[0] == "-":
            if (len(line) == 1 or line[1] == " ") and starts:
                continue  # an entry of a compact sequence under the current key
            if not starts and _DOCUMENT_START.fullmatch(line):
                continue
            raise _WholeDocument
        match = _SECTION.match(line)
        if match is None or match.group(1) in seen:
            raise _WholeDocument
        seen.add(match.group(1))
        starts.append((match.group(1), number))
    if not starts:
        raise _WholeDocument
    ends = [number for _, number in starts[1:]] + [len(lines)]
    return [(key, start, end) for (key, start), end in zip(starts, ends, strict=True)]


def _read_items(
    lines: list[str],
    rows: list[tuple[str, str, str, str]],
    start: int,
    stop: int,
    source: _Source,
    originals: list[yamlio.Original],
) -> Any:
    first = _first_content_line(lines, start + 1, stop)
    header_rest = lines[start][len("items:") :].strip()
    if first is None or (header_rest and not header_rest.startswith("#")):
        return _read_section_value(lines, rows, start, stop, "items")
    body = lines[first].lstrip(" ")
    if not (body == "-" or body.startswith("- ")):
        return _read_section_value(lines, rows, start, stop, "items")
    indent = len(lines[first]) - len(body)
    source.indent = indent
    if indent == 0:
        bounds = [i for i in range(first, stop) if lines[i][:2] == "- " or lines[i] == "-"]
    else:
        dash = " " * indent + "-"
        bounds = [
            i
            for i in range(first, stop)
            if lines[i].startswith(dash) and (len(lines[i]) == indent + 1 or lines[i][indent + 1] == " ")
        ]
    bounds.append(stop)
    items: list[Any] = []
    for chunk_start, chunk_stop in zip(bounds, bounds[1:], strict=False):
        try:
            value, original = yamlio.read_chunk(lines, rows, chunk_start, chunk_stop)
        except UnreadableYaml:
            raise _WholeDocument from None
        if not isinstance(value, list) or len(value) != 1:
            raise _WholeDocument
        item = value[0]
        original.fingerprint = yamlio.fingerprint(item)
        original.foot = _foot_comment(lines, original.end, chunk_stop, indent)
        items.append(item)
        originals.append(original)
    return items


def _foot_comment(lines: list[str], start: int, stop: int, dash: int) -> list[str]:
    """The comment lines after an item's content that are indented past its dash, as go-yaml keeps
    them with the item (its foot comment), with the blank lines among them."""
    kept: list[str] = []
    for line in lines[start:stop]:
        if line.strip() and not (line.lstrip().startswith("#") and len(line) - len(line.lstrip()) > dash):
            break
        kept.append(line)
    while kept and not kept[-1].strip():
        kept.pop()
    return kept if any(line.strip() for line in kept) else []


def _read_section_value(
    lines: list[str], rows: list[tuple[str, str, str, str]], start: int, stop: int, key: str
) -> Any:
    try:
        value, _ = yamlio.read_chunk(lines, rows, start, stop)
    except UnreadableYaml:
        raise _WholeDocument from None
    if not isinstance(value, dict) or list(value) != [key]:
        raise _WholeDocument
    return value[key]


def _first_content_line(lines: list[str], start: int, stop: int) -> int | None:
    for number in range(start, stop):
        body = lines[number].strip()
        if body and not body.startswith("#"):
            return number
    return None


def _read_whole(text: str) -> ResourceList:
    from krmyaml import _libyaml  # PyYAML only for what the line parser cannot read

    node = _libyaml.compose(text)
    if node is None:
        raise InputError("empty input: expected a ResourceList")
    document = _libyaml.construct(node, text)
    rl = _resource_list(document)
    source = _Source()
    for key, value_node in _libyaml.entries(node):
        if key == "items" and (item_nodes := _libyaml.elements(value_node)) is not None:
            for item, item_node in zip(rl.items, item_nodes, strict=True):
                source.remember(item, _node_original(item_node, text, (0,), item))
        elif key == "functionConfig":
            original = _node_original(value_node, text, ("functionConfig",), rl.function_config)
            source.function_config = (rl.function_config, original)
    rl._source = source
    return rl


def _node_original(node: Any, text: str, path: tuple[Any, ...], value: Any) -> yamlio.Original:
    from krmyaml import _libyaml

    def factory() -> Shape:
        shape = Shape()
        pristine = _libyaml.construct(node, text, shape, path=path)
        shape.value = [pristine] if path == (0,) else {path[0]: pristine}
        return shape

    return yamlio.Original(fingerprint=yamlio.fingerprint(value), factory=factory)


class _NotAsYaml(Exception):
    """JSON that Python's reader would read otherwise than the YAML reader does."""


def _distinct_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    document = dict(pairs)
    if len(document) != len(pairs):  # a key given twice: go-yaml refuses it, json.loads keeps the last
        raise _NotAsYaml
    return document


def _not_a_number(name: str) -> Any:
    raise _NotAsYaml  # NaN, Infinity, -Infinity: no JSON, and plain strings to go-yaml


# go-yaml's number rules (`resolve_plain`) for JSON's numbers, which are all plain YAML scalars.
_JSON = json.JSONDecoder(object_pairs_hook=_distinct_keys, parse_constant=_not_a_number, parse_int=resolve_plain,
                         parse_float=resolve_plain)
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _read_json(text: str) -> ResourceList:
    document = _JSON.decode(text)
    rl = _resource_list(document)
    source = _Source()
    pristine: list[Any] = []  # the document re-read, only if some item needs its original

    def original_at(index: int) -> yamlio.Original:
        def factory() -> Shape:
            if not pristine:
                pristine.append(_JSON.decode(text))
            return Shape(value=[pristine[0]["items"][index]])

        return yamlio.Original(fingerprint=None, factory=factory)

    for index, item in enumerate(rl.items):
        source.remember(item, original_at(index))
    rl._source = source
    return rl


def _resource_list(document: Any) -> ResourceList:
    """Check the shape of a parsed document and wrap it; raises InputError."""
    if not isinstance(document, dict):
        raise InputError(f"not a ResourceList: the input is {_describe(document)}, not a mapping")
    kind, api_version = document.get("kind"), document.get("apiVersion")
    if kind != KIND:
        raise InputError(f"not a ResourceList: kind is {kind!r}, expected {KIND!r}")
    if not isinstance(api_version, str) or not api_version.startswith(_API_GROUP):
        raise InputError(f"not a ResourceList: apiVersion is {api_version!r}, expected {_API_GROUP}*")
    items = document.get("items")
    if items is None:
        items = []
    if not isinstance(items, list):
        raise InputError(f"invalid ResourceList: items must be a list, not {_describe(items)}")
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise InputError(f"invalid ResourceList: items[{index}] is {_describe(item)}, not a mapping")
    function_config = document.get("functionConfig")
    if function_config is not None and not isinstance(function_config, dict):
        raise InputError(f"invalid ResourceList: functionConfig must be a mapping, not {_describe(function_config)}")
    return ResourceList(items=items, function_config=function_config, results=_results(document.get("results")))


def _results(value: Any) -> list[Result]:
    if isinstance(value, dict):  # the old Go SDK wrapped them: {name, items: [...]}
        value = value.get("items")
    if value is None:
        return []
    if not isinstance(value, list):
        raise InputError(f"invalid ResourceList: results must be a list, not {_describe(value)}")
    return [Result.from_dict(entry) for entry in value if isinstance(entry, dict)]


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    names = {
        dict: "a mapping",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
    }
    return names.get(type(value), f"a {type(value).__name__}")


# ---------------------------------------------------------------------------------------------
# Writing


def write(rl: ResourceList) -> str:
    """The ResourceList as block-style YAML text, ending with a newline.

    Raises OutputError if an item is not a mapping, holds a value YAML cannot carry or is nested
    deeper than the writer goes (an item written back unchanged is copied, at any depth); then
    nothing has been written anywhere (the caller decides what to emit instead).
    """
    with _no_cyclic_gc():
        try:
            return _write(rl)
        except UnwritableValue as err:
            raise OutputError(err.message, where=err.where) from None
        except RecursionError:  # the writer recurses per level; libyaml reads deeper than it writes
            raise OutputError("an item is nested too deeply to write") from None


def _write(rl: ResourceList) -> str:
    source = rl._source
    indent = source.indent if source is not None else 0
    lines = [f"apiVersion: {API_VERSION}", f"kind: {KIND}"]
    if rl.items:
        lines.append("items:")
        for index, item in enumerate(rl.items):
            if not isinstance(item, dict):
                raise OutputError(f"items[{index}] is {_describe(item)}, not a mapping")
            try:
                lines.extend(_item_lines(item, source, indent))
            except UnwritableValue as err:
                raise OutputError(err.message, where=err.where).at(f"items[{index}] {_name_of(item)}") from None
    else:
        lines.append("items: []")
    if rl.function_config is not None:
        lines.extend(_function_config_lines(rl.function_config, source))
    if rl.results:
        lines.append("results:")
        lines.extend(emit_block([result.to_dict() for result in rl.results]))
    return "\n".join(lines) + "\n"


def _item_lines(item: dict[str, Any], source: _Source | None, indent: int) -> list[str]:
    original = source.original_of(item) if source is not None else None
    if original is None:
        return emit_block([item], indent=indent)
    if original.unchanged(item):
        text = original.text
        assert text is not None
        return [text, *original.foot]
    shape = original.shape()
    item = kpt_annotations.restore_kpt_annotations(item, shape.value[0])
    if shape.lines is not None:
        return [*splice_block([item], shape), *original.foot]
    return [*emit_block([item], shape, indent=indent), *original.foot]


def _function_config_lines(config: dict[str, Any], source: _Source | None) -> list[str]:
    section = {"functionConfig": config}
    if source is not None and source.function_config is not None and source.function_config[0] is config:
        original = source.function_config[1]
        if original.unchanged(section):
            text = original.text
            assert text is not None
            return [text]
        shape = original.shape()
        return splice_block(section, shape) if shape.lines is not None else emit_block(section, shape)
    if not config:
        return ["functionConfig: {}"]
    return emit_block(section)


def _name_of(item: dict[str, Any]) -> str:
    ref = "/".join(str(part) for part in (item.get("kind"), _metadata_name(item)) if part)
    return f"({ref})" if ref else ""


def _metadata_name(item: dict[str, Any]) -> Any:
    metadata = item.get("metadata")
    return metadata.get("name") if isinstance(metadata, dict) else None
