"""EventRecorder on the embedded cluster: Events as client-go writes them, aggregated, rate limited."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from reconcile import FakeClock, Kind, NotFound, Obj, ObjectKey
from reconcile.embedded import EmbeddedCluster
from reconcile.errors import ServerError
from reconcile.events import EVENT, MAX_MESSAGE, EventLimits, EventRecorder

CONFIGMAP = Kind("v1", "ConfigMap")
NAMESPACE = Kind("v1", "Namespace")
KEY = ObjectKey("default", "a")


def events(cluster: Any, namespace: str = "default") -> list[Obj]:
    return sorted(cluster.list(EVENT, namespace=namespace).items, key=lambda e: e["metadata"]["name"])


def make_configmap(cluster: EmbeddedCluster, name: str = "a") -> Obj:
    return cluster.create({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": name, "namespace": "default"}})


def test_an_event_describes_its_object_as_client_go_writes_it(cluster: EmbeddedCluster, clock: FakeClock) -> None:
    cm = make_configmap(cluster)
    EventRecorder(cluster, "porchkit-test", clock=clock, instance="pod-1").record(
        CONFIGMAP, KEY, "Warning", "SyncError", "Sync error: boom")
    [event] = events(cluster)
    assert event["involvedObject"] == {"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "namespace": "default",
                                       "uid": cm["metadata"]["uid"]}
    assert {k: event[k] for k in ("type", "reason", "message", "count", "firstTimestamp", "lastTimestamp",
                                  "source", "reportingComponent", "reportingInstance")} == {
        "type": "Warning", "reason": "SyncError", "message": "Sync error: boom", "count": 1,
        "firstTimestamp": "2023-11-14T22:13:20Z", "lastTimestamp": "2023-11-14T22:13:20Z",
        "source": {"component": "porchkit-test", "host": "pod-1"},
        "reportingComponent": "porchkit-test", "reportingInstance": "pod-1"}
    assert event["metadata"]["name"].startswith("a.")


def test_an_event_about_a_missing_object_is_still_written_without_uid(cluster: EmbeddedCluster,
                                                                      clock: FakeClock) -> None:
    EventRecorder(cluster, "c", clock=clock).record(CONFIGMAP, ObjectKey("default", "gone"), "Normal", "Deleted", "x")
    [event] = events(cluster)
    assert "uid" not in event["involvedObject"] and event["involvedObject"]["name"] == "gone"


def test_a_repeated_event_bumps_the_count_instead_of_writing_another(cluster: EmbeddedCluster,
                                                                     clock: FakeClock) -> None:
    make_configmap(cluster)
    recorder = EventRecorder(cluster, "c", clock=clock)
    recorder.record(CONFIGMAP, KEY, "Warning", "SyncError", "boom")
    clock.advance(90)
    recorder.record(CONFIGMAP, KEY, "Warning", "SyncError", "boom")
    recorder.record(CONFIGMAP, KEY, "Warning", "SyncError", "other message")
    first, second = events(cluster)
    assert (first["message"], first["count"], first["lastTimestamp"]) == ("boom", 2, "2023-11-14T22:14:50Z")
    assert first["firstTimestamp"] == "2023-11-14T22:13:20Z"
    assert (second["message"], second["count"]) == ("other message", 1)


def test_a_repeat_whose_event_expired_writes_a_new_one_carrying_the_count(cluster: EmbeddedCluster,
                                                                         clock: FakeClock) -> None:
    recorder = EventRecorder(cluster, "c", clock=clock)
    recorder.record(CONFIGMAP, KEY, "Normal", "Synced", "ok")
    [old] = events(cluster)
    cluster.delete(EVENT, ObjectKey("default", old["metadata"]["name"]))
    recorder.record(CONFIGMAP, KEY, "Normal", "Synced", "ok")
    [new] = events(cluster)
    assert new["count"] == 2 and new["metadata"]["name"] != old["metadata"]["name"]


def test_events_per_object_are_rate_limited_by_a_token_bucket(cluster: EmbeddedCluster, clock: FakeClock) -> None:
    recorder = EventRecorder(cluster, "c", clock=clock, limits=EventLimits(burst=3, refill_seconds=60))
    for i in range(5):
        recorder.record(CONFIGMAP, KEY, "Warning", "Failed", f"attempt {i}")
    recorder.record(CONFIGMAP, ObjectKey("default", "b"), "Warning", "Failed", "another object has its own bucket")
    assert [e["message"] for e in events(cluster) if e["involvedObject"]["name"] == "a"] == [
        "attempt 0", "attempt 1", "attempt 2"]
    assert len(events(cluster)) == 4
    clock.advance(59)
    recorder.record(CONFIGMAP, KEY, "Warning", "Failed", "still limited")
    clock.advance(1)
    recorder.record(CONFIGMAP, KEY, "Warning", "Failed", "one token refilled")
    recorder.record(CONFIGMAP, KEY, "Warning", "Failed", "and spent")
    assert [e["message"] for e in events(cluster)][3:] == ["one token refilled", "another object has its own bucket"]


def test_the_default_limits_are_client_gos() -> None:
    assert EventLimits() == EventLimits(burst=25, refill_seconds=300.0, tracked=4096)
    with pytest.raises(ValueError, match="burst >= 1"):
        EventLimits(burst=0)


def test_repeats_spend_tokens_too(cluster: EmbeddedCluster, clock: FakeClock) -> None:
    recorder = EventRecorder(cluster, "c", clock=clock, limits=EventLimits(burst=2, refill_seconds=300))
    for _ in range(4):
        recorder.record(CONFIGMAP, KEY, "Warning", "Failed", "same")
    [event] = events(cluster)
    assert event["count"] == 2


def test_an_event_about_a_cluster_scoped_object_goes_to_the_default_namespace(cluster: EmbeddedCluster,
                                                                             clock: FakeClock) -> None:
    ns = cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    EventRecorder(cluster, "c", clock=clock).record(NAMESPACE, ObjectKey("", "team"), "Normal", "Seen", "hello")
    [event] = events(cluster)
    assert event["metadata"]["namespace"] == "default"
    assert event["involvedObject"] == {"apiVersion": "v1", "kind": "Namespace", "name": "team",
                                       "uid": ns["metadata"]["uid"]}
    assert events(cluster, "team") == []


def test_a_long_message_is_truncated(cluster: EmbeddedCluster, clock: FakeClock) -> None:
    EventRecorder(cluster, "c", clock=clock).record(CONFIGMAP, KEY, "Warning", "Failed", "x" * 5000)
    [event] = events(cluster)
    assert len(event["message"]) == MAX_MESSAGE and event["message"].endswith("...")


def test_an_event_type_other_than_normal_or_warning_is_dropped(cluster: EmbeddedCluster, clock: FakeClock) -> None:
    EventRecorder(cluster, "c", clock=clock).record(CONFIGMAP, KEY, "Error", "Failed", "x")
    assert events(cluster) == []


def test_events_about_long_names_get_valid_unique_names(cluster: EmbeddedCluster, clock: FakeClock) -> None:
    recorder = EventRecorder(cluster, "c", clock=clock)
    long_key = ObjectKey("default", "n" * 253)
    recorder.record(CONFIGMAP, long_key, "Normal", "One", "x")
    recorder.record(CONFIGMAP, long_key, "Normal", "Two", "x")  # same clock instant, different event
    names = [e["metadata"]["name"] for e in events(cluster)]
    assert len(set(names)) == 2 and all(len(n) <= 253 for n in names)


class BrokenCluster:
    """A cluster whose writes and reads of Events fail, as an overloaded API server's might."""

    def __init__(self, inner: EmbeddedCluster) -> None:
        self.inner = inner

    def create(self, obj: Obj) -> Obj:
        raise ServerError("etcdserver: request timed out")

    def patch(self, *args: Any, **kwargs: Any) -> Obj:
        raise NotFound("gone")

    def get(self, kind: Kind, key: ObjectKey) -> Obj | None:
        raise RuntimeError("not even an ApiError")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_the_recorder_never_raises_when_the_cluster_fails(cluster: EmbeddedCluster, clock: FakeClock) -> None:
    recorder = EventRecorder(BrokenCluster(cluster), "c", clock=clock)
    recorder.record(CONFIGMAP, KEY, "Warning", "Failed", "dropped")
    recorder.record(CONFIGMAP, KEY, "Warning", "Failed", "dropped")
    assert events(cluster) == []
    working = EventRecorder(cluster, "c", clock=clock)
    working.record(CONFIGMAP, KEY, "Warning", "Failed", "written")
    assert [e["message"] for e in events(cluster)] == ["written"]


class MeetingCreates:
    """The cluster, except that each create of an Event waits for `parties` creates to meet: it
    succeeds only if that many are in flight at once."""

    def __init__(self, cluster: EmbeddedCluster, parties: int) -> None:
        self.cluster, self.barrier = cluster, threading.Barrier(parties, timeout=5)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cluster, name)

    def create(self, obj: dict[str, Any]) -> Any:
        self.barrier.wait()
        return self.cluster.create(obj)


def test_events_about_different_objects_are_written_in_parallel() -> None:
    cluster = EmbeddedCluster()
    recorder = EventRecorder(MeetingCreates(cluster, 4), "test")  # type: ignore[arg-type]
    threads = [threading.Thread(target=recorder.record, args=(CONFIGMAP, ObjectKey("default", f"cm{i}"), "Warning",
                                                              "Failed", "boom")) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    written = cluster.list(EVENT).items
    assert sorted(e["involvedObject"]["name"] for e in written) == ["cm0", "cm1", "cm2", "cm3"]
