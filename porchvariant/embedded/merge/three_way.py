"""The 3-way merge of one value: original (old upstream), upstream (new upstream), local.

Plain data in (dicts, lists, scalars; `MISSING` for "not there"), plain data out; the inputs are
never changed. The rules are kpt's resource-merge (kyaml's merge3) where it gives a sound answer:

* a value upstream did not change stays as local has it; one local did not change takes the
  upstream value; when both sides made the same change it is kept. As in kpt, a scalar that only
  gained or lost quotes (`1` to `"1"`) did not change;
* both changed: maps merge key by key; associative lists (`schema.py`) element by element,
  local's elements in local's order and upstream's new ones after them; for everything else
  (scalars, atomic lists, a value whose type changed) upstream wins;
* upstream deleted, local changed: a map (an element of an associative list too) keeps only what
  local added to it, and is deleted if that is nothing; anything else is deleted;
* local deleted, upstream changed: upstream's value comes back.

Where kpt 1.0.0-beta.56 does otherwise, on purpose (see merge/resources.py for the list): it leaves
`{}` behind where a map was deleted on one side and not changed on the other, brings back only the
changed fields of a map local deleted, keeps local's order of an associative list local did not
touch while upstream reordered it, fails with `wrong node kind` when a value's type changed, and
drops fields that are null on either side. Here a null is a value like any other, as in later kpt
versions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from krmyaml.textedit import same_data
from porchvariant.embedded.merge.schema import ANY, ListKeys, Path, element_key

__all__ = ["MISSING", "merge", "same", "unchanged"]


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final[Any] = _Missing()


def same(a: Any, b: Any) -> bool:
    """Equal as YAML data, `MISSING` only to itself."""
    if a is MISSING or b is MISSING:
        return a is b
    return same_data(a, b)


def unchanged(before: Any, after: Any) -> bool:
    """Whether a side left a value as it was: the same data, or a scalar written the same way with
    or without quotes (`1` and `"1"`, `true` and `"true"`), which kpt compares as text."""
    if same(before, after):
        return True
    texts = [_scalar_text(value) for value in (before, after)]
    return None not in texts and texts[0] == texts[1] and isinstance(before, str) != isinstance(after, str)


def _scalar_text(value: Any) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    return None


def merge(original: Any, upstream: Any, local: Any, list_keys: ListKeys, path: Path = ()) -> Any:
    """The merged value at `path` (MISSING: leave it out). `list_keys` says which lists are associative."""
    if unchanged(original, upstream):
        return local
    if unchanged(original, local):
        return upstream
    if same(upstream, local):
        return local
    if upstream is MISSING:
        if isinstance(local, Mapping) and isinstance(original, Mapping):
            kept = _merge_maps(original, {}, local, list_keys, path)
            return kept if kept else MISSING
        return MISSING
    if local is MISSING:
        return upstream
    if isinstance(upstream, Mapping) and isinstance(local, Mapping):
        return _merge_maps(original if isinstance(original, Mapping) else {}, upstream, local, list_keys, path)
    if isinstance(upstream, list) and isinstance(local, list):
        base = original if isinstance(original, list) else []
        keys = list_keys(path, [items for items in (base, upstream, local) if items])
        if keys is not None:
            merged = _merge_elements(base, upstream, local, keys, list_keys, path)
            if merged is not None:
                return merged
    return upstream


def _merge_maps(original: Mapping[Any, Any], upstream: Mapping[Any, Any], local: Mapping[Any, Any],
                list_keys: ListKeys, path: Path) -> dict[Any, Any]:
    merged = {}
    for key in [*local, *(k for k in upstream if k not in local)]:
        value = merge(original.get(key, MISSING), upstream.get(key, MISSING), local.get(key, MISSING),
                      list_keys, (*path, str(key)))
        if value is not MISSING:
            merged[key] = value
    return _upstream_placement(merged, upstream, local)


def _upstream_placement(merged: dict[Any, Any], upstream: Mapping[Any, Any],
                        local: Mapping[Any, Any]) -> dict[Any, Any]:
    """`merged` with each key local did not have moved to just before the key that follows it upstream."""
    order = [key for key in merged if key in local]
    upstream_order = list(upstream)
    for key in (k for k in merged if k not in local):
        following = upstream_order[upstream_order.index(key) + 1:] if key in upstream else []
        anchor = next((k for k in following if k in order), None)
        order.insert(order.index(anchor) if anchor is not None else len(order), key)
    return {key: merged[key] for key in order}


def _merge_elements(original: list[Any], upstream: list[Any], local: list[Any], keys: tuple[str, ...],
                    list_keys: ListKeys, path: Path) -> list[Any] | None:
    """Element by element, or None if some element has no key or shares it with another."""
    by_original, by_upstream, by_local = (_index(items, keys) for items in (original, upstream, local))
    if by_original is None or by_upstream is None or by_local is None:
        return None
    merged = []
    for key in [*by_local, *(k for k in by_upstream if k not in by_local)]:
        local_element = by_local.get(key, MISSING)
        value = merge(by_original.get(key, MISSING), by_upstream.get(key, MISSING), local_element,
                      list_keys, (*path, ANY))
        if value is MISSING:
            continue
        if isinstance(value, Mapping) and isinstance(local_element, Mapping):
            # An element upstream deleted keeps what local added to it, and so its key (as kpt does).
            value = {**{k: local_element[k] for k in keys if k in local_element and k not in value}, **value}
        merged.append(value)
    return merged


def _index(items: Sequence[Any], keys: tuple[str, ...]) -> dict[tuple[Any, ...], Any] | None:
    index: dict[tuple[Any, ...], Any] = {}
    for item in items:
        key = element_key(item, keys)
        if key is None or key in index:
            return None
        index[key] = item
    return index
