"""Metadata-only lists and watches: what kube-apiserver answers to
`Accept: application/json;as=PartialObjectMetadata(List);g=meta.k8s.io;v=v1` (controller-runtime's
metadata informers), and what EmbeddedCluster answers to `list_metadata` and `watch_metadata`."""

from __future__ import annotations

from typing import Any

from reconcile.cluster import ObjectKey
from tests.reconcile.contract.support import CONFIGMAP, WATCH_TIMEOUT, Backend, configmap

PARTIAL = ("meta.k8s.io/v1", "PartialObjectMetadata")


def shape(obj: dict[str, Any]) -> tuple[str, str]:
    return obj.get("apiVersion", ""), obj.get("kind", "")


def test_a_metadata_list_has_partial_object_metadata_items_without_their_data(backend: Backend,
                                                                              namespace: str) -> None:
    cluster = backend.cluster
    made = cluster.create(configmap("a", namespace, labels={"pick": "me"}, data={"k": "v" * 100}))
    cluster.create(configmap("b", namespace, data={"k": "v"}))

    result = cluster.list_metadata(CONFIGMAP, namespace=namespace, labels="pick=me")  # type: ignore[attr-defined]

    [item] = result.items
    assert shape(item) == PARTIAL
    assert set(item) == {"apiVersion", "kind", "metadata"}
    assert item["metadata"]["name"] == "a" and item["metadata"]["labels"] == {"pick": "me"}
    assert item["metadata"]["uid"] == made["metadata"]["uid"]
    assert item["metadata"]["resourceVersion"] == made["metadata"]["resourceVersion"]
    assert int(result.resource_version) >= int(made["metadata"]["resourceVersion"])


def test_a_metadata_watch_sends_partial_object_metadata_and_leaves_as_deleted(backend: Backend,
                                                                              namespace: str) -> None:
    cluster = backend.cluster
    start = cluster.list(CONFIGMAP, namespace=namespace).resource_version
    stream = cluster.watch_metadata(CONFIGMAP, namespace=namespace, labels="pick=me",  # type: ignore[attr-defined]
                                    resource_version=start, timeout=WATCH_TIMEOUT)

    made = cluster.create(configmap("a", namespace, labels={"pick": "me"}, data={"k": "1"}))
    cluster.update({**made, "metadata": {**made["metadata"], "labels": {"pick": "not-me"}}})
    cluster.create(configmap("b", namespace, data={"k": "1"}))
    cluster.delete(CONFIGMAP, ObjectKey(namespace, "b"))

    events = backend.take(stream, 2)
    assert [(e.type, e.object["metadata"]["name"]) for e in events] == [("ADDED", "a"), ("DELETED", "a")]
    assert [shape(e.object) for e in events] == [PARTIAL, PARTIAL]
    assert all(set(e.object) == {"apiVersion", "kind", "metadata"} for e in events)
    assert events[1].object["metadata"]["labels"] == {"pick": "me"}
