"""Properties of the YAML layer as a whole: what its readers do with any input, and what a read
then a write gives back.

* Hostile input: any bytes, any text, and text built from YAML's own syntax (indicators, anchors
  and aliases, tags, quotes, flow brackets, block scalars, directives, document markers, deep
  nesting, tabs, a BOM, CR and CRLF, scalars too large to convert) is read or refused with the
  layer's own error, by every reader: krmyaml's YamlError, krmfn's InputError. Nothing else
  (RecursionError, ValueError, UnicodeError, ...) may escape.
* Identities: a value written by either writer reads back as itself; a ResourceList as kpt writes
  it, comments included, is written back byte for byte when the function changed nothing; an
  edit of a package file that leaves its data as it was gives back the file's very text.

Left to the tests that already hold them: the line parser agrees with libyaml (test_blockparse.py),
single scalars keep their meaning when written (test_scalars.py), spliced edits read back as edited
(tests/krmfn/test_splice.py), new items and re-written lists round-trip (tests/krmfn/test_resourcelist.py).
"""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

import krmyaml
from krmfn import resourcelist
from krmfn.errors import InputError
from krmyaml import roundtrip, textedit
from krmyaml._emit import emit_block
from krmyaml._scalars import same_value
from tests.krmyaml.test_blockparse import _keys, _values

RL_HEADER = "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\n"

# --- hostile input ------------------------------------------------------------------------------

# Pieces of YAML syntax, joined at random, so that the parsers get past the first character.
_FRAGMENTS = [
    "\n", "\r\n", "\r", "\t", " ", "  ", "    ", "\ufeff", "\x85", "\u2028", "\x00", "\x1b", "\udcff", "\ud800",
    "-", "- ", "? ", ":", ": ", ",", "[", "]", "{", "}", "#", " # c", "&a ", "*a", "&b ", "*b", "*",
    "!", "!t ", "!!str ", "!!int ", "!!float ", "!!bool ", "!!null ", "!!map ", "!!seq ", "!!binary ", "!<x> ",
    "'", "''", '"', "\\", "\\x4", "\\u12", '"\\U0010FFFF"', '"\\ud800"', "|", "|-", "|+", "|2", ">", ">-",
    "---", "--- ", "...", "%YAML 1.2\n", "%YAML 1.1\n", "%TAG ! tag:x,2024:\n", "<<: ", "<<: *a", "<<: [*a, *b]",
    "~", "null", "true", "yes", "0755", "0x1F", "0o17", "1e3", "1e999", ".inf", ".nan", "-.5", "2024-01-01",
    "1" * 4400, "0x" + "f" * 4400, "9" * 25, "a", "key", "kind: ResourceList", "apiVersion: config.kubernetes.io/v1",
    "items:", "- kind: A", "metadata:", "  name: x", "functionConfig:", "results:",
]  # fmt: skip
_yamlish = st.lists(st.one_of(st.sampled_from(_FRAGMENTS), st.text(max_size=3)), max_size=40).map("".join)


def _nested(shape: str, depth: int) -> str:
    return {
        "flow-seq": "[" * depth + "]" * depth,
        "flow-map": "{a: " * depth + "}" * depth,
        "dashes": "- " * depth + "x\n",
        "block-map": "".join(" " * i + "a:\n" for i in range(depth)),
        "block-seq": "".join(" " * (2 * i) + "- a:\n" for i in range(depth)),
        "anchors": "".join(f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}]\n" for i in range(1, depth)),
    }[shape]


_deep = st.builds(_nested, st.sampled_from(["flow-seq", "flow-map", "dashes", "block-map", "block-seq", "anchors"]),
                  st.integers(1, 1100))
_prefixes = st.sampled_from(["", RL_HEADER + "items:\n", RL_HEADER + "items:\n- ", "---\n", "\ufeff", "a:\n  ",
                             '{"apiVersion": "config.kubernetes.io/v1", "kind": "ResourceList", "items": [{',
                             RL_HEADER + "results:\n- message: "])
_hostile_texts = st.one_of(
    st.text(st.one_of(st.characters(), st.characters(categories=["Cs"]))),
    _yamlish,
    st.tuples(_prefixes, _yamlish, st.one_of(st.just(""), _deep), _yamlish).map("".join),
)


def _refused_or_read(read: Callable[..., object], *args: Any, error: type[Exception] = krmyaml.YamlError) -> None:
    """Call read(*args): returning and raising `error` both pass; any other exception fails the test."""
    with contextlib.suppress(error):
        read(*args)


def _read_text_everywhere(text: str) -> None:
    for read in (krmyaml.load_all, roundtrip.load, textedit.load_fast, textedit.load_objects):
        _refused_or_read(read, text)
    _refused_or_read(resourcelist.read, text, error=InputError)


def _read_file(directory: Path, data: bytes) -> None:
    path = directory / "manifest.yaml"
    path.write_bytes(data)
    _refused_or_read(krmyaml.read_documents, [path])


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory for the manifest file each example writes (not `tmp_path`: Hypothesis runs every
    example in one call of the test, so a function-scoped fixture would not be fresh anyway)."""
    return tmp_path_factory.mktemp("manifests")


@settings(max_examples=150, deadline=None)
@given(st.one_of(st.binary(max_size=200), _hostile_texts.map(lambda t: t.encode("utf-8", "surrogatepass"))))
def test_any_bytes_are_read_or_refused_with_the_layers_error(scratch: Path, data: bytes) -> None:
    _read_file(scratch, data)
    stdin = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")
    _refused_or_read(krmyaml.read_documents, ["-"], stdin)
    _refused_or_read(resourcelist.read, data, error=InputError)
    # Python decodes argv, file names and (in the POSIX locale) stdin this way: lone surrogates.
    _read_text_everywhere(data.decode("utf-8", "surrogateescape"))


@settings(max_examples=300, deadline=None)
@given(_hostile_texts)
@example("a: " + "1" * 4400 + "\n")  # ValueError: past Python's 4,300-digit limit on int()
@example("a: \udcff\n")  # UnicodeEncodeError: libyaml is handed UTF-8
@example("[" * 1100 + "]" * 1100)  # RecursionError in the ResourceList's JSON reader
@example('{"a": ' + "1" * 4400 + "}")  # ValueError from the ResourceList's JSON reader
@example("!!map 0")  # ValueError: the duplicate-key check unpacked a scalar's "entries"
@example("null:")  # KeyError: a ResourceList's section read as the key None, looked up as "null"
def test_any_text_is_read_or_refused_with_the_layers_error(scratch: Path, text: str) -> None:
    _read_text_everywhere(text)
    _refused_or_read(krmyaml.read_documents, ["-"], io.StringIO(text))
    _read_file(scratch, text.encode("utf-8", "surrogatepass"))


# --- identities: written, then read ------------------------------------------------------------

# JSON-like values with strings every YAML reader is tempted to misread.
_awkward = st.sampled_from([
    "yes", "No", "on", "0755", "0o17", "0x1F", "1e3", "1_000", "~", "null", "", ":", "a: b", "#", "a #b", "- x",
    " leading", "trailing ", "\ttab", "x\ny", "x\n", "\n", "x\n\n", " x\n y\n", "é ü 日本", "\U0001f600", "\x85",
    "\u2028", "\ufeff", "\r\n", "'", '"', "&a", "*a", "!t", "%x", "@x", "`x", "{x}", "[x]", "|", ">", "?", "<<",
    "2024-01-01", "1:20", ".inf", ".nan", "-", "---", "...", "\x00",
])  # fmt: skip
_strings = st.one_of(_awkward, st.text(max_size=12))
_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.floats(), _strings)
_json_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.one_of(_keys, _strings), inner, max_size=4)),
    max_leaves=16,
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_json_values, min_size=1, max_size=3), st.booleans())
def test_a_stream_written_by_dump_all_reads_back_as_its_values(values: list[Any], explicit_start: bool) -> None:
    out = io.StringIO()
    krmyaml.dump_all(values, out, explicit_start=explicit_start)
    assert same_value(krmyaml.load_all(out.getvalue()), values), out.getvalue()


@settings(max_examples=200, deadline=None)
@given(_json_values)
def test_a_value_written_by_roundtrip_dump_reads_back_as_itself(value: Any) -> None:
    text = roundtrip.dump(value)
    assert same_value(roundtrip.load(text), value), text


# --- identities: read, then written -------------------------------------------------------------

_LITERAL_OPENER = re.compile(r"(?:^|: |- )[|>][-+]?$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _outside_block_scalars(lines: list[str]) -> list[bool]:
    """For each line, whether a comment may go before or after it without entering a block scalar:
    conservatively, no line deeper than a line that opens one, until the indentation comes back."""
    free, opener = [], None
    for line in lines:
        inside = opener is not None and (not line.strip() or _indent(line) > opener)
        if not inside:
            opener = None
        free.append(not inside)
        if not inside and _LITERAL_OPENER.search(line.split(" #", 1)[0].rstrip()):
            opener = _indent(line)
    return free


def _commented(draw: st.DrawFn, lines: list[str], *, first_line_head: bool) -> list[str]:
    """`lines` with comments where go-yaml writes them: on a line's end, on lines of their own at
    the next line's indentation, after a dash (an item's head comment); and blank lines inside.
    `lines` as they were if that changed what they say (inside a multi-line quoted scalar)."""
    free = _outside_block_scalars(lines)
    out: list[str] = []
    for number, (line, ok) in enumerate(zip(lines, free, strict=True)):
        if number > 0 and ok and draw(st.integers(0, 5)) == 0:
            kind = draw(st.sampled_from(["comment", "blank"]))
            out.append(" " * _indent(line) + f"# above {number}" if kind == "comment" else "")
        if number == 0 and first_line_head and line.lstrip().startswith("- ") and draw(st.booleans()):
            dash = _indent(line)
            out.append(" " * dash + "- # head")
            line = " " * (dash + 2) + line[dash + 2 :]
        if ok and draw(st.integers(0, 3)) == 0:
            line += draw(st.sampled_from([" # end", "  #end", " #: x # y"]))
        out.append(line)
    with contextlib.suppress(krmyaml.YamlError):
        if textedit.same_data(textedit.load_fast("\n".join(out)), textedit.load_fast("\n".join(lines))):
            return out
    return lines


_objects = st.builds(
    lambda head, rest: {**head, **rest},
    st.fixed_dictionaries({"apiVersion": st.just("v1"), "kind": st.sampled_from(["ConfigMap", "Thing"])},
                          optional={"metadata": st.fixed_dictionaries({"name": _keys})}),
    st.dictionaries(_keys, _values, max_size=4),
)


def _item_lines(item: dict[str, Any], writer: str, indent: int) -> list[str]:
    if writer == "ours":
        return emit_block([item], indent=indent)
    text = yaml.safe_dump([item], width=4096, allow_unicode=True, sort_keys=False, default_flow_style=False)
    return [" " * indent + line for line in text.splitlines()]


@st.composite
def _kpt_resource_lists(draw: st.DrawFn) -> str:
    """A ResourceList as kpt writes it: block style, go-yaml's quoting (or PyYAML's), comments
    where go-yaml keeps them; items at column 0 (kpt) or indented by 2 (other writers)."""
    indent = draw(st.sampled_from([0, 2]))
    items = draw(st.lists(_objects, max_size=3))
    lines = RL_HEADER.splitlines()
    if items:
        lines.append("items:")  # (write spells the list's own keys afresh: kpt puts no comments there)
        for item in items:
            item_lines = _item_lines(item, draw(st.sampled_from(["ours", "pyyaml"])), indent)
            lines += _commented(draw, item_lines, first_line_head=True)
            if draw(st.booleans()):
                lines.append(" " * (indent + 2) + "# foot")
    else:
        lines.append("items: []")
    config = draw(st.none() | st.dictionaries(_keys, _values, max_size=3))
    if config == {}:
        lines.append("functionConfig: {}")
    elif config is not None:
        lines += _commented(draw, emit_block({"functionConfig": config}), first_line_head=False)
    return "\n".join(lines) + "\n"


@settings(max_examples=150, deadline=None)
@given(_kpt_resource_lists())
def test_a_resource_list_read_and_written_unchanged_is_the_same_text(text: str) -> None:
    assert resourcelist.write(resourcelist.read(text)) == text


@st.composite
def _documents(draw: st.DrawFn) -> str:
    """One document's text: written by us, by PyYAML (2 or 4 spaces), or in flow style; with
    comments, `---`, `...`, CRLF line ends or a BOM."""
    value = draw(st.dictionaries(st.one_of(_keys, _strings), _json_values, min_size=1, max_size=4)
                 | _json_values)
    writer = draw(st.sampled_from(["ours", "pyyaml", "pyyaml-4", "pyyaml-flow"]))
    if writer == "ours":
        text = roundtrip.dump(value)
    else:
        text = yaml.safe_dump(value, indent=4 if writer == "pyyaml-4" else 2, width=4096, allow_unicode=True,
                              sort_keys=False, default_flow_style=None if writer == "pyyaml-flow" else False)
    if writer != "pyyaml-flow":
        text = "\n".join(_commented(draw, text.splitlines(), first_line_head=True)) + "\n"
    text = draw(st.sampled_from(["", "\ufeff", "---\n", "# top\n--- # start\n"])) + text
    text += draw(st.sampled_from(["", "...\n", "...\n# after\n"]))
    if draw(st.booleans()):
        text = text.replace("\n", "\r\n")
    return text


def _no_edit(data: Any) -> None:
    return None


@settings(max_examples=150, deadline=None)
@given(_documents())
@example("'0': # end\n# above 1\n- |- # end\n  x\n  y\n")  # AttributeError: the comment after `|-` is no token
def test_an_edit_that_changes_nothing_gives_back_the_very_same_text(text: str) -> None:
    assert textedit.edit_document(text, _no_edit) is text


def _mappings(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], dict[Any, Any]]]:
    """Every non-empty mapping inside `value`, with its path of keys and indices."""
    found = [(path, value)] if isinstance(value, dict) and value else []
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else []
    for key, child in children:
        found += _mappings(child, (*path, key))
    return found


@settings(max_examples=100, deadline=None)
@given(_documents(), st.data())
def test_setting_a_key_to_its_current_value_gives_back_the_very_same_text(text: str, data: st.DataObject) -> None:
    candidates = _mappings(textedit.load_fast(text)[0])
    if not candidates:
        return
    path, mapping = data.draw(st.sampled_from(candidates))
    key = data.draw(st.sampled_from(list(mapping)))

    def set_current(document: Any) -> None:
        for step in path:
            document = document[step]
        textedit.set_key(document, key, mapping[key])

    assert textedit.edit_document(text, set_current) is text


@settings(max_examples=100, deadline=None)
@given(_hostile_texts)
@example("a: " + "1" * 4400 + "\n")  # ValueError from ruamel's int()
@example("0" * 4400)  # the same, for an integer the fast loader reads (octal: no digit limit)
@example(_nested("block-map", 300))  # RecursionError in ruamel's reader
@example(_nested("flow-seq", 340))  # RecursionError in ruamel's writer (its reader goes deeper)
@example("!!int")  # IndexError from ruamel's int constructor
@example("!!bool maybe")  # KeyError from ruamel's bool constructor
def test_an_edit_that_changes_nothing_gives_back_any_document_it_can_read(text: str) -> None:
    """On any text at all: each document comes back as itself, or is refused as not YAML."""
    for document in textedit.split_documents(text):
        with contextlib.suppress(krmyaml.YamlError):
            assert textedit.edit_document(document, _no_edit) is document


@settings(max_examples=150, deadline=None)
@given(_documents(), st.data())
def test_an_edit_is_written_so_that_the_text_reads_back_as_the_edited_data(text: str, data: st.DataObject) -> None:
    candidates = _mappings(textedit.load_fast(text)[0])
    if not candidates:
        return
    path, mapping = data.draw(st.sampled_from(candidates))
    action = data.draw(st.sampled_from(["set", "add", "remove", "reverse"]))
    key = data.draw(st.sampled_from(list(mapping)))
    value = data.draw(_json_values)

    def change(document: Any) -> None:
        for step in path:
            document = document[step]
        if action == "set":
            textedit.set_key(document, key, value)
        elif action == "add":
            textedit.set_key(document, "added-key", value, before=[key])
        elif action == "remove":
            textedit.remove_key(document, key)
        elif isinstance(document[key], list):
            textedit.replace_items(document[key], [(i, None) for i in reversed(range(len(document[key])))])

    [expected] = textedit.load_fast(text)
    change(expected)
    out = textedit.edit_document(text, change)
    assert textedit.same_data(textedit.load_fast(out), [expected]), out
