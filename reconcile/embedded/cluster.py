"""`EmbeddedCluster`: an in-process Kubernetes API server, the `Cluster` every controller can run on.

It is not a mock: wherever a controller could notice, it answers as kube-apiserver (with
kube-controller-manager's garbage collector and namespace controller, and the apiextensions
controllers) would. docs/embedded-cluster.md lists the semantics and what is left out.

This module is the face and the request routing; the work is done behind it:
`_engine` (the request path: validation, lifecycle, ownership), `_store` (objects, revisions,
the change log), `_watch` (watchers, streams, bookmarks), `_gc`, `_namespaces` and `_crds`
(the controllers), `_defaults` (normalization and defaulting), `_fields` and `_apply`
(managedFields and server-side apply), `_kinds` (discovery and per-kind rules), `_persist`
(the directory) and `_lock` (its one owner).

With `persist_to`, a write returns only once it is on disk (fsynced), and the directory is
held by this cluster until `close()`: another process (or cluster) opening it gets StateInUse.
Every write verb passes `reconcile.fencing.write` first: during a reconcile, a replica that
cannot prove it still holds its Lease gets NotLeading, and a Conflict is counted.

Threads: one re-entrant lock serializes every request and the controller work it causes, so a
request's effects (a cascade of deletions included) are complete when it returns. Objects
are copied outside the lock, and watch consumers never take it except to read a bookmark's
revision. Custom storage (`serve`) is called without the lock.
"""

from __future__ import annotations

import builtins
import functools
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

from reconcile import fencing
from reconcile.clock import SYSTEM_CLOCK, Clock
from reconcile.cluster import (
    Kind,
    LabelSelector,
    ListResult,
    Obj,
    ObjectKey,
    PatchType,
    Propagation,
    ResourceInfo,
    WatchEvent,
)
from reconcile.embedded import _errors
from reconcile.embedded._crds import CRD_GK, Crds
from reconcile.embedded._defaults import Defaults
from reconcile.embedded._engine import Engine
from reconcile.embedded._gc import GarbageCollector
from reconcile.embedded._kinds import BUILTIN, NAMESPACE, REGISTERED, Registry, group_kind
from reconcile.embedded._namespaces import PROTECTED, Namespaces
from reconcile.embedded._persist import StateLog
from reconcile.embedded._store import Change, Store
from reconcile.embedded._validation import request_body
from reconcile.embedded._watch import Watcher, WatchHub, WatchStream
from reconcile.embedded.storage import Storage
from reconcile.errors import AlreadyExists, BadRequest, ServerError
from reconcile.patching import apply_patch, clone
from reconcile.selectors import FieldSelector, parse_fields, parse_labels

PARTIAL_OBJECT_METADATA = Kind("meta.k8s.io/v1", "PartialObjectMetadata")
PAGE_SIZE = 500  # objects per page of `pages`, as KubeCluster asks a real server for
FIELD_MANAGER = "porchkit"  # the manager recorded for create, update and patch (they take none)
T = TypeVar("T")


class EmbeddedCluster:
    """An in-process API server implementing `reconcile.Cluster`; see the module docstring.

    `clock` times creationTimestamps, bookmarks and watch timeouts; `history` is how many of the
    most recent changes (across all kinds) a watch can resume from; `bookmark_interval` is the
    clock-seconds of quiet after which a watch sends a BOOKMARK; `persist_to` is a directory to
    keep the state in (it resumes from what is there; StateInUse when another process holds it).
    Call `close()` when done (or use `with`): it lets the directory go.
    """

    def __init__(self, *, clock: Clock = SYSTEM_CLOCK, history: int = 1000, bookmark_interval: float = 60.0,
                 persist_to: str | Path | None = None) -> None:
        if history < 0:
            raise ValueError(f"history must be 0 or more, not {history}")
        if bookmark_interval <= 0:
            raise ValueError(f"bookmark_interval must be positive, not {bookmark_interval}")
        self._lock = threading.RLock()
        self._clock, self._bookmark_interval = clock, bookmark_interval
        self._registry = Registry()
        self._store = Store(history=history)
        self._hub = WatchHub()
        self._store.subscribe(self._hub.publish)
        self._engine = Engine(self._registry, self._store, clock)
        self._namespaces = Namespaces(self._engine)
        self._namespaces_elsewhere: set[Kind] = set()
        self._engine.reactors = [Defaults(), self._namespaces, Crds(self._engine), GarbageCollector(self._engine)]
        self._journal = StateLog(persist_to) if persist_to is not None else None
        self._compacted_at = -1  # the store revision of the last snapshot written
        self._closed = False
        try:
            self._open()
        except BaseException:
            if self._journal is not None:
                self._journal.close()  # let the directory go: this cluster never opened
            raise

    def _open(self) -> None:
        with self._lock:
            if self._journal is not None:
                self._restore(self._journal)
            for name in sorted(PROTECTED):
                if self._store.get(group_kind(NAMESPACE), ObjectKey("", name)) is None:
                    self._engine.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
                                        manager="kube-apiserver")
            self._engine.settle()
            if self._journal is not None and self._store.revision != self._compacted_at:
                self._compact(self._journal)  # fold the journal in (and drop a line a crash tore)

    # discovery

    def resource(self, kind: Kind) -> ResourceInfo:
        """How `kind` is served; raises NotFound when it is not."""
        with self._lock:
            return self._registry.info(kind)

    def resources(self) -> list[ResourceInfo]:
        """Every served kind (one entry per version), as discovery lists them."""
        with self._lock:
            return self._registry.infos()

    def register(self, info: ResourceInfo) -> None:
        """Serve a kind that no CRD defines, from the generic store (kept with `persist_to`).

        Registering a kind again replaces how it is served; a built-in or CRD-defined kind
        cannot be registered (AlreadyExists)."""
        def registered() -> None:
            origin = self._registry.origin(info.kind)
            if origin and origin != REGISTERED:
                what = "built in" if origin == BUILTIN else f"served by {origin}"
                raise AlreadyExists(f"{info.kind} is already {what}")
            self._registry.add(info, origin=REGISTERED)
            if self._journal is not None:
                self._journal.record_kinds(self._registry.registered())

        self._write(registered)

    def serve(self, kind: Kind | ResourceInfo, storage: Storage, *, namespaces_elsewhere: bool = False) -> None:
        """Route every request for a kind to `storage` (see reconcile.embedded.storage). Pass the
        ResourceInfo of a kind not served yet, or the Kind of one that is. `namespaces_elsewhere`:
        the storage's namespaces are another API server's, which admits them (as an aggregated
        API server checks namespaces against the main one), so this cluster does not."""
        with self._lock:
            self._check_open()
            info = kind if isinstance(kind, ResourceInfo) else self._registry.info(kind)
            self._registry.serve(info, storage)
            if namespaces_elsewhere:
                self._namespaces_elsewhere.add(info.kind)
            else:
                self._namespaces_elsewhere.discard(info.kind)

    def watchers(self) -> int:
        """How many watches are open (apiserver_registered_watchers); abandoned ones not counted."""
        with self._lock:
            return self._hub.count()

    # reads

    def get(self, kind: Kind, key: ObjectKey) -> Obj | None:
        """The object, or None when there is none; NotFound when the kind is not served."""
        storage = self._storage(kind)
        if storage is not None:
            return storage.get(kind, key)
        with self._lock:
            self._check_open()
            info = self._registry.info(kind)
            found = self._store.get(group_kind(kind), ObjectKey(key.namespace if info.namespaced else "", key.name))
        return _render(found, kind) if found is not None else None

    def list(self, kind: Kind, *, namespace: str = "", labels: LabelSelector = None,
             fields: str | None = None) -> ListResult:
        """Objects of `kind` (in `namespace`, or everywhere), ordered by namespace and name;
        BadRequest for a malformed selector or a field label the kind does not support."""
        storage = self._storage(kind)
        if storage is not None:
            return storage.list(kind, namespace=namespace, labels=labels, fields=fields)
        return self._list(kind, namespace, labels, fields, lambda obj: _render(obj, kind))

    def list_metadata(self, kind: Kind, *, namespace: str = "", labels: LabelSelector = None,
                      fields: str | None = None) -> ListResult:
        """As `list`, with every item a PartialObjectMetadata (apiVersion meta.k8s.io/v1): what
        kube-apiserver answers to `Accept: application/json;as=PartialObjectMetadataList`."""
        storage = self._storage(kind)
        if storage is not None:
            result = storage.list(kind, namespace=namespace, labels=labels, fields=fields)
            return ListResult([_partial(obj) for obj in result.items], result.resource_version)
        return self._list(kind, namespace, labels, fields, _partial)

    def pages(self, kind: Kind, *, namespace: str = "", labels: LabelSelector = None, fields: str | None = None,
              metadata_only: bool = False, page_size: int = PAGE_SIZE) -> Iterator[ListResult]:
        """`list` (or `list_metadata`) in pages of `page_size`, each copied out only when the
        caller asks for it, so that a caller keeping less than whole objects never holds two
        copies of the whole list (as `KubeCluster.pages` does over a real server's pages). All
        pages are of one consistent state and carry its resourceVersion."""
        storage = self._storage(kind)
        if storage is not None:
            result = (self.list_metadata if metadata_only else self.list)(kind, namespace=namespace, labels=labels,
                                                                         fields=fields)
            yield result
            return
        items, revision = self._select(kind, namespace, labels, fields)
        render = _partial if metadata_only else functools.partial(_render, kind=kind)
        for start in range(0, max(len(items), 1), page_size):
            yield ListResult([render(obj) for obj in items[start:start + page_size]], revision)

    def _list(self, kind: Kind, namespace: str, labels: LabelSelector, fields: str | None,
              render: Callable[[Obj], Obj]) -> ListResult:
        items, revision = self._select(kind, namespace, labels, fields)
        return ListResult([render(obj) for obj in items], revision)

    def _select(self, kind: Kind, namespace: str, labels: LabelSelector,
                fields: str | None) -> tuple[builtins.list[Obj], str]:
        """The stored objects a list selects (shared: render before handing out), in order, and
        the revision they are the state of."""
        label_selector, field_selector = parse_labels(labels), parse_fields(fields)
        with self._lock:
            self._check_open()
            info = self._registry.info(kind)
            self._check_fields(kind, field_selector)
            found = builtins.list(self._store.objects(group_kind(kind), namespace if info.namespaced else ""))
            revision = self._store.revision
        items = [obj for obj in found if label_selector.matches(obj["metadata"].get("labels"))
                 and field_selector.matches(obj)]
        items.sort(key=lambda o: (o["metadata"].get("namespace") or "", o["metadata"]["name"]))
        return items, str(revision)

    def watch(self, kind: Kind, *, resource_version: str, namespace: str = "", labels: LabelSelector = None,
              fields: str | None = None, timeout: float | None = None) -> Iterator[WatchEvent]:
        """Changes after `resource_version` ("" or "0": the current objects as ADDED first),
        BOOKMARKs, until `timeout` clock-seconds pass or the stream is closed. Raises Gone at
        once when that version is older than the history kept. With a selector, an object that
        starts matching arrives as ADDED and one that stops matching as DELETED, carrying its
        previous state at the new resourceVersion, as kube-apiserver's watch cache sends them
        (cacheWatcher.convertToWatchEvent)."""
        storage = self._storage(kind)
        if storage is not None:
            return storage.watch(kind, resource_version=resource_version, namespace=namespace, labels=labels,
                                 fields=fields, timeout=timeout)
        return self._watch(kind, resource_version, namespace, labels, fields, timeout,
                           render=lambda obj: _render(obj, kind), shown_as=kind)

    def watch_metadata(self, kind: Kind, *, resource_version: str, namespace: str = "", labels: LabelSelector = None,
                       fields: str | None = None, timeout: float | None = None) -> Iterator[WatchEvent]:
        """As `watch`, with every object (bookmarks too) a PartialObjectMetadata: what
        kube-apiserver sends to `Accept: application/json;as=PartialObjectMetadata`."""
        storage = self._storage(kind)
        if storage is not None:
            events = storage.watch(kind, resource_version=resource_version, namespace=namespace, labels=labels,
                                   fields=fields, timeout=timeout)
            return (WatchEvent(event.type, _partial(event.object)) for event in events)
        return self._watch(kind, resource_version, namespace, labels, fields, timeout, render=_partial,
                           shown_as=PARTIAL_OBJECT_METADATA)

    def _watch(self, kind: Kind, resource_version: str, namespace: str, labels: LabelSelector, fields: str | None,
               timeout: float | None, *, render: Callable[[Obj], Obj], shown_as: Kind) -> Iterator[WatchEvent]:
        label_selector, field_selector = parse_labels(labels), parse_fields(fields)
        with self._lock:
            self._check_open()
            info = self._registry.info(kind)
            self._check_fields(kind, field_selector)
            gk, scope = group_kind(kind), namespace if info.namespaced else ""
            if resource_version in ("", "0"):
                current = sorted(self._store.objects(gk, scope), key=lambda o: int(o["metadata"]["resourceVersion"]))
                backlog = [Change("ADDED", gk, obj, None, int(obj["metadata"]["resourceVersion"])) for obj in current]
            else:
                if not str(resource_version).isdigit():
                    raise BadRequest(f"invalid resource version {resource_version!r}: not a number")
                backlog = [c for c in self._store.changes_after(int(resource_version), gk)
                           if not scope or (c.object["metadata"].get("namespace") or "") == scope]
            watcher = Watcher(gk, scope, backlog)
            self._hub.add(watcher)
        return WatchStream(watcher, kind=shown_as, labels=label_selector, fields=field_selector, clock=self._clock,
                           bookmark_interval=self._bookmark_interval, timeout=timeout, revision=self._revision,
                           render=render)

    # writes

    def create(self, obj: Obj) -> Obj:
        """Create; AlreadyExists, Invalid, NotFound (kind or namespace), Forbidden."""
        body = _body(obj)
        with fencing.write(Kind.of(body), ObjectKey.of(body)):
            storage = self._storage_for_write(body)
            if storage is not None:
                return storage.create(obj)
            return _render(self._write(lambda: self._engine.create(body, manager=FIELD_MANAGER)), Kind.of(body))

    def update(self, obj: Obj) -> Obj:
        """Replace (status kept when the kind has a status subresource); Conflict, NotFound."""
        body = _body(obj)
        with fencing.write(Kind.of(body), ObjectKey.of(body)):
            storage = self._storage(Kind.of(body))
            if storage is not None:
                return storage.update(obj)
            return _render(self._write(lambda: self._engine.update(body, manager=FIELD_MANAGER)), Kind.of(body))

    def update_status(self, obj: Obj) -> Obj:
        """Replace only `status`; NotFound when the kind has no status subresource."""
        body = _body(obj)
        with fencing.write(Kind.of(body), ObjectKey.of(body)):
            storage = self._storage(Kind.of(body))
            if storage is not None:
                return storage.update_status(obj)
            result = self._write(lambda: self._engine.update(body, manager=FIELD_MANAGER, subresource="status"))
            return _render(result, Kind.of(body))

    def patch(self, kind: Kind, key: ObjectKey, patch: Any, *, patch_type: PatchType = "merge",
              subresource: str | None = None) -> Obj:
        """A JSON merge patch or JSON patch; a resourceVersion in the patch is a precondition."""
        with fencing.write(kind, key):
            return self._patch(kind, key, patch, patch_type, subresource)

    def _patch(self, kind: Kind, key: ObjectKey, patch: Any, patch_type: PatchType, subresource: str | None) -> Obj:
        storage = self._storage(kind)
        if storage is not None:
            return storage.patch(kind, key, patch, patch_type=patch_type, subresource=subresource)

        def patched() -> Obj:
            info = self._registry.info(kind)
            if subresource and subresource not in info.subresources:
                raise _errors.unknown_subresource(info, subresource)
            name_key = ObjectKey(key.namespace if info.namespaced else "", key.name)
            current = self._store.get(group_kind(kind), name_key)
            if current is None:
                raise _errors.not_found(info, key.name)
            result = apply_patch(_render(current, kind), patch, patch_type)
            body = _patched_body(result, current, kind, name_key)
            return self._engine.update(body, manager=FIELD_MANAGER, subresource=subresource or "")

        return _render(self._write(patched), kind)

    def apply(self, obj: Obj, *, field_manager: str, force: bool = False, subresource: str | None = None) -> Obj:
        """Server-side apply: create or merge `obj` as `field_manager`'s intent; Conflict when it
        changes fields another manager owns, unless `force`."""
        body = _body(obj)
        with fencing.write(Kind.of(body), ObjectKey.of(body)):
            storage = self._storage_for_write(body)
            if storage is not None:
                return storage.apply(obj, field_manager=field_manager, force=force, subresource=subresource)
            result = self._write(lambda: self._engine.apply(body, manager=field_manager, force=force,
                                                            subresource=subresource or ""))
            return _render(result, Kind.of(body))

    def delete(self, kind: Kind, key: ObjectKey, *, propagation: Propagation = "Background",
               preconditions: Mapping[str, str] | None = None) -> Obj | None:
        """Delete, cascading as `propagation` says; the object while finalizers hold it, None once
        it is gone. NotFound, Conflict (preconditions), Forbidden."""
        with fencing.write(kind, key):
            return self._delete(kind, key, propagation, preconditions)

    def _delete(self, kind: Kind, key: ObjectKey, propagation: Propagation,
                preconditions: Mapping[str, str] | None) -> Obj | None:
        storage = self._storage(kind)
        if storage is not None:
            return self._delete_served(storage, kind, key, propagation, preconditions)

        def deleted() -> Obj | None:
            info = self._registry.info(kind)
            name_key = ObjectKey(key.namespace if info.namespaced else "", key.name)
            result = self._engine.delete(kind, name_key, propagation=propagation, preconditions=preconditions)
            self._engine.settle()
            current = self._store.get(group_kind(kind), name_key)
            if result is None or current is None or current["metadata"]["uid"] != result["metadata"]["uid"]:
                return None
            return current

        found = self._write(deleted)
        return _render(found, kind) if found is not None else None

    def close(self) -> None:
        """End every watch and, with `persist_to`, write the final snapshot. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._hub.close()
            if self._journal is not None:
                if self._store.revision != self._compacted_at:  # else the snapshot is already current
                    self._compact(self._journal)
                self._journal.close()

    def __enter__(self) -> EmbeddedCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # internals

    def _write(self, request: Callable[[], T]) -> T:
        """Run a write and the controller work it causes; with `persist_to`, return only once it
        is on disk. The fsync is made outside the lock, so that writers waiting for the disk at
        the same moment share one (and readers never wait for it)."""
        journal = self._journal
        with self._lock:
            self._check_open()
            if journal is not None:
                journal.check()
            result = request()
            self._engine.settle()
            if journal is not None and journal.due(self._store.size):
                self._compact(journal)
            written = journal.written if journal is not None else 0
        if journal is not None:
            journal.sync(written)
        return result

    def _storage(self, kind: Kind) -> Storage | None:
        with self._lock:
            self._check_open()
            return self._registry.handler(kind)

    def _storage_for_write(self, body: Obj) -> Storage | None:
        """The custom storage of a create or apply, once the namespace admits it."""
        kind = Kind.of(body)
        with self._lock:
            self._check_open()
            storage = self._registry.handler(kind)
            if storage is not None and kind not in self._namespaces_elsewhere:
                meta = body["metadata"]
                info = self._registry.info(kind)
                self._namespaces.check_namespace(info, str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        return storage

    def _delete_served(self, storage: Storage, kind: Kind, key: ObjectKey, propagation: Propagation,
                       preconditions: Mapping[str, str] | None) -> Obj | None:
        before = storage.get(kind, key)
        result = storage.delete(kind, key, propagation=propagation, preconditions=preconditions)
        if result is None and before is not None and isinstance(before.get("metadata"), dict):
            self._write(lambda: self._removed_by_storage(kind, before))
        return result

    def _removed_by_storage(self, kind: Kind, before: Obj) -> None:
        for reactor in self._engine.reactors:
            reactor.removed(group_kind(kind), before)

    def _check_fields(self, kind: Kind, selector: FieldSelector) -> None:
        supported = self._registry.field_labels(kind)
        for requirement in selector.requirements:
            if requirement.field not in supported:
                raise _errors.unsupported_field_label(requirement.field)

    def _revision(self) -> int:
        with self._lock:
            return self._store.revision

    def _check_open(self) -> None:
        if self._closed:
            raise ServerError("the embedded cluster is closed")

    def _restore(self, journal: StateLog) -> None:
        saved = journal.load()
        for info in saved.kinds:
            self._registry.add(info, origin=REGISTERED)
        for gk, obj in saved.objects:
            self._store.restore(gk, obj)
        self._store.restore_revision(saved.revision)
        if journal.snapshot_is_current:
            self._compacted_at = saved.revision
        # the controllers start with a full resync, as after a restart: CRDs first (their kinds)
        for gk in sorted(self._store.group_kinds(), key=lambda g: g != CRD_GK):
            for obj in self._store.objects(gk):
                for reactor in self._engine.reactors:
                    reactor.written(gk, None, obj)
            if gk == CRD_GK:
                self._engine.settle()
        self._store.subscribe(journal.record)

    def _compact(self, journal: StateLog) -> None:
        self._compacted_at = self._store.revision
        objects = [(gk, obj) for gk in self._store.group_kinds() for obj in self._store.objects(gk)]
        journal.compact(self._store.revision, self._registry.registered(), objects)


def _body(obj: Obj) -> Obj:
    body = request_body(obj)
    if not body.get("apiVersion") or not body.get("kind"):
        missing = "Kind" if not body.get("kind") else "apiVersion"
        raise BadRequest(f"Object '{missing}' is missing in the request")
    return body


def _partial(obj: Obj) -> Obj:
    """What leaves the cluster for a metadata-only request: the object's metadata alone."""
    return {"apiVersion": PARTIAL_OBJECT_METADATA.api_version, "kind": PARTIAL_OBJECT_METADATA.kind,
            "metadata": clone(obj["metadata"])}


def _render(obj: Obj, kind: Kind) -> Obj:
    """What leaves the cluster: a private copy, in the version it was asked for."""
    out: Obj = clone(obj)
    out["apiVersion"] = kind.api_version
    return out


def _patched_body(result: Any, current: Obj, kind: Kind, key: ObjectKey) -> Obj:
    if not isinstance(result, dict):
        raise BadRequest("the patched object must be a JSON object")
    body = request_body(result)
    meta = body["metadata"]
    if meta.get("name") != key.name:
        raise BadRequest(f"the name of the object ({meta.get('name')}) does not match the name on the URL "
                         f"({key.name})")
    if key.namespace and meta.get("namespace") != key.namespace:
        raise BadRequest("the namespace of the provided object does not match the namespace sent on the request")
    if Kind.of(body) != kind:
        raise BadRequest(f"the patch may not change apiVersion or kind (from {kind.api_version}/{kind.kind} to "
                         f"{body.get('apiVersion')}/{body.get('kind')})")
    uid = meta.get("uid")
    if uid and uid != current["metadata"]["uid"]:
        # only an update (PUT) takes the body's uid as a precondition; a patch that changes it
        # changes an immutable field
        raise _errors.invalid(kind, key.name, [_errors.invalid_value("metadata.uid", uid, "field is immutable")])
    if not meta.get("resourceVersion"):
        meta["resourceVersion"] = current["metadata"]["resourceVersion"]  # a patch without one is not conditional
    return body
