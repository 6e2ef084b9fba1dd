"""A fast reader for the block-style YAML that kpt writes, with libyaml as the judge of the rest.

Why not libyaml for everything: libyaml itself parses kpt's 5,000-resource ResourceList (3 MiB)
in 0.05 s, but PyYAML's bridge builds a Python object per event and node and takes over 1 s for
the same text, which is the whole time budget. This module reads the subset of YAML that go-yaml
emits for ordinary resources, line by line, at about 0.2 s for the same list:

* block mappings and block sequences (`key:` then deeper lines, `- ` entries, compact or
  indented sequences, `- key: v` mappings started on the dash line);
* plain scalars, single-line quoted scalars;
* single-line flow collections (`[a, "b"]`, `{k: v}`, JSON objects written by kpt for `.json`
  files) whose plain scalars hold no `:` or `#`;
* literal block scalars (`|`, `|-`, `|+`) without an indentation indicator;
* comments and blank lines, which carry no value.

Anything else (multi-line flow collections, folded `>` scalars, anchors, aliases, tags, merge keys,
multi-line plain or quoted scalars, explicit `?` keys, tabs used as indentation, odd key
characters) raises `Unsupported`, and the caller hands that text to libyaml (`_libyaml.py`).
The subset is chosen so that whenever this parser accepts a text, libyaml reads the same value
from it; the property tests in `tests/krmyaml/test_blockparse.py` compare the two.

Scalars are resolved by go-yaml's rules (`_scalars.resolve_plain`). Asked for a `Shape`, the
same pass also records where each entry's lines are, for `_splice.py`.
"""

from __future__ import annotations

import re
from typing import Any

from krmyaml._scalars import resolve_plain
from krmyaml._shape import Path, Shape


class Unsupported(Exception):
    """The text uses YAML that this parser leaves to libyaml (or that is invalid)."""


# One row per line, computed for a whole text by a single `findall` (C speed):
# (indentation, "- " or "", a plain key before ": " or "", the rest of the line).
_ROW = re.compile(r"""^( *)(-(?: +|$))?(?:([^\s'"#{\[&*!|>%@`?:,\]}\-][^:\n#]*+):(?: +|$))?(.*)$""", re.M)
_ENTRY = re.compile(
    r"""(?:(?P<plain>[^\s\-?:,\[\]{}#&*!|>'"%@`][^:#]*?)
        |(?P<sq>'(?:[^']|'')*')
        |(?P<dq>"(?:[^"\\]|\\.)*"))
        [ \t]*:(?:[ \t]+|\Z)""",
    re.X,
)
_SINGLE = re.compile(r"'((?:[^']|'')*)'")
_DOUBLE = re.compile(r'"((?:[^"\\]|\\.)*)"')
_TRAILER = re.compile(r"(?:[ \t]+(?:#.*)?)?")
# A plain scalar inside a flow collection: no `:` or `#` at all (libyaml and go-yaml disagree
# on some of those), and it may start with `-` only before a non-space (`--port`, `-1`).
_FLOW_PLAIN = re.compile(r"""(?:[^\s,\[\]{}#&*!|>'"%@`?:\-]|-(?=[^\s,\[\]{}]))[^,\[\]{}:#]*""")
_LITERAL = re.compile(r"\|([-+]?)(?:[ \t]+(?:#.*)?)?")
_DOUBLE_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|.)")
_SIMPLE_ESCAPES = {
    "0": "\0", "a": "\x07", "b": "\b", "t": "\t", "\t": "\t", "n": "\n", "v": "\x0b",
    "f": "\x0c", "r": "\r", "e": "\x1b", " ": " ", '"': '"', "/": "/", "\\": "\\",
    "N": "\x85", "_": "\xa0", "L": "\u2028", "P": "\u2029",
}  # fmt: skip
_SCALAR_STARTS_UNSUPPORTED = frozenset("&*!>%@`?:")
# A plain scalar starting with one of these is a string whatever follows (resolve_plain).
_STRING_START = frozenset("abcdeghijklmpqrsuvwxzABCDEGHIJKLMPQRSUVWXZ_/")
# A plain scalar may start with any of these (indicators, quotes and `-` take the slow path).
_PLAIN_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_/.+~$^()=;<\\")


def rows_of(text: str) -> list[tuple[str, str, str, str]]:
    """The rows `parse_block` reads, one per line of `text.split("\n")`."""
    return _ROW.findall(text)


def parse_block(
    lines: list[str],
    rows: list[tuple[str, str, str, str]],
    start: int,
    stop: int,
    shape: Shape | None = None,
) -> tuple[Any, int]:
    """Read `lines[start:stop]` as one block node (a mapping or a sequence).

    `rows` must be `rows_of` the text that `lines` were split from. Returns the value and the
    index of the last line that holds part of it (trailing comments and blank lines excluded,
    except the blank lines a `|+` scalar keeps). When given a `shape`, fills in its line spans,
    columns and key texts, and the texts of flow collections (a block scalar's text is in its
    entry's span, where `_splice.py` takes it from). Raises `Unsupported` for anything outside
    the subset.
    """
    root: Any = None
    stack: list[tuple[int, Any, Path]] = []  # (column, container, path), innermost last
    top_col, top_is_list, top_path = -1, False, ()
    top: Any = None
    key: Any  # the plain text of a key, or (value, text) for a quoted one
    pending: tuple[int, Any, Any, Path] | None = None  # an entry whose value may be a nested block
    limit = -1  # after a scalar at column c, a deeper line would continue it: unsupported
    last = start - 1
    recording = shape is not None
    # While recording: the entry open in each frame of `stack`, as (path, first line).
    opens: list[tuple[Path, int] | None] = []
    keys: dict[Path, str] = shape.keys if shape is not None else {}
    spans: dict[Path, tuple[int, int]] = shape.spans if shape is not None else {}
    columns: dict[Path, int] = shape.columns if shape is not None else {}
    path: Path = ()
    i = start
    while i < stop:
        indent, dash, key, rest = rows[i]
        if not key and not dash:
            if not rest or rest[0] == "#":
                i += 1
                continue
            if rest[0] == "\t":
                raise Unsupported("tab before content")
        col = len(indent)
        if pending is not None:
            pcol, pcont, pkey, ppath = pending
            pending = None
            if col > pcol or (col == pcol and dash and type(pcont) is dict):
                new: Any = [] if dash else {}
                pcont[pkey] = new
                stack.append((col, new, ppath))
                top_col, top, top_is_list, top_path = col, new, bool(dash), ppath
                if recording:
                    columns[ppath] = col
                    opens.append(None)
        elif limit >= 0 and col > limit:
            raise Unsupported("a scalar continues on a deeper line")
        if col != top_col or (top_is_list and not dash):
            while stack:
                fcol, fcont, _ = stack[-1]
                if fcol > col or (fcol == col and not dash and type(fcont) is list):
                    stack.pop()
                    if recording:
                        entry = opens.pop()
                        if entry is not None:
                            spans[entry[0]] = (entry[1], last + 1)
                else:
                    break
            if not stack:
                if root is not None:
                    raise Unsupported("more than one node")
                root = [] if dash else {}
                stack.append((col, root, ()))
                if recording:
                    columns[()] = col
                    opens.append(None)
            top_col, top, top_path = stack[-1]
            top_is_list = type(top) is list
            if top_col != col:
                raise Unsupported("inconsistent indentation")
        if dash:
            if not top_is_list:
                raise Unsupported("sequence entry inside a mapping")
            index = len(top)
            if recording:
                path = top_path + (index,)
                entry = opens[-1]
                if entry is not None:
                    spans[entry[0]] = (entry[1], last + 1)
                opens[-1] = (path, i)
            if not key:
                if not rest or rest[0] == "#":
                    top.append(None)
                    pending = (col, top, index, path)
                    limit = -1
                    last = i
                    i += 1
                    continue
                if rest[0] == "-" and (len(rest) == 1 or rest[1] == " "):
                    raise Unsupported("nested sequence on one line")
                match = _ENTRY.match(rest)
                if match is None:
                    value, raw, i, last = _scalar(rest, lines, i, stop, col)
                    top.append(value)
                    if recording and raw is not None and raw[0] in "[{":
                        record_flow(raw, path, shape)  # type: ignore[arg-type]
                    limit = col
                    continue
                key, rest = _entry_key(match), rest[match.end() :]
            mapping: dict[Any, Any] = {}
            top.append(mapping)
            col += len(dash)
            stack.append((col, mapping, path))
            top_col, top, top_is_list, top_path = col, mapping, False, path
            if recording:
                columns[path] = col
                opens.append(None)
        elif top_is_list:
            raise Unsupported("mapping entry inside a sequence")
        elif not key:
            match = _ENTRY.match(rest)
            if match is None:
                raise Unsupported("not a simple mapping entry")
            key, rest = _entry_key(match), rest[match.end() :]
        if type(key) is str:
            if key[-1] in " \t":
                key = key.rstrip(" \t")
            if key[0] not in _STRING_START:
                if key == "<<":
                    raise Unsupported("merge key")
                key_value = resolve_plain(key)
            else:
                key_value = key
            key_text = key
        else:  # a quoted key: (value, text)
            key_value, key_text = key
        if key_value in top and _same_key(top, key_value):
            raise Unsupported("a key given twice")  # libyaml's reader says where, as go-yaml refuses it
        if recording:
            path = top_path + (key_value,)
            keys[path] = key_text
            entry = opens[-1]
            if entry is not None:
                spans[entry[0]] = (entry[1], last + 1)
            opens[-1] = (path, i)
        if not rest or rest[0] == "#":
            top[key_value] = None
            pending = (col, top, key_value, path)
            limit = -1
            last = i
            i += 1
            continue
        first = rest[0]
        if (
            first in _PLAIN_START
            and " #" not in rest
            and ": " not in rest
            and "\t" not in rest
            and rest[-1] not in " :"
        ):
            value = rest if first in _STRING_START else resolve_plain(rest)
            raw = rest
            last = i
            i += 1
        elif first == "'" and rest[-1] == "'" and len(rest) > 1 and rest.count("'") == 2:
            value = rest[1:-1]
            raw = rest
            last = i
            i += 1
        else:
            value, raw, i, last = _scalar(rest, lines, i, stop, col)
        top[key_value] = value
        if recording and raw is not None and raw[0] in "[{":
            record_flow(raw, path, shape)  # type: ignore[arg-type]
        limit = col
    if root is None:
        raise Unsupported("no content")
    if shape is not None:
        shape.lines = lines
        for entry in opens:  # an entry's text: from its first line to the last content line
            if entry is not None:
                spans[entry[0]] = (entry[1], last + 1)
    return root, last


def _same_key(mapping: dict[Any, Any], key: Any) -> bool:
    """Whether `mapping` holds `key` itself, not just a key Python finds equal (1 and true)."""
    return any(type(existing) is type(key) for existing in mapping if existing == key)


def _entry_key(match: re.Match[str]) -> Any:
    """The key of an `_ENTRY` match: the plain text, or (value, text) for a quoted key."""
    plain = match.group("plain")
    if plain is not None:
        return plain
    text = match.group("sq") or match.group("dq")
    return (_quoted(text), text)


def _scalar(text: str, lines: list[str], i: int, stop: int, col: int) -> tuple[Any, str | None, int, int]:
    """The scalar starting `text` on line i: (value, source text or None, next line, last line)."""
    first = text[0]
    if first == "'":
        match = _SINGLE.match(text)
        if match is None or not _TRAILER.fullmatch(text, match.end()):
            raise Unsupported("multi-line or malformed single-quoted scalar")
        return match.group(1).replace("''", "'"), match.group(), i + 1, i
    if first == '"':
        match = _DOUBLE.match(text)
        if match is None or not _TRAILER.fullmatch(text, match.end()):
            raise Unsupported("multi-line or malformed double-quoted scalar")
        return _double(match.group(1)), match.group(), i + 1, i
    if first == "|":
        return _literal(text, lines, i, stop, col)
    if first in "{[":
        value, end = _flow(text, 0, None, ())
        if not _TRAILER.fullmatch(text, end):
            raise Unsupported("text after a flow collection")
        return value, text[:end], i + 1, i
    if first in _SCALAR_STARTS_UNSUPPORTED or (first == "-" and (len(text) == 1 or text[1] in " \t")):
        raise Unsupported("anchor, alias, tag, folded scalar or indicator")
    cut = text.find(" #")
    if cut >= 0:
        text = text[:cut]
    plain = text.rstrip(" \t")
    if ": " in plain or plain.endswith(":") or ":\t" in plain or "\t#" in plain:
        raise Unsupported("colon or comment inside a plain scalar")
    return resolve_plain(plain), plain, i + 1, i


def record_flow(raw: str, path: Path, shape: Shape) -> None:
    """Fill `shape` for the flow collection `raw` found at `path` (its nodes' texts and style)."""
    _flow(raw, 0, shape, path)


def _flow(text: str, i: int, shape: Shape | None, path: Path) -> tuple[Any, int]:
    """The flow node starting at text[i]: (value, index after it). Records into `shape` if given."""
    if i >= len(text):
        raise Unsupported("a flow collection that is not closed")  # libyaml says where
    first = text[i]
    if first == "[" or first == "{":
        closer = "]" if first == "[" else "}"
        result: Any = [] if first == "[" else {}
        start, i = i, _skip_spaces(text, i + 1)
        if text[i : i + 1] != closer:
            while True:
                if first == "[":
                    value, i = _flow(text, i, shape, path + (len(result),) if shape is not None else path)
                    result.append(value)
                else:
                    key, key_text, i = _flow_key(text, i)
                    if key in result and _same_key(result, key):
                        raise Unsupported("a key given twice")
                    child = path + (key,) if shape is not None else path
                    if shape is not None:
                        shape.keys[child] = key_text
                    result[key], i = _flow(text, _skip_spaces(text, i), shape, child)
                i = _skip_spaces(text, i)
                if text[i : i + 1] == closer:
                    break
                if text[i : i + 1] != ",":
                    raise Unsupported("malformed or multi-line flow collection")
                i = _skip_spaces(text, i + 1)
                if text[i : i + 1] in (closer, ""):
                    raise Unsupported("empty entry in a flow collection")
        if shape is not None:
            shape.flow.add(path)
            shape.raw[path] = text[start : i + 1]
        return result, i + 1
    if first == "'" or first == '"':
        match = (_SINGLE if first == "'" else _DOUBLE).match(text, i)
        if match is None:
            raise Unsupported("multi-line quoted scalar in a flow collection")
        value = match.group(1).replace("''", "'") if first == "'" else _double(match.group(1))
        end = match.end()
    else:
        match = _FLOW_PLAIN.match(text, i)
        if match is None:
            raise Unsupported("unsupported scalar in a flow collection")
        plain = match.group().rstrip(" \t")
        value, end = resolve_plain(plain), i + len(plain)
    if shape is not None:
        shape.raw[path] = text[i:end]
    return value, end


def _flow_key(text: str, i: int) -> tuple[Any, str, int]:
    """A key in a flow mapping and its `: `: (key, key text, index of its value)."""
    first = text[i : i + 1]
    if first == "'" or first == '"':
        match = (_SINGLE if first == "'" else _DOUBLE).match(text, i)
        if match is None:
            raise Unsupported("malformed flow mapping key")
        key_text = match.group()
        key: Any = _quoted(key_text)
    else:
        match = _FLOW_PLAIN.match(text, i)
        if match is None:
            raise Unsupported("unsupported flow mapping key")
        key_text = match.group().rstrip(" \t")
        if key_text == "<<":
            raise Unsupported("merge key")
        key = resolve_plain(key_text)
    end = _skip_spaces(text, i + len(key_text))
    if text[end : end + 2] != ": ":
        raise Unsupported("flow mapping entry without `: `")
    return key, key_text, end + 2


def _skip_spaces(text: str, i: int) -> int:
    while text[i : i + 1] == " ":
        i += 1
    return i


def _quoted(text: str) -> str:
    return text[1:-1].replace("''", "'") if text[0] == "'" else _double(text[1:-1])


def _double(content: str) -> str:
    if "\\" not in content:
        return content
    return _DOUBLE_ESCAPE.sub(_unescape, content)


def _unescape(match: re.Match[str]) -> str:
    code = match.group(1)
    if len(code) == 1:
        char = _SIMPLE_ESCAPES.get(code)
        if char is None:
            raise Unsupported(f"unknown escape \\{code}")
        return char
    number = int(code[1:], 16)
    if 0xD800 <= number <= 0xDFFF or number > 0x10FFFF:
        raise Unsupported("escape of a surrogate or out-of-range character")
    return chr(number)


def _literal(text: str, lines: list[str], i: int, stop: int, col: int) -> tuple[str, None, int, int]:
    """A `|` scalar whose header is on line i, inside a node at column `col`."""
    header = _LITERAL.fullmatch(text)
    if header is None:
        raise Unsupported("block scalar with an indentation indicator")
    chomp = header.group(1)
    content: list[str] = []
    indent = -1
    widest_blank = 0
    j = i + 1
    while j < stop:
        line = lines[j]
        body = line.lstrip(" ")
        if not body:
            if indent < 0:
                widest_blank = max(widest_blank, len(line))
            elif len(line) > indent:
                raise Unsupported("whitespace-only line inside a block scalar")
            content.append("")
            j += 1
            continue
        column = len(line) - len(body)
        if indent < 0:
            if column <= col:
                break
            if widest_blank > column:
                raise Unsupported("leading blank line wider than the block scalar")
            indent = column
        elif column < indent:
            break
        content.append(line[indent:])
        j += 1
    trailing = 0
    while trailing < len(content) and not content[len(content) - 1 - trailing]:
        trailing += 1
    body_lines = content[: len(content) - trailing]
    if not body_lines:
        if chomp == "+" and trailing:
            raise Unsupported("keep-chomped block scalar with no content")
        return "", None, j, i
    value = "\n".join(body_lines)
    last = j - 1 - trailing  # the last line with content (lines i+1 .. j-1 were consumed)
    if chomp == "+":
        value += "\n" * (trailing + 1)
        last = j - 1
    elif chomp == "":
        value += "\n"
    return value, None, j, last
