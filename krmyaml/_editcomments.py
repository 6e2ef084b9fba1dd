"""Comment bookkeeping on ruamel.yaml's round-trip data, so that comments move with their entries.

ruamel hangs every comment on the token before it: the comment above the third item of a list is
part of the end-of-line comment of the second item's last scalar, however deep that is. Deleting
or moving items would then carry comments off with the wrong neighbour.

Promises:

* `settle(root)` rewrites one document's comments so that a comment line is a "pre" comment of the
  next key or item in its block (`ca.items[key][1]`), or the block's end comment (`ca.end`) if it
  comes last in the block, keeping lines indented deeper than the block with the entry above them.
  ruamel emits all three places, so the text it writes is unchanged until the data is.
* `tidy(root)`, after an edit, puts right what the edit's new values would make ruamel write
  wrongly: a block mapping or sequence left empty comes out as `key: {}` / `key: []` with the
  end-of-line comment of `key:` after the brackets (ruamel would write the comment first and the
  brackets on a line of their own: not YAML); comment lines after a value that is now a block
  scalar (`|`) are indented no deeper than its key (deeper, they would be read as its content);
  the comment of a sequence item that is now a block collection goes above its `-`.

Leaves to textedit.py: loading, dumping, and which entries an edit adds, removes or reorders.
"""

from __future__ import annotations

from typing import Any

from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import CommentMark
from ruamel.yaml.scalarstring import FoldedScalarString, LiteralScalarString
from ruamel.yaml.tokens import CommentToken

__all__ = ["settle", "tidy"]

_Block = CommentedMap | CommentedSeq


def settle(root: Any) -> None:
    """Give every full-line comment of the document `root` to the entry it precedes (see above)."""
    if isinstance(root, _Block):
        _settle(root, parent=None, key=None, seen=set())


def tidy(root: Any) -> None:
    """Fix up empty collections and comments after block scalars under `root` (see above)."""
    _tidy(root, path=[], seen=set())


def _tidy(node: Any, path: list[tuple[Any, Any]], seen: set[int]) -> None:
    """`path`: the (block, key) pairs from the root down to `node`."""
    if not isinstance(node, _Block) or id(node) in seen:
        return
    seen.add(id(node))
    if not node:
        if not node.fa.flow_style():
            node.fa.set_flow_style()
            parent, key = path[-1] if path else (None, None)
            slots = parent.ca.items.get(key) if parent is not None else None
            if slots and len(slots) > 3 and slots[3] == []:
                slots[3] = None  # an empty pre-comment list on a sequence value misplaces `[]`
        return
    for child_key in _keys(node):
        child = node[child_key]
        if isinstance(child, LiteralScalarString | FoldedScalarString):
            _outdent_after_block_scalar([*path, (node, child_key)])
        elif isinstance(node, CommentedSeq) and isinstance(child, _Block) and child and not child.fa.flow_style():
            _lift_item_comment(node, child_key)
        _tidy(child, [*path, (node, child_key)], seen)


def _lift_item_comment(seq: CommentedSeq, index: int) -> None:
    """The comment of an item that is now a block collection goes above its `-` (where ruamel puts
    `- # comment` when it reads one); left after the `-`, ruamel writes the block's lines run on."""
    slots = seq.ca.items.get(index)
    if not slots or slots[0] is None:
        return
    value = slots[0].value
    column = seq.lc.col if seq.lc.col is not None else 0
    lifted = value.removeprefix("\n") if value.startswith("\n") else " " * column + value
    slots[1] = [CommentToken(_text(slots[1]) + lifted, CommentMark(0))]
    slots[0] = None


def _outdent_after_block_scalar(path: list[tuple[Any, Any]]) -> None:
    """Outdent the comment lines ruamel writes between the block scalar at the end of `path` and
    the next entry: its own comment, then the end comments of the blocks it ends, then the
    comment above the entry that follows."""
    node, key = path[-1]
    column = node.lc.col if node.lc.col is not None else 0
    slots = node.ca.items.get(key)
    index = 2 if isinstance(node, CommentedMap) else 0
    if slots and len(slots) > index and slots[index] is not None:
        value = slots[index].value
        eol = not value.startswith("\n")  # `key: value # comment`: now on a line of its own
        text = (" " * column if eol else "") + value.removeprefix("\n")  # the block ends its own line
        slots[index] = CommentToken(_outdent(text, column), CommentMark(0))
    for holder, at in reversed(path):
        keys = _keys(holder)
        position = keys.index(at)
        if position + 1 < len(keys):
            following = holder.ca.items.get(keys[position + 1])
            if following and len(following) > 1 and following[1]:
                following[1] = [CommentToken(_outdent(_text(following[1]), column), CommentMark(0))]
            return
        if holder.ca.end:
            holder.ca.end = [CommentToken(_outdent(_text(holder.ca.end), column), CommentMark(0))]


def _keys(node: Any) -> list[Any]:
    return list(node) if isinstance(node, CommentedMap) else list(range(len(node)))


def _outdent(text: str, column: int) -> str:
    """Comment lines indented by at most `column`."""
    return "".join(" " * min(column, len(line) - len(line.lstrip(" "))) + line.lstrip(" ") if line.strip() else line
                   for line in text.splitlines(keepends=True))


def _settle(node: CommentedMap | CommentedSeq, parent: Any, key: Any, seen: set[int]) -> None:
    if id(node) in seen or node.fa.flow_style() or not node:
        return
    seen.add(id(node))
    keys = list(node) if isinstance(node, CommentedMap) else list(range(len(node)))
    column = node.lc.col if node.lc.col is not None else 0
    if parent is not None:
        _add_pre(node, keys[0], _take_start(node, parent, key))
    for position, child_key in enumerate(keys):
        trailing = _take_trailing(node, child_key)
        if position + 1 == len(keys):
            trailing += _text(node.ca.end)
            node.ca.end = []
        inner, outer = _split_at_column(trailing, column)
        _put_back(node, child_key, inner)
        if position + 1 < len(keys):
            _add_pre(node, keys[position + 1], outer)
        elif outer:
            _set_end(node, outer)
    for child_key in keys:
        child = node[child_key]
        if isinstance(child, _Block):
            _settle(child, node, child_key, seen)


def _take_start(node: Any, parent: Any, key: Any) -> str:
    """The comment lines between `key:` (or `-`) and the first entry of the block `node`."""
    text = ""
    start = node.ca.comment
    if start and start[0] is not None:  # `key: # eol` + lines, one token shared with the parent
        eol, rest = _split_eol(start[0].value)
        text += rest
        if eol:
            start[0].value = eol
        else:
            start[0] = None
            _clear_parent_slot(parent, key, 2)
    if start and start[1]:
        text += _text(start[1])
        start[1] = None
        _clear_parent_slot(parent, key, 3)
    return text


def _clear_parent_slot(parent: Any, key: Any, slot: int) -> None:
    if isinstance(parent, CommentedMap) and key in parent.ca.items:
        parent.ca.items[key][slot] = None


def _take_trailing(node: Any, key: Any) -> str:
    """Cut the full comment lines that follow entry `key` out of ruamel's token for its last scalar."""
    child = node[key]
    if isinstance(child, _Block) and child and not child.fa.flow_style():
        last = list(child)[-1] if isinstance(child, CommentedMap) else len(child) - 1
        text = _take_trailing(child, last)
        text += _text(child.ca.end)
        child.ca.end = []
        return text
    slots = node.ca.items.get(key)
    index = 2 if isinstance(node, CommentedMap) else 0
    if not slots or len(slots) <= index or slots[index] is None:
        return ""
    if isinstance(child, LiteralScalarString | FoldedScalarString):
        eol, rest = "", slots[index].value  # a block scalar ends its own line: no end-of-line part
    else:
        eol, rest = _split_eol(slots[index].value)
    if eol:
        slots[index].value = eol
    else:
        slots[index] = None
    return rest


def _put_back(node: Any, key: Any, text: str) -> None:
    """Hang deeper-indented lines back after entry `key`, where they were."""
    if not text:
        return
    child = node[key]
    if isinstance(child, _Block) and child and not child.fa.flow_style():
        _set_end(child, text + _text(child.ca.end))
        return
    slots = node.ca.items.setdefault(key, [None, None, None, None])
    index = 2 if isinstance(node, CommentedMap) else 0
    if slots[index] is not None:
        eol = slots[index].value
    else:
        eol = "" if isinstance(child, LiteralScalarString | FoldedScalarString) else "\n"
    slots[index] = CommentToken(eol + text, CommentMark(0))


def _add_pre(node: Any, key: Any, text: str) -> None:
    if not text:
        return
    slots = node.ca.items.setdefault(key, [None, None, None, None])
    # For a block scalar item (`- |- # comment`) ruamel keeps the comment after `|-` here as plain
    # strings, which its writer drops (textedit carries the line over); the lines above take its place.
    before = slots[1] if slots[1] and all(isinstance(token, CommentToken) for token in slots[1]) else None
    slots[1] = [CommentToken(text + _text(before), CommentMark(0))]


def _set_end(node: Any, text: str) -> None:
    if node.ca.comment is None:
        node.ca.comment = [None, None]  # ruamel writes `ca.end` only when this list exists
    node.ca.end = [CommentToken(text, CommentMark(0))] if text else []


def _text(tokens: Any) -> str:
    """Whole comment lines as they stand in the file: ruamel keeps the first line's indentation
    apart, in the token's column."""
    text = ""
    for token in tokens or ():
        if token is None:
            continue
        value = token.value
        if value and not value.startswith("\n") and token.start_mark is not None:
            value = " " * token.start_mark.column + value
        text += value
    return text


def _split_eol(value: str) -> tuple[str, str]:
    """A token's text as (end-of-line comment with its newline, or "" if none; the lines after it)."""
    if value.startswith("\n"):
        return "", value[1:]
    newline = value.find("\n")
    if newline < 0:
        return value, ""
    return value[: newline + 1], value[newline + 1:]


def _split_at_column(text: str, column: int) -> tuple[str, str]:
    """Split comment lines into those indented deeper than `column` (first) and the rest, which
    starts at the first comment line at or left of `column`, blank lines before it included."""
    lines = text.splitlines(keepends=True)
    cut = len(lines)
    for i, line in enumerate(lines):
        stripped = line.lstrip(" \t")
        if stripped.strip() and len(line) - len(stripped) <= column:
            cut = i
            break
    while cut > 0 and not lines[cut - 1].strip():
        cut -= 1  # blank lines separate this entry from what follows: they go with what follows
    return "".join(lines[:cut]), "".join(lines[cut:])
