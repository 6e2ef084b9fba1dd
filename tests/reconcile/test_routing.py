"""RoutedCluster: each API group goes to the cluster that serves it, and an informer works across it."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from reconcile import EmbeddedCluster, Kind, ObjectKey
from reconcile.errors import NotFound
from reconcile.informer import Informer
from reconcile.routing import RoutedCluster
from tests.reconcile.support import configmap
from tests.waiting import eventually

WIDGET = Kind("example.com/v1", "Widget")


def widget_crd() -> dict[str, object]:
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                     "versions": [{"name": "v1", "served": True, "storage": True, "schema": schema}]}}


@pytest.fixture(name="clusters")
def clusters_fixture() -> Iterator[tuple[EmbeddedCluster, EmbeddedCluster, RoutedCluster]]:
    with EmbeddedCluster() as main, EmbeddedCluster() as side:
        side.create(widget_crd())
        yield main, side, RoutedCluster(main, {"example.com": side})


def test_requests_go_to_the_cluster_of_their_group(
        clusters: tuple[EmbeddedCluster, EmbeddedCluster, RoutedCluster]) -> None:
    main, side, routed = clusters
    routed.create(configmap("settings", color="blue"))
    routed.create({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": "default"}})
    assert main.get(Kind("v1", "ConfigMap"), ObjectKey("default", "settings")) is not None
    assert side.get(Kind("v1", "ConfigMap"), ObjectKey("default", "settings")) is None
    assert side.get(WIDGET, ObjectKey("default", "w")) is not None
    with pytest.raises(NotFound):
        main.resource(WIDGET)
    assert routed.resource(WIDGET).plural == "widgets"
    kinds = [info.kind for info in routed.resources()]
    assert WIDGET in kinds and Kind("v1", "ConfigMap") in kinds
    assert not [k for k in kinds if k.group == "example.com" and k != WIDGET]  # only the routed cluster's
    routed.patch(WIDGET, ObjectKey("default", "w"), {"spec": {"size": 3}})
    assert [w["spec"] for w in routed.list(WIDGET).items] == [{"size": 3}]
    routed.delete(WIDGET, ObjectKey("default", "w"))
    assert side.list(WIDGET).items == []


def test_an_informer_over_a_routed_group_sees_its_changes(
        clusters: tuple[EmbeddedCluster, EmbeddedCluster, RoutedCluster]) -> None:
    _, side, routed = clusters
    informer = Informer(routed, WIDGET)
    stop = threading.Event()
    thread = threading.Thread(target=informer.run, args=(stop,))
    thread.start()
    try:
        side.create({"apiVersion": "example.com/v1", "kind": "Widget",
                     "metadata": {"name": "w", "namespace": "default"}})
        eventually(lambda: informer.get(ObjectKey("default", "w")) is not None)
    finally:
        stop.set()
        informer.wake()
        thread.join(5)


def test_metadata_lists_watches_and_pages_go_to_the_cluster_of_their_group(
        clusters: tuple[EmbeddedCluster, EmbeddedCluster, RoutedCluster]) -> None:
    _, side, routed = clusters
    for name in ("a", "b", "c"):
        routed.create({"apiVersion": "example.com/v1", "kind": "Widget", "spec": {"size": 1},
                       "metadata": {"name": name, "namespace": "default", "labels": {"pick": str(name != "c")}}})
    listed = routed.list_metadata(WIDGET, labels="pick=True")
    assert sorted(item["metadata"]["name"] for item in listed.items) == ["a", "b"]
    assert all(item["kind"] == "PartialObjectMetadata" and "spec" not in item for item in listed.items)
    pages = list(routed.pages(WIDGET, metadata_only=True))
    assert sorted(item["metadata"]["name"] for page in pages for item in page.items) == ["a", "b", "c"]
    assert [page.resource_version for page in pages][-1] == side.list(WIDGET).resource_version
    events = routed.watch_metadata(WIDGET, resource_version=listed.resource_version, timeout=5)
    routed.patch(WIDGET, ObjectKey("default", "a"), {"spec": {"size": 2}})
    event_type, obj = next(iter(events))[:2]
    assert (event_type, obj["metadata"]["name"], "spec" in obj) == ("MODIFIED", "a", False)
    getattr(events, "close", lambda: None)()
