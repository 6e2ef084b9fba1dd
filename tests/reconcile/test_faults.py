"""Fault tests of the runtime on the embedded cluster: contention and many writers at once.

Watch cuts, expired resourceVersions and failing reconcilers are in test_informer.py and
test_controller.py; leader hand-over and SIGTERM draining are in test_manager.py.
"""

from __future__ import annotations

import threading
from typing import Any

from reconcile import Conflict, Kind, ObjectKey
from reconcile.embedded import EmbeddedCluster
from reconcile.informer import Informer
from tests.reconcile.support import configmap
from tests.waiting import eventually

CONFIGMAP = Kind("v1", "ConfigMap")
KEY = ObjectKey("default", "counter")


def increment(cluster: EmbeddedCluster, field: str) -> int:
    """Read, change, write; on Conflict read again. Returns how many conflicts it met."""
    conflicts = 0
    while True:
        current = cluster.get(CONFIGMAP, KEY)
        assert current is not None
        data = dict(current.get("data") or {})
        data[field] = str(int(data.get(field, "0")) + 1)
        try:
            cluster.update({**current, "data": data})
            return conflicts
        except Conflict:
            conflicts += 1


def test_a_storm_of_conflicting_writers_converges_without_losing_a_write() -> None:
    cluster = EmbeddedCluster()
    cluster.create(configmap("counter"))
    writers, rounds = 8, 150
    conflicts: list[int] = []
    barrier = threading.Barrier(writers)

    def writer(index: int) -> None:
        barrier.wait()
        met = 0
        for _ in range(rounds):
            met += increment(cluster, "total")
            met += increment(cluster, f"w{index}")
        conflicts.append(met)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    final = cluster.get(CONFIGMAP, KEY)
    assert final is not None
    assert final["data"]["total"] == str(writers * rounds)
    assert all(final["data"][f"w{i}"] == str(rounds) for i in range(writers))
    assert len(conflicts) == writers


def test_an_informer_sees_every_version_a_storm_of_writers_leaves_behind() -> None:
    cluster = EmbeddedCluster()
    cluster.create(configmap("counter"))
    informer = Informer(cluster, CONFIGMAP)
    versions: list[int] = []
    informer.add_handler(lambda old, new: versions.append(int(new["metadata"]["resourceVersion"]))
                         if new is not None else None)
    stop = threading.Event()
    runner = threading.Thread(target=informer.run, args=(stop,), daemon=True)
    runner.start()
    assert informer.synced.wait(5)

    def writer(_: Any) -> None:
        for _ in range(100):
            increment(cluster, "total")

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    try:
        eventually(lambda: (informer.get(KEY) or {}).get("data", {}).get("total") == "400")
        assert versions == sorted(versions) and len(versions) == len(set(versions)) == 401  # create + 400 updates
    finally:
        stop.set()
        informer.wake()
        runner.join(5)
