"""Delete and its preconditions (uid, resourceVersion)."""

from __future__ import annotations

import uuid

import pytest

from reconcile.cluster import Cluster, ObjectKey
from reconcile.errors import Conflict, NotFound
from tests.reconcile.contract.support import CONFIGMAP, configmap


def test_a_delete_whose_uid_precondition_does_not_match_raises_conflict(cluster: Cluster, namespace: str) -> None:
    cluster.create(configmap("a", namespace))

    with pytest.raises(Conflict):
        cluster.delete(CONFIGMAP, ObjectKey(namespace, "a"), preconditions={"uid": str(uuid.uuid4())})
    assert cluster.get(CONFIGMAP, ObjectKey(namespace, "a")) is not None


def test_a_delete_whose_resource_version_precondition_is_stale_raises_conflict(cluster: Cluster,
                                                                              namespace: str) -> None:
    made = cluster.create(configmap("a", namespace))
    cluster.update({**made, "data": {"k": "1"}})

    with pytest.raises(Conflict):
        cluster.delete(CONFIGMAP, ObjectKey(namespace, "a"),
                       preconditions={"resourceVersion": made["metadata"]["resourceVersion"]})
    assert cluster.get(CONFIGMAP, ObjectKey(namespace, "a")) is not None


def test_a_delete_whose_preconditions_hold_deletes(cluster: Cluster, namespace: str) -> None:
    made = cluster.create(configmap("a", namespace))
    meta = made["metadata"]

    cluster.delete(CONFIGMAP, ObjectKey(namespace, "a"),
                   preconditions={"uid": meta["uid"], "resourceVersion": meta["resourceVersion"]})

    assert cluster.get(CONFIGMAP, ObjectKey(namespace, "a")) is None


def test_deleting_an_object_that_does_not_exist_raises_not_found(cluster: Cluster, namespace: str) -> None:
    with pytest.raises(NotFound):
        cluster.delete(CONFIGMAP, ObjectKey(namespace, "missing"))


def test_a_uid_precondition_protects_a_recreated_object_of_the_same_name(cluster: Cluster, namespace: str) -> None:
    old = cluster.create(configmap("a", namespace))
    cluster.delete(CONFIGMAP, ObjectKey(namespace, "a"))
    cluster.create(configmap("a", namespace))

    with pytest.raises(Conflict):
        cluster.delete(CONFIGMAP, ObjectKey(namespace, "a"), preconditions={"uid": old["metadata"]["uid"]})
    assert cluster.get(CONFIGMAP, ObjectKey(namespace, "a")) is not None
