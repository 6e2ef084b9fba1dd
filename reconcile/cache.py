"""The shared cache: one informer per (kind, namespace, label selector), for all controllers.

The manager owns one `InformerCache`; controllers ask it for informers while they are wired,
then read from it while they reconcile. Reads are fast, read-only and possibly a little stale:
they are spelled `cache.get`/`cache.list`, never to be mistaken for a live `cluster.get`.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from reconcile.clock import SYSTEM_CLOCK, Clock
from reconcile.cluster import Cluster, Kind, Obj, ObjectKey
from reconcile.informer import Informer, Transform, drop_managed_fields


class InformerCache:
    def __init__(self, cluster: Cluster, *, clock: Clock = SYSTEM_CLOCK,
                 transform: Transform = drop_managed_fields) -> None:
        self.cluster, self.clock, self.transform = cluster, clock, transform
        self._informers: dict[tuple[Kind, str, str], Informer] = {}
        self._stop: threading.Event | None = None  # set once the cache runs
        self._lock = threading.Lock()

    def informer(self, kind: Kind, *, namespace: str = "", labels: Any = None) -> Informer:
        """The informer for this scope, created on first use (and started if the cache runs)."""
        scope = (kind, namespace, json.dumps(labels, sort_keys=True) if labels is not None else "")
        with self._lock:
            found = self._informers.get(scope)
            if found is not None:
                return found
            found = self._informers[scope] = Informer(self.cluster, kind, namespace=namespace, labels=labels,
                                                       transform=self.transform, clock=self.clock)
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
        threading.Thread(target=informer.run, args=(stop,), daemon=True, name=f"informer-{informer.kind.kind}").start()

    def wait_synced(self, timeout: float) -> bool:
        """Whether every informer finished its first list within `timeout` (real) seconds."""
        return all(informer.synced.wait(timeout) for informer in self.informers)

    def get(self, kind: Kind, key: ObjectKey) -> Obj | None:
        return self._cluster_wide(kind).get(key)

    def list(self, kind: Kind, namespace: str = "") -> list[Obj]:
        return self._cluster_wide(kind).list(namespace)

    def silence(self) -> float:
        """Seconds since the quietest informer last heard anything (event, bookmark or list)."""
        informers = self.informers
        if not informers:
            return 0.0
        return self.clock.monotonic() - min(informer.last_activity for informer in informers)

    def stop(self) -> None:
        for informer in self.informers:
            informer.wake()

    def _cluster_wide(self, kind: Kind) -> Informer:
        return self.informer(kind)
