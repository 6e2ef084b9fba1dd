"""Writing an edited item by splicing: the original lines of what did not change, new lines for the rest.

An item read by the line parser has a `Shape` with the line span of every block entry. To write
the item after the function edited it, walk the new value beside the value as read:

* an entry (mapping key or list element) holding the same value, type for type, is copied as
  its original lines: same text, same style, its comments inside it;
* an entry whose value is still a non-empty block mapping or list on both sides keeps its
  original key line and is spliced recursively;
* a list element equal to an element that moved (an insertion at the front, say) is copied from
  where it was, comments with it, and an edited element is spliced against the original
  element of the same `name` (else the one at its position): kpt's own comment restoration
  matches list elements by position and would move such comments to the wrong element (§7);
* everything else (new keys, changed scalars, replaced collections) is written by `_emit.py`;
  a flow collection stays flow, with the original text of its unchanged scalars.

Deleted entries are left out, and with them any comment inside them. Comment lines between two
entries belong to neither and are not copied (kpt puts them back from its copy of the input).
Items read by libyaml (anchors, flow style, ...) have no spans and are written by `_emit.py`.
"""

from __future__ import annotations

from typing import Any

from krmyaml._emit import Writer, emit_block
from krmyaml._scalars import same_value
from krmyaml._shape import Path, Shape
from krmyaml.roundtrip import fingerprint

_MISSING: Any = object()
_NEW: Any = object()  # in a path: a list element with no counterpart in the original


def splice_block(value: dict[Any, Any] | list[Any], shape: Shape) -> list[str]:
    """Lines for `value`, the edited version of the node `shape` describes (its root at `()`).

    The shape must come from the line parser (`shape.lines` set). Raises UnwritableValue, as
    `_emit.emit_block` does, for values YAML cannot carry.
    """
    splicer = _Splicer(shape)
    column = shape.columns[()]
    if isinstance(value, dict) and type(shape.value) is dict:
        splicer.mapping(value, shape.value, (), column, None)
    elif isinstance(value, list) and type(shape.value) is list:
        splicer.sequence(value, shape.value, (), column)
    else:  # pragma: no cover - callers pass the kind of node they read
        return emit_block(value)
    return splicer.out


class _Splicer:
    __slots__ = ("lines", "spans", "columns", "out", "writer")

    def __init__(self, shape: Shape) -> None:
        assert shape.lines is not None
        self.lines, self.spans, self.columns = shape.lines, shape.spans, shape.columns
        self.out: list[str] = []
        self.writer = Writer(shape, self.out)

    def mapping(self, value: dict[Any, Any], old: dict[Any, Any], path: Path, column: int, first: str | None) -> None:
        """Entries at `column`; the first line starts with `first` instead, if given."""
        lines, out = self.lines, self.out
        start = len(out)
        for key, child in value.items():
            child_path = path + (key,)
            # Only string keys: with others, 1 and True would find each other's spans.
            old_child = old.get(key, _MISSING) if type(key) is str else _MISSING
            span = self.spans.get(child_path) if old_child is not _MISSING else None
            if span is None:
                self.writer.entry(key, child, child_path, old_child, column)
            elif _same(child, old_child):
                line = lines[span[0]]
                out.append(line if not line[:column].strip() else " " * column + line[column:])
                if span[1] > span[0] + 1:
                    out.extend(lines[span[0] + 1 : span[1]])
            elif _block_pair(child, old_child) and child_path in self.columns:
                self.out.append(self._first_line(span[0], column))
                self._nested(child, old_child, child_path)
            else:
                self.writer.entry(key, child, child_path, old_child, column)
        if first is not None and len(self.out) > start:
            self.out[start] = first + self.out[start][column:]

    def sequence(self, value: list[Any], old: list[Any], path: Path, column: int) -> None:
        """Entries with their dashes at `column`."""
        moved: dict[bytes, int] | None = None
        for index, child in enumerate(value):
            if index < len(old) and path + (index,) in self.spans and _same(child, old[index]):
                self._copy(self.spans[path + (index,)], column)
                continue
            if moved is None:
                moved = {}
                for number, element in enumerate(old):
                    old_print = fingerprint(element)
                    if old_print is not None:
                        moved.setdefault(old_print, number)
            was = moved.get(fingerprint(child) or b"")
            if was is not None and path + (was,) in self.spans:
                self._copy(self.spans[path + (was,)], column)
                continue
            counterpart = _counterpart(child, old, index)
            if counterpart is None:  # a new element: nothing of the old list may leak into it
                self.writer.item(child, path + (_NEW, index), _MISSING, column)
                continue
            old_path, old_child = path + (counterpart,), old[counterpart]
            span = self.spans.get(old_path)
            if span is not None and _block_pair(child, old_child) and isinstance(child, dict):
                self._element(child, old_child, old_path, span, column)
            else:
                self.writer.item(child, old_path, old_child, column)

    def _element(
        self, child: dict[Any, Any], old: dict[Any, Any], path: Path, span: tuple[int, int], column: int
    ) -> None:
        """A mapping in a list whose entries changed: keep its dash line if it holds only a comment."""
        inner = self.columns.get(path)
        if inner is None:
            self.writer.item(child, path, old, column)
            return
        dash_line = self.lines[span[0]]
        rest = dash_line[column + 1 :].strip()
        if not rest or rest.startswith("#"):  # `- # head comment`: the mapping starts below
            self.out.append(dash_line)
            self.mapping(child, old, path, inner, None)
        else:
            self.mapping(child, old, path, inner, (" " * column + "-").ljust(inner))

    def _nested(self, child: Any, old: Any, path: Path) -> None:
        if isinstance(child, dict):
            self.mapping(child, old, path, self.columns[path], None)
        else:
            self.sequence(child, old, path, self.columns[path])

    def _copy(self, span: tuple[int, int], column: int) -> None:
        self.out.append(self._first_line(span[0], column))
        self.out.extend(self.lines[span[0] + 1 : span[1]])

    def _first_line(self, number: int, column: int) -> str:
        """An entry's first line, with whatever preceded the entry on it (a `- `) made spaces."""
        line = self.lines[number]
        return line if not line[:column].strip() else " " * column + line[column:]


def _same(a: Any, b: Any) -> bool:
    """Same value and same types throughout, quickly for large subtrees."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict | list):
        return bool(a == b) and fingerprint(a) == fingerprint(b) is not None
    return same_value(a, b)


def _counterpart(child: Any, old: list[Any], index: int) -> int | None:
    """The index of the original element `child` is an edit of, if any.

    Elements with a `name` (containers, env vars, volumes, ports...: Kubernetes' usual merge
    key) match the original element of the same name, wherever it was; others match by
    position. Matching by name keeps a container's comments, and only its own, when another
    container is inserted before it.
    """
    if isinstance(child, dict) and "name" in child:
        name = child["name"]
        if index < len(old) and isinstance(old[index], dict) and old[index].get("name") == name:
            return index
        return next((n for n, o in enumerate(old) if isinstance(o, dict) and o.get("name") == name), None)
    return index if index < len(old) else None


def _block_pair(new: Any, old: Any) -> bool:
    """Both non-empty mappings or both non-empty lists: a block that can be spliced."""
    return (type(new) is dict and type(old) is dict or type(new) is list and type(old) is list) and bool(new and old)
