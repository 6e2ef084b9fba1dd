"""The status subresource and metadata.generation.

`generation` is how a controller tells "the desired state changed" from "someone wrote
status or metadata": it starts at 1 and moves only on spec changes, and kinds without a
spec/status split (ConfigMaps, Namespaces, ...) have none at all. Where a kind has a status
subresource, update() cannot write status and update_status() can write nothing else.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from reconcile.cluster import Cluster, ObjectKey
from reconcile.errors import Conflict, NotFound
from tests.reconcile.contract.support import (
    DEPLOYMENT,
    NAMESPACE,
    CustomKind,
    configmap,
    deployment,
    version,
    widget,
    with_meta,
)


def test_a_custom_resource_starts_at_generation_one_and_create_drops_its_status(
        cluster: Cluster, namespace: str, install_crd: Callable[..., CustomKind]) -> None:
    widgets = install_crd(status=True)

    made = cluster.create(widget(widgets, "w", namespace, spec={"size": 1}, status={"ready": True}))

    assert made["metadata"]["generation"] == 1
    assert "status" not in made


def test_spec_changes_bump_generation_and_metadata_changes_do_not(
        cluster: Cluster, namespace: str, install_crd: Callable[..., CustomKind]) -> None:
    widgets = install_crd(status=True)
    made = cluster.create(widget(widgets, "w", namespace, spec={"size": 1}))

    relabelled = cluster.update(with_meta(made, labels={"a": "b"}, annotations={"c": "d"}))
    resized = cluster.update({**relabelled, "spec": {"size": 2}})

    assert relabelled["metadata"]["generation"] == 1
    assert resized["metadata"]["generation"] == 2


def test_update_ignores_status_when_the_kind_has_a_status_subresource(
        cluster: Cluster, namespace: str, install_crd: Callable[..., CustomKind]) -> None:
    widgets = install_crd(status=True)
    made = cluster.create(widget(widgets, "w", namespace, spec={"size": 1}))
    with_status = cluster.update_status({**made, "status": {"phase": "Ready"}})

    updated = cluster.update({**with_status, "spec": {"size": 2}, "status": {"phase": "Broken"}})

    assert updated["spec"] == {"size": 2}
    assert updated["status"] == {"phase": "Ready"}


def test_update_status_writes_status_and_ignores_everything_else(
        cluster: Cluster, namespace: str, install_crd: Callable[..., CustomKind]) -> None:
    widgets = install_crd(status=True)
    made = cluster.create(widget(widgets, "w", namespace, spec={"size": 1}))

    updated = cluster.update_status(with_meta({**made, "spec": {"size": 9}, "status": {"phase": "Ready"}},
                                              labels={"sneaky": "yes"}))

    assert updated["status"] == {"phase": "Ready"}
    assert updated["spec"] == {"size": 1}
    assert "labels" not in updated["metadata"]
    assert updated["metadata"]["generation"] == 1
    assert version(updated) > version(made)


def test_update_status_with_a_stale_resource_version_raises_conflict(
        cluster: Cluster, namespace: str, install_crd: Callable[..., CustomKind]) -> None:
    widgets = install_crd(status=True)
    made = cluster.create(widget(widgets, "w", namespace, spec={"size": 1}))
    cluster.update({**made, "spec": {"size": 2}})

    with pytest.raises(Conflict):
        cluster.update_status({**made, "status": {"phase": "Ready"}})


def test_update_status_of_a_kind_without_a_status_subresource_raises_not_found(cluster: Cluster,
                                                                              namespace: str) -> None:
    made = cluster.create(configmap("a", namespace))

    with pytest.raises(NotFound):
        cluster.update_status({**made, "status": {"phase": "Ready"}})


def test_without_a_status_subresource_update_writes_status_and_bumps_generation(
        cluster: Cluster, namespace: str, install_crd: Callable[..., CustomKind]) -> None:
    # for custom resources, generation moves on any change outside metadata; status is only
    # set apart when it is a subresource
    widgets = install_crd(status=False)
    made = cluster.create(widget(widgets, "w", namespace, spec={"size": 1}, status={"phase": "New"}))

    updated = cluster.update({**made, "status": {"phase": "Ready"}})

    assert made["status"] == {"phase": "New"}
    assert updated["status"] == {"phase": "Ready"}
    assert updated["metadata"]["generation"] == 2


def test_configmaps_have_no_generation_however_often_they_change(cluster: Cluster, namespace: str) -> None:
    made = cluster.create(configmap("a", namespace, data={"k": "1"}))

    updated = cluster.update({**made, "data": {"k": "2"}})

    assert "generation" not in made["metadata"]
    assert "generation" not in updated["metadata"]


def test_namespaces_have_no_generation(cluster: Cluster, namespace: str) -> None:
    found = cluster.get(NAMESPACE, ObjectKey("", namespace))

    assert found is not None
    assert "generation" not in found["metadata"]


def test_a_deployment_generation_moves_with_its_spec_and_annotations_but_not_its_labels(
        cluster: Cluster, namespace: str) -> None:
    # the Deployment strategy counts annotations as desired state (they are copied to the
    # ReplicaSets); patches, so that the deployment controller's status writes cannot conflict
    key = ObjectKey(namespace, "web")
    made = cluster.create(deployment("web", namespace))

    labelled = cluster.patch(DEPLOYMENT, key, {"metadata": {"labels": {"tier": "front"}}})
    annotated = cluster.patch(DEPLOYMENT, key, {"metadata": {"annotations": {"note": "hi"}}})
    respecced = cluster.patch(DEPLOYMENT, key, {"spec": {"minReadySeconds": 5}})

    assert made["metadata"]["generation"] == 1
    assert labelled["metadata"]["generation"] == 1
    assert annotated["metadata"]["generation"] == 2
    assert respecced["metadata"]["generation"] == 3


def test_a_patch_of_the_status_subresource_changes_only_status(
        cluster: Cluster, namespace: str, install_crd: Callable[..., CustomKind]) -> None:
    widgets = install_crd(status=True)
    cluster.create(widget(widgets, "w", namespace, spec={"size": 1}))
    key = ObjectKey(namespace, "w")

    patched = cluster.patch(widgets.kind, key, {"spec": {"size": 5}, "status": {"phase": "Ready"}},
                            subresource="status")
    main = cluster.patch(widgets.kind, key, {"status": {"phase": "Broken"}})

    assert patched["spec"] == {"size": 1} and patched["status"] == {"phase": "Ready"}
    assert main["status"] == {"phase": "Ready"}
