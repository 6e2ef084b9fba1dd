"""Finalizers on the embedded cluster: add and remove without lost updates, and the escape hatches."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from reconcile import Conflict, FakeClock, Kind, NotFound, Obj, ObjectKey, ReconcileError
from reconcile import finalizers as fin
from reconcile.embedded import EmbeddedCluster

CONFIGMAP = Kind("v1", "ConfigMap")
NAMESPACE = Kind("v1", "Namespace")
OURS, THEIRS = "porchkit.dev/cleanup", "example.com/other"
KEY = ObjectKey("default", "a")


@pytest.fixture
def cluster() -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(clock=FakeClock()) as cluster:
        yield cluster


def configmap(name: str = "a", *, finalizers: list[str] | None = None, annotations: dict[str, str] | None = None,
              namespace: str = "default") -> Obj:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if finalizers:
        meta["finalizers"] = finalizers
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}}


def stored(cluster: EmbeddedCluster, key: ObjectKey = KEY) -> Obj:
    found = cluster.get(CONFIGMAP, key)
    assert found is not None
    return found


class InterleavingCluster:
    """Delegates to a real cluster, but the first `times` updates of the object lose a race: just
    before each, another writer changes the object (a label and one of its own finalizers)."""

    def __init__(self, inner: EmbeddedCluster, times: int = 1) -> None:
        self.inner, self.times = inner, times

    def update(self, obj: Obj) -> Obj:
        if self.times > 0:
            self.times -= 1
            other = self.inner.get(Kind.of(obj), ObjectKey.of(obj))
            assert other is not None
            other["metadata"].setdefault("labels", {})["bumped"] = str(self.times)
            if not fin.is_deleting(other) and THEIRS not in other["metadata"].get("finalizers", []):
                other["metadata"]["finalizers"] = [*other["metadata"].get("finalizers", []), THEIRS]
            self.inner.update(other)
        return self.inner.update(obj)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_ensure_adds_the_finalizer_and_keeps_the_others(cluster: EmbeddedCluster) -> None:
    created = cluster.create(configmap(finalizers=[THEIRS]))
    out = fin.ensure(cluster, CONFIGMAP, created, OURS)
    assert stored(cluster)["metadata"]["finalizers"] == [THEIRS, OURS] == out["metadata"]["finalizers"]
    assert created["metadata"]["finalizers"] == [THEIRS]  # the caller's object is untouched


def test_ensure_makes_no_write_when_the_finalizer_is_there(cluster: EmbeddedCluster) -> None:
    created = cluster.create(configmap(finalizers=[OURS]))
    fin.ensure(cluster, CONFIGMAP, created, OURS)
    assert stored(cluster)["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


def test_ensure_never_adds_to_an_object_being_deleted(cluster: EmbeddedCluster) -> None:
    cluster.create(configmap(finalizers=[THEIRS]))
    deleting = cluster.delete(CONFIGMAP, KEY)
    assert deleting is not None
    out = fin.ensure(cluster, CONFIGMAP, deleting, OURS)
    assert stored(cluster)["metadata"]["finalizers"] == [THEIRS] == out["metadata"]["finalizers"]


def test_ensure_survives_a_concurrent_writer_between_read_and_write(cluster: EmbeddedCluster) -> None:
    created = cluster.create(configmap())
    out = fin.ensure(InterleavingCluster(cluster), CONFIGMAP, created, OURS)
    now = stored(cluster)
    assert now["metadata"]["finalizers"] == [THEIRS, OURS] == out["metadata"]["finalizers"]
    assert now["metadata"]["labels"] == {"bumped": "0"}  # the other writer's change survives too


def test_ensure_gives_up_with_conflict_after_its_attempts(cluster: EmbeddedCluster) -> None:
    created = cluster.create(configmap())
    racing = InterleavingCluster(cluster, times=3)
    with pytest.raises(Conflict):
        fin.ensure(racing, CONFIGMAP, created, OURS, attempts=3)
    assert OURS not in stored(cluster)["metadata"]["finalizers"]


def test_ensure_on_an_object_that_is_gone_raises_not_found(cluster: EmbeddedCluster) -> None:
    created = cluster.create(configmap())
    cluster.delete(CONFIGMAP, KEY)
    with pytest.raises(NotFound):
        fin.ensure(cluster, CONFIGMAP, created, OURS)


def test_ensure_respects_the_release_annotation(cluster: EmbeddedCluster) -> None:
    created = cluster.create(configmap(annotations={fin.RELEASE_ANNOTATION: f"{THEIRS}, {OURS}"}))
    fin.ensure(cluster, CONFIGMAP, created, OURS)
    assert "finalizers" not in stored(cluster)["metadata"]


def test_release_removes_only_our_finalizer(cluster: EmbeddedCluster) -> None:
    created = cluster.create(configmap(finalizers=[OURS, THEIRS]))
    out = fin.release(cluster, CONFIGMAP, created, OURS)
    assert out is not None and out["metadata"]["finalizers"] == [THEIRS] == stored(cluster)["metadata"]["finalizers"]


def test_releasing_the_last_finalizer_of_a_deleting_object_lets_it_go(cluster: EmbeddedCluster) -> None:
    cluster.create(configmap(finalizers=[OURS]))
    deleting = cluster.delete(CONFIGMAP, KEY)
    assert deleting is not None and fin.is_deleting(deleting)
    assert fin.release(cluster, CONFIGMAP, deleting, OURS) is None
    assert cluster.get(CONFIGMAP, KEY) is None


def test_release_makes_no_write_when_the_finalizer_is_absent(cluster: EmbeddedCluster) -> None:
    created = cluster.create(configmap(finalizers=[THEIRS]))
    assert fin.release(cluster, CONFIGMAP, created, OURS) == created
    assert stored(cluster)["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


def test_release_survives_a_concurrent_writer_between_read_and_write(cluster: EmbeddedCluster) -> None:
    cluster.create(configmap(finalizers=[OURS, THEIRS]))
    deleting = cluster.delete(CONFIGMAP, KEY)
    assert deleting is not None
    out = fin.release(InterleavingCluster(cluster), CONFIGMAP, deleting, OURS)
    now = stored(cluster)
    assert out is not None and now["metadata"]["finalizers"] == [THEIRS]
    assert now["metadata"]["labels"] == {"bumped": "0"}


def test_release_leaves_a_recreated_object_of_the_same_name_alone(cluster: EmbeddedCluster) -> None:
    old = cluster.create(configmap(finalizers=[OURS]))
    cluster.delete(CONFIGMAP, KEY)
    cluster.update({**stored(cluster), "metadata": {**stored(cluster)["metadata"], "finalizers": []}})
    cluster.create(configmap(finalizers=[OURS]))
    assert fin.release(cluster, CONFIGMAP, old, OURS) is None  # old resourceVersion: Conflict, re-read: new uid
    assert stored(cluster)["metadata"]["finalizers"] == [OURS]


def test_release_of_an_object_that_is_gone_returns_none(cluster: EmbeddedCluster) -> None:
    created = cluster.create(configmap(finalizers=[OURS]))
    cluster.update({**created, "metadata": {**created["metadata"], "finalizers": []}})
    cluster.delete(CONFIGMAP, KEY)
    assert fin.release(cluster, CONFIGMAP, created, OURS) is None


@pytest.mark.parametrize(("value", "expected"), [
    ("true", True), ("*", True), (OURS, True), (f"{THEIRS},{OURS}", True), (f" {OURS} ", True),
    (THEIRS, False), ("false", False), ("", False),
])
def test_should_release_reads_the_escape_annotation(value: str, expected: bool) -> None:
    obj = configmap(finalizers=[OURS], annotations={fin.RELEASE_ANNOTATION: value})
    assert fin.should_release(obj, OURS) is expected


def test_should_release_is_false_once_the_finalizer_is_gone() -> None:
    assert not fin.should_release(configmap(annotations={fin.RELEASE_ANNOTATION: "true"}), OURS)


def test_a_controller_drops_its_finalizer_without_cleanup_when_an_operator_asks(cluster: EmbeddedCluster) -> None:
    cluster.create(configmap(finalizers=[OURS]))
    cluster.delete(CONFIGMAP, KEY)
    cluster.patch(CONFIGMAP, KEY, {"metadata": {"annotations": {fin.RELEASE_ANNOTATION: "true"}}})
    cleaned: list[str] = []
    obj = stored(cluster)
    if fin.is_deleting(obj):  # what a reconcile does
        if not fin.should_release(obj, OURS):
            cleaned.append("cleanup")
        fin.release(cluster, CONFIGMAP, obj, OURS)
    assert cleaned == [] and cluster.get(CONFIGMAP, KEY) is None


def test_overdue_counts_from_the_deletion_timestamp() -> None:
    obj = configmap()
    obj["metadata"]["deletionTimestamp"] = "2023-11-14T22:13:20Z"  # 1_700_000_000
    assert not fin.overdue(obj, 60, now=1_700_000_059.0)
    assert fin.overdue(obj, 60, now=1_700_000_060.0)
    obj["metadata"]["deletionTimestamp"] = "2023-11-14T22:13:20.500000Z"
    assert not fin.overdue(obj, 60, now=1_700_000_060.0)


def test_overdue_is_false_for_live_or_odd_objects() -> None:
    assert not fin.overdue(configmap(), 0, now=2e9)
    odd = configmap()
    odd["metadata"]["deletionTimestamp"] = "yesterday"
    assert not fin.overdue(odd, 0, now=2e9)


def test_overdue_on_an_object_the_cluster_is_deleting() -> None:
    clock = FakeClock()
    with EmbeddedCluster(clock=clock) as timed:
        timed.create(configmap(finalizers=[OURS]))
        deleting = timed.delete(CONFIGMAP, KEY)
        assert deleting is not None
        clock.advance(299)
        assert not fin.overdue(deleting, 300, now=clock.time())
        clock.advance(1)
        assert fin.overdue(deleting, 300, now=clock.time())


def test_release_all_frees_every_object_that_holds_the_finalizer(cluster: EmbeddedCluster) -> None:
    cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
    cluster.create(configmap("a", finalizers=[OURS, THEIRS]))
    cluster.create(configmap("b", finalizers=[OURS]))
    cluster.create(configmap("c", finalizers=[THEIRS]))
    cluster.create(configmap("d", finalizers=[OURS], namespace="other"))
    cluster.delete(CONFIGMAP, ObjectKey("default", "b"))
    assert fin.release_all(cluster, CONFIGMAP, OURS, namespace="default") == 2
    assert stored(cluster, ObjectKey("default", "a"))["metadata"]["finalizers"] == [THEIRS]
    assert cluster.get(CONFIGMAP, ObjectKey("default", "b")) is None  # was Terminating: now gone
    assert stored(cluster, ObjectKey("other", "d"))["metadata"]["finalizers"] == [OURS]
    assert fin.release_all(cluster, CONFIGMAP, OURS) == 1  # every namespace
    assert "finalizers" not in stored(cluster, ObjectKey("other", "d"))["metadata"]


def test_release_all_tries_every_object_and_then_reports_failures(cluster: EmbeddedCluster) -> None:
    cluster.create(configmap("a", finalizers=[OURS]))
    cluster.create(configmap("b", finalizers=[OURS]))

    class FailsOnA(InterleavingCluster):
        def update(self, obj: Obj) -> Obj:
            if obj["metadata"]["name"] == "a":
                raise Conflict("always stale")
            return self.inner.update(obj)

    with pytest.raises(ReconcileError, match="from 1 of 2"):
        fin.release_all(FailsOnA(cluster), CONFIGMAP, OURS)
    assert "finalizers" not in stored(cluster, ObjectKey("default", "b"))["metadata"]
