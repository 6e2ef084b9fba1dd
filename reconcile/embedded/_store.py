"""The object store: what etcd is to kube-apiserver.

Objects by group-kind and key; one revision counter for every write (etcd's revision, which is
what a resourceVersion is, so versions increase across all kinds); and the log of the most recent
changes, which watches resume from. Changes are handed to listeners (the watch hub, the journal)
in revision order, as they happen.

Stored objects are snapshots: a dict handed to `put` belongs to the store from then on and is
never changed afterwards, so the log, the watchers and readers share it safely. Whatever leaves
the embedded cluster is copied first.

Indexes: by uid, owners to dependents by uid (the garbage collector's graph), and the number of
objects in each namespace (namespace deletion waits for it to reach zero).

The store knows nothing of API semantics, and it has no lock: the cluster's lock covers it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from reconcile.cluster import EventType, Obj, ObjectKey
from reconcile.embedded._kinds import GroupKind
from reconcile.errors import Gone, make_status


class Change(NamedTuple):
    """One write, as the log keeps it and listeners receive it."""

    type: EventType  # ADDED, MODIFIED or DELETED
    group_kind: GroupKind
    object: Obj  # the new snapshot; for DELETED the final state, at the deletion's revision
    old: Obj | None  # the snapshot it replaced (None for ADDED)
    revision: int


Listener = Callable[[Change], None]


class Store:
    """Objects, the revision counter, the change log and the indexes over them."""

    def __init__(self, *, history: int) -> None:
        self.revision = 0
        self._objects: dict[GroupKind, dict[ObjectKey, Obj]] = {}
        self._uids: dict[str, tuple[GroupKind, ObjectKey]] = {}
        self._dependents: dict[str, dict[tuple[GroupKind, ObjectKey], None]] = {}
        self._population: dict[str, int] = {}
        self.size = 0  # objects stored, all kinds
        self._log: deque[Change] = deque(maxlen=max(history, 0))
        self._floor = 0  # the oldest revision a watch can resume from
        self._listeners: list[Listener] = []

    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    # reading

    def get(self, gk: GroupKind, key: ObjectKey) -> Obj | None:
        bucket = self._objects.get(gk)
        return bucket.get(key) if bucket else None

    def objects(self, gk: GroupKind, namespace: str = "") -> Iterator[Obj]:
        """The stored snapshots of one group-kind, of one namespace when `namespace` is given."""
        bucket = self._objects.get(gk) or {}
        if not namespace:
            return iter(list(bucket.values()))
        return iter([obj for key, obj in bucket.items() if key.namespace == namespace])

    def group_kinds(self) -> list[GroupKind]:
        return [gk for gk, bucket in self._objects.items() if bucket]

    def by_uid(self, uid: str) -> tuple[GroupKind, Obj] | None:
        found = self._uids.get(uid)
        if found is None:
            return None
        obj = self.get(*found)
        return (found[0], obj) if obj is not None else None

    def dependents(self, uid: str) -> list[tuple[GroupKind, Obj]]:
        """Objects with an ownerReference to `uid`, oldest reference first."""
        out = []
        for gk, key in self._dependents.get(uid, {}):
            obj = self.get(gk, key)
            if obj is not None:
                out.append((gk, obj))
        return out

    def population(self, namespace: str) -> int:
        return self._population.get(namespace, 0)

    def changes_after(self, revision: int, gk: GroupKind) -> list[Change]:
        """The logged changes of `gk` after `revision`; Gone when the log no longer reaches back."""
        if revision < self._floor:
            message = f"too old resource version: {revision} ({self._floor + 1})"
            raise Gone(message, status=make_status(410, "Expired", message))
        out = []
        for change in reversed(self._log):
            if change.revision <= revision:
                break
            if change.group_kind == gk:
                out.append(change)
        out.reverse()
        return out

    # writing

    def put(self, gk: GroupKind, obj: Obj) -> Change:
        """Store `obj` (now the store's) at the next revision; ADDED or MODIFIED."""
        meta = obj["metadata"]
        key = ObjectKey(meta.get("namespace") or "", meta["name"])
        bucket = self._objects.setdefault(gk, {})
        old = bucket.get(key)
        self.revision += 1
        meta["resourceVersion"] = str(self.revision)
        bucket[key] = obj
        self._index(gk, key, old, obj)
        change = Change("MODIFIED" if old is not None else "ADDED", gk, obj, old, self.revision)
        self._record(change)
        return change

    def remove(self, gk: GroupKind, key: ObjectKey) -> Change:
        """Remove the object; the DELETED change carries its last state at a new revision."""
        old = self._objects[gk].pop(key)
        self.revision += 1
        final = {**old, "metadata": {**old["metadata"], "resourceVersion": str(self.revision)}}
        self._index(gk, key, old, None)
        change = Change("DELETED", gk, final, old, self.revision)
        self._record(change)
        return change

    def restore(self, gk: GroupKind, obj: Obj) -> None:
        """Put back an object read from disk: no revision, no change, no listener."""
        meta = obj["metadata"]
        key = ObjectKey(meta.get("namespace") or "", meta["name"])
        bucket = self._objects.setdefault(gk, {})
        old = bucket.get(key)
        bucket[key] = obj
        self._index(gk, key, old, obj)

    def restore_revision(self, revision: int) -> None:
        """Continue counting from `revision`; older versions can no longer be watched from."""
        self.revision = max(self.revision, revision)
        self._floor = self.revision
        self._log.clear()

    def _record(self, change: Change) -> None:
        log = self._log
        if log.maxlen == 0:
            self._floor = change.revision
        else:
            if len(log) == log.maxlen:
                self._floor = log[0].revision
            log.append(change)
        for listener in self._listeners:
            listener(change)

    def _index(self, gk: GroupKind, key: ObjectKey, old: Obj | None, new: Obj | None) -> None:
        ref = (gk, key)
        if old is None and new is not None:
            self.size += 1
            self._uids[new["metadata"]["uid"]] = ref
            if key.namespace:
                self._population[key.namespace] = self._population.get(key.namespace, 0) + 1
        elif new is None and old is not None:
            self.size -= 1
            self._uids.pop(old["metadata"]["uid"], None)
            if key.namespace:
                self._population[key.namespace] -= 1
        before, after = _owner_uids(old), _owner_uids(new)
        if before == after:
            return
        for uid in before - after:
            dependents = self._dependents.get(uid)
            if dependents is not None:
                dependents.pop(ref, None)
                if not dependents:
                    del self._dependents[uid]
        for uid in after - before:
            self._dependents.setdefault(uid, {})[ref] = None


def _owner_uids(obj: Obj | None) -> set[str]:
    if obj is None:
        return set()
    refs: Any = obj["metadata"].get("ownerReferences")
    if not refs:
        return set()
    return {ref["uid"] for ref in refs if isinstance(ref, dict) and isinstance(ref.get("uid"), str)}
