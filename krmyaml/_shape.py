"""The shape of an item as it was read: what it takes to write an edited item like the original.

When a function edits a resource, the edited dict must be written anew, but most of its fields
still hold what they held before. A `Shape` remembers, per field path, the source text of every
single-line scalar, flow collection and key, and which collections were in flow style. The
emitter (`_emit.py`) writes a field's original text whenever the field still holds a value of
the same type and the same value as when it was read, so an annotation `'0'` stays `'0'`, a mode
`0755` stays `0755`, and `~` stays `~`. Only what the function changed gets new text.

When the item was read by the line parser, the shape also knows where every block entry's text
is (`spans`, `columns`), and `_splice.py` copies the lines of every entry that did not change,
comments included, instead of writing it anew.

A package file edited through `textedit` has a shape that also says which comment lines belong
to which entry (`_ownership.py`): an entry's span then starts at the comment lines above it
(`firsts` holds the line of its content) and ends after the lines indented deeper than it that
follow it; `feet` holds the comment lines that end a block.

Shapes are built on demand, only for edited items: `_blockparse.py`, `_libyaml.py` and
`_ownership.py` fill one when asked.
"""

from __future__ import annotations

from typing import Any

Path = tuple[Any, ...]


class Shape:
    """Source text of an item's nodes, by path (keys and list indexes from the item's root).

    (A plain class: a dataclass would cost every function's start-up the import of `dataclasses`.)
    """

    __slots__ = ("value", "raw", "keys", "flow", "lines", "spans", "columns", "firsts", "lasts", "feet", "eols",
                 "aliases")

    def __init__(self, value: Any = None) -> None:
        self.value = value  # the item exactly as read: the reference for "unchanged"
        self.raw: dict[Path, str] = {}  # scalar or flow collection -> its text (*)
        self.keys: dict[Path, str] = {}  # mapping entry -> its key's text
        self.flow: set[Path] = set()  # collections written in flow style
        # Only from the line parser (block style, no anchors): where each entry's text is. (*) The
        # line parser records `raw` only inside flow collections: spans already hold the rest.
        self.lines: list[str] | None = None  # the source lines that spans index
        self.spans: dict[Path, tuple[int, int]] = {}  # entry -> [first, end) lines
        self.columns: dict[Path, int] = {}  # block collection -> its entries' column
        # Only with comment ownership (textedit), for entries whose span starts with comment lines:
        self.firsts: dict[Path, int] = {}  # entry -> its first line of content (key or dash line)
        self.lasts: dict[Path, int] = {}  # entry -> its last line of content
        self.feet: dict[Path, tuple[int, int]] = {}  # block collection -> the comment lines ending it
        self.eols: dict[Path, str] = {}  # entry -> the comment at the end of its first line, spaces before
        self.aliases: dict[Path, Path] = {}  # entry whose value is an alias -> the anchored node's path
