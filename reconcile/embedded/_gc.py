"""Owner-reference garbage collection, as kube-controller-manager's garbage collector does it.

The graph is the store's owner index (owner uid to dependents). Work is queued by events:
- an object is removed: each of its dependents is looked at (`_attempt`), and each of its owners
  waiting in foreground deletion is looked at again (`_owner`);
- an object is written with new ownerReferences: it is looked at (a dangling owner means it is
  collected, as on a real cluster);
- an object gets a deletionTimestamp with the `orphan` or `foregroundDeletion` finalizer: it is
  processed as an owner.

Looking at a dependent classifies each ownerReference: *dangling* (no owner with that uid),
*waiting* (the owner is being deleted in the foreground), *solid*, or *unresolvable* (a kind
that is not served, or a namespaced owner of a cluster-scoped object). One unresolvable
reference leaves the object untouched, as the real collector gives up on it. With a solid owner,
dangling and waiting references are removed and the object stays. Otherwise it is deleted: in
the foreground when an owner waits and it has dependents of its own, else with the policy its
finalizers ask for (Background by default).

Owners of kinds served by a custom `Storage` are never looked up here: the collector runs under
the cluster's lock, and a storage is called without it. Such an owner counts as solid until the
cluster deletes it (`removed`), and as dangling from then on.

Processing an owner: `orphan`: remove its reference from every dependent, then the finalizer.
`foregroundDeletion`: delete its dependents; once none with `blockOwnerDeletion: true`
remains, remove the finalizer (the object goes once no other finalizer holds it).

Writes go through the engine as manager `kube-controller-manager`, so they carry the same
semantics, versions and events as any client's.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Literal

from reconcile.cluster import Kind, Obj, ObjectKey
from reconcile.embedded._engine import Engine
from reconcile.embedded._kinds import GroupKind, group_kind
from reconcile.embedded._lifecycle import FOREGROUND, ORPHAN, finalizers, is_deleting, without_finalizer

MANAGER = "kube-controller-manager"
OwnerState = Literal["solid", "dangling", "waiting", "unresolvable"]
_REMEMBERED = 10_000  # uids of deleted custom-storage owners kept, most recent first


class GarbageCollector:
    """A reactor: see the module docstring."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._gone_served: OrderedDict[str, None] = OrderedDict()  # uids of deleted custom-storage objects

    def admit(self, kind: Kind, old: Obj | None, new: Obj) -> None:
        return None

    def admit_delete(self, kind: Kind, obj: Obj) -> None:
        return None

    def written(self, gk: GroupKind, old: Obj | None, new: Obj) -> None:
        meta = new["metadata"]
        if meta.get("deletionTimestamp"):
            held = meta.get("finalizers") or ()
            if ORPHAN in held or FOREGROUND in held:
                self._engine.later(self._owner, meta["uid"])
        refs = meta.get("ownerReferences")
        if refs and (old is None or old["metadata"].get("ownerReferences") != refs):
            self._engine.later(self._attempt, meta["uid"])

    def removed(self, gk: GroupKind, obj: Obj) -> None:
        meta = obj["metadata"]
        if any(self._engine.registry.handler(kind) is not None for kind in self._engine.registry.kinds_of(gk)):
            self._gone_served[str(meta.get("uid"))] = None
            while len(self._gone_served) > _REMEMBERED:
                self._gone_served.popitem(last=False)
        for _, dependent in self._engine.store.dependents(meta["uid"]):
            self._engine.later(self._attempt, dependent["metadata"]["uid"])
        for ref in meta.get("ownerReferences") or ():
            found = self._engine.store.by_uid(str(ref.get("uid")))
            if found is not None and is_deleting(found[1]) and FOREGROUND in finalizers(found[1]):
                self._engine.later(self._owner, ref["uid"])

    def _owner(self, uid: str) -> None:
        found = self._engine.store.by_uid(uid)
        if found is None or not is_deleting(found[1]):
            return
        gk, owner = found
        held = finalizers(owner)
        dependents = self._engine.store.dependents(uid)
        if ORPHAN in held:
            for dep_gk, dependent in dependents:
                self._drop_references(dep_gk, dependent, {uid})
            self._drop_finalizer(gk, owner, ORPHAN)
        elif FOREGROUND in held:
            blocking = [d for _, d in dependents if _reference(d, uid).get("blockOwnerDeletion") is True]
            for _, dependent in dependents:
                if not is_deleting(dependent):
                    self._engine.later(self._attempt, dependent["metadata"]["uid"])
            if not blocking:
                self._drop_finalizer(gk, owner, FOREGROUND)

    def _attempt(self, uid: str) -> None:
        found = self._engine.store.by_uid(uid)
        if found is None or is_deleting(found[1]):
            return  # gone, or its own deletion is under way
        gk, item = found
        refs = item["metadata"].get("ownerReferences") or []
        states = [(ref, self._state(item, ref)) for ref in refs]
        if any(state == "unresolvable" for _, state in states):
            return
        solid = [ref for ref, state in states if state == "solid"]
        waiting = {str(ref["uid"]) for ref, state in states if state == "waiting"}
        dangling = {str(ref["uid"]) for ref, state in states if state == "dangling"}
        if not refs:
            return
        kind, key = self._engine.kind_of(gk, item), _key(item)
        if solid:
            if waiting or dangling:
                self._drop_references(gk, item, waiting | dangling)
                for owner_uid in waiting:
                    self._engine.later(self._owner, owner_uid)
            return
        if waiting and self._engine.store.dependents(uid):
            self._engine.delete(kind, key, propagation="Foreground")
            return
        held = finalizers(item)
        policy: Any = "Orphan" if ORPHAN in held else "Foreground" if FOREGROUND in held else "Background"
        self._engine.delete(kind, key, propagation=policy)

    def _state(self, dependent: Obj, ref: Any) -> OwnerState:
        if not isinstance(ref, dict):
            return "solid"
        registry = self._engine.registry
        kind = Kind(str(ref.get("apiVersion")), str(ref.get("kind")))
        served = registry.kinds_of(group_kind(kind))
        if not served:
            return "unresolvable"
        kind = kind if kind in served else served[0]
        info = registry.info(kind)
        namespace = dependent["metadata"].get("namespace") or ""
        if info.namespaced and not namespace:
            return "unresolvable"  # a cluster-scoped object cannot be owned by a namespaced one
        if registry.handler(kind) is not None:
            return "dangling" if str(ref.get("uid")) in self._gone_served else "solid"
        key = ObjectKey(namespace if info.namespaced else "", str(ref.get("name")))
        owner = self._engine.store.get(group_kind(kind), key)
        if owner is None or (owner.get("metadata") or {}).get("uid") != ref.get("uid"):
            return "dangling"
        if (owner.get("metadata") or {}).get("deletionTimestamp") and FOREGROUND in (
                owner["metadata"].get("finalizers") or ()):
            return "waiting"
        return "solid"

    def _drop_references(self, gk: GroupKind, item: Obj, uids: set[str]) -> None:
        meta = dict(item["metadata"])
        kept = [ref for ref in meta.get("ownerReferences") or () if ref.get("uid") not in uids]
        if kept:
            meta["ownerReferences"] = kept
        else:
            meta.pop("ownerReferences", None)
        self._engine.write_metadata(gk, item, meta, manager=MANAGER)

    def _drop_finalizer(self, gk: GroupKind, item: Obj, finalizer: str) -> None:
        self._engine.write_metadata(gk, item, without_finalizer(item, finalizer), manager=MANAGER)


def _reference(dependent: Obj, owner_uid: str) -> dict[str, Any]:
    for ref in dependent["metadata"].get("ownerReferences") or ():
        if ref.get("uid") == owner_uid:
            return dict(ref)
    return {}


def _key(obj: Obj) -> ObjectKey:
    meta = obj["metadata"]
    return ObjectKey(meta.get("namespace") or "", meta["name"])
