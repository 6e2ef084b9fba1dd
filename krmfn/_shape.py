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

Shapes are built on demand, only for edited items: `_blockparse.py` and `_libyaml.py` both fill
one when asked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Path = tuple[Any, ...]


@dataclass(slots=True)
class Shape:
    """Source text of an item's nodes, by path (keys and list indexes from the item's root)."""

    value: Any = None  # the item exactly as read: the reference for "unchanged"
    raw: dict[Path, str] = field(default_factory=dict)  # scalar or flow collection -> its text (*)
    keys: dict[Path, str] = field(default_factory=dict)  # mapping entry -> its key's text
    flow: set[Path] = field(default_factory=set)  # collections written in flow style
    # Only from the line parser (block style, no anchors): where each entry's text is. (*) The
    # line parser records `raw` only inside flow collections: spans already hold the rest.
    lines: list[str] | None = None  # the source lines that spans index
    spans: dict[Path, tuple[int, int]] = field(default_factory=dict)  # entry -> [first, end) lines
    columns: dict[Path, int] = field(default_factory=dict)  # block collection -> its entries' column
