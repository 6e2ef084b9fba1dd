"""The generic registry: create, update, apply and delete with kube-apiserver's semantics.

The engine is the server's request path for every stored kind: it checks the request
(namespace, name, metadata, preconditions, resourceVersion), applies the lifecycle rules of
`_lifecycle`, records field ownership (`_fields`, `_apply`), lets the reactors admit the
result, and writes the store. A write that changes nothing is skipped (no new version, no
event); an update that leaves a deleting object without finalizers removes it.

Reactors are the in-process stand-ins for what surrounds a real API server: admission plugins
(`admit`, `admit_delete`) and controllers (`written`, `removed`: the garbage collector, the
namespace controller, the CRD controllers). Controllers never act inside a write: they queue work
with `later()`, and `settle()` (called by the cluster before each public call returns) runs that
work until nothing is left. So cascades (GC, namespace and CRD cleanup) are complete and
observable when `delete()` returns, yet each write stays one simple step.

The caller holds the cluster's lock. Request bodies are private copies the engine may keep;
results are stored snapshots, which the caller copies before handing them out.
"""

from __future__ import annotations

import logging
import random
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from reconcile.clock import Clock
from reconcile.cluster import Kind, Obj, ObjectKey, Propagation, ResourceInfo
from reconcile.embedded import _apply, _errors, _fields, _lifecycle
from reconcile.embedded._kinds import NAMESPACE, GroupKind, Registry, group_kind
from reconcile.embedded._store import Store
from reconcile.embedded._validation import check_metadata, generated_prefix_problem
from reconcile.errors import BadRequest, ReconcileError

# uids: random version-4 UUIDs from a generator of our own (uuid4 asks the OS for randomness on
# every call; the global `random` is reseeded by test tools, which would repeat uids)
_UIDS = random.Random()

_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # the API server's: no vowels, no look-alikes
_GENERATE_ATTEMPTS = 8
_NAMESPACE_GK = group_kind(NAMESPACE)

log = logging.getLogger("porchkit.embedded")


class Reactor(Protocol):
    """Admission and controllers around the registry; see the module docstring."""

    def admit(self, kind: Kind, old: Obj | None, new: Obj) -> None:
        """Default or refuse `new` before it is stored; `old` is None on create. `new` and its
        metadata are the write's own dicts; anything nested may be shared with `old`, so it is
        replaced, never changed in place."""

    def admit_delete(self, kind: Kind, obj: Obj) -> None:
        """Refuse a delete request (raise) before anything happens."""

    def written(self, gk: GroupKind, old: Obj | None, new: Obj) -> None:
        """`new` was stored over `old`; queue follow-up work with `Engine.later`."""

    def removed(self, gk: GroupKind, obj: Obj) -> None:
        """`obj` (its final state) is gone; queue follow-up work with `Engine.later`."""


class Engine:
    """The request path for stored kinds, and the queue of controller work after it."""

    def __init__(self, registry: Registry, store: Store, clock: Clock) -> None:
        self.registry, self.store, self.clock = registry, store, clock
        self.reactors: list[Reactor] = []
        self._random = random.Random()
        self._work: deque[tuple[Callable[..., None], tuple[Any, ...]]] = deque()
        self._settling = False

    # controller work

    def later(self, work: Callable[..., None], *args: Any) -> None:
        self._work.append((work, args))

    def settle(self) -> None:
        """Run queued controller work (and what it queues) until none is left. A piece of work
        that fails is logged and dropped: the request that caused it has succeeded, as on a real
        cluster, where the controllers' failures never reach the client."""
        if self._settling:
            return
        self._settling = True
        try:
            while self._work:
                work, args = self._work.popleft()
                try:
                    work(*args)
                except ReconcileError as err:
                    log.warning("embedded cluster: %s failed: %s", getattr(work, "__qualname__", work), err)
        finally:
            self._settling = False

    # reads

    def get(self, kind: Kind, key: ObjectKey) -> Obj | None:
        return self.store.get(group_kind(kind), key)

    def kind_of(self, gk: GroupKind, obj: Obj) -> Kind:
        """A served kind for a stored object: the version it was written in if still served."""
        kind = Kind.of(obj)
        if self.registry.find(kind) is None:
            kind = next(iter(self.registry.kinds_of(gk)), kind)
        return kind

    # writes

    def create(self, body: Obj, *, manager: str, managed: list[dict[str, Any]] | None = None) -> Obj:
        """Store a new object; AlreadyExists, Invalid, NotFound (namespace), BadRequest."""
        kind = Kind.of(body)
        info = self.registry.info(kind)
        meta = body["metadata"]
        namespace = _namespace_of(info, meta)
        name, prefix = str(meta.get("name") or ""), meta.get("generateName")
        rule = self.registry.name_rule(kind)
        causes = []
        if not name:
            if not isinstance(prefix, str) or not prefix:
                causes.append(_errors.required("metadata.name", "name or generateName is required"))
            elif problem := generated_prefix_problem(prefix, rule):
                causes.append(_errors.invalid_value("metadata.generateName", prefix, problem))
        causes += check_metadata(meta, rule=rule, check_name=bool(name))
        if causes:
            raise _errors.invalid(kind, name or str(prefix or ""), causes)
        if _is_version(meta.get("resourceVersion")):
            raise _errors.version_on_create()
        gk = group_kind(kind)
        for _ in range(1 if name else _GENERATE_ATTEMPTS):
            candidate = name or f"{prefix}{''.join(self._random.choices(_SUFFIX_ALPHABET, k=5))}"
            if self.store.get(gk, ObjectKey(namespace, candidate)) is None:
                break
        else:
            raise _errors.already_exists(info, candidate)
        uid = str(uuid.UUID(int=_UIDS.getrandbits(128), version=4))
        new = _lifecycle.created(body, info, name=candidate, uid=uid, now=self.clock.time(),
                                 generation=self.registry.generation(kind) is not None)
        for reactor in self.reactors:
            reactor.admit(kind, None, new)
        new["metadata"]["managedFields"] = managed if managed is not None else _fields.record_update(
            [], None, new, manager=manager, api_version=kind.api_version, subresource="", now=self.clock.time())
        if not new["metadata"]["managedFields"]:
            del new["metadata"]["managedFields"]
        change = self.store.put(gk, new)
        self._written(gk, None, change.object)
        return change.object

    def update(self, body: Obj, *, manager: str, subresource: str = "") -> Obj:
        """Replace an object (or its status); Conflict, NotFound, Invalid."""
        body = {**body, "metadata": dict(body["metadata"])}  # never write through into a stored snapshot
        kind = Kind.of(body)
        info, gk, old = self._existing(kind, body, subresource)
        meta, before = body["metadata"], old["metadata"]
        version = meta.get("resourceVersion")
        if version and version != before["resourceVersion"]:
            raise _errors.stale(info, before["name"])
        if not version and self.registry.origin(kind).startswith("crd:"):
            # custom resources refuse unconditional updates (AllowUnconditionalUpdate is false)
            raise _errors.invalid(kind, before["name"], [_errors.invalid_value(
                "metadata.resourceVersion", 0, "must be specified for an update")])
        uid = meta.get("uid")
        if uid and uid != before["uid"]:
            raise _errors.conflict(info, before["name"], f"Precondition failed: UID in precondition: {uid}, "
                                                         f"UID in object meta: {before['uid']}")
        incoming = meta.get("managedFields")
        base = before.get("managedFields") if incoming in (None, []) or incoming == before.get("managedFields") \
            else incoming
        new = self._replaced(kind, info, old, body, subresource)
        new["metadata"]["managedFields"] = _fields.record_update(
            _fields.read_entries(base), old, new, manager=manager, api_version=kind.api_version,
            subresource=subresource, now=self.clock.time())
        return self._commit(gk, kind, old, new)

    def apply(self, body: Obj, *, manager: str, force: bool, subresource: str = "") -> Obj:
        """Server-side apply of `body` as `manager`'s intent; creates when absent."""
        if not manager:
            raise BadRequest("PATCH with apply type requires a field manager (field_manager)")
        kind = Kind.of(body)
        info = self.registry.info(kind)
        meta = body["metadata"]
        if meta.get("managedFields") is not None:
            raise BadRequest("metadata.managedFields must be nil")
        if not meta.get("name"):
            raise BadRequest("resource name may not be empty")
        key = ObjectKey(_namespace_of(info, meta), str(meta["name"]))
        if subresource and subresource not in info.subresources:
            raise _errors.unknown_subresource(info, subresource)
        gk = group_kind(kind)
        old = self.store.get(gk, key)
        version = meta.pop("resourceVersion", None)
        if old is not None and version and version != old["metadata"]["resourceVersion"]:
            raise _errors.stale(info, key.name)
        uid = meta.get("uid")
        if old is not None and uid and uid != old["metadata"]["uid"]:
            raise _errors.invalid(kind, key.name, [_errors.invalid_value("metadata.uid", uid, "field is immutable")])
        if old is None and subresource:
            raise _errors.not_found(info, key.name)
        if old is None and _is_version(version):
            raise _errors.version_on_create()  # an apply that creates is a create
        intent = _intent(info, body, subresource)
        merged, managed = _apply.apply(old, intent, manager=manager, force=force, api_version=kind.api_version,
                                       subresource=subresource, now=self.clock.time())
        if old is None:
            return self.create(merged, manager=manager, managed=managed)
        new = self._replaced(kind, info, old, merged, subresource)
        new["metadata"]["managedFields"] = managed
        return self._commit(gk, kind, old, new)

    def delete(self, kind: Kind, key: ObjectKey, *, propagation: Propagation = "Background",
               preconditions: Mapping[str, str] | None = None) -> Obj | None:
        """Delete, or mark as deleting while finalizers remain; the object, or None when gone."""
        if propagation not in ("Background", "Foreground", "Orphan"):
            raise BadRequest(f"propagation must be Background, Foreground or Orphan, not {propagation!r}")
        info = self.registry.info(kind)
        gk = group_kind(kind)
        old = self.store.get(gk, key)
        if old is None:
            raise _errors.not_found(info, key.name)
        _check_preconditions(info, old, preconditions or {})
        for reactor in self.reactors:
            reactor.admit_delete(kind, old)
        new = _lifecycle.marked_deleting(old, _lifecycle.deletion_finalizers(_lifecycle.finalizers(old), propagation),
                                         self.clock.time())
        for reactor in self.reactors:
            reactor.admit(kind, old, new)
        if not _lifecycle.pending(new, namespace=gk == _NAMESPACE_GK):
            self.remove(gk, old)
            return None
        if _lifecycle.unchanged(old, new):
            return old
        change = self.store.put(gk, new)
        self._written(gk, old, change.object)
        return change.object

    def write_metadata(self, gk: GroupKind, obj: Obj, meta: dict[str, Any], *, manager: str) -> Obj:
        """A controller's update of the stored `obj` with new metadata."""
        return self.update({**obj, "apiVersion": self.kind_of(gk, obj).api_version, "metadata": meta},
                           manager=manager)

    def remove(self, gk: GroupKind, obj: Obj) -> Obj:
        """Remove the stored object now; returns its final state."""
        meta = obj["metadata"]
        change = self.store.remove(gk, ObjectKey(meta.get("namespace") or "", meta["name"]))
        for reactor in self.reactors:
            reactor.removed(gk, change.object)
        return change.object

    def _existing(self, kind: Kind, body: Obj, subresource: str) -> tuple[ResourceInfo, GroupKind, Obj]:
        info = self.registry.info(kind)
        if subresource and subresource not in info.subresources:
            raise _errors.unknown_subresource(info, subresource)
        meta = body["metadata"]
        if not meta.get("name"):
            raise BadRequest("resource name may not be empty")
        key = ObjectKey(_namespace_of(info, meta), str(meta["name"]))
        gk = group_kind(kind)
        old = self.store.get(gk, key)
        if old is None:
            # current servers answer NotFound even when the body carries the uid of the object that
            # was there (1.20 checked that uid first, against nothing, and answered Conflict)
            raise _errors.not_found(info, key.name)
        return info, gk, old

    def _replaced(self, kind: Kind, info: ResourceInfo, old: Obj, body: Obj, subresource: str) -> Obj:
        if subresource:
            new = _lifecycle.status_updated(old, body)
        else:
            new = _lifecycle.updated(old, body, info, self.registry.generation(kind))
            new["apiVersion"] = kind.api_version
            causes = check_metadata(new["metadata"], rule=self.registry.name_rule(kind), check_name=False)
            added = [f for f in _lifecycle.finalizers(new) if f not in _lifecycle.finalizers(old)]
            if added and _lifecycle.is_deleting(old):
                listed = " ".join(f'"{f}"' for f in added)
                causes.append(_errors.forbidden_field(
                    "metadata.finalizers", f"no new finalizers can be added if the object is being deleted, found "
                                           f"new finalizers []string{{{listed}}}"))
            if causes:
                raise _errors.invalid(kind, old["metadata"]["name"], causes)
        for reactor in self.reactors:
            reactor.admit(kind, old, new)
        return new

    def _commit(self, gk: GroupKind, kind: Kind, old: Obj, new: Obj) -> Obj:
        if _lifecycle.unchanged(old, new):
            return old
        if _lifecycle.is_deleting(new) and not _lifecycle.pending(new, namespace=gk == _NAMESPACE_GK):
            # the update that removes the last finalizer deletes the object, as the registry does
            return self.remove(gk, old)
        change = self.store.put(gk, new)
        self._written(gk, old, change.object)
        return change.object

    def _written(self, gk: GroupKind, old: Obj | None, new: Obj) -> None:
        for reactor in self.reactors:
            reactor.written(gk, old, new)


def _is_version(value: Any) -> bool:
    """Whether a request's resourceVersion is one the storage would refuse on create: a positive
    number (the server ignores "", "0" and anything it cannot parse)."""
    return isinstance(value, str) and value.isdigit() and int(value) > 0


def _namespace_of(info: ResourceInfo, meta: dict[str, Any]) -> str:
    if not info.namespaced:
        meta.pop("namespace", None)
        return ""
    namespace = meta.get("namespace")
    if not namespace or not isinstance(namespace, str):
        raise BadRequest(f"{_errors.resource_name(info)} are namespaced: metadata.namespace is required")
    return namespace


def _intent(info: ResourceInfo, body: Obj, subresource: str) -> Obj:
    """What an apply may set: only status through the status subresource, never status
    through the main resource when there is a status subresource."""
    if subresource == "status":
        meta = body["metadata"]
        kept = {k: meta[k] for k in ("name", "namespace") if k in meta}
        return {"apiVersion": body.get("apiVersion"), "kind": body.get("kind"), "metadata": kept,
                **({"status": body["status"]} if "status" in body else {})}
    if "status" in info.subresources:
        return {k: v for k, v in body.items() if k != "status"}
    return body


def _check_preconditions(info: ResourceInfo, obj: Obj, preconditions: Mapping[str, str]) -> None:
    meta = obj["metadata"]
    unknown = set(preconditions) - {"uid", "resourceVersion"}
    if unknown:
        raise BadRequest(f"unknown delete preconditions: {', '.join(sorted(unknown))} (uid, resourceVersion)")
    uid = preconditions.get("uid")
    if uid is not None and uid != meta["uid"]:
        raise _errors.conflict(info, meta["name"], f"the UID in the precondition ({uid}) does not match the UID in "
                                                   f"record ({meta['uid']}). The object might have been deleted "
                                                   f"and then recreated")
    version = preconditions.get("resourceVersion")
    if version is not None and version != meta["resourceVersion"]:
        raise _errors.conflict(info, meta["name"], f"the ResourceVersion in the precondition ({version}) does not "
                                                   f"match the ResourceVersion in record "
                                                   f"({meta['resourceVersion']}). The object might have been "
                                                   f"modified")
