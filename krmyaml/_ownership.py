"""Where each entry of a package file is, and which comment lines belong to it: textedit's `Shape`.

`_splice.py` writes an edited document from the lines of its unchanged entries. For a file that goes
back into a package, comments must move with the entries they describe, so this module decides, from
libyaml's node graph (any YAML, not only the block style the line parser reads), whose each comment
line is:

* a comment line belongs to the entry after it in its block, and the comment lines after a block's
  last entry belong to the block (its foot);
* comment lines right after an entry and indented deeper than its block stay with that entry
  (`key: 1` then `    # about key`); blank lines in front of the first line that is not deeper go
  with what follows.

An entry's span (`Shape.spans`) runs from its first comment line to the last line it owns;
`firsts` and `lasts` hold its first and last lines of content, `eols` the comment ending its first
line, `feet` each block's closing comment lines, `aliases` the entries whose value is an alias.
Scalars, keys and flow collections on one line keep their text in `raw` and `keys`, as the
line parser records them for krmfn.

A layout this module does not place (content on a line where only comments can be, a key on
several lines, a root that is not a block collection) raises `Unsupported`: the caller writes the
document anew.
"""

from __future__ import annotations

import re
from typing import Any

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from krmyaml._shape import Path, Shape

__all__ = ["Unsupported", "build"]

_EOL = re.compile(r"[ \t]+#[^\r]*")


class Unsupported(Exception):
    """The document's layout is not one whose lines this module can give to entries."""


def build(node: Node, value: Any, text: str, lines: list[str]) -> Shape:
    """The shape of the document `text` (split into `lines` at "\\n"), composed as `node`, read as `value`.

    Raises Unsupported (see the module doc)."""
    if not _is_block(node) or not node.value:
        raise Unsupported("the root is not a block collection")
    shape = Shape(value)
    shape.lines = lines
    builder = _Builder(shape, text, lines)
    builder.find_aliases(node, value, ())
    builder.block(node, value, (), 0, len(lines))
    return shape


def _is_block(node: Node) -> bool:
    return isinstance(node, MappingNode | SequenceNode) and not node.flow_style


def _blank_or_comment(line: str) -> bool:
    stripped = line.lstrip(" \t")
    return not stripped.rstrip("\r") or stripped[0] == "#"


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


class _Builder:
    __slots__ = ("shape", "text", "lines", "anchors")

    def __init__(self, shape: Shape, text: str, lines: list[str]) -> None:
        self.shape, self.text, self.lines = shape, text, lines
        self.anchors: dict[int, Path] = {}  # node -> where it was first seen (later sightings are aliases)

    def block(self, node: Node, value: Any, path: Path, start: int, limit: int) -> None:
        """Place the entries of the block collection `node` (at `path`), whose lines, with the
        comment lines it owns, are [start, limit)."""
        shape, lines = self.shape, self.lines
        entries = self._entries(node, value, path)
        column = shape.columns[path]
        # First and last line of content of each entry, then whose each line between them is.
        firsts: list[int] = []
        lasts: list[int] = []
        previous = start - 1
        for child_path, key_node, child_node, _ in entries:
            first = self._first_line(node, key_node, previous, column)
            if any(not _blank_or_comment(line) for line in lines[max(previous + 1, start) : first]):
                raise Unsupported("content between entries")
            firsts.append(first)
            lasts.append(max(first, self._extent(child_node, child_path, first)))
            previous = lasts[-1]
        head = start
        for index, (child_path, key_node, child_node, child_value) in enumerate(entries):
            first, last = firsts[index], lasts[index]
            following = firsts[index + 1] if index + 1 < len(entries) else limit
            tail = self._split(last + 1, following, column)
            shape.spans[child_path] = (head, tail)
            shape.firsts[child_path] = first
            shape.lasts[child_path] = last
            self._eol(key_node, child_node, child_path, first, column)
            if child_path not in shape.aliases and _is_block(child_node) and child_node.value:
                inner = self._content_line(child_node)
                self.block(child_node, child_value, child_path, first + 1 if inner > first else first, tail)
            elif child_path not in shape.aliases:
                self._leaf(child_node, child_value, child_path)
            head = tail
        if head < limit:
            shape.feet[path] = (head, limit)

    def _entries(self, node: Node, value: Any, path: Path) -> list[tuple[Path, Node | None, Node, Any]]:
        shape = self.shape
        if isinstance(node, MappingNode):
            if not isinstance(value, dict) or len(value) != len(node.value):
                raise Unsupported("a mapping read otherwise than written (a merge)")
            out: list[tuple[Path, Node | None, Node, Any]] = []
            for (key_node, child_node), (key, child) in zip(node.value, value.items(), strict=True):
                if not isinstance(key_node, ScalarNode) or key_node.start_mark.line != key_node.end_mark.line:
                    raise Unsupported("a key that is not a one-line scalar")
                child_path = path + (key,)
                raw = self._raw(key_node)
                if raw is None:
                    raise Unsupported("a key with an anchor, alias or tag")
                shape.keys[child_path] = raw
                out.append((child_path, key_node, child_node, child))
            shape.columns[path] = node.value[0][0].start_mark.column
            return out
        if not isinstance(value, list) or len(value) != len(node.value):
            raise Unsupported("a sequence read otherwise than written")
        shape.columns[path] = self._dash(node)[1]
        return [(path + (index,), None, child_node, child)
                for index, (child_node, child) in enumerate(zip(node.value, value, strict=True))]

    def _first_line(self, node: Node, key_node: Node | None, previous: int, column: int) -> int:
        """The line an entry starts on: its key's, or its dash's (the first line of content after the
        previous entry, which must have its `-` at the block's column)."""
        lines = self.lines
        if key_node is not None:
            line = int(key_node.start_mark.line)
            if key_node.start_mark.column != column or lines[line][:column].strip(" -"):
                raise Unsupported("a key out of its block's column, or an explicit `? key`")
            return line
        line = max(previous + 1, self._dash(node)[0])
        while line < len(lines) and _blank_or_comment(lines[line]):
            line += 1
        text = lines[line] if line < len(lines) else ""
        if text[column : column + 1] != "-" or text[:column].strip(" -"):
            raise Unsupported("a sequence entry without its dash where expected")
        return line

    def _content_line(self, node: Node) -> int:
        """The line a block collection's first entry starts on (its node may start at an anchor)."""
        if isinstance(node, MappingNode):
            return int(node.value[0][0].start_mark.line)
        return self._dash(node)[0]

    def _dash(self, node: Node) -> tuple[int, int]:
        """Line and column of a block sequence's first dash (its node may start at an anchor)."""
        line, column = int(node.start_mark.line), int(node.start_mark.column)
        if self.lines[line][column : column + 1] == "-":
            return line, column
        line += 1
        while line < len(self.lines) and _blank_or_comment(self.lines[line]):
            line += 1
        if line >= len(self.lines):
            raise Unsupported("a sequence without its dash")
        return line, _indent(self.lines[line])

    def _extent(self, child_node: Node, path: Path, first: int) -> int:
        """The last line of content of the entry starting on line `first`."""
        if path in self.shape.aliases:  # `*name` is written on the entry's first line
            return first
        return self._last_line(child_node)

    def find_aliases(self, node: Node, value: Any, path: Path) -> None:
        """Record, in document order, which nodes are seen again (as aliases) and where first."""
        if id(node) in self.anchors:
            self.shape.aliases[path] = self.anchors[id(node)]
            return
        self.anchors[id(node)] = path
        if isinstance(node, MappingNode) and isinstance(value, dict) and len(value) == len(node.value):
            for (_, child_node), (key, child) in zip(node.value, value.items(), strict=True):
                self.find_aliases(child_node, child, path + (key,))
        elif isinstance(node, SequenceNode) and isinstance(value, list) and len(value) == len(node.value):
            for index, (child_node, child) in enumerate(zip(node.value, value, strict=True)):
                self.find_aliases(child_node, child, path + (index,))

    def _last_line(self, node: Node) -> int:
        if _is_block(node) and node.value:
            children = node.value
            last = children[-1]
            return max(self._last_line(part) for part in (last if isinstance(last, tuple) else (last,)))
        end = node.end_mark
        line = int(end.line)
        if line > node.start_mark.line and (line >= len(self.lines) or not self.lines[line][: end.column].strip(" \t")):
            line -= 1  # the mark is at the start of the next line (a block scalar ends with its line break)
        if isinstance(node, ScalarNode) and node.style in ("|", ">") and not str(node.value).endswith("\n\n"):
            while line > node.start_mark.line and not self.lines[line].strip(" \t\r"):
                line -= 1
        return line

    def _split(self, start: int, stop: int, column: int) -> int:
        """Where the lines [start, stop) after an entry stop being its own: the first line indented
        no deeper than `column`, with the blank lines before it."""
        lines = self.lines
        cut = start
        while cut < stop and (not lines[cut].strip(" \t\r") or _indent(lines[cut]) > column):
            cut += 1
        while cut > start and not lines[cut - 1].strip(" \t\r"):
            cut -= 1
        return cut

    def _eol(self, key_node: Node | None, child_node: Node, path: Path, first: int, column: int) -> None:
        """Record the comment at the end of the entry's first line, if there is one."""
        line = self.lines[first]
        if path in self.shape.aliases:
            return
        if isinstance(child_node, ScalarNode) and child_node.style in ("|", ">"):
            return
        if child_node.start_mark.line == first and child_node.end_mark.line == first and \
                child_node.end_mark.index > child_node.start_mark.index:
            rest = line[child_node.end_mark.column :]
        elif key_node is not None:
            after = line[key_node.end_mark.column :].lstrip(" \t")
            rest = after[1:] if after.startswith(":") else ""
        else:
            rest = line[column + 1 :]
        match = _EOL.match(rest)
        if match is not None:
            self.shape.eols[path] = match.group()

    def _leaf(self, node: Node, value: Any, path: Path) -> None:
        """Record the text of a scalar or flow collection, and inside a flow collection of its parts."""
        shape = self.shape
        raw = self._raw(node)
        if raw is not None and (isinstance(node, ScalarNode) or getattr(node, "flow_style", False)):
            shape.raw[path] = raw
        if isinstance(node, MappingNode) and node.flow_style and isinstance(value, dict) \
                and len(value) == len(node.value):
            shape.flow.add(path)
            for (key_node, child_node), (key, child) in zip(node.value, value.items(), strict=True):
                key_raw = self._raw(key_node) if isinstance(key_node, ScalarNode) else None
                if key_raw is not None:
                    shape.keys[path + (key,)] = key_raw
                self._leaf(child_node, child, path + (key,))
        elif isinstance(node, SequenceNode) and node.flow_style and isinstance(value, list) \
                and len(value) == len(node.value):
            shape.flow.add(path)
            for index, (child_node, child) in enumerate(zip(node.value, value, strict=True)):
                self._leaf(child_node, child, path + (index,))

    def _raw(self, node: Node) -> str | None:
        """The node's source text if it is on one line and carries no anchor, alias or tag."""
        start, end = node.start_mark, node.end_mark
        if start.line != end.line:
            return None
        raw = self.text[start.index : end.index]
        if raw[:1] in ("&", "*", "!") or (isinstance(node, ScalarNode) and node.style in ("|", ">")):
            return None
        return raw
