"""Informers are held while used: `acquire` counts a user, `release` takes one away, and the last
release stops the informer (its watch and thread end, its handlers, indexes and objects go, the
cache forgets it); controllers hold their watches' informers while bound."""

from __future__ import annotations

import threading
from typing import Any

from reconcile import Kind, ObjectKey
from reconcile.cache import InformerCache
from reconcile.cluster import Obj
from reconcile.controller import Controller, Watches
from reconcile.informer import by_labels
from reconcile.outcome import Done
from tests.reconcile.test_selection_cache import CONFIGMAP, Asked, Started, cluster, labelled, run, started
from tests.waiting import eventually

__all__ = ["cluster", "started"]  # fixtures, imported to be found here

SECRET = Kind("v1", "Secret")


def test_an_informer_runs_until_its_last_user_releases_it(cluster: Asked, started: Started) -> None:
    cache = InformerCache(cluster)
    informer = cache.acquire(CONFIGMAP, labels="sel=yes")
    assert cache.acquire(CONFIGMAP, labels={"matchLabels": {"sel": "yes"}}) is informer  # a second user
    run(cache, started)
    heard: list[Any] = []
    informer.add_handler(lambda old, new: heard.append(new))
    informer.add_index("labels", by_labels)
    assert len(informer) == 3 and len(heard) == 3

    cache.release(informer)
    cluster.create(labelled("late", sel="yes"))
    eventually(lambda: len(heard) == 4, 5)  # still watching, still handled
    assert cache.informers == [informer] and informer.get(ObjectKey("default", "late")) is not None

    cache.release(informer)
    assert cache.informers == [] and informer.closed
    eventually(lambda: not informer.running, 5, what="the informer's thread to end")
    assert len(informer) == 0 and informer.list() == [] and informer.by_index("owner", "x") == []
    assert informer.by_index("namespace", "default") == []


def test_an_acquire_after_the_last_release_lists_afresh(cluster: Asked, started: Started) -> None:
    cache = run(InformerCache(cluster), started)
    first = cache.acquire(CONFIGMAP, labels="sel=yes")
    eventually(first.synced.is_set, 5)
    cache.release(first)
    cluster.create(labelled("while-nobody-watched", sel="yes"))

    second = cache.acquire(CONFIGMAP, labels="sel=yes")
    assert second is not first and cache.informers == [second]
    eventually(second.synced.is_set, 5)
    assert second.get(ObjectKey("default", "while-nobody-watched")) is not None
    assert cluster.lists == [("ConfigMap", "sel=yes", False)] * 2
    cache.release(first)  # the old informer is no longer the cache's: its user count is not touched
    assert cache.informers == [second] and not second.closed


def test_a_look_up_counts_no_user(cluster: Asked) -> None:
    cache = InformerCache(cluster)
    held = cache.acquire(CONFIGMAP)
    assert cache.informer(CONFIGMAP) is held
    cache.release(held)
    assert cache.informers == [] and held.closed
    kept = cache.informer(SECRET)  # nobody acquired it: kept for the cache's life
    assert cache.informers == [kept] and not kept.closed


def test_an_informer_released_before_the_cache_starts_never_runs(cluster: Asked, started: Started) -> None:
    cache = InformerCache(cluster)
    cache.release(cache.acquire(CONFIGMAP, labels="sel=yes"))
    kept = cache.acquire(SECRET)
    run(cache, started)
    assert cache.informers == [kept] and cluster.lists == [("Secret", None, False)]


def test_controllers_hold_their_watches_informers_while_bound(cluster: Asked, started: Started) -> None:
    cache = run(InformerCache(cluster), started)
    heard: dict[str, list[str]] = {"first": [], "second": []}

    def hearing(name: str) -> Controller[ObjectKey]:
        def mapper(obj: Obj) -> list[ObjectKey]:
            heard[name].append(obj["metadata"]["name"])
            return []
        return Controller(name, CONFIGMAP, lambda key: Done(), primary=Watches(CONFIGMAP, mapper),
                          watches=[Watches(SECRET, lambda obj: [])])
    first, second = hearing("first"), hearing("second")
    first.bind(cache)
    second.bind(cache)
    configmaps, secrets = cache.informer(CONFIGMAP), cache.informer(SECRET)

    first.unbind()
    assert set(cache.informers) == {configmaps, secrets}  # the second controller still holds both
    cluster.create(labelled("heard", sel="yes"))
    eventually(lambda: "heard" in heard["second"], 5)
    assert "heard" not in heard["first"]  # unsubscribed: the change reached only the second

    second.unbind()
    assert cache.informers == [] and configmaps.closed and secrets.closed
    eventually(lambda: not configmaps.running and not secrets.running, 5, what="both informer threads to end")


def test_unwatch_releases_what_watch_more_acquired(cluster: Asked, started: Started) -> None:
    cache = run(InformerCache(cluster), started)
    controller: Controller[ObjectKey] = Controller("cm", CONFIGMAP, lambda key: Done())
    controller.bind(cache)
    heard: list[str] = []

    def mapper(obj: Obj) -> list[ObjectKey]:
        heard.append(obj["metadata"]["name"])
        return []
    selection = Watches(CONFIGMAP, mapper, labels="sel=yes")
    selecting = controller.watch_more(cache, selection)
    assert controller.watch_more(cache, selection) is selecting  # once per scope
    eventually(lambda: sorted(heard) == ["picked-0", "picked-1", "picked-2"], 5)

    controller.unwatch(selection)
    assert selecting.closed and cache.informers == [cache.informer(CONFIGMAP)]  # the primary watch's stays
    again = controller.watch_more(cache, selection)
    assert again is not selecting and not again.closed
    controller.unbind()
    assert cache.informers == []


def test_released_informers_leave_no_thread_behind(cluster: Asked) -> None:
    cache = InformerCache(cluster)
    stop = threading.Event()
    cache.start(stop)
    try:
        held = [cache.acquire(CONFIGMAP, labels=f"sel in (yes, v{index})") for index in range(5)]
        eventually(lambda: all(informer.synced.is_set() for informer in held), 5)
        for informer in held:
            cache.release(informer)
        eventually(lambda: not any(t.name == "informer-ConfigMap" and t.is_alive() for t in threading.enumerate()),
                   5, what="the released informers' threads to end while the cache runs")
    finally:
        stop.set()
        assert cache.stop()
