"""Turning local's round-trip YAML data into the merged data, keeping what did not change.

`apply` edits krmyaml.textedit's data in place with its helpers, so that an entry whose value is
unchanged keeps its place and its comments, and a changed scalar keeps its quoting and its line
comment. List items are carried over to the merged list by identity: first an item with the same
data, then a map with the same merge key (`schema.py`), then the map sharing most entries
with it (the nearest on a tie), or, when the list keeps its length, the map at the same position;
an item matched by key or likeness is edited in place, so its comments stay (and textedit quotes a
new string in a list whose strings are all quoted alike so too). New keys go where the merge put them
(before the key that follows them upstream).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from krmyaml.textedit import remove_key, replace_items, same_data, set_key
from porchvariant.embedded.merge.schema import ANY, ListKeys, Path, element_key

__all__ = ["apply"]


def apply(node: Any, merged: Any, list_keys: ListKeys, path: Path = ()) -> bool:
    """Make the map or list `node` hold `merged`, in place; False if it cannot (not the same type)."""
    if isinstance(node, Mapping) and isinstance(merged, Mapping):
        _apply_map(node, merged, list_keys, path)
        return True
    if isinstance(node, list) and isinstance(merged, list):
        _apply_seq(node, merged, list_keys, path)
        return True
    return False


def _apply_map(node: Any, merged: Mapping[Any, Any], list_keys: ListKeys, path: Path) -> None:
    for key in [k for k in node if k not in merged]:
        remove_key(node, key)
    keys = list(merged)
    for position, key in enumerate(keys):
        if key in node and same_data(node[key], merged[key]):
            continue
        if key in node and apply(node[key], merged[key], list_keys, (*path, str(key))):
            continue
        set_key(node, key, merged[key], before=keys[position + 1:])


def _apply_seq(node: list[Any], merged: list[Any], list_keys: ListKeys, path: Path) -> None:
    old = list(node)
    chosen = _match_items(old, merged, list_keys(path, [items for items in (old, merged) if items]))
    replace_items(node, [(j, None if j is not None else value) for j, value in zip(chosen, merged, strict=True)])
    for i, value in enumerate(merged):
        if chosen[i] is not None:
            apply(node[i], value, list_keys, (*path, ANY))  # items matched other than by data are maps


def _match_items(old: list[Any], new: list[Any], keys: tuple[str, ...] | None) -> list[int | None]:
    """For each new item, the old item it continues (its comments go along), or None."""
    chosen: list[int | None] = [None] * len(new)
    free = list(range(len(old)))

    def take(i: int, j: int) -> None:
        chosen[i] = j
        free.remove(j)

    for i, value in enumerate(new):
        j = next((j for j in free if same_data(old[j], value)), None)
        if j is not None:
            take(i, j)
    if keys:
        for i, value in enumerate(new):
            key = element_key(value, keys) if chosen[i] is None and isinstance(value, Mapping) else None
            j = next((j for j in free if key is not None and element_key(old[j], keys) == key), None)
            if j is not None:
                take(i, j)
    for i, value in enumerate(new):
        if chosen[i] is None and isinstance(value, Mapping):
            scores = [(_shared_entries(old[j], value), -abs(i - j), j) for j in free if isinstance(old[j], Mapping)]
            best = max(scores, default=None)
            if best is not None and (best[0] > 0 or len(old) == len(new) and best[2] == i):
                take(i, best[2])
    return chosen


def _shared_entries(a: Mapping[Any, Any], b: Mapping[Any, Any]) -> int:
    return sum(1 for key in a if key in b and same_data(a[key], b[key]))
