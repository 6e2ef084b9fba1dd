"""The shared cache: one informer per scope (kind, namespace, label selector, metadata only),
shared by all controllers.

The manager owns one `InformerCache`; controllers ask it for informers while they are wired,
then read from it while they reconcile. Reads are fast, read-only and possibly a little stale:
they are spelled `cache.get`/`cache.list`, never to be mistaken for a live `cluster.get`.
"""

from __future__ import annotations

import builtins
import json
import threading
import time
from typing import Any

from reconcile.clock import SYSTEM_CLOCK, Clock
from reconcile.cluster import Cluster, Kind, Obj, ObjectKey
from reconcile.errors import ReconcileError
from reconcile.informer import Informer, Transform, drop_managed_fields
from reconcile.informer import metadata_only as keep_metadata_only


class InformerCache:
    def __init__(self, cluster: Cluster, *, clock: Clock = SYSTEM_CLOCK,
                 transform: Transform = drop_managed_fields, read_timeout: float = 30.0) -> None:
        self.cluster, self.clock, self.transform, self.read_timeout = cluster, clock, transform, read_timeout
        self._informers: dict[tuple[Kind, str, str, bool], Informer] = {}
        self._threads: list[threading.Thread] = []
        self._stop: threading.Event | None = None  # set once the cache runs
        self._lock = threading.Lock()

    def informer(self, kind: Kind, *, namespace: str = "", labels: Any = None,
                 metadata_only: bool = False) -> Informer:
        """The informer for this scope, created on first use (and started if the cache runs).

        `metadata_only` caches only apiVersion, kind and metadata: for kinds a controller only
        needs to find (the children it owns, objects it maps to keys), at a fraction of the memory."""
        scope = (kind, namespace, json.dumps(labels, sort_keys=True) if labels is not None else "", metadata_only)
        with self._lock:
            found = self._informers.get(scope)
            if found is not None:
                return found
            transform = keep_metadata_only if metadata_only else self.transform
            found = self._informers[scope] = Informer(self.cluster, kind, namespace=namespace, labels=labels,
                                                       transform=transform, clock=self.clock)
            stop = self._stop
        if stop is not None:
            self._run(found, stop)
        return found

    @property
    def informers(self) -> list[Informer]:
        with self._lock:
            return list(self._informers.values())

    def start(self, stop: threading.Event) -> None:
        """Run every informer on its own thread until `stop` is set (and any created later)."""
        with self._lock:
            self._stop = stop
        for informer in self.informers:
            self._run(informer, stop)

    def _run(self, informer: Informer, stop: threading.Event) -> None:
        thread = threading.Thread(target=informer.run, args=(stop,), daemon=True, name=f"informer-{informer.kind.kind}")
        with self._lock:
            self._threads.append(thread)
        thread.start()

    def wait_synced(self, timeout: float) -> bool:
        """Whether every informer finished its first list within `timeout` (real) seconds."""
        return all(informer.synced.wait(timeout) for informer in self.informers)

    def get(self, kind: Kind, key: ObjectKey, *, metadata_only: bool = False) -> Obj | None:
        """The cached object (shared: never change it), or None; see `_reader`."""
        return self._reader(kind, metadata_only).get(key)

    def list(self, kind: Kind, namespace: str = "", *, metadata_only: bool = False) -> list[Obj]:
        """The cached objects of `kind` (in `namespace`, or everywhere); see `_reader`."""
        return self._reader(kind, metadata_only).list(namespace)

    def by_index(self, kind: Kind, index: str, value: str, *, metadata_only: bool = False) -> builtins.list[Obj]:
        """The cached objects of `kind` whose index `index` holds `value` ("owner" and "namespace"
        are built in: the children of an owner uid, say); see `_reader`."""
        return self._reader(kind, metadata_only).by_index(index, value)

    def stop(self, timeout: float = 5.0) -> bool:
        """After the `stop` event given to `start` is set: end every watch and wait up to `timeout`
        (real) seconds for the informer threads; False if one is still running."""
        for informer in self.informers:
            informer.wake()
        with self._lock:
            threads, self._threads = self._threads, []
        deadline = time.monotonic() + timeout
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return not any(thread.is_alive() for thread in threads)

    def _reader(self, kind: Kind, metadata_only: bool) -> Informer:
        """The cluster-wide informer of `kind`, synced. Like controller-runtime's cache, a read of a
        kind nothing watches yet starts an informer for it, and waits (up to `read_timeout` real
        seconds) for its first list: an unsynced cache would answer "absent" for objects that
        exist. Raises ReconcileError when the cache is not running or the list does not come."""
        informer = self.informer(kind, metadata_only=metadata_only)
        if informer.synced.is_set():
            return informer
        with self._lock:
            running = self._stop is not None
        if not running:
            raise ReconcileError(f"the cache is not started: cannot read {kind} from it")
        if not informer.synced.wait(self.read_timeout):
            raise ReconcileError(f"the cache of {kind} has not synced within {self.read_timeout:g}s")
        return informer
