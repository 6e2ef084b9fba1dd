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

A package file edited through `textedit` is spliced with comment ownership (its shape comes from
`_ownership.py`) and in the file's `Style`. Then an entry's comment lines go wherever the entry
goes and a block's closing comments stay with the block; a rewritten entry keeps the comment lines
above it, the comment at the end of its line (above it, if its new value takes several lines) and
the deeper comment lines below it; a new string in a list whose strings are all quoted alike is
quoted alike. List elements are matched by what the edit did to them: `origin` says where each
mapping and list of the edited value was read from, so an element kept (`replace_items`) keeps its
lines, a new one is new, and a scalar continues an old equal one, else the one at its position.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from krmyaml._emit import Writer, emit_block
from krmyaml._scalars import same_value
from krmyaml._shape import Path, Shape
from krmyaml._style import Style
from krmyaml.roundtrip import fingerprint

_MISSING: Any = object()
_NEW: Any = object()  # in a path: a list element with no counterpart in the original


def splice_block(
    value: dict[Any, Any] | list[Any],
    shape: Shape,
    *,
    style: Style | None = None,
    origin: dict[int, Path] | None = None,
) -> list[str]:
    """Lines for `value`, the edited version of the node `shape` describes (its root at `()`).

    The shape must know its lines (`shape.lines` set). With `origin` (id of each mapping and list
    of `value` -> its path as read), comments are spliced as textedit promises (module doc).
    Raises UnwritableValue, as `_emit.emit_block` does, for values YAML cannot carry.
    """
    splicer = _Splicer(shape, style, origin)
    column = shape.columns[()]
    if isinstance(value, dict) and type(shape.value) is dict:
        splicer.mapping(value, shape.value, (), column, None)
    elif isinstance(value, list) and type(shape.value) is list:
        splicer.sequence(value, shape.value, (), column)
    else:  # pragma: no cover - callers pass the kind of node they read
        return emit_block(value, style=style)
    return splicer.out


class _Splicer:
    __slots__ = ("lines", "spans", "columns", "out", "writer", "shape", "origin")

    def __init__(self, shape: Shape, style: Style | None = None, origin: dict[int, Path] | None = None) -> None:
        assert shape.lines is not None
        self.lines, self.spans, self.columns = shape.lines, shape.spans, shape.columns
        self.shape, self.origin = shape, origin
        self.out: list[str] = []
        self.writer = Writer(shape, self.out, style=style)

    def mapping(self, value: dict[Any, Any], old: dict[Any, Any], path: Path, column: int, first: str | None) -> None:
        """Entries at `column`; the first line starts with `first` instead, if given."""
        out = self.out
        start = len(out)
        owned = self.origin is not None
        for key, child in value.items():
            child_path = path + (key,)
            # Only string keys: with others, 1 and True would find each other's spans.
            known = key in old and (type(key) is str or owned and _same_key(old, key))
            old_child = old[key] if known else _MISSING
            span = self.spans.get(child_path) if old_child is not _MISSING else None
            if span is None:
                self.writer.entry(key, child, child_path, old_child, column)
            elif self._kept(child, old_child, child_path):
                self._copy(child_path, span, column)
            elif _block_pair(child, old_child) and child_path in self.columns:
                self._head(child_path, span)
                out.append(self._first_line(self._first(child_path, span), column))
                self._nested(child, old_child, child_path)
            else:
                write = partial(self.writer.entry, key, child, child_path, old_child, column)
                self._rewrite(child_path, span, column, write)
        if first is not None and len(out) > start:
            line = out[start]
            if line.lstrip(" ").startswith("#") or not line.strip():  # a comment line now opens the item
                out[start] = first + line.lstrip(" ") if line.strip() else first.rstrip()
            else:
                out[start] = first + line[column:]
        self._foot(path)

    def sequence(self, value: list[Any], old: list[Any], path: Path, column: int) -> None:
        """Entries with their dashes at `column`."""
        if self.origin is not None:
            self._owned_sequence(value, old, path, column)
            return
        moved: dict[bytes, int] | None = None
        for index, child in enumerate(value):
            if index < len(old) and path + (index,) in self.spans and _same(child, old[index]):
                self._copy(path + (index,), self.spans[path + (index,)], column)
                continue
            if moved is None:
                moved = {}
                for number, element in enumerate(old):
                    old_print = fingerprint(element)
                    if old_print is not None:
                        moved.setdefault(old_print, number)
            was = moved.get(fingerprint(child) or b"")
            if was is not None and path + (was,) in self.spans:
                self._copy(path + (was,), self.spans[path + (was,)], column)
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

    def _owned_sequence(self, value: list[Any], old: list[Any], path: Path, column: int) -> None:
        """Entries with their dashes at `column`, matched to the old ones by `origin` (module doc)."""
        quote = self.writer.common_quote(old, path)
        for index, (child, was) in enumerate(zip(value, self._matches(value, old, path), strict=True)):
            if was is None:
                self.writer.item(child, path + (_NEW, index), _MISSING, column, quote)
                continue
            old_path, old_child = path + (was,), old[was]
            span = self.spans[old_path]
            if self._kept(child, old_child, old_path):
                self._copy(old_path, span, column)
            elif _block_pair(child, old_child) and isinstance(child, dict):
                self._element(child, old_child, old_path, span, column)
            else:
                self._rewrite(old_path, span, column, partial(self.writer.item, child, old_path, old_child, column))
        self._foot(path)

    def _matches(self, value: list[Any], old: list[Any], path: Path) -> list[int | None]:
        """For each element of `value`, the index of the old element it continues, or None."""
        origin = self.origin or {}
        matches: list[int | None] = [None] * len(value)
        claimed: set[int] = set()
        for index, child in enumerate(value):
            where = origin.get(id(child)) if isinstance(child, dict | list) else None
            if where is not None and where[:-1] == path and where[-1] not in claimed:
                matches[index] = where[-1]
                claimed.add(where[-1])
        scalars = [index for index, child in enumerate(value) if not isinstance(child, dict | list)]
        for rule in ("same place", "same value", "same place, changed"):
            for index in scalars:
                if matches[index] is not None:
                    continue
                candidates = range(len(old)) if rule == "same value" else range(index, min(index + 1, len(old)))
                for number in candidates:
                    if number in claimed or isinstance(old[number], dict | list):
                        continue
                    if rule == "same place, changed" or same_value(value[index], old[number]):
                        matches[index] = number
                        claimed.add(number)
                        break
        return matches

    def _element(
        self, child: dict[Any, Any], old: dict[Any, Any], path: Path, span: tuple[int, int], column: int
    ) -> None:
        """A mapping in a list whose entries changed: keep its dash line if it holds only a comment."""
        inner = self.columns.get(path)
        if inner is None:
            self._rewrite(path, span, column, partial(self.writer.item, child, path, old, column))
            return
        self._head(path, span)
        dash_line = self.lines[self._first(path, span)]
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

    def _kept(self, child: Any, old: Any, path: Path) -> bool:
        """Whether an entry's old lines still say what it holds (an alias still refers to its anchor)."""
        if self.origin is not None and path in self.shape.aliases and isinstance(child, dict | list):
            return self.origin.get(id(child)) == self.shape.aliases[path]
        return _same(child, old)

    def _first(self, path: Path, span: tuple[int, int]) -> int:
        """An entry's first line of content (its span may start with its comment lines)."""
        return self.shape.firsts.get(path, span[0])

    def _head(self, path: Path, span: tuple[int, int]) -> None:
        self.out.extend(self.lines[span[0] : self._first(path, span)])

    def _foot(self, path: Path) -> None:
        foot = self.shape.feet.get(path)
        if foot is not None:
            self.out.extend(self.lines[foot[0] : foot[1]])

    def _copy(self, path: Path, span: tuple[int, int], column: int) -> None:
        first = self._first(path, span)
        self.out.extend(self.lines[span[0] : first])
        self.out.append(self._first_line(first, column))
        self.out.extend(self.lines[first + 1 : span[1]])

    def _rewrite(self, path: Path, span: tuple[int, int], column: int, write: Callable[[], None]) -> None:
        """An entry written anew by `write`, with the comments it owns (module doc)."""
        self._head(path, span)
        start = len(self.out)
        write()
        several = len(self.out) - start > 1
        eol = self.shape.eols.get(path)
        if eol is not None and (not several or _opens_block(self.out[start])):
            self.out[start] += eol
        elif eol is not None:  # after `|` or `- a: 1` it would say something else, or nothing
            self.out.insert(start, " " * column + eol.lstrip(" \t"))
        last = self.shape.lasts.get(path)
        if last is not None:
            for line in self.lines[last + 1 : span[1]]:
                depth = len(line) - len(line.lstrip(" "))
                # deeper, they could be read into a block the new value ends with
                self.out.append(" " * min(depth, column) + line.lstrip(" ") if several and line.strip() else line)

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


def _opens_block(line: str) -> bool:
    """Whether `line` is a `key:` whose value is a block below it."""
    return line.endswith(":") and not line.lstrip(" ").startswith("-")


def _same_key(mapping: dict[Any, Any], key: Any) -> bool:
    """Whether `mapping` holds `key` itself, not just a key Python finds equal (1 and true)."""
    return any(type(existing) is type(key) for existing in mapping if existing == key)


def _block_pair(new: Any, old: Any) -> bool:
    """Both non-empty mappings or both non-empty lists: a block that can be spliced."""
    return (type(new) is dict and type(old) is dict or type(new) is list and type(old) is list) and bool(new and old)
