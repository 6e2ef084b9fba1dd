"""Create, get, update, list, and the resourceVersion that guards every write."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from reconcile.cluster import Cluster, ObjectKey
from reconcile.errors import AlreadyExists, Conflict, Invalid, NotFound, ServerError
from tests.reconcile.contract.support import CONFIGMAP, SERVER_MADE, configmap, version, with_meta


def test_create_returns_the_stored_object_with_the_metadata_the_server_sets(cluster: Cluster,
                                                                          namespace: str) -> None:
    made = cluster.create(configmap("a", namespace, data={"k": "1"}))

    meta = made["metadata"]
    assert meta["uid"] and meta["creationTimestamp"].endswith("Z")
    assert meta["resourceVersion"].isdigit()
    assert made["data"] == {"k": "1"}
    fetched = cluster.get(CONFIGMAP, ObjectKey(namespace, "a"))
    assert fetched is not None
    assert (fetched["metadata"]["uid"], fetched["metadata"]["resourceVersion"], fetched["data"]) == \
        (meta["uid"], meta["resourceVersion"], {"k": "1"})


def test_get_of_an_object_that_does_not_exist_returns_none(cluster: Cluster, namespace: str) -> None:
    assert cluster.get(CONFIGMAP, ObjectKey(namespace, "missing")) is None


def test_creating_a_name_that_exists_raises_already_exists(cluster: Cluster, namespace: str) -> None:
    cluster.create(configmap("a", namespace))

    with pytest.raises(AlreadyExists):
        cluster.create(configmap("a", namespace, data={"k": "2"}))


def test_generate_name_gets_a_random_five_character_suffix(cluster: Cluster, namespace: str) -> None:
    body = configmap("", namespace, generateName="gen-")
    del body["metadata"]["name"]

    first, second = cluster.create(body), cluster.create(body)

    for made in (first, second):
        assert made["metadata"]["name"].startswith("gen-") and len(made["metadata"]["name"]) == len("gen-") + 5
    assert first["metadata"]["name"] != second["metadata"]["name"]


def test_an_invalid_name_is_refused_as_invalid(cluster: Cluster, namespace: str) -> None:
    with pytest.raises(Invalid):
        cluster.create(configmap("Not_A_Name", namespace))


def test_creating_an_object_that_carries_a_resource_version_fails(cluster: Cluster, namespace: str) -> None:
    # kube-apiserver's storage refuses it with a 500 ("resourceVersion should not be set on objects
    # to be created"): a controller copying an object it read must strip the version first.
    with pytest.raises(ServerError, match="resourceVersion should not be set"):
        cluster.create(configmap("a", namespace, resourceVersion="12"))
    assert cluster.get(CONFIGMAP, ObjectKey(namespace, "a")) is None


def test_update_with_a_stale_resource_version_raises_conflict(cluster: Cluster, namespace: str) -> None:
    first = cluster.create(configmap("a", namespace, data={"k": "1"}))
    cluster.update({**first, "data": {"k": "2"}})

    with pytest.raises(Conflict):
        cluster.update({**first, "data": {"k": "3"}})  # still carries the first resourceVersion
    assert cluster.get(CONFIGMAP, ObjectKey(namespace, "a"))["data"] == {"k": "2"}  # type: ignore[index]


def test_update_without_a_resource_version_overwrites_a_configmap_unconditionally(cluster: Cluster,
                                                                                 namespace: str) -> None:
    first = cluster.create(configmap("a", namespace, data={"k": "1"}))
    cluster.update({**first, "data": {"k": "2"}})

    updated = cluster.update(with_meta({**first, "data": {"k": "3"}}, resourceVersion=None))

    assert updated["data"] == {"k": "3"}


def test_an_update_carrying_the_uid_of_an_earlier_incarnation_raises_conflict(cluster: Cluster,
                                                                             namespace: str) -> None:
    old = cluster.create(configmap("a", namespace))
    cluster.delete(CONFIGMAP, ObjectKey(namespace, "a"))
    cluster.create(configmap("a", namespace))

    with pytest.raises(Conflict):
        cluster.update(with_meta({**old, "data": {"k": "x"}}, resourceVersion=None))


def test_update_of_an_object_that_is_gone_raises_not_found(cluster: Cluster, namespace: str) -> None:
    made = cluster.create(configmap("a", namespace))
    cluster.delete(CONFIGMAP, ObjectKey(namespace, "a"))

    # without the uid: with it, 1.20 answered Conflict (a failed uid precondition), current servers NotFound
    with pytest.raises(NotFound):
        cluster.update(with_meta({**made, "data": {"k": "2"}}, resourceVersion=None, uid=None))


def test_server_set_metadata_is_kept_whatever_an_update_sends(cluster: Cluster, namespace: str) -> None:
    made = cluster.create(configmap("a", namespace))

    updated = cluster.update(with_meta({**made, "data": {"k": "1"}}, creationTimestamp="2001-01-01T00:00:00Z"))

    assert updated["metadata"]["creationTimestamp"] == made["metadata"]["creationTimestamp"]
    assert updated["metadata"]["uid"] == made["metadata"]["uid"]


def test_every_write_moves_the_resource_version_forward_across_objects(cluster: Cluster, namespace: str) -> None:
    a1 = cluster.create(configmap("a", namespace))
    a2 = cluster.update({**a1, "data": {"k": "1"}})
    b1 = cluster.create(configmap("b", namespace))
    a3 = cluster.update({**a2, "data": {"k": "2"}})

    assert version(a1) < version(a2) < version(b1) < version(a3)


def test_an_update_that_changes_nothing_keeps_the_resource_version(cluster: Cluster, namespace: str) -> None:
    made = cluster.create(configmap("a", namespace, data={"k": "1"}))

    again = cluster.update(made)

    assert again["metadata"]["resourceVersion"] == made["metadata"]["resourceVersion"]


def test_a_list_carries_a_resource_version_no_older_than_any_listed_object(cluster: Cluster,
                                                                         namespace: str) -> None:
    for name in ("a", "b", "c"):
        cluster.create(configmap(name, namespace))

    result = cluster.list(CONFIGMAP, namespace=namespace)

    assert result.resource_version.isdigit()
    assert int(result.resource_version) >= max(version(o) for o in result.items)


def test_list_returns_the_objects_of_one_namespace_ordered_by_name(cluster: Cluster,
                                                                  new_namespace: Callable[[], str]) -> None:
    here, there = new_namespace(), new_namespace()
    for name in ("c", "a", "b"):
        cluster.create(configmap(name, here))
    cluster.create(configmap("elsewhere", there))

    listed = [o["metadata"]["name"] for o in cluster.list(CONFIGMAP, namespace=here).items
              if o["metadata"]["name"] not in SERVER_MADE]

    assert listed == ["a", "b", "c"]


def test_listed_objects_carry_their_api_version_and_kind(cluster: Cluster, namespace: str) -> None:
    # a real server leaves them out of the items of a built-in kind's list; the Cluster puts them back
    cluster.create(configmap("a", namespace))

    items = cluster.list(CONFIGMAP, namespace=namespace).items

    assert {(o["apiVersion"], o["kind"]) for o in items} == {("v1", "ConfigMap")}


def test_a_secrets_string_data_is_stored_base64_encoded_in_data(cluster: Cluster, namespace: str) -> None:
    made = cluster.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": namespace},
                           "data": {"kept": "MQ==", "over": "MQ=="}, "stringData": {"over": "two", "new": "3"}})

    assert made["data"] == {"kept": "MQ==", "over": "dHdv", "new": "Mw=="}
    assert "stringData" not in made
    assert made["type"] == "Opaque"
    updated = cluster.update({**made, "stringData": {"kept": "one"}})
    assert updated["data"]["kept"] == "b25l"
    assert "stringData" not in updated


def test_empty_metadata_collections_are_not_stored(cluster: Cluster, namespace: str) -> None:
    made = cluster.create(with_meta(configmap("a", namespace), labels={}, annotations={}, finalizers=[],
                                    ownerReferences=[]))

    assert not {"labels", "annotations", "finalizers", "ownerReferences"} & made["metadata"].keys()


def test_a_configmap_keeps_only_the_fields_its_type_declares(cluster: Cluster, namespace: str) -> None:
    made = cluster.create({**configmap("a", namespace, data={}), "spec": {"stray": "field"}})

    assert "spec" not in made and "data" not in made
    updated = cluster.update({**made, "data": {"k": "1"}, "status": {"stray": "too"}})
    assert updated["data"] == {"k": "1"} and "status" not in updated
