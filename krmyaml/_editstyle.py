"""How ruamel.yaml is set up to read a document and write it back in the file's own style.

Owns the file's layout as a `Style` (indentation, sequence style, the spelling of null, the
preferred quote), its detection (`detect_style`), and the ruamel engine built for it (`engine`).

Promises about what the engine reads: a null remembers how it was written (`null`, `~`, nothing);
a merge key `<<` is an ordinary key whose value is the aliased mapping (as the fast loader and
Go's yaml.v3 node tree see it), so that editing an anchored mapping never trips ruamel's merge
bookkeeping; a timestamp stays the text it was (`TimestampText`), as in the fast loader.
Promises about what it writes: long strings are never wrapped; `[{a: 1}]` keeps its braces; an
empty `{}` item never runs the next item onto its line (a ruamel bug); a string that needs quotes
gets the file's preferred quote; a string this package adds that a YAML 1.1 reader (kubectl's
sigs.k8s.io/yaml, PyYAML) would take for a boolean or number (`yes`, `on`, `n`, `12:30`) is
quoted, as Go's yaml.v3 encoder, which Porch writes with, quotes it (`fresh_text` marks them).
Leaves to textedit.py: which documents are edited, and how; to _editcomments.py: comments.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

import yaml
from ruamel.yaml import YAML
from ruamel.yaml.constructor import RoundTripConstructor
from ruamel.yaml.emitter import RoundTripEmitter
from ruamel.yaml.events import MappingEndEvent
from ruamel.yaml.representer import RoundTripRepresenter

__all__ = ["MergeKey", "Style", "TimestampText", "WrittenNull", "detect_style", "engine", "fresh_text"]

# Wide enough that ruamel never folds a long string onto a second line.
_NO_WRAP = 1 << 20
_STR = "tag:yaml.org,2002:str"
_MERGE = "tag:yaml.org,2002:merge"
_TIMESTAMP = "tag:yaml.org,2002:timestamp"


@dataclass(frozen=True, slots=True)
class Style:
    """How a file is laid out, so that what we write looks like what was there."""

    mapping_indent: int = 2
    dash_offset: int = 2  # 0: "compact" `key:\n- a`; mapping_indent: "wide" `key:\n  - a`
    null: str = ""  # a null value is written as `key:` ("") or `key: null` or `key: ~`
    quote: str = '"'  # the quote for strings that need one


_KEY_THEN_DASH = re.compile(r"^( *)[^\s#-][^\n]*:[ \t]*(?:#[^\n]*)?\r?\n(?:[ \t]*(?:#[^\n]*)?\r?\n)*( *)- ",
                            re.MULTILINE)
_KEY_THEN_KEY = re.compile(r"^( *)[^\s#-][^\n]*:[ \t]*(?:#[^\n]*)?\r?\n(?:[ \t]*(?:#[^\n]*)?\r?\n)*( *)[^\s#-]",
                           re.MULTILINE)
_NULLS = re.compile(r":[ \t]+(null|~)[ \t]*(?:#[^\n]*)?\r?$", re.MULTILINE)
_QUOTES = re.compile(r"(?::|^[ \t]*-)[ \t]+([\"'])", re.MULTILINE)


def detect_style(text: str) -> Style:
    """The layout `text` uses, by majority where it is mixed; kpt's defaults where it shows none."""
    indents = Counter(len(c) - len(p) for p, c in _KEY_THEN_KEY.findall(text) if len(c) > len(p))
    mapping_indent = indents.most_common(1)[0][0] if indents else 2
    offsets = Counter(len(dash) - len(key) for key, dash in _KEY_THEN_DASH.findall(text) if len(dash) >= len(key))
    dash_offset = offsets.most_common(1)[0][0] if offsets else mapping_indent
    nulls = Counter(_NULLS.findall(text))
    null = nulls.most_common(1)[0][0] if nulls else ""
    quotes = Counter(_QUOTES.findall(text))
    quote = "'" if quotes["'"] > quotes['"'] else '"'
    return Style(mapping_indent, dash_offset, null, quote)


# --- what is read ---------------------------------------------------------------------------------------


class WrittenNull:
    """A null read from the file, remembering whether it was written `null`, `~` or not at all."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


class MergeKey(str):
    """The key `<<`, read as an ordinary key and written back unquoted."""

    __slots__ = ()


class TimestampText(str):
    """A plain scalar that YAML reads as a timestamp, kept as its text and written back unquoted."""

    __slots__ = ()


class _Constructor(RoundTripConstructor):
    def construct_written_null(self, node: Any) -> WrittenNull:
        return WrittenNull(node.value)

    def construct_merge_key(self, node: Any) -> MergeKey:
        return MergeKey(node.value)

    def construct_timestamp_text(self, node: Any) -> TimestampText:
        return TimestampText(node.value)

    def flatten_mapping(self, node: Any) -> Any:
        return None  # `<<` stays a key (see construct_merge_key)


_Constructor.add_constructor("tag:yaml.org,2002:null", _Constructor.construct_written_null)
_Constructor.add_constructor(_MERGE, _Constructor.construct_merge_key)
_Constructor.add_constructor(_TIMESTAMP, _Constructor.construct_timestamp_text)


# --- what is written -------------------------------------------------------------------------------------


class _Yaml11Text(str):
    """A string this package adds that a YAML 1.1 reader would not read as a string if plain."""

    __slots__ = ()


# YAML 1.1 reads these as booleans too (Go's yaml.v2 does; PyYAML's resolver below does not).
_YAML11_LETTERS = frozenset({"y", "Y", "n", "N"})
_YAML11 = yaml.resolver.Resolver()  # stateless: only its resolve() is used


def fresh_text(text: str) -> str:
    """`text` as a new plain string to write: marked for quoting if a YAML 1.1 reader needs that."""
    if text in _YAML11_LETTERS or _YAML11.resolve(yaml.ScalarNode, text, (True, False)) != _STR:
        return _Yaml11Text(text)
    return text


class _Representer(RoundTripRepresenter):
    null_text = ""  # for a null we add
    quote = '"'

    def represent_none(self, data: Any) -> Any:
        return self.represent_scalar("tag:yaml.org,2002:null", self.null_text)

    def represent_written_null(self, data: WrittenNull) -> Any:
        return self.represent_scalar("tag:yaml.org,2002:null", data.text)

    def represent_merge_key(self, data: MergeKey) -> Any:
        return self.represent_scalar(_MERGE, str(data))

    def represent_timestamp_text(self, data: TimestampText) -> Any:
        return self.represent_scalar(_TIMESTAMP, str(data))

    def represent_yaml11_text(self, data: _Yaml11Text) -> Any:
        return self.represent_scalar(_STR, str(data), style=self.quote)


def _representer(null: str, quote_mark: str) -> type[_Representer]:
    class Representer(_Representer):
        null_text, quote = null, quote_mark

    cls = Representer
    # ruamel looks representers up in a per-class table, not by method resolution
    cls.add_representer(type(None), cls.represent_none)
    cls.add_representer(WrittenNull, cls.represent_written_null)
    cls.add_representer(MergeKey, cls.represent_merge_key)
    cls.add_representer(TimestampText, cls.represent_timestamp_text)
    cls.add_representer(_Yaml11Text, cls.represent_yaml11_text)
    return cls


_REPRESENTERS = {(null, quote): _representer(null, quote) for null in ("", "null", "~") for quote in ('"', "'")}


class _Emitter(RoundTripEmitter):
    def expect_first_flow_mapping_key(self) -> None:
        if isinstance(self.event, MappingEndEvent):
            # ruamel forgets this after an empty `{}` (it resets it after a non-empty one), and then
            # writes the next item of a commented sequence on the same line: `- {}\n- a: 1 -`
            self.no_newline = False
        super().expect_first_flow_mapping_key()


class _DoubleQuotingEmitter(_Emitter):
    """Quotes a string that needs quotes (`"true"`, `"8080"`) the way Go and kpt do: with `"`."""

    def choose_scalar_style(self) -> Any:
        style = super().choose_scalar_style()
        if style == "'" and self.event.style is None:
            return '"'
        return style


def engine(style: Style) -> YAML:
    """A ruamel round-trip engine that reads and writes as described above, in `style`."""
    out = YAML(typ="rt")
    out.preserve_quotes = True
    out.width = _NO_WRAP
    out.brace_single_entry_mapping_in_flow_sequence = True  # `[{a: 1}]`, as written and as Go writes it
    out.indent(mapping=style.mapping_indent, sequence=style.dash_offset + 2, offset=style.dash_offset)
    out.Constructor = _Constructor
    out.Representer = _REPRESENTERS[style.null, style.quote]
    out.Emitter = _DoubleQuotingEmitter if style.quote == '"' else _Emitter
    return out
