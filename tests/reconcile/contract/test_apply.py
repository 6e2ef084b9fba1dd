"""Server-side apply: an applier's intent, the fields it owns, and conflicts between managers."""

from __future__ import annotations

import uuid

import pytest

from reconcile.cluster import Cluster, ObjectKey
from reconcile.errors import Conflict, Invalid, ServerError
from tests.reconcile.contract.support import CONFIGMAP, configmap, owners


def test_apply_creates_an_absent_object_owned_by_its_manager(cluster: Cluster, namespace: str) -> None:
    made = cluster.apply(configmap("a", namespace, data={"k": "1"}), field_manager="alice")

    assert made["data"] == {"k": "1"}
    assert owners(made, "data", "k") == {"alice"}
    entry = next(e for e in made["metadata"]["managedFields"] if e["manager"] == "alice")
    assert entry["operation"] == "Apply"


def test_applying_the_same_intent_again_changes_nothing(cluster: Cluster, namespace: str) -> None:
    first = cluster.apply(configmap("a", namespace, data={"k": "1"}), field_manager="alice")

    again = cluster.apply(configmap("a", namespace, data={"k": "1"}), field_manager="alice")

    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]


def test_applying_a_change_to_a_field_another_manager_owns_raises_conflict(cluster: Cluster, namespace: str) -> None:
    cluster.apply(configmap("a", namespace, data={"k": "1"}), field_manager="alice")

    with pytest.raises(Conflict, match="alice"):
        cluster.apply(configmap("a", namespace, data={"k": "2"}), field_manager="bob")
    assert cluster.get(CONFIGMAP, ObjectKey(namespace, "a"))["data"] == {"k": "1"}  # type: ignore[index]


def test_a_forced_apply_takes_the_field_from_its_owner(cluster: Cluster, namespace: str) -> None:
    cluster.apply(configmap("a", namespace, data={"k": "1", "mine": "x"}), field_manager="alice")

    taken = cluster.apply(configmap("a", namespace, data={"k": "2"}), field_manager="bob", force=True)

    assert taken["data"] == {"k": "2", "mine": "x"}
    assert owners(taken, "data", "k") == {"bob"}
    assert owners(taken, "data", "mine") == {"alice"}


def test_applying_the_value_a_field_already_has_shares_it_without_conflict(cluster: Cluster, namespace: str) -> None:
    cluster.apply(configmap("a", namespace, data={"k": "1"}), field_manager="alice")

    shared = cluster.apply(configmap("a", namespace, data={"k": "1"}), field_manager="bob")

    assert owners(shared, "data", "k") == {"alice", "bob"}


def test_a_field_left_out_of_the_next_apply_is_removed(cluster: Cluster, namespace: str) -> None:
    cluster.apply(configmap("a", namespace, data={"keep": "1", "drop": "2"}, labels={"x": "y"}), field_manager="alice")

    pruned = cluster.apply(configmap("a", namespace, data={"keep": "1"}), field_manager="alice")

    assert pruned["data"] == {"keep": "1"}
    assert "labels" not in pruned["metadata"]


def test_a_field_left_out_that_another_manager_also_applied_stays(cluster: Cluster, namespace: str) -> None:
    cluster.apply(configmap("a", namespace, data={"k": "1", "other": "2"}), field_manager="alice")
    cluster.apply(configmap("a", namespace, data={"k": "1"}), field_manager="bob")

    kept = cluster.apply(configmap("a", namespace, data={"other": "2"}), field_manager="alice")

    assert kept["data"] == {"k": "1", "other": "2"}
    assert owners(kept, "data", "k") == {"bob"}


def test_applying_a_change_to_a_field_written_by_update_raises_conflict(cluster: Cluster, namespace: str) -> None:
    made = cluster.create(configmap("a", namespace))
    cluster.update({**made, "data": {"k": "1"}})

    with pytest.raises(Conflict):
        cluster.apply(configmap("a", namespace, data={"k": "2"}), field_manager="alice")


@pytest.mark.min_server("1.21", "1.20 creates it (seen); current servers refuse a create that sets resourceVersion")
def test_applying_an_absent_object_that_carries_a_resource_version_fails(cluster: Cluster, namespace: str) -> None:
    with pytest.raises(ServerError, match="resourceVersion should not be set"):
        cluster.apply(configmap("a", namespace, resourceVersion="7"), field_manager="alice")
    assert cluster.get(CONFIGMAP, ObjectKey(namespace, "a")) is None


def test_applying_with_a_stale_resource_version_raises_conflict(cluster: Cluster, namespace: str) -> None:
    first = cluster.apply(configmap("a", namespace, data={"k": "1"}), field_manager="alice")
    cluster.apply(configmap("a", namespace, data={"k": "2"}), field_manager="alice")

    with pytest.raises(Conflict):
        cluster.apply(configmap("a", namespace, data={"k": "3"}, resourceVersion=first["metadata"]["resourceVersion"]),
                      field_manager="alice")


def test_an_apply_that_changes_the_uid_is_invalid(cluster: Cluster, namespace: str) -> None:
    cluster.apply(configmap("a", namespace, data={"k": "v"}), field_manager="me")
    intent = configmap("a", namespace, data={"k": "v"})
    intent["metadata"]["uid"] = str(uuid.uuid4())

    with pytest.raises(Invalid, match="metadata.uid"):
        cluster.apply(intent, field_manager="me")
