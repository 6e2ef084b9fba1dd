"""Namespaces: what the server gives a new one, admission into them, and their deletion."""

from __future__ import annotations

import pytest

from reconcile.cluster import Cluster, ObjectKey
from reconcile.errors import Forbidden, NotFound
from tests.reconcile.contract.support import (
    CONFIGMAP,
    HOLD,
    NAMESPACE,
    configmap,
    eventually,
    marked,
    token,
    with_meta,
)


@pytest.mark.min_server("1.21", "the kubernetes.io/metadata.name label came with 1.21")
def test_a_new_namespace_is_active_with_the_kubernetes_finalizer_and_its_name_label(cluster: Cluster,
                                                                                    namespace: str) -> None:
    found = cluster.get(NAMESPACE, ObjectKey("", namespace))

    assert found is not None
    assert found["metadata"]["labels"]["kubernetes.io/metadata.name"] == namespace
    assert found["spec"]["finalizers"] == ["kubernetes"]
    assert found["status"]["phase"] == "Active"


def test_a_namespace_is_cluster_scoped_and_found_without_a_namespace(cluster: Cluster, namespace: str) -> None:
    listed = cluster.list(NAMESPACE, fields=f"metadata.name={namespace}")

    assert [n["metadata"]["name"] for n in listed.items] == [namespace]
    assert "namespace" not in listed.items[0]["metadata"]


def test_creating_in_a_namespace_that_does_not_exist_raises_not_found(cluster: Cluster) -> None:
    with pytest.raises(NotFound):
        cluster.create(configmap("a", f"missing-{token()}"))


def test_deleting_a_namespace_deletes_everything_in_it_and_then_the_namespace(cluster: Cluster,
                                                                             namespace: str) -> None:
    for name in ("a", "b"):
        cluster.create(configmap(name, namespace))

    cluster.delete(NAMESPACE, ObjectKey("", namespace))

    def emptied_and_gone() -> None:
        assert cluster.get(NAMESPACE, ObjectKey("", namespace)) is None
        for name in ("a", "b"):
            assert cluster.get(CONFIGMAP, ObjectKey(namespace, name)) is None

    eventually(emptied_and_gone)


def test_a_terminating_namespace_refuses_new_objects_until_what_holds_it_is_gone(cluster: Cluster,
                                                                                 namespace: str) -> None:
    cluster.create(configmap("held", namespace, finalizers=[HOLD]))

    answer = cluster.delete(NAMESPACE, ObjectKey("", namespace))

    assert answer is not None and answer["metadata"]["deletionTimestamp"]  # still there: terminating
    held = eventually(lambda: marked(cluster, CONFIGMAP, ObjectKey(namespace, "held")))
    terminating = cluster.get(NAMESPACE, ObjectKey("", namespace))
    assert terminating is not None and terminating["status"]["phase"] == "Terminating"
    with pytest.raises(Forbidden):
        cluster.create(configmap("late", namespace))

    cluster.update(with_meta(held, finalizers=None))

    eventually(lambda: cluster.get(NAMESPACE, ObjectKey("", namespace)) is None)


@pytest.mark.embedded_only("deleting a system namespace on a shared cluster is not a risk worth taking")
@pytest.mark.parametrize("name", ["default", "kube-system", "kube-public"])
def test_the_system_namespaces_cannot_be_deleted(cluster: Cluster, name: str) -> None:
    with pytest.raises(Forbidden):
        cluster.delete(NAMESPACE, ObjectKey("", name))

    assert cluster.get(NAMESPACE, ObjectKey("", name)) is not None
