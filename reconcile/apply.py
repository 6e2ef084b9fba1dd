"""Applying a desired object: server-side apply, or Metacontroller's client-side 3-way merge.

Two strategies behind one shape, `ApplyStrategy = (cluster, desired) -> stored object`:
- `ServerSideApply` / `apply_ssa`: the API server merges, by field ownership (managedFields).
  The apply is always sent. Metacontroller skips an apply when a hash of desired and the
  object's `generation` are unchanged, so drift on kinds without a generation bump (ConfigMaps,
  Secrets, Services, ServiceAccounts, PVCs) was never corrected (metacontroller #1177). Here the
  server decides, and an apply that changes nothing does not write (the resourceVersion stays).
- `ThreeWayApply` / `apply_3way`: Metacontroller's default "dynamic apply"
  (`pkg/dynamic/apply/apply.go`): what we applied last time is kept in the annotation
  `metacontroller.k8s.io/last-applied-configuration`, and `three_way_merge(observed,
  last_applied, desired)` removes what we dropped, sets what we want, and keeps what others set.

The pure core is `three_way_merge`, `three_way_update` (the object to write, or None) and
`with_last_applied` (the object to create); `apply_3way` is the I/O shell around them.
Does not: add ownerReferences beyond `owner=` on create, delete or recreate objects (update
policies such as Recreate/OnDelete belong to the caller, which can use `three_way_update`), or
retry a Conflict (the caller's reconcile retries with a fresh read).

Where this differs from Metacontroller, on purpose:
- the annotation is compared as JSON, not as a string, so objects written by Metacontroller
  (or by any other serialiser) are not all rewritten once on the first pass (spec b.5 (2)); the
  annotation is still written as Go's `json.Marshal` writes it (sorted keys, no spaces, `<`, `>`,
  `&` escaped);
- a `null` in desired removes the field instead of writing an explicit null, which the API
  server drops and the next pass writes again forever (metacontroller #319);
- a list is merged by a key only when that key is unique within each list; otherwise the next
  conventional key is tried (Service ports sharing a port number with different protocols fall
  back to `name`, metacontroller #371), and with none the list is replaced;
- desired of another JSON type than observed (a scalar against an object, say) replaces the
  field; Metacontroller's type checks never fire and it ignores or nulls such a value (spec b.6
  calls these quirks, not contract).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from reconcile import objects
from reconcile.cluster import Cluster, Kind, Obj, ObjectKey
from reconcile.patching import clone, json_equal

log = logging.getLogger(__name__)

LAST_APPLIED = "metacontroller.k8s.io/last-applied-configuration"

MERGE_KEYS = ("containerPort", "port", "mountPath", "name", "uid", "ip", "path")
"""The fields a list of objects is merged by, in order of precedence (Metacontroller's
`knownMergeKeys`): the first one every item of observed, last-applied and desired has."""

SYSTEM_FIELDS = ("selfLink", "uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp",
                 "deletionGracePeriodSeconds", "managedFields")
"""metadata fields the server owns: kept as observed by a 3-way update, dropped from an SSA body."""

ApplyStrategy = Callable[[Cluster, Obj], Obj]
"""Make the cluster hold `desired`; returns the stored object. Raises the cluster's errors."""


@dataclass(frozen=True, slots=True)
class ServerSideApply:
    """`apply_ssa` as an ApplyStrategy."""

    field_manager: str
    force: bool = True

    def __call__(self, cluster: Cluster, desired: Obj) -> Obj:
        return apply_ssa(cluster, desired, self.field_manager, force=self.force)


@dataclass(frozen=True, slots=True)
class ThreeWayApply:
    """`apply_3way` as an ApplyStrategy."""

    annotation: str = LAST_APPLIED

    def __call__(self, cluster: Cluster, desired: Obj) -> Obj:
        return apply_3way(cluster, desired, annotation=self.annotation)


# --- server-side apply ----------------------------------------------------------------------


def apply_ssa(cluster: Cluster, obj: Obj, field_manager: str, force: bool = True) -> Obj:
    """Server-side apply `obj` as `field_manager`'s whole intent; returns the stored object.

    Always sends the apply: no client-side skip by generation or hash (metacontroller #1177),
    so drift on any kind is corrected on every call; the server writes nothing when nothing
    changes. Server-owned metadata (SYSTEM_FIELDS) is dropped first: a resourceVersion or uid in
    an apply is a precondition, not intent. Fields this manager applied before and `obj` leaves
    out are removed by the server. Raises Conflict when `force` is False and another manager owns
    a field `obj` changes.
    """
    body = clone(obj)
    meta = body.get("metadata")
    if isinstance(meta, dict):
        for name in SYSTEM_FIELDS:
            meta.pop(name, None)
    return cluster.apply(body, field_manager=field_manager, force=force)


# --- client-side 3-way apply ----------------------------------------------------------------


def apply_3way(cluster: Cluster, desired: Obj, annotation: str = LAST_APPLIED, *, owner: Obj | None = None) -> Obj:
    """Make the cluster hold `desired` by Metacontroller's 3-way merge; returns the stored object.

    Creates the object when absent (recording `desired` in `annotation`; `owner`, when given,
    becomes its controller ownerReference, added after recording, as Metacontroller does). Else
    updates it with `three_way_update` when that finds a change, with optimistic concurrency:
    raises Conflict when the object changed since it was read. Makes no write when the object
    already matches (re-applying the same desired state is free) or is being deleted. Raises
    AlreadyExists when a concurrent create wins, and the cluster's other errors.
    """
    kind, key = Kind.of(desired), ObjectKey.of(desired)
    observed = cluster.get(kind, key)
    if observed is None:
        return cluster.create(with_last_applied(desired, annotation, owner=owner))
    if objects.is_deleting(observed):
        return observed
    update = three_way_update(observed, desired, annotation)
    return observed if update is None else cluster.update(update)


def with_last_applied(desired: Obj, annotation: str = LAST_APPLIED, *, owner: Obj | None = None) -> Obj:
    """Pure: `desired` as it should be created: carrying `annotation` = its own JSON (without any
    stale copy of the annotation), then `owner`'s controller ownerReference unless one with that
    uid is already there."""
    intent = _intent(desired, annotation)
    out = _set_annotation(clone(intent), annotation, last_applied_json(intent))
    if owner is not None:
        ref = objects.owner_reference(owner)
        meta = out.setdefault("metadata", {})
        refs = meta.get("ownerReferences") if isinstance(meta.get("ownerReferences"), list) else []
        if not any(isinstance(r, Mapping) and r.get("uid") == ref["uid"] for r in refs):
            meta["ownerReferences"] = [*refs, ref]
    return out


def three_way_update(observed: Obj, desired: Obj, annotation: str = LAST_APPLIED) -> Obj | None:
    """Pure: the object to write so that `observed` holds `desired`, or None when it already does.

    The merge is `three_way_merge(observed, last applied (from observed's annotation), desired)`;
    server-owned metadata (SYSTEM_FIELDS) and `status` are then put back as observed, and the
    annotation set to desired's JSON. "Already does" is JSON equality, with the annotation
    compared as the JSON it holds, not as a string. An unreadable annotation counts as none.
    """
    intent = _intent(desired, annotation)
    merged = three_way_merge(observed, last_applied(observed, annotation), intent)
    _revert(merged, observed, ("metadata",), SYSTEM_FIELDS)
    _revert(merged, observed, (), ("status",))
    merged = _set_annotation(merged, annotation, last_applied_json(intent))
    if json_equal(_comparable(merged, annotation), _comparable(observed, annotation)):
        return None
    return merged


def three_way_merge(observed: Any, last_applied: Any, desired: Any) -> Any:
    """Pure: `observed` changed as `desired` says, relative to `last_applied`; a new value.

    Objects merge key by key: a key in last_applied but not in desired is removed; a key in
    desired is merged recursively; a key only in observed (set by someone else) is kept. A
    `null` in desired removes the key. Lists are replaced by desired, except lists of objects
    that all share a conventional key (MERGE_KEYS, first match wins, unique within each list):
    those merge item by item as objects keyed by that field, in observed order (removed items
    dropped), then new items in desired order. Scalars, and values of differing types, take
    desired. None of the arguments is changed.
    """
    return _merge(clone(observed), last_applied, desired)


def last_applied(obj: Mapping[str, Any], annotation: str = LAST_APPLIED) -> dict[str, Any]:
    """The object recorded in `annotation`, or {} when there is none or it is not a JSON object."""
    text = objects.annotations_of(obj).get(annotation)
    if not text:
        return {}
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        log.debug("ignoring unreadable %s annotation on %s", annotation, ObjectKey.of(obj))
        return {}
    return value if isinstance(value, dict) else {}


def last_applied_json(value: Any) -> str:
    """`value` as Go's `json.Marshal` writes it: sorted keys, no spaces, and `<`, `>`, `&`,
    U+2028, U+2029 escaped; so the annotation reads as Metacontroller would have written it."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    for raw, escaped in _GO_ESCAPES:
        text = text.replace(raw, escaped)
    return text


_GO_ESCAPES = (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029"))


def _merge(observed: Any, last: Any, desired: Any) -> Any:
    if isinstance(observed, dict) and isinstance(desired, Mapping):
        return _merge_object(observed, last if isinstance(last, Mapping) else {}, desired)
    if isinstance(observed, list) and isinstance(desired, list):
        return _merge_list(observed, last if isinstance(last, list) else [], desired)
    return clone(desired)


def _merge_object(observed: dict[str, Any], last: Mapping[str, Any], desired: Mapping[str, Any]) -> dict[str, Any]:
    for key in last:
        if key not in desired:
            observed.pop(key, None)
    for key, value in desired.items():
        if value is None:
            observed.pop(key, None)  # an explicit null would be dropped by the server: a perpetual diff
        else:
            observed[key] = _merge(observed.get(key), last.get(key), value)
    return observed


def _merge_list(observed: list[Any], last: list[Any], desired: list[Any]) -> list[Any]:
    key = _list_map_key(observed, last, desired)
    if key is None:
        return clone(desired)
    by_key = {_key_text(item[key]): item for item in observed}
    merged = _merge_object(by_key, {_key_text(item[key]): item for item in last},
                           {_key_text(item[key]): item for item in desired})
    out: list[Any] = []
    added: set[str] = set()
    for item in [*observed, *desired]:
        text = _key_text(item[key])
        if text in merged and text not in added:
            out.append(merged[text])
            added.add(text)
    return out


def _list_map_key(*lists: list[Any]) -> str | None:
    """The first MERGE_KEYS field every item of every list has, with values non-null and unique
    within each list; None when an item is not an object or there is no such field (also for
    empty lists)."""
    common: set[str] | None = None
    for items in lists:
        for item in items:
            if not isinstance(item, dict):
                return None
            common = set(item) if common is None else common & item.keys()
    for key in MERGE_KEYS:
        if common and key in common and all(_unique(items, key) for items in lists):
            return key
    return None


def _unique(items: list[dict[str, Any]], key: str) -> bool:
    """Whether `key` names each item once: present, not null (a null is removed by the merge, so
    it cannot name an item), and different in every item."""
    if any(item[key] is None for item in items):
        return False
    texts = [_key_text(item[key]) for item in items]
    return len(texts) == len(set(texts))


def _key_text(value: Any) -> str:
    """A merge-key value as Go's `%v` prints it, so "80" and 80 are the same key, as there."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if value is None:
        return "<nil>"
    return str(value) if isinstance(value, int | float) else json.dumps(value, sort_keys=True)


def _intent(desired: Obj, annotation: str) -> Obj:
    """desired without a copy of the last-applied annotation it may carry (a hook may echo it)."""
    annotations = objects.annotations_of(desired)
    if annotation not in annotations:
        return desired
    out = clone(desired)
    del out["metadata"]["annotations"][annotation]
    if not out["metadata"]["annotations"]:
        del out["metadata"]["annotations"]
    return out


def _set_annotation(obj: Obj, annotation: str, value: str) -> Obj:
    meta = obj.setdefault("metadata", {})
    annotations = meta.get("annotations")
    meta["annotations"] = {**(annotations if isinstance(annotations, Mapping) else {}), annotation: value}
    return obj


def _revert(merged: Obj, observed: Obj, path: tuple[str, ...], fields: tuple[str, ...]) -> None:
    """Put `fields` under `path` back as they are in observed (present or absent)."""
    source: Any = observed
    for step in path:
        source = source.get(step) if isinstance(source, Mapping) else None
    target: Any = merged
    for step in path:
        if not isinstance(target.get(step), dict):
            target[step] = {}
        target = target[step]
    for name in fields:
        if isinstance(source, Mapping) and name in source:
            target[name] = clone(source[name])
        else:
            target.pop(name, None)


def _comparable(obj: Obj, annotation: str) -> Obj:
    """obj with the annotation's JSON parsed, so that formatting differences compare equal."""
    text = objects.annotations_of(obj).get(annotation)
    if not isinstance(text, str):
        return obj
    try:
        parsed = json.loads(text)
    except ValueError:
        return obj
    out = dict(obj)
    meta = dict(out["metadata"])
    meta["annotations"] = {**meta["annotations"], annotation: parsed}
    out["metadata"] = meta
    return out
