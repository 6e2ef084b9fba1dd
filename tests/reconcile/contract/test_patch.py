"""Patches: JSON merge patch (RFC 7386), JSON patch (RFC 6902), and a resourceVersion in a
patch as a precondition."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from reconcile.cluster import Cluster, ObjectKey
from reconcile.errors import Conflict, Invalid, NotFound
from tests.reconcile.contract.support import CONFIGMAP, configmap, version


def test_a_merge_patch_merges_maps_and_null_removes_a_key(cluster: Cluster, namespace: str) -> None:
    cluster.create(configmap("a", namespace, data={"keep": "1", "change": "1", "drop": "1"}, labels={"x": "y"}))

    patched = cluster.patch(CONFIGMAP, ObjectKey(namespace, "a"), {"data": {"change": "2", "drop": None, "new": "3"}})

    assert patched["data"] == {"keep": "1", "change": "2", "new": "3"}
    assert patched["metadata"]["labels"] == {"x": "y"}


def test_a_merge_patch_carrying_a_stale_resource_version_raises_conflict(cluster: Cluster, namespace: str) -> None:
    made = cluster.create(configmap("a", namespace, data={"k": "1"}))
    cluster.patch(CONFIGMAP, ObjectKey(namespace, "a"), {"data": {"k": "2"}})

    with pytest.raises(Conflict):
        cluster.patch(CONFIGMAP, ObjectKey(namespace, "a"),
                      {"metadata": {"resourceVersion": made["metadata"]["resourceVersion"]}, "data": {"k": "3"}})
    assert cluster.get(CONFIGMAP, ObjectKey(namespace, "a"))["data"] == {"k": "2"}  # type: ignore[index]


def test_a_merge_patch_carrying_the_current_resource_version_applies(cluster: Cluster, namespace: str) -> None:
    made = cluster.create(configmap("a", namespace, data={"k": "1"}))

    patched = cluster.patch(CONFIGMAP, ObjectKey(namespace, "a"),
                            {"metadata": {"resourceVersion": made["metadata"]["resourceVersion"]}, "data": {"k": "2"}})

    assert patched["data"] == {"k": "2"}
    assert version(patched) > version(made)


def test_a_json_patch_applies_its_operations_in_order(cluster: Cluster, namespace: str) -> None:
    cluster.create(configmap("a", namespace, data={"a": "1", "b": "2"}))

    patched = cluster.patch(CONFIGMAP, ObjectKey(namespace, "a"), [
        {"op": "add", "path": "/data/c", "value": "3"},
        {"op": "replace", "path": "/data/a", "value": "10"},
        {"op": "remove", "path": "/data/b"},
        {"op": "copy", "from": "/data/c", "path": "/data/d"},
    ], patch_type="json")

    assert patched["data"] == {"a": "10", "c": "3", "d": "3"}


def test_a_json_patch_whose_test_fails_is_invalid_and_changes_nothing(cluster: Cluster, namespace: str) -> None:
    made = cluster.create(configmap("a", namespace, data={"k": "1"}))

    with pytest.raises(Invalid):
        cluster.patch(CONFIGMAP, ObjectKey(namespace, "a"), [
            {"op": "replace", "path": "/data/k", "value": "2"},
            {"op": "test", "path": "/data/k", "value": "1"},
        ], patch_type="json")

    after = cluster.get(CONFIGMAP, ObjectKey(namespace, "a"))
    assert after is not None and after["metadata"]["resourceVersion"] == made["metadata"]["resourceVersion"]


def test_a_json_patch_can_test_the_resource_version_as_a_lock(cluster: Cluster, namespace: str) -> None:
    made = cluster.create(configmap("a", namespace, data={"k": "1"}))
    lock = {"op": "test", "path": "/metadata/resourceVersion", "value": made["metadata"]["resourceVersion"]}
    cluster.patch(CONFIGMAP, ObjectKey(namespace, "a"), [lock, {"op": "replace", "path": "/data/k", "value": "2"}],
                  patch_type="json")

    with pytest.raises(Invalid):
        cluster.patch(CONFIGMAP, ObjectKey(namespace, "a"), [lock, {"op": "replace", "path": "/data/k", "value": "3"}],
                      patch_type="json")


def test_a_patch_of_an_object_that_does_not_exist_raises_not_found(cluster: Cluster, namespace: str) -> None:
    with pytest.raises(NotFound):
        cluster.patch(CONFIGMAP, ObjectKey(namespace, "missing"), {"data": {"k": "1"}})


def test_a_patch_that_changes_nothing_keeps_the_resource_version(cluster: Cluster, namespace: str) -> None:
    made = cluster.create(configmap("a", namespace, data={"k": "1"}))

    patched = cluster.patch(CONFIGMAP, ObjectKey(namespace, "a"), {"data": {"k": "1"}})

    assert patched["metadata"]["resourceVersion"] == made["metadata"]["resourceVersion"]


@pytest.mark.parametrize("patch_type", ["merge", "json"])
def test_a_patch_that_changes_the_uid_is_invalid_not_a_conflict(cluster: Cluster, namespace: str,
                                                               patch_type: str) -> None:
    cluster.create(configmap("a", namespace))
    other = str(uuid.uuid4())
    patch: Any = {"metadata": {"uid": other}} if patch_type == "merge" else [
        {"op": "replace", "path": "/metadata/uid", "value": other}]

    with pytest.raises(Invalid, match="metadata.uid"):
        cluster.patch(CONFIGMAP, ObjectKey(namespace, "a"), patch, patch_type=patch_type)  # type: ignore[arg-type]
