"""A file's layout, so that the lines an edit adds look like the lines that were there.

`Style` says how new lines are indented (mapping indentation; a sequence under a key written
"compact", `key:` then `- a` at the key's column, or indented), how a new null is spelled (`key:`,
`key: null`, `key: ~`) and which quote a new string that needs one gets. `detect_style` reads it
from a file, by majority where the file mixes layouts, with kpt's defaults where it shows none.
The writer (`_emit.py`) follows it; without one it writes as go-yaml does for krmfn.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import NamedTuple

__all__ = ["Style", "detect_style"]


class Style(NamedTuple):
    """How a file is laid out (a NamedTuple: cheap to import, for the writer krmfn also loads)."""

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
