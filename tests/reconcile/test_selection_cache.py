"""Informers narrowed by the server: label selectors sent with the list and the watch, metadata
asked for alone (PartialObjectMetadata), one informer per selection, and the cache view through
which a controller reads only what it selected."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from reconcile import Kind, ObjectKey
from reconcile.cache import InformerCache
from reconcile.cluster import ListResult
from reconcile.embedded import EmbeddedCluster
from reconcile.informer import Informer
from tests.reconcile.support import configmap
from tests.waiting import eventually

CONFIGMAP = Kind("v1", "ConfigMap")


class Asked:
    """The embedded cluster, remembering what each list asked for (kind, labels, metadata only)."""

    def __init__(self, cluster: EmbeddedCluster) -> None:
        self.cluster = cluster
        self.lists: list[tuple[str, Any, bool]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cluster, name)

    def list(self, kind: Kind, **options: Any) -> ListResult:
        self.lists.append((kind.kind, options.get("labels"), False))
        return self.cluster.list(kind, **options)

    def list_metadata(self, kind: Kind, **options: Any) -> ListResult:
        self.lists.append((kind.kind, options.get("labels"), True))
        return self.cluster.list_metadata(kind, **options)


Started = list[tuple[InformerCache, threading.Event]]


def labelled(name: str, **labels: str) -> dict[str, Any]:
    obj = configmap(name, payload="x" * 50)
    obj["metadata"]["labels"] = labels
    return obj


@pytest.fixture
def cluster() -> Iterator[Asked]:
    embedded = EmbeddedCluster()
    for index in range(30):
        embedded.create(labelled(f"other-{index}", app="other"))
    for index in range(3):
        embedded.create(labelled(f"picked-{index}", sel="yes"))
    yield Asked(embedded)
    embedded.close()


@pytest.fixture
def started() -> Iterator[Started]:
    caches: Started = []
    yield caches
    for cache, stop in caches:
        stop.set()
        cache.stop()


def run(cache: InformerCache, started: Started) -> InformerCache:
    stop = threading.Event()
    cache.start(stop)
    started.append((cache, stop))
    assert cache.wait_synced(5)
    return cache


def test_an_informer_with_a_selector_asks_the_server_for_the_selection_and_caches_only_it(
        cluster: Asked, started: Started) -> None:
    cache = InformerCache(cluster)
    informer = cache.informer(CONFIGMAP, labels={"matchLabels": {"sel": "yes"}})
    run(cache, started)
    assert cluster.lists == [("ConfigMap", "sel=yes", False)]
    assert len(informer) == 3


def test_one_informer_serves_every_spelling_of_one_selection(cluster: Asked) -> None:
    cache = InformerCache(cluster)
    one = cache.informer(CONFIGMAP, labels={"matchLabels": {"sel": "yes"}})
    assert cache.informer(CONFIGMAP, labels="sel=yes") is one
    assert cache.informer(CONFIGMAP, labels="sel in (yes)") is not one  # another requirement, another scope
    assert cache.informer(CONFIGMAP, labels={}) is cache.informer(CONFIGMAP)  # empty: the whole kind


def test_a_metadata_informer_asks_for_metadata_alone_and_keeps_the_objects_own_kind(
        cluster: Asked, started: Started) -> None:
    cache = InformerCache(cluster)
    informer = cache.informer(CONFIGMAP, metadata_only=True)
    run(cache, started)
    assert cluster.lists == [("ConfigMap", None, True)]
    obj = informer.get(ObjectKey("default", "picked-0"))
    assert obj is not None and set(obj) == {"apiVersion", "kind", "metadata"}
    assert (obj["apiVersion"], obj["kind"]) == ("v1", "ConfigMap")  # not meta.k8s.io/v1 PartialObjectMetadata
    cluster.create(labelled("late", sel="yes"))
    eventually(lambda: (informer.get(ObjectKey("default", "late")) or {}).get("kind") == "ConfigMap", 5)


def test_a_narrowed_view_gets_from_the_selection_and_reads_what_it_lacks_live(
        cluster: Asked, started: Started) -> None:
    cache = InformerCache(cluster)
    selecting = cache.informer(CONFIGMAP, labels="sel=yes")
    view = run(cache, started).narrowed({CONFIGMAP: selecting})

    picked, other = view.get(CONFIGMAP, ObjectKey("default", "picked-1")), view.get(CONFIGMAP,
                                                                                   ObjectKey("default", "other-1"))

    assert picked is selecting.get(ObjectKey("default", "picked-1"))  # the cached object itself
    assert other is not None and other["metadata"]["labels"] == {"app": "other"}  # read live: outside the selection
    assert view.get(CONFIGMAP, ObjectKey("default", "absent")) is None
    assert cache.informers == [selecting]  # no whole-kind informer was started to answer
    assert cache.narrowed({CONFIGMAP: selecting}, confirm=False).get(CONFIGMAP,
                                                                     ObjectKey("default", "other-1")) is None


def test_a_narrowed_view_over_metadata_answers_with_the_whole_object(cluster: Asked,
                                                                     started: Started) -> None:
    cache = InformerCache(cluster)
    slim = cache.informer(CONFIGMAP, metadata_only=True)
    view = run(cache, started).narrowed({CONFIGMAP: slim})
    whole = view.get(CONFIGMAP, ObjectKey("default", "picked-2"))
    assert whole is not None and whole["data"] == {"payload": "x" * 50}
    assert "data" not in (view.get(CONFIGMAP, ObjectKey("default", "picked-2"), metadata_only=True) or {})
    assert cache.informers == [slim]


def test_a_metadata_informer_over_a_cluster_without_metadata_lists_in_full_and_keeps_the_metadata(
        started: Started) -> None:
    class FullOnly:  # a cluster with no list_metadata: a RoutedCluster, say
        def __init__(self, cluster: EmbeddedCluster) -> None:
            self.list, self.watch, self.get = cluster.list, cluster.watch, cluster.get

    embedded = EmbeddedCluster()
    embedded.create(labelled("a", sel="yes"))
    informer = Informer(FullOnly(embedded), CONFIGMAP, metadata=True)  # type: ignore[arg-type]
    stop = threading.Event()
    thread = threading.Thread(target=informer.run, args=(stop,), daemon=True)
    thread.start()
    try:
        assert informer.synced.wait(5)
        obj = informer.get(ObjectKey("default", "a"))
        assert obj is not None and set(obj) == {"apiVersion", "kind", "metadata"} and obj["kind"] == "ConfigMap"
    finally:
        stop.set()
        informer.wake()
        thread.join(5)
        embedded.close()


def test_embedded_pages_hand_out_one_consistent_list_in_chunks(cluster: Asked) -> None:
    embedded = cluster.cluster
    pages = embedded.pages(CONFIGMAP, namespace="default", page_size=10)
    first = next(pages)
    embedded.create(labelled("written-meanwhile", sel="yes"))  # after the list's state was taken
    rest = list(pages)
    assert [len(p.items) for p in [first, *rest]] == [10, 10, 10, 3]
    assert {p.resource_version for p in [first, *rest]} == {first.resource_version}
    [slim] = list(embedded.pages(CONFIGMAP, labels="sel=yes", metadata_only=True))
    assert {(o["apiVersion"], o["kind"]) for o in slim.items} == {("meta.k8s.io/v1", "PartialObjectMetadata")}
    assert len(slim.items) == 4
