"""The reconcile runtime's capacity on the embedded cluster.

  * writes/s: creates, then updates, of small ConfigMaps (target >= 5,000/s);
  * informer cache memory per object for 10k and 100k ConfigMaps, against their JSON size as
    the server lists them (managedFields included; the cache drops them)
    (target <= 2.5x), measured with tracemalloc around the cache's first list;
  * end-to-end throughput of a trivial controller (a change in, a reconcile done) with 1, 4
    and 16 workers (target >= 2,000 reconciles/s).
Run: `python bench/reconcile_bench.py` (or `make bench`). Exits non-zero if a target is missed.
"""

from __future__ import annotations

import gc
import json
import sys
import threading
import time
import tracemalloc
from typing import Any

from reconcile import Kind, ListResult, ObjectKey
from reconcile.cache import InformerCache
from reconcile.controller import Controller
from reconcile.embedded import EmbeddedCluster
from reconcile.informer import Informer
from reconcile.outcome import Done

CONFIGMAP = Kind("v1", "ConfigMap")


def configmap(i: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": f"settings-{i}", "namespace": f"team-{i % 20}",
                         "labels": {"app": f"app-{i % 50}", "tier": "backend"}},
            "data": {"LOG_LEVEL": "info", "REGION": "eu-west-1", "ENDPOINT": f"https://svc-{i}.example.com/api"}}


def cluster_with_namespaces() -> EmbeddedCluster:
    cluster = EmbeddedCluster()
    for i in range(20):
        cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"team-{i}"}})
    return cluster


def writes_per_second(count: int = 20_000) -> tuple[float, float]:
    cluster = cluster_with_namespaces()
    start = time.perf_counter()
    created = [cluster.create(configmap(i)) for i in range(count)]
    creates = count / (time.perf_counter() - start)
    start = time.perf_counter()
    for obj in created:
        cluster.update({**obj, "data": {**obj["data"], "LOG_LEVEL": "debug"}})
    updates = count / (time.perf_counter() - start)
    return creates, updates


class OverTheWire:
    """The embedded cluster, but lists arrive decoded from JSON text, as from a real API server:
    otherwise the cached objects would share their strings with the embedded store, and the
    cache would look smaller than it is."""

    def __init__(self, cluster: EmbeddedCluster) -> None:
        self.cluster = cluster

    def list(self, kind: Kind, **options: Any) -> ListResult:
        result = self.cluster.list(kind, **options)
        return ListResult(json.loads(json.dumps(result.items)), result.resource_version)


def cache_memory(count: int) -> tuple[float, float]:
    """(bytes per cached object, ratio to the object's compact JSON size)."""
    cluster = cluster_with_namespaces()
    for i in range(count):
        cluster.create(configmap(i))
    listed = cluster.list(CONFIGMAP).items
    json_size = sum(len(json.dumps(o, separators=(",", ":"))) for o in listed) / count
    del listed
    informer = Informer(OverTheWire(cluster), CONFIGMAP)  # type: ignore[arg-type]
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    informer._relist()  # the first list, as run() does it
    gc.collect()
    used = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert len(informer) == count
    per_object = used / count
    return per_object, per_object / json_size


def controller_throughput(workers: int, count: int = 20_000) -> float:
    cluster = cluster_with_namespaces()
    done = threading.Event()
    reconciled = 0
    lock = threading.Lock()

    def reconcile(key: ObjectKey) -> Done:
        nonlocal reconciled
        with lock:
            reconciled += 1
            if reconciled == count:
                done.set()
        return Done()

    controller = Controller("bench", CONFIGMAP, reconcile, workers=workers)
    cache = InformerCache(cluster)
    controller.bind(cache)
    stop = threading.Event()
    cache.start(stop)
    cache.wait_synced(10)
    controller.run(stop)
    start = time.perf_counter()
    for i in range(count):
        cluster.create(configmap(i))
    finished = done.wait(120)
    elapsed = time.perf_counter() - start
    stop.set()
    controller.queue.shutdown()
    cache.stop()
    if not finished:
        raise SystemExit(f"only {reconciled} of {count} reconciles finished")
    return count / elapsed


def main() -> int:
    failures = []
    creates, updates = writes_per_second()
    print(f"embedded cluster writes: {creates:,.0f} creates/s, {updates:,.0f} updates/s (target >= 5,000)")
    if min(creates, updates) < 5_000:
        failures.append("embedded cluster below 5,000 writes/s")
    for count in (10_000, 100_000):
        per_object, ratio = cache_memory(count)
        print(f"informer cache, {count:,} ConfigMaps: {per_object:,.0f} bytes/object, "
              f"{ratio:.2f}x JSON (target <= 2.5)")
        if ratio > 2.5:
            failures.append(f"cache memory {ratio:.2f}x JSON at {count:,} objects")
    for workers in (1, 4, 16):
        rate = controller_throughput(workers)
        print(f"trivial controller, {workers:>2} worker(s): {rate:,.0f} reconciles/s (target >= 2,000)")
        if rate < 2_000:
            failures.append(f"{rate:,.0f} reconciles/s with {workers} workers")
    for failure in failures:
        print(f"MISSED: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
