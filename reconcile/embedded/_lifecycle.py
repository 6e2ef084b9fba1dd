"""The metadata rules of kube-apiserver's generic registry, as pure functions over dicts.

What a create sets (uid, creationTimestamp, generation 1 where the kind has one, no status on a
kind with a status subresource), what an update may not change (server-owned metadata; status
when there is a status subresource), when `generation` moves (a change outside metadata, and
outside status when status is a subresource, or to the metadata keys the kind counts as desired
state; never for kinds without a generation), what a status update changes (status only), which
finalizers a deletion adds for its propagation policy, what marks an object as being deleted
(and bumps a generation that is set), when an update is a no-op, and when an object with a
deletionTimestamp is gone (no finalizers left).

Functions take request bodies (private copies, changed in place and returned) or stored
snapshots (never changed: a new dict is built).
"""

from __future__ import annotations

import json
from typing import Any

from reconcile.cluster import Obj, Propagation, ResourceInfo
from reconcile.objects import rfc3339

ORPHAN = "orphan"
FOREGROUND = "foregroundDeletion"
SERVER_OWNED = ("uid", "creationTimestamp", "generation", "deletionTimestamp", "deletionGracePeriodSeconds",
                "selfLink")
_NOT_SPEC = frozenset({"apiVersion", "kind", "metadata", "status"})


def created(body: Obj, info: ResourceInfo, *, name: str, uid: str, now: float, generation: bool) -> Obj:
    """`body` as the server stores it on create; `generation`: whether the kind has one."""
    meta = body["metadata"]
    meta["name"] = name
    if not info.namespaced:
        meta.pop("namespace", None)  # the API server ignores it for cluster-scoped kinds
    for field in (*SERVER_OWNED, "resourceVersion", "managedFields"):
        meta.pop(field, None)
    meta["uid"] = uid
    meta["creationTimestamp"] = rfc3339(now)
    if generation:
        meta["generation"] = 1
    if "status" in info.subresources:
        body.pop("status", None)  # status is written through its subresource only
    body["apiVersion"], body["kind"] = info.kind.api_version, info.kind.kind
    return body


def updated(old: Obj, body: Obj, info: ResourceInfo, generation: tuple[str, ...] | None) -> Obj:
    """`body` as the server stores it on update over `old`: server-owned metadata and (with a
    status subresource) status are kept from `old`; generation moves as `generation_moves` says
    (`generation`: None for a kind without one, else the metadata keys that count)."""
    meta, before = body["metadata"], old["metadata"]
    for field in (*SERVER_OWNED, "name", "namespace"):
        if field in before:
            meta[field] = before[field]
        else:
            meta.pop(field, None)
    if "status" in info.subresources:
        if "status" in old:
            body["status"] = old["status"]
        else:
            body.pop("status", None)
    if generation is None:
        meta.pop("generation", None)
    elif generation_moves(old, body, status_apart="status" in info.subresources, metadata=generation):
        meta["generation"] = int(before.get("generation") or 0) + 1
    return body


def status_updated(old: Obj, body: Obj) -> Obj:
    """A new snapshot: `old` with the status of `body`, and nothing else of it."""
    new = {**old, "metadata": dict(old["metadata"])}
    if "status" in body:
        new["status"] = body["status"]
    else:
        new.pop("status", None)
    return new


def generation_moves(old: Obj, new: Obj, *, status_apart: bool, metadata: tuple[str, ...] = ()) -> bool:
    """True when the desired state changed: anything outside apiVersion, kind and metadata (and
    status, when `status_apart`: a status subresource), or one of the `metadata` keys."""
    ignored = _NOT_SPEC if status_apart else _NOT_SPEC - {"status"}
    if any(key not in ignored and old.get(key) != new.get(key) for key in old.keys() | new.keys()):
        return True
    before, after = old["metadata"], new["metadata"]
    return any((before.get(key) or None) != (after.get(key) or None) for key in metadata)


def deletion_finalizers(finalizers: list[str], propagation: Propagation) -> list[str]:
    """The finalizers after a delete with `propagation`: `orphan` for Orphan,
    `foregroundDeletion` for Foreground, neither for Background (an explicit policy replaces
    the one a previous delete asked for)."""
    kept = [f for f in finalizers if f not in (ORPHAN, FOREGROUND)]
    if propagation == "Orphan":
        kept.append(ORPHAN)
    elif propagation == "Foreground":
        kept.append(FOREGROUND)
    return kept


def marked_deleting(obj: Obj, finalizers: list[str], now: float) -> Obj:
    """A new snapshot of `obj` being deleted: deletionTimestamp (kept if set),
    deletionGracePeriodSeconds 0, generation (where it is set) bumped the first time,
    `finalizers`."""
    meta = dict(obj["metadata"])
    if not meta.get("deletionTimestamp"):
        meta["deletionTimestamp"] = rfc3339(now)
        if int(meta.get("generation") or 0) > 0:  # the registry bumps only a generation the kind has
            meta["generation"] = int(meta["generation"]) + 1
    meta["deletionGracePeriodSeconds"] = 0
    if finalizers:
        meta["finalizers"] = finalizers
    else:
        meta.pop("finalizers", None)
    return {**obj, "metadata": meta}


def without_finalizer(obj: Obj, finalizer: str) -> dict[str, Any]:
    """New metadata for `obj` without `finalizer`."""
    meta = dict(obj["metadata"])
    kept = [f for f in finalizers(obj) if f != finalizer]
    if kept:
        meta["finalizers"] = kept
    else:
        meta.pop("finalizers", None)
    return meta


def section(obj: Obj, key: str) -> dict[str, Any]:
    """`obj[key]` when it is a map, else an empty one (for reading `spec`, `status`)."""
    found = obj.get(key)
    return found if isinstance(found, dict) else {}


def is_deleting(obj: Obj) -> bool:
    return bool(obj["metadata"].get("deletionTimestamp"))


def finalizers(obj: Obj) -> list[str]:
    found = obj["metadata"].get("finalizers")
    return list(found) if isinstance(found, list) else []


def pending(obj: Obj, *, namespace: bool = False) -> bool:
    """Whether anything still holds the object: finalizers, and for a Namespace the
    `spec.finalizers` the namespace controller removes once the namespace is empty."""
    if obj["metadata"].get("finalizers"):
        return True
    spec = obj.get("spec")
    return namespace and isinstance(spec, dict) and bool(spec.get("finalizers"))


def unchanged(old: Obj, new: Obj) -> bool:
    """True when `new` would store nothing new over `old`: equal but for resourceVersion,
    managedFields timestamps and the version it was written in (a real server stores every
    version of a kind in one storage version, so a write through another changes nothing). The
    server skips such writes: no new version, no event."""
    if old.keys() != new.keys():
        return False
    for key, value in old.items():
        if key not in ("metadata", "apiVersion") and new[key] != value:
            return False
    before, after = old["metadata"], new["metadata"]
    keys = (before.keys() | after.keys()) - {"resourceVersion", "managedFields"}
    if any(before.get(k) != after.get(k) for k in keys):
        return False
    return _untimed(before.get("managedFields")) == _untimed(after.get("managedFields"))


def _untimed(entries: Any) -> Any:
    """managedFields without timestamps, in an order that does not depend on them."""
    if not isinstance(entries, list):
        return entries
    return sorted(json.dumps({k: v for k, v in e.items() if k != "time"} if isinstance(e, dict) else e,
                             sort_keys=True) for e in entries)
