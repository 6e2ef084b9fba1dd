"""Controllers on the embedded cluster: events to keys, outcomes, back-off, exclusivity."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from reconcile import FakeClock, Kind, ObjectKey, ReconcileError, Terminal
from reconcile.cache import InformerCache
from reconcile.controller import Controller, Owns, Watch, Watches
from reconcile.embedded import EmbeddedCluster
from reconcile.outcome import Done, RequeueAfter
from tests.reconcile.heard import Heard, handled
from tests.reconcile.support import configmap
from tests.waiting import eventually

CONFIGMAP = Kind("v1", "ConfigMap")
SECRET = Kind("v1", "Secret")


class Started:
    """What `start` ran, so the `stop` fixture can end it: caches, queues and worker threads."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.caches: list[InformerCache] = []
        self.controllers: list[Controller] = []
        self.workers: list[threading.Thread] = []

    def end(self) -> None:
        self.event.set()
        for controller in self.controllers:
            controller.queue.shutdown()
        for thread in self.workers:
            thread.join(5)
        for cache in self.caches:
            assert cache.stop(timeout=5)


@pytest.fixture
def stop() -> Iterator[Started]:
    started = Started()
    yield started
    started.end()


def drive(controller: Controller, clock: FakeClock, *, rounds: int, step: float) -> list[str]:
    """Work the controller's queue by hand, `rounds` times: process every key ready, then move the
    clock `step` seconds. What each reconcile came to, in order."""
    results = []
    for _ in range(rounds):
        for ready in controller.queue.pop_ready():
            results.append(controller.process(ready))
            controller.queue.done(ready)
        clock.advance(step)
    return results


def start(cluster: EmbeddedCluster, controller: Controller, stop: Started) -> InformerCache:
    cache = InformerCache(cluster)
    controller.bind(cache)
    cache.start(stop.event)
    stop.caches.append(cache)
    assert cache.wait_synced(5)
    stop.workers += controller.run(stop.event)
    stop.controllers.append(controller)
    return cache


def test_a_change_to_an_object_reconciles_its_key(stop: Started) -> None:
    cluster = EmbeddedCluster()
    seen: list[ObjectKey] = []
    controller = Controller("cm", CONFIGMAP, lambda key: seen.append(key) or Done())
    start(cluster, controller, stop)
    cluster.create(configmap("a"))
    eventually(lambda: ObjectKey("default", "a") in seen)


def test_a_child_reconciles_its_controller_owner(stop: Started) -> None:
    cluster = EmbeddedCluster()
    owner = cluster.create(configmap("parent"))
    seen: list[ObjectKey] = []
    controller = Controller("cm", CONFIGMAP, lambda key: seen.append(key) or Done(), watches=[Owns(SECRET)])
    start(cluster, controller, stop)
    eventually(lambda: seen == [ObjectKey("default", "parent")])
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "child", "namespace": "default",
              "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "parent",
                                   "uid": owner["metadata"]["uid"], "controller": True}]}}
    cluster.create(secret)
    eventually(lambda: len(seen) == 2)
    assert seen[1] == ObjectKey("default", "parent")


def test_children_watched_metadata_only_still_reach_their_owner_without_their_data(stop: Started) -> None:
    cluster = EmbeddedCluster()
    owner = cluster.create(configmap("parent"))
    seen: list[ObjectKey] = []
    controller = Controller("cm", CONFIGMAP, lambda key: seen.append(key) or Done(),
                            watches=[Owns(SECRET, metadata_only=True)])
    cache = start(cluster, controller, stop)
    cluster.create({"apiVersion": "v1", "kind": "Secret", "data": {"token": "c2VjcmV0"},
                    "metadata": {"name": "child", "namespace": "default",
                                 "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "parent",
                                                      "uid": owner["metadata"]["uid"], "controller": True}]}})
    eventually(lambda: len(seen) == 2)
    cached = cache.informer(SECRET, metadata_only=True).get(ObjectKey("default", "child"))
    assert cached is not None and "data" not in cached and cached["metadata"]["ownerReferences"]


def test_watches_map_other_kinds_to_keys(stop: Started) -> None:
    cluster = EmbeddedCluster()
    seen: list[ObjectKey] = []
    controller = Controller("cm", CONFIGMAP, lambda key: seen.append(key) or Done(),
                            watches=[Watches(SECRET, lambda obj: [ObjectKey("default", "from-secret")])])
    start(cluster, controller, stop)
    cluster.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "default"}})
    eventually(lambda: ObjectKey("default", "from-secret") in seen)


def test_a_watch_added_while_running_maps_its_kind_once_however_often_it_is_asked(stop: Started) -> None:
    cluster = EmbeddedCluster()
    seen: list[ObjectKey] = []
    mapped: list[str] = []
    controller = Controller("cm", CONFIGMAP, lambda key: seen.append(key) or Done())
    cache = start(cluster, controller, stop)

    def to_key(obj: dict[str, object]) -> list[ObjectKey]:
        mapped.append(str(obj["metadata"]["name"]))  # type: ignore[index]
        return [ObjectKey("default", "from-secret")]

    for _ in range(3):
        controller.watch_more(cache, Watches(SECRET, to_key))
    heard = Heard(cache.informer(SECRET))
    secret = cluster.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "default"}})
    eventually(lambda: ObjectKey("default", "from-secret") in seen)
    handled(heard, secret, controller)
    assert mapped == ["s"]


def test_a_primary_watch_can_filter_changes_and_choose_keys(stop: Started) -> None:
    cluster = EmbeddedCluster()
    seen: list[ObjectKey] = []

    def labels_changed(old: dict[str, Any] | None, new: dict[str, Any] | None) -> bool:
        return old is None or new is None or old["metadata"].get("labels") != new["metadata"].get("labels")

    primary = Watch(CONFIGMAP, lambda obj, kind: [ObjectKey.of(obj)] if obj["metadata"]["name"] != "skip" else [],
                    changes=labels_changed)
    controller = Controller("cm", CONFIGMAP, lambda key: seen.append(key) or Done(), primary=primary)
    heard = Heard(start(cluster, controller, stop).informer(CONFIGMAP))
    cluster.create(configmap("skip"))
    made = cluster.create(configmap("a"))
    eventually(lambda: seen == [ObjectKey("default", "a")])
    handled(heard, cluster.update({**made, "data": {"x": "1"}}), controller)  # not a label change: filtered out
    assert seen == [ObjectKey("default", "a")]
    current = cluster.get(CONFIGMAP, ObjectKey("default", "a"))
    assert current is not None
    cluster.update({**current, "metadata": {**current["metadata"], "labels": {"l": "1"}}})
    eventually(lambda: seen == [ObjectKey("default", "a")] * 2)


def test_an_unbound_controller_hears_of_no_more_changes(stop: Started) -> None:
    cluster = EmbeddedCluster()
    seen: list[ObjectKey] = []
    controller = Controller("cm", CONFIGMAP, lambda key: seen.append(key) or Done(),
                            watches=[Watches(SECRET, lambda obj: [ObjectKey("default", "from-secret")])])
    cache = start(cluster, controller, stop)
    controller.watch_more(cache, Watches(Kind("v1", "Service"), lambda obj: [ObjectKey("default", "from-svc")]))
    cluster.create(configmap("a"))
    eventually(lambda: seen == [ObjectKey("default", "a")])
    controller.unbind()
    heard = {kind: Heard(cache.informer(kind)) for kind in (CONFIGMAP, SECRET)}
    handled(heard[CONFIGMAP], cluster.create(configmap("b")), controller)
    handled(heard[SECRET], cluster.create({"apiVersion": "v1", "kind": "Secret",
                                           "metadata": {"name": "s", "namespace": "default"}}), controller)
    assert seen == [ObjectKey("default", "a")] and len(controller.queue) == 0


def test_a_failing_reconcile_is_retried_with_growing_delays_and_recovers() -> None:
    clock = FakeClock()
    calls: list[float] = []

    def reconcile(key: ObjectKey) -> Done:
        calls.append(clock.monotonic())
        if len(calls) < 4:
            raise RuntimeError("not yet")
        return Done()

    controller = Controller("flaky", CONFIGMAP, reconcile, clock=clock)
    key = ObjectKey("default", "a")
    controller.queue.add(key)
    results = drive(controller, clock, rounds=200, step=0.001)
    assert results == ["error", "error", "error", "success"]
    gaps = [round(b - a, 3) for a, b in zip(calls, calls[1:], strict=False)]
    assert gaps[0] < gaps[1] < gaps[2]
    assert controller.queue.num_requeues(key) == 0


def test_a_terminal_error_is_not_retried() -> None:
    clock = FakeClock()
    calls = Counter[ObjectKey]()

    def reconcile(key: ObjectKey) -> None:
        calls[key] += 1
        raise Terminal("the spec is invalid")

    controller = Controller("strict", CONFIGMAP, reconcile, clock=clock)
    controller.queue.add(ObjectKey("default", "a"))
    assert drive(controller, clock, rounds=3, step=100) == ["terminal_error"]
    assert calls == {ObjectKey("default", "a"): 1}


def unusable_answer(key: ObjectKey) -> None:
    """Fails as a pass does on a hook's unusable answer: wrapped, the cause deterministic."""
    try:
        raise ReconcileError("bad response from hook: invalid JSON", deterministic=True)
    except ReconcileError as err:
        raise RuntimeError("Sync error: bad response from hook: invalid JSON") from err


@pytest.mark.parametrize(("retry", "results"), [(True, ["error", "error", "error"]), (False, ["terminal_error"])])
def test_a_deterministic_error_is_retried_unless_the_run_is_one_off(retry: bool, results: list[str]) -> None:
    clock = FakeClock()
    recorded: list[str] = []

    class Events:
        def record(self, kind: Kind, key: ObjectKey, event_type: str, reason: str, message: str) -> None:
            recorded.append(message)

    controller = Controller("decorator", CONFIGMAP, unusable_answer, clock=clock, events=Events(),
                            retry_deterministic=retry)
    controller.queue.add(ObjectKey("default", "a"))
    assert drive(controller, clock, rounds=3, step=100) == results
    assert recorded == ["Sync error: bad response from hook: invalid JSON"] * len(results)


def test_a_one_off_run_still_retries_an_error_that_is_not_deterministic() -> None:
    clock = FakeClock()
    calls: list[float] = []

    def reconcile(key: ObjectKey) -> None:
        calls.append(clock.monotonic())
        raise ReconcileError("POST http://hook/sync failed: connection refused")

    controller = Controller("decorator", CONFIGMAP, reconcile, clock=clock, retry_deterministic=False)
    controller.queue.add(ObjectKey("default", "a"))
    assert drive(controller, clock, rounds=3, step=100) == ["error"] * 3
    assert len(calls) == 3


def test_requeue_after_brings_the_key_back_after_the_delay() -> None:
    clock = FakeClock()
    controller = Controller("poll", CONFIGMAP, lambda key: RequeueAfter(30.0), clock=clock)
    key = ObjectKey("default", "a")
    controller.queue.add(key)
    (ready,) = controller.queue.pop_ready()
    assert controller.process(ready) == "requeue_after"
    controller.queue.done(ready)
    clock.advance(29.9)
    assert controller.queue.pop_ready() == []
    clock.advance(0.2)
    assert controller.queue.pop_ready() == [key]


def test_a_key_is_never_reconciled_by_two_workers_at_once(stop: Started) -> None:
    cluster = EmbeddedCluster()
    active: set[ObjectKey] = set()
    overlaps: list[ObjectKey] = []
    done = Counter[ObjectKey]()
    lock = threading.Lock()

    def reconcile(key: ObjectKey) -> Done:
        with lock:
            if key in active:
                overlaps.append(key)
            active.add(key)
        time.sleep(0.001)
        with lock:
            active.discard(key)
            done[key] += 1
        return Done()

    controller = Controller("busy", CONFIGMAP, reconcile, workers=4)
    start(cluster, controller, stop)
    objs = [cluster.create(configmap(f"cm{i}", v="0")) for i in range(5)]
    for round_ in range(1, 20):
        for obj in objs:
            current = cluster.get(CONFIGMAP, ObjectKey.of(obj))
            assert current is not None
            cluster.update({**current, "data": {"v": str(round_)}})
    expected = {ObjectKey.of(o) for o in objs}
    # the watch events may still be on their way when the queue first looks empty
    eventually(lambda: set(done) == expected and controller.queue.len() == 0 and not active)
    assert overlaps == []


def test_an_error_names_the_event_reason_it_is_recorded_under() -> None:
    class SyncFailed(Exception):
        event_reason = "SyncError"

    recorded: list[tuple[str, str, str]] = []

    class Events:
        def record(self, kind: Kind, key: ObjectKey, event_type: str, reason: str, message: str) -> None:
            recorded.append((event_type, reason, message))

    def reconcile(key: ObjectKey) -> None:
        raise SyncFailed("Sync error: the hook answered 500") if key.name == "a" else RuntimeError("boom")

    controller = Controller("decorator", CONFIGMAP, reconcile, clock=FakeClock(), events=Events())
    for name in ("a", "b"):
        assert controller.process(ObjectKey("default", name)) == "error"
    assert recorded == [("Warning", "SyncError", "Sync error: the hook answered 500"),
                        ("Warning", "ReconcileError", "boom")]


def test_a_reconcile_that_returns_none_is_a_bug_said_loudly_and_retried(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    answers: list[Any] = [None, "done", Done()]

    def reconcile(key: ObjectKey) -> Any:
        return answers.pop(0)

    controller = Controller("sloppy", CONFIGMAP, reconcile, clock=clock)
    controller.queue.add(ObjectKey("default", "a"))
    results = drive(controller, clock, rounds=200, step=0.001)
    assert results == ["error", "error", "success"]
    assert "reconcile returned None: return Done() or RequeueAfter(seconds)" in caplog.text
