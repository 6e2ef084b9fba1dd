"""The shared cache: one informer per scope (kind, namespace, label selector, metadata only),
shared by all controllers, and stopped when the last of its users lets go of it.

Users `acquire` an informer and `release` it: a controller's watches hold theirs for as long as
the controller is bound (reconcile.controller), a MapController's parent selection for as long
as some parent selects it. When the last user releases one, its watch ends, its thread ends, its
handlers, indexes and objects are dropped and the cache forgets it: a later `acquire` starts a
fresh one (a new list). An informer only looked up (`informer`, or a read of a kind nobody
holds) counts no user: it is kept until some user of its scope releases it, or for the cache's
life.

The manager owns one `InformerCache`; controllers ask it for informers while they are wired,
then read from it while they reconcile. Reads are fast, read-only and possibly a little stale:
they are spelled `cache.get`/`cache.list`, never to be mistaken for a live `cluster.get`.

A controller that watches only a selection of a kind (a label selector the server applies) gets
objects of that kind through `narrowed(...)`: a view of the same cache whose `get` goes to the
selecting informer, never to a whole-kind one (which would bring the whole kind into memory).
"""

from __future__ import annotations

import builtins
import copy
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reconcile.clock import SYSTEM_CLOCK, Clock
from reconcile.cluster import Cluster, Kind, Obj, ObjectKey
from reconcile.errors import ReconcileError
from reconcile.informer import Informer, Transform, drop_managed_fields
from reconcile.informer import metadata_only as keep_metadata_only
from reconcile.selectors import parse_labels

Scope = tuple[Kind, str, str, bool]  # kind, namespace, label selector (canonical text), metadata only
Selection = Callable[[str], Sequence[Informer]]  # namespace -> the informers holding what is read there


@dataclass
class _Shared:
    """What every view of one cache shares: its informers, their threads and whether it runs."""

    informers: dict[Scope, Informer] = field(default_factory=dict)
    users: dict[Scope, int] = field(default_factory=dict)  # acquires not yet released
    threads: list[threading.Thread] = field(default_factory=list)
    stop: threading.Event | None = None  # set once the cache runs
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass(frozen=True)
class _Route:
    """How a narrowed view gets an object of one kind (`gets`): from `informer`, confirming with a live
    read what it does not hold (`confirm`), and reading it live when it holds metadata only."""

    informer: Informer
    confirm: bool


class InformerCache:
    def __init__(self, cluster: Cluster, *, clock: Clock = SYSTEM_CLOCK,
                 transform: Transform = drop_managed_fields, read_timeout: float = 30.0) -> None:
        self.cluster, self.clock, self.transform, self.read_timeout = cluster, clock, transform, read_timeout
        self._shared = _Shared()
        self._gets: dict[Kind, _Route] = {}  # see narrowed
        self._lists: dict[Kind, Selection] = {}
        self._indexes: dict[Kind, Informer] = {}

    def acquire(self, kind: Kind, *, namespace: str = "", labels: Any = None,
                metadata_only: bool = False) -> Informer:
        """The informer for this scope (see `informer`), with one more user: it runs at least until
        this user gives it back with `release`."""
        return self._lookup(kind, namespace, labels, metadata_only, use=True)

    def release(self, informer: Informer) -> None:
        """One user fewer for `informer` (acquired with `acquire`). The last one's release stops it:
        its watch is closed, its thread ends, its handlers, indexes and objects are dropped, and the
        cache forgets it. Releasing an informer the cache no longer holds does nothing."""
        shared = self._shared
        with shared.lock:
            scope = next((scope for scope, held in shared.informers.items() if held is informer), None)
            if scope is None:
                return
            left = shared.users.get(scope, 0) - 1
            if left > 0:
                shared.users[scope] = left
                return
            shared.users.pop(scope, None)
            del shared.informers[scope]
        informer.close()

    def informer(self, kind: Kind, *, namespace: str = "", labels: Any = None,
                 metadata_only: bool = False) -> Informer:
        """The informer for this scope, created on first use (and started if the cache runs); a
        look-up, counting no user (see the module docstring).
        Selectors are compared by meaning: `{"matchLabels": {"a": "b"}}` and `"a=b"` share one.

        `metadata_only` caches only apiVersion, kind and metadata: for kinds a controller only
        needs to find (the children it owns, objects it maps to keys), at a fraction of the memory;
        where the cluster serves it, only metadata crosses the wire (informer.MetadataSource)."""
        return self._lookup(kind, namespace, labels, metadata_only, use=False)

    def _lookup(self, kind: Kind, namespace: str, labels: Any, metadata_only: bool, *, use: bool) -> Informer:
        selector = parse_labels(labels)
        scope = (kind, namespace, str(selector), metadata_only)
        shared = self._shared
        with shared.lock:
            if use:
                shared.users[scope] = shared.users.get(scope, 0) + 1
            found = shared.informers.get(scope)
            if found is not None:
                return found
            transform = keep_metadata_only if metadata_only else self.transform
            found = shared.informers[scope] = Informer(
                self.cluster, kind, namespace=namespace, labels=str(selector) if not selector.empty else None,
                transform=transform, clock=self.clock, metadata=metadata_only)
            stop = shared.stop
        if stop is not None:
            self._run(found, stop)
        return found

    def narrowed(self, gets: Mapping[Kind, Informer] | None = None, *, confirm: bool = True,
                 lists: Mapping[Kind, Selection] | None = None,
                 indexes: Mapping[Kind, Informer] | None = None) -> InformerCache:
        """A view of this cache (same informers, same threads) whose reads of some kinds go to the
        informers selecting what the caller reads, rather than to a whole-kind informer (which
        would hold the whole kind in memory):

        * `gets`: `get` of the kind reads this informer. With `confirm`, an object a selecting
          informer does not hold is read live: it may exist outside the selection, having just
          left it, and a caller that must see it leave (to let go of it) gets it. An informer
          holding metadata only answers with the full object read live: the selection is decided
          on metadata, and only what is asked for is read in full.
        * `lists`: `get` and `list` of the kind in a namespace read the union of the informers
          `lists[kind](namespace)` names (a caller that only ever reads objects it selected: a
          MapController reading its parents' inputs). An object none of them holds is absent.
        * `indexes`: `by_index` of the kind reads this informer.
        Other reads see the whole kind, as they do through the cache itself."""
        view = copy.copy(self)
        view._gets = {**self._gets, **{kind: _Route(informer, confirm and _narrow(informer))
                                       for kind, informer in (gets or {}).items()}}
        view._lists = {**self._lists, **(lists or {})}
        view._indexes = {**self._indexes, **(indexes or {})}
        return view

    @property
    def informers(self) -> list[Informer]:
        with self._shared.lock:
            return list(self._shared.informers.values())

    def start(self, stop: threading.Event) -> None:
        """Run every informer on its own thread until `stop` is set (and any created later)."""
        with self._shared.lock:
            self._shared.stop = stop
        for informer in self.informers:
            self._run(informer, stop)

    def _run(self, informer: Informer, stop: threading.Event) -> None:
        thread = threading.Thread(target=informer.run, args=(stop,), daemon=True, name=f"informer-{informer.kind.kind}")
        with self._shared.lock:
            # the threads of released informers end on their own: only the live ones are kept
            self._shared.threads = [*(t for t in self._shared.threads if t.is_alive()), thread]
        thread.start()

    def wait_synced(self, timeout: float) -> bool:
        """Whether every informer finished its first list within `timeout` (real) seconds."""
        return all(informer.synced.wait(timeout) for informer in self.informers)

    def get(self, kind: Kind, key: ObjectKey, *, metadata_only: bool = False) -> Obj | None:
        """The cached object (shared: never change it), or None; see `_reader` (and `narrowed`)."""
        route = self._gets.get(kind)
        if route is not None:
            found = self._synced(route.informer, kind).get(key)
            if found is None:
                return self.cluster.get(kind, key) if route.confirm else None
            if metadata_only or not route.informer.holds_metadata_only:
                return found
            return self.cluster.get(kind, key)  # selected on its metadata: read in full
        selection = self._lists.get(kind)
        if selection is not None:
            for informer in selection(key.namespace):
                found = self._synced(informer, kind).get(key)
                if found is not None:
                    return found
            return None
        return self._reader(kind, metadata_only).get(key)

    def list(self, kind: Kind, namespace: str = "", *, metadata_only: bool = False) -> list[Obj]:
        """The cached objects of `kind` (in `namespace`, or everywhere); see `_reader` (and `narrowed`)."""
        selection = self._lists.get(kind)
        if selection is None:
            return self._reader(kind, metadata_only).list(namespace)
        informers = selection(namespace)
        if len(informers) == 1:
            return self._synced(informers[0], kind).list(namespace)
        union: dict[ObjectKey, Obj] = {}
        for informer in informers:
            for obj in self._synced(informer, kind).list(namespace):
                union.setdefault(ObjectKey.of(obj), obj)  # one object selected twice is listed once
        return builtins.list(union.values())

    def by_index(self, kind: Kind, index: str, value: str, *, metadata_only: bool = False) -> builtins.list[Obj]:
        """The cached objects of `kind` whose index `index` holds `value` ("owner" and "namespace"
        are built in: the children of an owner uid, say); see `_reader` (and `narrowed`)."""
        routed = self._indexes.get(kind)
        if routed is not None:
            return self._synced(routed, kind).by_index(index, value)
        return self._reader(kind, metadata_only).by_index(index, value)

    def stop(self, timeout: float = 5.0) -> bool:
        """After the `stop` event given to `start` is set: end every watch and wait up to `timeout`
        (real) seconds for the informer threads; False if one is still running."""
        for informer in self.informers:
            informer.wake()
        with self._shared.lock:
            threads = list(self._shared.threads)
            self._shared.threads.clear()
        deadline = time.monotonic() + timeout
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return not any(thread.is_alive() for thread in threads)

    def _reader(self, kind: Kind, metadata_only: bool) -> Informer:
        """The cluster-wide informer of `kind`, synced. Like controller-runtime's cache, a read of a
        kind nothing watches yet starts an informer for it, and waits (up to `read_timeout` real
        seconds) for its first list: an unsynced cache would answer "absent" for objects that
        exist. Raises ReconcileError when the cache is not running or the list does not come."""
        return self._synced(self.informer(kind, metadata_only=metadata_only), kind)

    def _synced(self, informer: Informer, kind: Kind) -> Informer:
        if informer.synced.is_set():
            return informer
        with self._shared.lock:
            running = self._shared.stop is not None
        if not running:
            raise ReconcileError(f"the cache is not started: cannot read {kind} from it")
        if not informer.synced.wait(self.read_timeout):
            raise ReconcileError(f"the cache of {kind} has not synced within {self.read_timeout:g}s")
        return informer


def _narrow(informer: Informer) -> bool:
    """Whether `informer` holds less than its whole kind (its namespace aside)."""
    return informer.labels is not None or informer.holds_metadata_only
