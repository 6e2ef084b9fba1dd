"""Server-side apply: an applier's intent merged into the live object, with field ownership.

`apply(live, intent, ...)` follows the algorithm of the API server's structured-merge-diff:

1. **Merge.** Maps merge key by key; keyed lists (see `_fields.list_kind`) merge item by item,
   live items keeping their order and new ones appended; set-like lists gain the new values;
   atomic lists and scalars are replaced. A `null` in the intent means "not specified".
2. **Conflicts.** The fields whose value the merge changed (or added) and that another manager
   owns, Apply or Update alike, are conflicts: the apply fails with 409 and a message listing
   each field and its manager, unless `force`, in which case those fields move to the applier.
   Setting a field to the value it already has is no conflict: the field becomes shared.
3. **Ownership.** The applier now owns exactly the fields of its intent.
4. **Pruning.** Fields the applier owned from its previous apply, left out of this one and owned
   by nobody else, are removed from the object (a keyed-list item as a whole).

What is not covered: schema-driven list types (`x-kubernetes-list-type`, the real keys of
container ports or service ports), granular merging of atomic structs, and version conversion
of managed fields; see docs/embedded-cluster.md.
"""

from __future__ import annotations

import json
from typing import Any

from reconcile.cluster import Obj
from reconcile.embedded import _fields
from reconcile.embedded._fields import ATOMIC, SET, Entry, FieldSet, Path
from reconcile.errors import Conflict, make_status
from reconcile.objects import rfc3339
from reconcile.patching import clone

APPLY = "Apply"


def apply(live: Obj | None, intent: Obj, *, manager: str, force: bool, api_version: str, subresource: str,
          now: float) -> tuple[Obj, list[dict[str, Any]]]:
    """(object, managedFields) after `manager` applied `intent` to `live` (None: a create).

    Raises Conflict when the intent changes a field another manager owns and `force` is
    false. Neither argument is changed."""
    intent = drop_nulls(intent)
    intent_fields = _fields.members(intent)
    entries = _fields.read_entries(live["metadata"].get("managedFields")) if live is not None else []
    merged = clone(live) if live is not None else {}
    _merge_into(merged, intent, ())
    mine = next((e for e in entries if e.is_manager(manager, APPLY, api_version, subresource)), None)
    others = [e for e in entries if e is not mine]
    if live is not None:
        changed, _ = _fields.diff(live, merged)
        conflicts = [(entry, hits) for entry in others if (hits := _overlap(changed, entry.fields))]
        if conflicts and not force:
            raise conflict_error(conflicts)
        for entry, hits in conflicts:
            entry.fields = entry.fields - hits
    kept_by_others: FieldSet = set().union(*(e.fields for e in others)) if others else set()
    previous = mine.fields if mine is not None else set()
    _prune(merged, previous - intent_fields - kept_by_others, kept_by_others | intent_fields)
    if mine is None:
        mine = Entry(manager, APPLY, api_version, subresource, "", set())
        others.append(mine)
        entries = others
    mine.fields, mine.api_version, mine.time = intent_fields, api_version, rfc3339(now)
    return merged, _fields.write_entries(entries)


def conflict_error(conflicts: list[tuple[Entry, FieldSet]]) -> Conflict:
    """The API server's apply conflict: one cause per field, the message grouped by manager."""
    pairs = sorted((entry.label(), _fields.path_text(path)) for entry, paths in conflicts for path in paths)
    causes = [{"reason": "FieldManagerConflict", "message": f"conflict with {label}", "field": field}
              for label, field in pairs]
    if len(pairs) == 1:
        message = f"Apply failed with 1 conflict: conflict with {pairs[0][0]}: {pairs[0][1]}"
    else:
        lines: list[str] = []
        for label in sorted({label for label, _ in pairs}):
            lines.append(f"conflicts with {label}:")
            lines += [f"- {field}" for other, field in pairs if other == label]
        message = f"Apply failed with {len(pairs)} conflicts: " + "\n".join(lines)
    return Conflict(message, status=make_status(409, "Conflict", message, {"causes": causes}))


def drop_nulls(value: Any) -> Any:
    """The intent without `null` map values (an applier's "I have no opinion")."""
    if type(value) is dict:
        return {k: drop_nulls(v) for k, v in value.items() if v is not None}
    if type(value) is list:
        return [drop_nulls(v) for v in value]
    return value


def _merge_into(target: dict[str, Any], intent: dict[str, Any], path: Path) -> None:
    for key, value in intent.items():
        child = (*path, "f:" + key)
        current = target.get(key)
        if type(current) is dict and type(value) is dict:
            _merge_into(current, value, child)
        elif type(current) is list and type(value) is list:
            target[key] = _merge_lists(current, value, child)
        else:
            target[key] = clone(value)


def _merge_lists(live: list[Any], intent: list[Any], path: Path) -> list[Any]:
    how = _fields.list_kind(path, live, intent)
    if how == ATOMIC:
        return clone(intent)
    tokens = {_fields.item_token(item, how): i for i, item in enumerate(live)}
    out = list(live)
    for item in intent:
        token = _fields.item_token(item, how)
        if token not in tokens:
            tokens[token] = len(out)
            out.append(clone(item))
        elif how != SET:
            _merge_into(out[tokens[token]], item, (*path, token))
    return out


def _overlap(changed: FieldSet, owned: FieldSet) -> FieldSet:
    """Changed fields that `owned` claims: the same path, or a path inside a changed one (an
    atomic value or a new item replacing what the other manager owns within it)."""
    hits = changed & owned
    if len(hits) < len(changed) and owned:
        inner = {path[:i] for path in owned for i in range(1, len(path))}
        hits |= {path for path in changed if path in inner}
    return hits


def _prune(obj: dict[str, Any], remove: FieldSet, keep: FieldSet) -> None:
    if not remove:
        return
    held = {path[:i] for path in keep for i in range(1, len(path) + 1)}
    for path in sorted(remove, key=len, reverse=True):
        if path not in held and not _is_item_key(path):
            _remove(obj, path, held)


def _is_item_key(path: Path) -> bool:
    """The key field of a keyed-list item: it goes only with the item itself."""
    if len(path) < 2 or not path[-2].startswith("k:"):
        return False
    return path[-1][2:] in json.loads(path[-2][2:])


def _remove(obj: dict[str, Any], path: Path, held: set[Path]) -> None:
    trail: list[tuple[Any, Any]] = []  # (container, key or index) from the root down
    node: Any = obj
    for token in path:
        slot = _find(node, token)
        if slot is None:
            return
        trail.append((node, slot))
        node = node[slot]
    for depth in range(len(trail) - 1, -1, -1):
        container, slot = trail[depth]
        container.pop(slot)
        parent_path = path[:depth]
        if depth == 0 or container or parent_path in held or parent_path == ("f:metadata",):
            return
        if not isinstance(container, dict):
            return  # an emptied list stays: it may be someone's atomic value


def _find(node: Any, token: str) -> Any:
    kind, _, rest = token.partition(":")
    if kind == "f" and isinstance(node, dict):
        return rest if rest in node else None
    if kind in ("k", "v") and isinstance(node, list):
        how = SET if kind == "v" else tuple(sorted(json.loads(rest)))
        for index, item in enumerate(node):
            if (how == SET or type(item) is dict and all(k in item for k in how)) and \
                    _fields.item_token(item, how) == token:
                return index
    return None
