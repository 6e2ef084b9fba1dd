"""Informers on the embedded cluster: lists, watches, resumes, relists, indexes."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from reconcile import FakeClock, Gone, Kind, ObjectKey, ReconcileError, WatchEvent
from reconcile.cache import InformerCache
from reconcile.embedded import EmbeddedCluster
from reconcile.informer import Informer, by_labels, metadata_only, share_strings
from tests.reconcile.support import configmap
from tests.waiting import eventually

CONFIGMAP = Kind("v1", "ConfigMap")


class Recorder:
    """A handler that remembers every change it was given."""

    def __init__(self) -> None:
        self.changes: list[tuple[str, str, str]] = []  # (change, name, resourceVersion)

    def __call__(self, old: dict | None, new: dict | None) -> None:
        obj = new if new is not None else old
        change = "added" if old is None else "deleted" if new is None else "updated"
        assert obj is not None
        self.changes.append((change, obj["metadata"]["name"], obj["metadata"]["resourceVersion"]))


class FlakyWatches:
    """The embedded cluster, except that watches break after `every` events (a cut connection),
    or answer Gone once when asked to."""

    def __init__(self, cluster: EmbeddedCluster, every: int | None = None) -> None:
        self.cluster, self.every, self.watches, self.gone_once = cluster, every, 0, False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cluster, name)

    def watch(self, kind: Kind, **options: Any) -> Iterator[WatchEvent]:
        self.watches += 1
        if self.gone_once:
            self.gone_once = False
            raise Gone("too old resource version")
        events = self.cluster.watch(kind, **options)
        return events if self.every is None else CutAfter(events, self.every)


class CutAfter:
    """A watch stream that breaks (ConnectionResetError) after `every` events; closable from any
    thread, as a real stream is."""

    def __init__(self, events: Any, every: int) -> None:
        self.events, self.left = events, every

    def __iter__(self) -> CutAfter:
        return self

    def __next__(self) -> WatchEvent:
        if self.left == 0:
            self.events.close()
            raise ConnectionResetError("connection cut")
        self.left -= 1
        return next(self.events)

    def close(self) -> None:
        self.events.close()


@pytest.fixture
def running() -> Iterator[Any]:
    stop = threading.Event()
    started: list[Informer] = []
    threads: list[threading.Thread] = []

    def start(informer: Informer) -> Informer:
        threads.append(threading.Thread(target=informer.run, args=(stop,), daemon=True))
        threads[-1].start()
        started.append(informer)
        assert informer.synced.wait(5)
        return informer

    yield start
    stop.set()
    for informer in started:
        informer.wake()
    for thread in threads:
        thread.join(5)


def test_the_first_list_fills_the_cache_and_reaches_handlers_as_additions(running: Any) -> None:
    cluster = EmbeddedCluster()
    cluster.create(configmap("a"))
    cluster.create(configmap("b", namespace="kube-system"))
    informer = Informer(cluster, CONFIGMAP)
    recorder = Recorder()
    informer.add_handler(recorder)
    running(informer)
    assert sorted(name for _, name, _ in recorder.changes) == ["a", "b"]
    assert informer.get(ObjectKey("default", "a")) is not None
    assert [o["metadata"]["name"] for o in informer.list("kube-system")] == ["b"]


def test_changes_reach_handlers_exactly_once_in_order(running: Any) -> None:
    cluster = EmbeddedCluster()
    informer = running(Informer(cluster, CONFIGMAP))
    recorder = Recorder()
    informer.add_handler(recorder)
    created = cluster.create(configmap("a", v="1"))
    updated = cluster.update({**created, "data": {"v": "2"}})
    cluster.delete(CONFIGMAP, ObjectKey("default", "a"))
    eventually(lambda: len(recorder.changes) == 3)
    assert [(c, n) for c, n, _ in recorder.changes] == [("added", "a"), ("updated", "a"), ("deleted", "a")]
    assert recorder.changes[1][2] == updated["metadata"]["resourceVersion"]
    assert informer.get(ObjectKey("default", "a")) is None


def flaky_informer(cluster: EmbeddedCluster, running: Any, *, every: int) -> tuple[FlakyWatches, Informer, Recorder]:
    """A running informer of ConfigMaps whose watch breaks after every `every` events (retried at
    once), and a Recorder of what it hands on."""
    flaky = FlakyWatches(cluster, every=every)
    informer = Informer(flaky, CONFIGMAP)
    informer.backoff.first = 0.001
    recorder = Recorder()
    informer.add_handler(recorder)
    running(informer)
    return flaky, informer, recorder


def test_a_watch_cut_mid_stream_resumes_without_losing_or_repeating_an_event(running: Any) -> None:
    cluster = EmbeddedCluster()
    flaky, informer, recorder = flaky_informer(cluster, running, every=3)
    for i in range(20):
        cluster.create(configmap(f"cm{i}"))
    eventually(lambda: len(recorder.changes) == 20)
    cluster.create(configmap("last"))  # a repeat of any of the twenty would be handed on before it
    eventually(lambda: recorder.changes[-1][1] == "last")
    assert [n for _, n, _ in recorder.changes] == [f"cm{i}" for i in range(20)] + ["last"]
    assert flaky.watches >= 7 and informer.relists == 1


def test_an_expired_resource_version_triggers_exactly_one_relist(running: Any) -> None:
    cluster = EmbeddedCluster()
    flaky, informer, recorder = flaky_informer(cluster, running, every=1)
    flaky.gone_once = True
    cluster.create(configmap("a"))
    eventually(lambda: [n for _, n, _ in recorder.changes] == ["a"])
    cluster.create(configmap("b"))
    eventually(lambda: len(recorder.changes) == 2)
    assert informer.relists == 2  # the first list, and one after Gone


def test_a_relist_reports_what_changed_while_the_watch_was_away() -> None:
    cluster = EmbeddedCluster()
    for name in ("keep", "change", "remove"):
        cluster.create(configmap(name))
    informer = Informer(cluster, CONFIGMAP)
    recorder = Recorder()
    informer.add_handler(recorder)
    informer._relist()
    changed = cluster.get(CONFIGMAP, ObjectKey("default", "change"))
    assert changed is not None
    cluster.update({**changed, "data": {"x": "1"}})
    cluster.delete(CONFIGMAP, ObjectKey("default", "remove"))
    cluster.create(configmap("new"))
    recorder.changes.clear()
    informer._relist()
    assert sorted((c, n) for c, n, _ in recorder.changes) == [("added", "new"), ("deleted", "remove"),
                                                              ("updated", "change")]


def test_indexes_find_objects_by_owner_and_custom_keys(running: Any) -> None:
    cluster = EmbeddedCluster()
    owner = cluster.create(configmap("owner"))
    uid = owner["metadata"]["uid"]
    child = configmap("child")
    child["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid}]
    cluster.create(child)
    informer = Informer(cluster, CONFIGMAP)
    informer.add_index("data-key", lambda obj: list((obj.get("data") or {}).keys()))
    running(informer)
    assert [o["metadata"]["name"] for o in informer.by_index("owner", uid)] == ["child"]
    cluster.create(configmap("tagged", color="red"))
    eventually(lambda: len(informer.by_index("data-key", "color")) == 1)


def test_the_cache_drops_managed_fields_and_can_keep_metadata_only(running: Any) -> None:
    cluster = EmbeddedCluster()
    cluster.apply(configmap("a", big="x" * 100), field_manager="me")
    full = running(Informer(cluster, CONFIGMAP))
    slim = running(Informer(cluster, CONFIGMAP, transform=metadata_only))
    cached = full.get(ObjectKey("default", "a"))
    assert cached is not None and "managedFields" not in cached["metadata"] and cached["data"]["big"]
    assert set(slim.get(ObjectKey("default", "a")) or {}) == {"apiVersion", "kind", "metadata"}


def test_a_label_index_finds_objects_by_key_and_value(running: Any) -> None:
    cluster = EmbeddedCluster()
    for name, app in (("a", "web"), ("b", "db"), ("c", "web")):
        obj = configmap(name)
        obj["metadata"]["labels"] = {"app": app}
        cluster.create(obj)
    informer = Informer(cluster, CONFIGMAP)
    informer.add_index("labels", by_labels)
    running(informer)
    assert sorted(o["metadata"]["name"] for o in informer.by_index("labels", "app=web")) == ["a", "c"]
    moved = cluster.get(CONFIGMAP, ObjectKey("default", "c"))
    assert moved is not None
    moved["metadata"]["labels"] = {"app": "db"}
    cluster.update(moved)
    eventually(lambda: len(informer.by_index("labels", "app=db")) == 2)
    assert [o["metadata"]["name"] for o in informer.by_index("labels", "app=web")] == ["a"]


def test_cached_objects_share_repeated_strings_but_equal_what_the_server_sent() -> None:
    first = json.loads(json.dumps(configmap("first", region="eu-west-1")))
    second = json.loads(json.dumps(configmap("second", region="eu-west-1")))
    a, b = share_strings(first), share_strings(second)
    assert a == first and b == second
    assert a["data"]["region"] is b["data"]["region"]
    assert a["metadata"]["namespace"] is b["metadata"]["namespace"]
    assert next(iter(a)) is next(iter(b))  # the key "apiVersion"


def test_the_shared_cache_keeps_metadata_only_informers_apart_from_full_ones() -> None:
    cluster = EmbeddedCluster()
    cluster.create(configmap("a", big="x" * 100))
    cache = InformerCache(cluster)
    full, slim = cache.informer(CONFIGMAP), cache.informer(CONFIGMAP, metadata_only=True)
    assert full is not slim and cache.informer(CONFIGMAP, metadata_only=True) is slim
    stop = threading.Event()
    cache.start(stop)
    try:
        assert cache.wait_synced(5)
        assert "data" not in (slim.get(ObjectKey("default", "a")) or {})
        assert (full.get(ObjectKey("default", "a")) or {})["data"]["big"] == "x" * 100
    finally:
        stop.set()
        assert cache.stop(timeout=5)


def test_stopping_the_cache_ends_open_watches_at_once() -> None:
    cluster = EmbeddedCluster()
    cache = InformerCache(cluster)
    cache.informer(CONFIGMAP)
    stop = threading.Event()
    cache.start(stop)
    assert cache.wait_synced(5)
    eventually(lambda: cluster.watchers() == 1)
    stop.set()
    started = time.monotonic()
    assert cache.stop(timeout=5)  # the watch's own timeout is minutes away
    assert time.monotonic() - started < 2
    assert cluster.watchers() == 0


def test_bookmarks_keep_a_quiet_watch_fresh() -> None:
    clock = FakeClock()
    cluster = EmbeddedCluster(clock=clock, bookmark_interval=10)
    informer = Informer(cluster, CONFIGMAP, clock=clock)
    stop = threading.Event()
    thread = threading.Thread(target=informer.run, args=(stop,), daemon=True)
    thread.start()
    try:
        assert informer.synced.wait(5)
        eventually(lambda: cluster.watchers() == 1)
        clock.advance(25)  # nothing changes, but the server sends bookmarks
        eventually(lambda: clock.monotonic() - informer.last_activity < 15)
    finally:
        stop.set()
        informer.wake()
        thread.join(5)


def test_handlers_can_tell_changes_found_by_a_list_from_changes_seen_on_the_watch(running: Any) -> None:
    cluster = EmbeddedCluster()
    cluster.create(configmap("before"))
    informer = Informer(cluster, CONFIGMAP)
    seen: dict[str, bool] = {}
    informer.add_handler(lambda old, new: seen.__setitem__((new or old)["metadata"]["name"], informer.listing))
    running(informer)
    cluster.create(configmap("after"))
    eventually(lambda: "after" in seen)
    late: dict[str, bool] = {}
    informer.add_handler(lambda old, new: late.__setitem__((new or old)["metadata"]["name"], informer.listing))
    assert seen == {"before": True, "after": False}
    assert late == {"before": True, "after": True}  # a late handler's replay counts as a list
    assert not informer.listing


def test_a_handler_that_raises_neither_stalls_the_informer_nor_starves_other_handlers(running: Any) -> None:
    cluster = EmbeddedCluster()
    cluster.create(configmap("bad"))
    cluster.create(configmap("listed"))
    informer = Informer(cluster, CONFIGMAP)

    def broken(old: Any, new: Any) -> None:
        if (new or old)["metadata"]["name"] == "bad":
            raise RuntimeError("a bug in a mapper")

    recorder = Recorder()
    informer.add_handler(broken)
    informer.add_handler(recorder)
    running(informer)  # synced, although a listed object broke a handler
    bad = cluster.get(CONFIGMAP, ObjectKey("default", "bad"))
    assert bad is not None
    cluster.update({**bad, "data": {"x": "1"}})
    cluster.create(configmap("later"))
    eventually(lambda: [n for _, n, _ in recorder.changes] == ["bad", "listed", "bad", "later"])
    assert (informer.get(ObjectKey("default", "bad")) or {}).get("data") == {"x": "1"}


class SlowLists:
    """The embedded cluster, with every list taking a moment (a real server's first list does)."""

    def __init__(self, cluster: EmbeddedCluster) -> None:
        self.cluster = cluster

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cluster, name)

    def list(self, kind: Kind, **options: Any) -> Any:
        time.sleep(0.1)
        return self.cluster.list(kind, **options)


def test_a_cache_read_of_a_kind_nothing_watches_in_full_waits_for_its_first_list() -> None:
    cluster = EmbeddedCluster()
    cluster.create(configmap("a", k="v"))
    cache = InformerCache(SlowLists(cluster))  # type: ignore[arg-type]
    cache.informer(CONFIGMAP, metadata_only=True)  # what a controller's Owns(..., metadata_only=True) asks for
    with pytest.raises(ReconcileError, match="not started"):
        cache.get(CONFIGMAP, ObjectKey("default", "a"))
    stop = threading.Event()
    cache.start(stop)
    try:
        assert cache.wait_synced(5)
        assert (cache.get(CONFIGMAP, ObjectKey("default", "a")) or {}).get("data") == {"k": "v"}
        assert [o["metadata"]["name"] for o in cache.list(CONFIGMAP, "default", metadata_only=True)] == ["a"]
    finally:
        stop.set()
        assert cache.stop(timeout=5)


def test_reads_without_a_lock_never_miss_an_object_being_updated(running: Any) -> None:
    # Readers take no lock: while the watch applies updates of one object, every read by
    # namespace or index must still find it (an index value that stays is never taken out).
    cluster = EmbeddedCluster()
    cluster.create(configmap("busy", n="0"))
    informer = Informer(cluster, CONFIGMAP)
    informer.add_index("data-key", lambda obj: list((obj.get("data") or {}).keys()))
    running(informer)
    done = threading.Event()

    def write() -> None:
        for i in range(1, 400):
            obj = cluster.get(CONFIGMAP, ObjectKey("default", "busy"))
            assert obj is not None
            obj["data"]["n"] = str(i)
            cluster.update(obj)
        done.set()

    writer = threading.Thread(target=write, daemon=True)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: anywhere in an update
    try:
        writer.start()
        misses = reads = 0
        while not done.is_set():
            reads += 1
            misses += not informer.list("default") or not informer.by_index("data-key", "n") \
                or informer.get(ObjectKey("default", "busy")) is None
        writer.join(5)
    finally:
        sys.setswitchinterval(interval)
    assert reads > 100 and misses == 0


def test_an_index_can_be_added_and_removed_while_running(running: Any) -> None:
    cluster = EmbeddedCluster()
    cluster.create(configmap("a", color="red"))
    informer = running(Informer(cluster, CONFIGMAP))
    informer.add_index("data-key", lambda obj: list((obj.get("data") or {}).keys()))
    assert [o["metadata"]["name"] for o in informer.by_index("data-key", "color")] == ["a"]
    informer.remove_index("data-key")
    informer.remove_index("owner")  # built in: kept
    cluster.create(configmap("b", color="blue"))
    eventually(lambda: informer.get(ObjectKey("default", "b")) is not None)
    assert informer.by_index("owner", "nobody") == []
    with pytest.raises(KeyError):
        informer.by_index("data-key", "color")
