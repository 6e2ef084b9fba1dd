"""CustomResourceDefinitions: installing one serves its kind (scope, status subresource);
deleting one deletes its objects and stops serving the kind."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from reconcile.cluster import Cluster, ObjectKey
from reconcile.errors import Invalid, NotFound
from tests.reconcile.contract.support import CRD, CustomKind, crd, eventually, served, widget, with_meta


def test_installing_a_crd_serves_its_kind_with_the_scope_and_status_subresource_it_declares(
        cluster: Cluster, install_crd: Callable[..., CustomKind]) -> None:
    namespaced = install_crd(scope="Namespaced", status=True)
    plain = install_crd(scope="Cluster", status=False)

    info, other = cluster.resource(namespaced.kind), cluster.resource(plain.kind)

    assert (info.plural, info.namespaced, "status" in info.subresources) == ("widgets", True, True)
    assert (other.plural, other.namespaced, "status" in other.subresources) == ("widgets", False, False)


def test_an_installed_crd_reports_accepted_names_and_established(cluster: Cluster,
                                                                 install_crd: Callable[..., CustomKind]) -> None:
    widgets = install_crd()

    def established() -> None:
        found = cluster.get(CRD, ObjectKey("", widgets.crd_name))
        assert found is not None
        conditions = {c["type"]: c["status"] for c in found["status"].get("conditions", [])}
        assert conditions.get("Established") == "True" and conditions.get("NamesAccepted") == "True"
        assert found["status"]["acceptedNames"]["kind"] == "Widget"

    eventually(established)


def test_a_custom_resource_of_a_namespaced_kind_lives_in_a_namespace(cluster: Cluster, namespace: str,
                                                                     install_crd: Callable[..., CustomKind]) -> None:
    widgets = install_crd(scope="Namespaced")

    made = cluster.create(widget(widgets, "w", namespace, spec={"size": 1}))

    assert made["metadata"]["namespace"] == namespace
    assert cluster.get(widgets.kind, ObjectKey(namespace, "w")) is not None


def test_a_custom_resource_of_a_cluster_scoped_kind_lives_outside_namespaces(
        cluster: Cluster, install_crd: Callable[..., CustomKind]) -> None:
    widgets = install_crd(scope="Cluster")

    made = cluster.create(widget(widgets, "w", spec={"size": 1}))

    assert "namespace" not in made["metadata"]
    assert cluster.get(widgets.kind, ObjectKey("", "w")) is not None
    assert [o["metadata"]["name"] for o in cluster.list(widgets.kind).items] == ["w"]


def test_a_custom_resource_update_without_a_resource_version_is_invalid(
        cluster: Cluster, namespace: str, install_crd: Callable[..., CustomKind]) -> None:
    # custom resources do not allow unconditional updates (ConfigMaps do)
    widgets = install_crd()
    made = cluster.create(widget(widgets, "w", namespace, spec={"size": 1}))

    with pytest.raises(Invalid):
        cluster.update(with_meta({**made, "spec": {"size": 2}}, resourceVersion=None))


def test_deleting_a_crd_deletes_its_objects_and_stops_serving_the_kind(
        cluster: Cluster, namespace: str, install_crd: Callable[..., CustomKind]) -> None:
    widgets = install_crd()
    cluster.create(widget(widgets, "w", namespace, spec={"size": 1}))

    cluster.delete(CRD, ObjectKey("", widgets.crd_name))

    def unserved() -> None:
        assert cluster.get(CRD, ObjectKey("", widgets.crd_name)) is None
        try:
            cluster.resource(widgets.kind)
        except NotFound:
            return
        raise AssertionError(f"{widgets.kind} is still served")

    eventually(unserved)
    cluster.create(crd(widgets.kind.group))  # the same CRD again: served anew, and empty
    eventually(lambda: served(cluster, widgets.kind))
    assert cluster.list(widgets.kind, namespace=namespace).items == []


def test_a_crd_in_a_kubernetes_group_needs_the_api_approval_annotation(cluster: Cluster) -> None:
    unapproved = crd("widgets-contract.k8s.io")
    with pytest.raises(Invalid) as raised:
        cluster.create(unapproved)
    assert "metadata.annotations[api-approved.kubernetes.io]" in str(raised.value)
    assert cluster.get(CRD, ObjectKey("", unapproved["metadata"]["name"])) is None
