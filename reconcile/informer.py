"""Informer: one shared list+watch of a kind, kept in a local cache, with indexes and handlers.

Promises:
  * after `synced` is set, the cache holds every object the list returned, then every change
    the watch delivered, in resourceVersion order; handlers see each change exactly once, as
    (old, new) with old None for an addition and new None for a deletion;
  * a watch that ends or breaks resumes from the last resourceVersion seen (bookmarks included),
    so nothing is lost or repeated; a `Gone` answer triggers one relist, whose differences with
    the cache reach the handlers as ordinary changes; other failures retry with back-off;
  * lists (the first and every relist) are taken page by page where the cluster offers pages
    (`PagedSource`), each page transformed before the next is read;
  * `last_activity` (clock.monotonic()) moves with every event and bookmark, for health checks
    that must notice a watch gone silent;
  * a handler that raises is logged and skipped: the change still reaches the cache and every
    other handler, and the watch goes on;
  * once `close()`d (its last user let go: reconcile.cache), it stops for good: the watch is
    closed, `run` returns, and the handlers, the extra indexes and every object are dropped.
A metadata-only informer asks the server for metadata alone (PartialObjectMetadata, as
controller-runtime's metadata informers do) when the cluster can serve it (`MetadataSource`), so
that neither the wire nor the decoder carries what the cache would drop; the server answers with
apiVersion meta.k8s.io/v1 and kind PartialObjectMetadata, and the cache puts back the informer's
own kind. Other clusters are listed in full and the metadata kept.
Does not: decide what a change means (controllers map changes to keys), or write to the cluster.
Cached objects are shared: read them, never change them (copy first).
"""

from __future__ import annotations

import builtins
import contextlib
import logging
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol, runtime_checkable

from reconcile.clock import SYSTEM_CLOCK, Clock
from reconcile.cluster import Cluster, Kind, LabelSelector, ListResult, Obj, ObjectKey, WatchEvent
from reconcile.errors import Gone
from reconcile.ratelimit import ItemBackoff

Handler = Callable[[Obj | None, Obj | None], None]
IndexFunc = Callable[[Obj], Iterable[str]]
Transform = Callable[[Obj], Obj]
Change = tuple[Obj | None, Obj | None]  # (old, new): None for an addition's old, a deletion's new

log = logging.getLogger("porchkit.informer")


def drop_managed_fields(obj: Obj) -> Obj:
    """The default transform: managedFields are often most of an object's size and no controller
    reads them."""
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        obj = {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
    return obj


def metadata_only(obj: Obj) -> Obj:
    """A transform keeping only apiVersion, kind and metadata (without managedFields)."""
    return drop_managed_fields({k: obj[k] for k in ("apiVersion", "kind", "metadata") if k in obj})


@runtime_checkable
class MetadataSource(Protocol):
    """A cluster that can list and watch metadata alone: objects (and list items) come as
    `{"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": ...}`, which
    is what kube-apiserver answers to `Accept: application/json;as=PartialObjectMetadata(List)`."""

    def list_metadata(self, kind: Kind, *, namespace: str = "", labels: LabelSelector = None,
                      fields: str | None = None) -> ListResult: ...

    def watch_metadata(self, kind: Kind, *, resource_version: str, namespace: str = "",
                       labels: LabelSelector = None, fields: str | None = None,
                       timeout: float | None = None) -> Iterator[WatchEvent]: ...


@runtime_checkable
class PagedSource(Protocol):
    """A cluster that can hand a list over page by page (KubeCluster: the server's own pages), so
    that a relist keeps only what its transform keeps of each page, never a whole list of whole
    objects beside the cache it builds."""

    def pages(self, kind: Kind, *, namespace: str = "", labels: LabelSelector = None, fields: str | None = None,
              metadata_only: bool = False) -> Iterator[ListResult]: ...


def as_kind(kind: Kind) -> Transform:
    """A transform for metadata-only answers: `metadata_only`, with the object's own apiVersion
    and kind in place of PartialObjectMetadata's (readers and mappers look at them)."""
    api_version, name = sys.intern(kind.api_version), sys.intern(kind.kind)

    def transform(obj: Obj) -> Obj:
        out = metadata_only(obj)
        out["apiVersion"], out["kind"] = api_version, name
        return out
    return transform


# Metadata fields whose values are unique to one object: sharing them would only grow the table.
_UNIQUE_FIELDS = frozenset(("name", "uid", "resourceVersion", "creationTimestamp", "deletionTimestamp",
                            "generateName", "selfLink"))
_SHARED_LENGTH = 40  # longer strings are rarely repeated between objects


def share_strings(obj: Obj) -> Obj:
    """A copy of `obj` whose keys and short string values are interned.

    Objects decoded one by one (every watch event is its own JSON document) each carry their own
    copies of "apiVersion", "v1", the namespace, label keys and values...; in a cache of many
    similar objects those copies are a third of the memory. Values unique to one object (name,
    uid, timestamps) are left alone."""
    out = {}
    for key, value in obj.items():
        if key == "metadata" and isinstance(value, dict):
            value = {sys.intern(k): v if k in _UNIQUE_FIELDS else _shared(v) for k, v in value.items()}
        else:
            value = _shared(value)
        out[sys.intern(key)] = value
    return out


def _shared(value: Any, intern: Callable[[str], str] = sys.intern) -> Any:
    if isinstance(value, str):
        return intern(value) if len(value) <= _SHARED_LENGTH else value
    if isinstance(value, dict):
        return {intern(k) if isinstance(k, str) else k: _shared(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shared(v) for v in value]
    return value


def by_namespace(obj: Obj) -> list[str]:
    return [ObjectKey.of(obj).namespace]


def by_labels(obj: Obj) -> list[str]:
    """An index function: one `key=value` entry per label (`informer.by_index("labels", "app=web")`)."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return [f"{key}={value}" for key, value in labels.items()] if isinstance(labels, dict) else []


def by_owner_uid(obj: Obj) -> list[str]:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return [str(ref.get("uid")) for ref in refs if isinstance(ref, dict) and ref.get("uid")]


class Informer:
    """The list+watch of one kind in one scope (namespace, label selector), and its cache.

    Indexes "namespace" and "owner" (owner uid) are built in; `add_index` adds others, such as
    `by_labels` or any function of the object. `transform` shapes every object before it is
    cached (the default drops managedFields; `metadata_only` keeps just the metadata). With
    `metadata`, only metadata is cached, and only metadata is asked of a cluster that can
    serve it (see the module docstring)."""

    def __init__(self, cluster: Cluster, kind: Kind, *, namespace: str = "", labels: LabelSelector = None,
                 transform: Transform = drop_managed_fields, clock: Clock = SYSTEM_CLOCK,
                 watch_timeout: float = 300.0, backoff: ItemBackoff | None = None,
                 metadata: bool = False) -> None:
        self.cluster, self.kind, self.namespace, self.labels = cluster, kind, namespace, labels
        self.transform, self.clock, self.watch_timeout = transform, clock, watch_timeout
        # metadata: list and watch PartialObjectMetadata where the cluster serves it
        self._metadata = cluster if metadata and isinstance(cluster, MetadataSource) else None
        self.holds_metadata_only = metadata or transform is metadata_only
        if metadata:
            self.transform = as_kind(kind)
        self.backoff = backoff or ItemBackoff(first=0.5, cap=30.0)
        self.synced = threading.Event()
        self._listing = threading.local()  # per thread: a replay in add_handler and a relist may overlap
        self.relists = 0
        self.last_activity = clock.monotonic()
        self._lock = threading.RLock()
        self._cache: dict[ObjectKey, Obj] = {}
        self._indexers: dict[str, IndexFunc] = {"namespace": by_namespace, "owner": by_owner_uid}
        self._indexes: dict[str, dict[str, set[ObjectKey]]] = {name: {} for name in self._indexers}
        self._handlers: list[Handler] = []
        self._resource_version = ""
        self._stream: Iterable[Any] | None = None  # the open watch, closed by wake()
        self._wake = threading.Condition()
        self._closed = False
        self.running = False  # while `run` runs

    # --- configuration (before run) -------------------------------------------------------

    def add_handler(self, handler: Handler) -> None:
        """Call `handler(old, new)` for every change; objects already cached are replayed as
        additions, so a handler added late still sees everything."""
        with self._lock:
            self._handlers.append(handler)
            current = list(self._cache.values())
        self._listing.on = True
        try:
            for obj in current:
                handler(None, obj)
        finally:
            self._listing.on = False

    def remove_handler(self, handler: Handler) -> None:
        """Stop calling `handler` (a controller removed while the cache runs); unknown ones are ignored."""
        with self._lock:
            if handler in self._handlers:
                self._handlers.remove(handler)

    @property
    def listing(self) -> bool:
        """True while this thread's handlers receive changes found by a list (the first list, a
        relist, or the replay of `add_handler`) rather than by the watch."""
        return bool(getattr(self._listing, "on", False))

    def add_index(self, name: str, index: IndexFunc) -> None:
        """Index the cache by `index` under `name` (replacing an index of that name)."""
        with self._lock:
            built: dict[str, set[ObjectKey]] = {}
            for key, obj in self._cache.items():
                for value in index(obj):
                    built.setdefault(value, set()).add(key)
            self._indexers[name] = index
            self._indexes[name] = built  # readers see the whole index at once

    def remove_index(self, name: str) -> None:
        """Stop keeping the index `name` (the built-in ones stay)."""
        if name in ("namespace", "owner"):
            return
        with self._lock:
            self._indexers.pop(name, None)
            self._indexes.pop(name, None)

    # --- cache reads ------------------------------------------------------------------------

    # Reads take no lock: each copies what it needs in one step the GIL makes atomic (a dict
    # lookup, list() or tuple() of a dict's values or a set), so a reader never waits for a writer
    # or for other readers (with many workers, a shared lock here made them queue up). A read
    # racing a write sees the object before or after it, as a read a moment earlier or later would:
    # `_store` changes the cache and indexes in an order that allows it.

    def get(self, key: ObjectKey) -> Obj | None:
        return self._cache.get(key)

    def list(self, namespace: str = "") -> list[Obj]:
        if not namespace:
            return list(self._cache.values())
        return self._lookup(tuple(self._indexes["namespace"].get(namespace, ())))

    def by_index(self, name: str, value: str) -> builtins.list[Obj]:
        return self._lookup(tuple(self._indexes[name].get(value, ())))

    def _lookup(self, keys: tuple[ObjectKey, ...]) -> builtins.list[Obj]:
        cache = self._cache
        found = [cache.get(key) for key in keys]
        return [obj for obj in found if obj is not None]  # one removed since the keys were taken

    def __len__(self) -> int:
        return len(self._cache)

    # --- running ------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """List, then watch until `stop` is set or the informer is closed; meant to run on its own thread."""
        self.running = True
        try:
            self._run(stop)
        finally:
            self.running = False

    def _run(self, stop: threading.Event) -> None:
        while not stop.is_set() and not self._closed:
            try:
                if not self._resource_version:
                    self._relist()
                self._watch(stop)
                self.backoff.forget(self.kind)
            except Gone:
                log.info("watch of %s expired at resourceVersion %s: relisting", self.kind, self._resource_version)
                self._resource_version = ""
            except Exception as err:  # any failure of the connection or the server: back off, resume
                delay = self.backoff.when(self.kind)
                log.warning("watch of %s failed (%s): retrying in %.1fs", self.kind, err, delay)
                with self._wake:
                    deadline = self.clock.monotonic() + delay
                    while not stop.is_set() and not self._closed and self.clock.monotonic() < deadline:
                        self.clock.wait(self._wake, deadline - self.clock.monotonic())

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Stop for good (nobody uses this informer any more): end the watch and `run`, and drop
        the handlers, the extra indexes and every cached object. Changes the watch was still
        delivering are dropped too."""
        with self._lock:
            self._closed = True
            self._handlers.clear()
            self._cache.clear()
            self._indexers = {"namespace": by_namespace, "owner": by_owner_uid}
            self._indexes = {name: {} for name in self._indexers}
        self.wake()

    def wake(self) -> None:
        """Interrupt a back-off wait or an open watch (after setting the `stop` given to run)."""
        close = getattr(self._stream, "close", None)
        if close is not None:
            # a generator mid-step cannot be closed from another thread (ValueError); it ends at its timeout
            with contextlib.suppress(ValueError):
                close()
        with self._wake:
            self._wake.notify_all()

    def _relist(self) -> None:
        fresh, version = self._list()
        self.relists += 1
        with self._lock:
            if self._closed:
                self.synced.set()  # a reader waiting for the list reads an empty cache, not a timeout
                return
            gone = [key for key in self._cache if key not in fresh]
            changes: list[Change] = [(self._cache.get(key), obj) for key, obj in fresh.items()
                       if _version(self._cache.get(key)) != _version(obj)]
            changes += [(self._cache[key], None) for key in gone]
            for old, new in changes:
                self._store(old, new)
            self._resource_version = version
        self.last_activity = self.clock.monotonic()
        self._listing.on = True
        try:
            self._notify(changes)
        finally:
            self._listing.on = False
        self.synced.set()

    def _list(self) -> tuple[dict[ObjectKey, Obj], str]:
        """Every object the list returns, transformed, and the list's resourceVersion; page by
        page where the cluster offers pages (a raw page is dropped once transformed)."""
        # the class must define pages: a wrapper delegating by attribute lookup that overrides
        # `list` (to count, gate or slow lists) is listed through that `list`
        cluster: Any = self.cluster
        if callable(getattr(type(cluster), "pages", None)) and isinstance(cluster, PagedSource):
            fresh: dict[ObjectKey, Obj] = {}
            version = ""
            for page in cluster.pages(self.kind, namespace=self.namespace, labels=self.labels,
                                      metadata_only=self._metadata is not None):
                for obj in page.items:
                    fresh[ObjectKey.of(obj)] = share_strings(self.transform(obj))
                version = page.resource_version
            return fresh, version
        if self._metadata is not None:
            result = self._metadata.list_metadata(self.kind, namespace=self.namespace, labels=self.labels)
        else:
            result = self.cluster.list(self.kind, namespace=self.namespace, labels=self.labels)
        return {ObjectKey.of(obj): share_strings(self.transform(obj)) for obj in result.items}, \
            result.resource_version

    def _watch(self, stop: threading.Event) -> None:
        watch = self._metadata.watch_metadata if self._metadata is not None else self.cluster.watch
        events = watch(self.kind, resource_version=self._resource_version, namespace=self.namespace,
                       labels=self.labels, timeout=self.watch_timeout)
        self._stream = events
        if stop.is_set() or self._closed:  # stopped while the watch was being opened: wake() could not close it
            self._stream = None
            getattr(events, "close", lambda: None)()
            return
        try:
            for event in events:
                self.last_activity = self.clock.monotonic()
                version = _version(event.object)
                if event.type != "BOOKMARK":
                    self._apply(event.type, share_strings(self.transform(event.object)))
                if version:
                    self._resource_version = version
                if stop.is_set() or self._closed:
                    return
        finally:
            self._stream = None
            close = getattr(events, "close", None)
            if close is not None:
                close()

    def _apply(self, event_type: str, obj: Obj) -> None:
        key = ObjectKey.of(obj)
        with self._lock:
            if self._closed:
                return
            old = self._cache.get(key)
            new = None if event_type == "DELETED" else obj
            if old is None and new is None:
                return
            self._store(old, new)
        self._notify([(old, new)])

    def _store(self, old: Obj | None, new: Obj | None) -> None:
        """Replace `old` by `new` (either may be None) in the cache and its indexes, in an order
        that lock-free readers can follow: an object is in the cache before any index names it,
        and an index value that stays is never taken out and put back (a reader of it would miss
        the object in between)."""
        key = ObjectKey.of(new if new is not None else old)  # type: ignore[arg-type]
        if new is not None:
            self._cache[key] = new
        for name, indexer in self._indexers.items():
            before = indexer(old) if old is not None else []
            after = indexer(new) if new is not None else []
            index = self._indexes[name]
            for value in after:
                if value not in before:
                    index.setdefault(value, set()).add(key)
            for value in before:
                if value not in after:
                    bucket = index.get(value)
                    if bucket is not None:
                        bucket.discard(key)
                        if not bucket:
                            del index[value]
        if new is None:
            self._cache.pop(key, None)

    def _notify(self, changes: builtins.list[Change]) -> None:
        for old, new in changes:
            for handler in list(self._handlers):
                try:
                    handler(old, new)
                except Exception:  # a bug in one handler (a mapper, say) must not stall the kind for all
                    obj = new if new is not None else old
                    log.exception("a handler of %s failed on %s", self.kind, ObjectKey.of(obj or {}))


def _version(obj: Any) -> str:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    return str(meta.get("resourceVersion") or "") if isinstance(meta, dict) else ""
