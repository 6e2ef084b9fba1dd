"""Apply strategies: Metacontroller's 3-way merge (pure, then on the embedded cluster) and SSA."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest

from reconcile import Conflict, FakeClock, Kind, Obj, ObjectKey
from reconcile.apply import (
    LAST_APPLIED,
    ApplyStrategy,
    ServerSideApply,
    ThreeWayApply,
    apply_3way,
    apply_ssa,
    last_applied,
    last_applied_json,
    three_way_merge,
    three_way_update,
)
from reconcile.embedded import EmbeddedCluster

CONFIGMAP = Kind("v1", "ConfigMap")
KEY = ObjectKey("default", "a")


@pytest.fixture
def cluster() -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(clock=FakeClock()) as cluster:
        yield cluster


def configmap(data: dict[str, str], name: str = "a", **meta: Any) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default", **meta},
            "data": data}


def stored(cluster: EmbeddedCluster) -> Obj:
    found = cluster.get(CONFIGMAP, KEY)
    assert found is not None
    return found


def rv(obj: Obj) -> str:
    return str(obj["metadata"]["resourceVersion"])


# --- three_way_merge: pure --------------------------------------------------------------------


def test_merge_removes_what_we_dropped_sets_what_we_want_and_keeps_what_others_set() -> None:
    observed = {"keep": "other", "remove": "other", "replace": "other"}
    last = {"remove": "old", "replace": "old"}
    desired = {"replace": "new", "add": "new"}
    assert three_way_merge(observed, last, desired) == {"keep": "other", "replace": "new", "add": "new"}


def test_merge_recurses_into_nested_objects() -> None:
    observed = {"update": {"keep": "other", "remove": "other"}}
    last = {"update": {"remove": "old", "replace": "old"}}
    desired = {"update": {"replace": "new", "add": "new"}}
    assert three_way_merge(observed, last, desired) == {"update": {"keep": "other", "replace": "new", "add": "new"}}


def test_merge_replaces_lists_that_are_not_list_maps() -> None:
    observed = {"list": [1, 2, 3, {"a": True}], "objects": [{"name": "keep"}, {"notName": "x"}]}
    last = {"list": [4, 5, 6], "objects": [{"name": "remove"}]}
    desired = {"list": [7, 8, 9, {"b": False}], "objects": [{"name": "add"}]}
    assert three_way_merge(observed, last, desired) == {"list": [7, 8, 9, {"b": False}], "objects": [{"name": "add"}]}


def test_merge_merges_lists_of_objects_by_their_conventional_key() -> None:
    observed = {
        "listMap": [{"name": "keep", "value": "other"}, {"name": "remove", "value": "other"},
                    {"name": "merge", "nested": {"keep": "other"}}],
        "ports1": [{"port": 80, "keep": "other"}],
        "ports2": [{"containerPort": 80, "keep": "other"}],
    }
    last = {"listMap": [{"name": "remove", "value": "old"}], "ports1": [{"port": 80, "remove": "old"}]}
    desired = {
        "listMap": [{"name": "add", "value": "new"}, {"name": "merge", "nested": {"add": "new"}}],
        "ports1": [{"port": 80, "add": "new"}, {"port": 90}],
        "ports2": [{"containerPort": 80}, {"containerPort": 90}],
    }
    assert three_way_merge(observed, last, desired) == {
        "listMap": [{"name": "keep", "value": "other"}, {"name": "merge", "nested": {"keep": "other", "add": "new"}},
                    {"name": "add", "value": "new"}],
        "ports1": [{"port": 80, "keep": "other", "add": "new"}, {"port": 90}],
        "ports2": [{"containerPort": 80, "keep": "other"}, {"containerPort": 90}],
    }


def test_merged_list_maps_keep_observed_order_then_add_new_items_in_desired_order() -> None:
    # Metacontroller's order (metacontroller #562): reordering desired does not reorder the object.
    env = [{"name": "VAR1", "value": "1"}, {"name": "VAR3", "value": "3"}, {"name": "VAR2", "value": "2"}]
    desired = [{"name": "VAR1", "value": "1"}, {"name": "VAR5", "value": "5"}, {"name": "VAR2", "value": "2"},
               {"name": "VAR4", "value": "4"}]
    assert [e["name"] for e in three_way_merge({"env": env}, {"env": env}, {"env": desired})["env"]] == [
        "VAR1", "VAR2", "VAR5", "VAR4"]


def test_merge_key_precedence_prefers_container_port_then_port_then_mount_path_then_name() -> None:
    # volumeMounts of one volume at two paths share a name; mountPath comes first (metacontroller #650)
    observed = {"volumeMounts": [{"name": "v", "mountPath": "/a"}, {"name": "v", "mountPath": "/b", "readOnly": True}]}
    desired = {"volumeMounts": [{"name": "v", "mountPath": "/b"}, {"name": "v", "mountPath": "/c"}]}
    last = {"volumeMounts": [{"name": "v", "mountPath": "/a"}, {"name": "v", "mountPath": "/b"}]}
    assert three_way_merge(observed, last, desired) == {
        "volumeMounts": [{"name": "v", "mountPath": "/b", "readOnly": True}, {"name": "v", "mountPath": "/c"}]}
    ports = [{"containerPort": 8080, "port": 1, "name": "a", "extra": "kept"}]
    merged = three_way_merge({"ports": ports}, {}, {"ports": [{"containerPort": 8080, "port": 2, "name": "b"}]})
    assert merged == {"ports": [{"containerPort": 8080, "port": 2, "name": "b", "extra": "kept"}]}


def test_a_merge_key_that_repeats_within_a_list_gives_way_to_the_next_key() -> None:
    # two Service ports on 53 (TCP and UDP): "port" is not unique, so they merge by "name" (metacontroller #371)
    observed = {"ports": [{"port": 53, "protocol": "TCP", "name": "dns-tcp", "nodePort": 30053},
                          {"port": 53, "protocol": "UDP", "name": "dns", "nodePort": 30054}]}
    desired = {"ports": [{"port": 53, "protocol": "TCP", "name": "dns-tcp"},
                         {"port": 53, "protocol": "UDP", "name": "dns"}]}
    assert three_way_merge(observed, desired, desired) == observed
    no_key = {"items": [{"value": 1}, {"value": 1}]}
    assert three_way_merge({"items": [{"value": 2, "x": 1}]}, {}, no_key) == no_key


def test_merge_keys_compare_numbers_and_strings_as_go_prints_them() -> None:
    observed = {"ports": [{"port": 80, "keep": "other"}]}
    assert three_way_merge(observed, {}, {"ports": [{"port": 80.0, "add": "new"}]}) == {
        "ports": [{"port": 80.0, "keep": "other", "add": "new"}]}


def test_a_null_in_desired_removes_the_field_instead_of_writing_null() -> None:
    observed = {"a": {"x": 1, "y": 2}, "b": "set", "c": 3}
    assert three_way_merge(observed, {"a": {"x": 1}}, {"a": None, "b": None}) == {"c": 3}


def test_desired_of_another_type_replaces_the_observed_value() -> None:
    observed = {"a": {"x": 1}, "b": [1, 2], "c": "s"}
    desired = {"a": "scalar", "b": {"k": "v"}, "c": [1]}
    assert three_way_merge(observed, {}, desired) == desired


def test_merging_again_with_the_same_desired_changes_nothing() -> None:
    observed = {"spec": {"replicas": 1, "template": {"containers": [{"name": "c", "image": "a", "defaulted": 1}]}},
                "other": True}
    desired = {"spec": {"replicas": 2, "template": {"containers": [{"name": "c", "image": "b"}]}}}
    once = three_way_merge(observed, {}, desired)
    assert three_way_merge(once, desired, desired) == once == {
        "spec": {"replicas": 2, "template": {"containers": [{"name": "c", "image": "b", "defaulted": 1}]}},
        "other": True}


def test_merge_changes_none_of_its_arguments() -> None:
    observed = {"a": {"x": [{"name": "n", "v": 1}]}, "b": 1}
    last, desired = {"b": 1}, {"a": {"x": [{"name": "n", "v": 2}]}}
    before = copy.deepcopy((observed, last, desired))
    merged = three_way_merge(observed, last, desired)
    merged["a"]["x"][0]["v"] = 99
    assert (observed, last, desired) == before


def test_last_applied_is_written_as_go_json_marshal_writes_it() -> None:
    value = {"b": 1, "a": {"z": "<x> & y", "y": [True, None]}, "é": "ü"}
    assert last_applied_json(value) == '{"a":{"y":[true,null],"z":"\\u003cx\\u003e \\u0026 y"},"b":1,"é":"ü"}'
    assert json.loads(last_applied_json(value)) == value


def test_an_unreadable_last_applied_annotation_counts_as_none() -> None:
    assert last_applied({"metadata": {"annotations": {LAST_APPLIED: "{not json"}}}) == {}
    assert last_applied({"metadata": {"annotations": {LAST_APPLIED: "[1]"}}}) == {}
    assert last_applied({"metadata": {}}) == {}


def test_three_way_update_keeps_server_fields_and_status_as_observed() -> None:
    observed = configmap({"k": "v"}, uid="u1", resourceVersion="7", generation=1)
    observed["status"] = {"phase": "Observed"}
    desired = configmap({"k": "w"}, uid="other", resourceVersion="1", generation=9)
    desired["status"] = {"phase": "Desired"}
    update = three_way_update(observed, desired)
    assert update is not None and update["data"] == {"k": "w"} and update["status"] == {"phase": "Observed"}
    assert {k: update["metadata"][k] for k in ("uid", "resourceVersion", "generation")} == {
        "uid": "u1", "resourceVersion": "7", "generation": 1}
    # once recorded, the same desired state is no change, whatever it says about server fields
    assert three_way_update(update, desired) is None


# --- apply_3way on the embedded cluster -----------------------------------------------------


def test_apply_3way_creates_an_absent_object_recording_what_was_applied(cluster: EmbeddedCluster) -> None:
    desired = configmap({"k": "v"}, labels={"app": "x"})
    created = apply_3way(cluster, desired)
    now = stored(cluster)
    assert created == now and now["data"] == {"k": "v"} and now["metadata"]["labels"] == {"app": "x"}
    assert json.loads(now["metadata"]["annotations"][LAST_APPLIED]) == desired


def test_apply_3way_updates_what_changed_and_keeps_fields_set_by_others(cluster: EmbeddedCluster) -> None:
    apply_3way(cluster, configmap({"keep": "1", "drop": "1"}))
    cluster.patch(CONFIGMAP, KEY, {"data": {"theirs": "t"}, "metadata": {"labels": {"owner": "someone"}}})
    apply_3way(cluster, configmap({"keep": "2", "add": "1"}))
    now = stored(cluster)
    assert now["data"] == {"keep": "2", "theirs": "t", "add": "1"}
    assert now["metadata"]["labels"] == {"owner": "someone"}
    assert json.loads(now["metadata"]["annotations"][LAST_APPLIED]) == configmap({"keep": "2", "add": "1"})


def test_reapplying_the_same_desired_state_makes_no_write(cluster: EmbeddedCluster) -> None:
    desired = configmap({"k": "v"})
    first = apply_3way(cluster, desired)
    second = apply_3way(cluster, copy.deepcopy(desired))
    assert rv(second) == rv(first) == rv(stored(cluster))


def test_an_object_written_by_metacontroller_is_not_rewritten(cluster: EmbeddedCluster) -> None:
    desired = configmap({"k": "v", "url": "a<b"})
    # the same JSON as another serialiser writes it: other key order, spaces, no HTML escaping
    recorded = json.dumps({"metadata": desired["metadata"], "kind": "ConfigMap", "data": desired["data"],
                           "apiVersion": "v1"}, indent=1)
    before = cluster.create(configmap({"k": "v", "url": "a<b"}, annotations={LAST_APPLIED: recorded}))
    assert rv(apply_3way(cluster, desired)) == rv(before) == rv(stored(cluster))


def test_an_object_without_last_applied_is_adopted_with_one_update(cluster: EmbeddedCluster) -> None:
    before = cluster.create(configmap({"k": "v", "theirs": "t"}))
    adopted = apply_3way(cluster, configmap({"k": "v"}))
    assert rv(adopted) != rv(before) and adopted["data"] == {"k": "v", "theirs": "t"}
    assert rv(apply_3way(cluster, configmap({"k": "v"}))) == rv(adopted)


def test_a_last_applied_annotation_sent_in_desired_is_ignored(cluster: EmbeddedCluster) -> None:
    echoed = configmap({"k": "v"}, annotations={LAST_APPLIED: '{"bogus":true}'})
    apply_3way(cluster, echoed)
    assert json.loads(stored(cluster)["metadata"]["annotations"][LAST_APPLIED]) == configmap({"k": "v"})


def test_apply_3way_leaves_an_object_being_deleted_alone(cluster: EmbeddedCluster) -> None:
    apply_3way(cluster, configmap({"k": "v"}, finalizers=["example.com/hold"]))
    deleting = cluster.delete(CONFIGMAP, KEY)
    assert deleting is not None
    assert rv(apply_3way(cluster, configmap({"k": "changed"}, finalizers=["example.com/hold"]))) == rv(deleting)
    assert stored(cluster)["data"] == {"k": "v"}


def test_apply_3way_adds_the_owner_after_recording_last_applied(cluster: EmbeddedCluster) -> None:
    parent = cluster.create(configmap({}, name="parent"))
    desired = configmap({"k": "v"})
    created = apply_3way(cluster, desired, owner=parent)
    assert [r["uid"] for r in created["metadata"]["ownerReferences"]] == [parent["metadata"]["uid"]]
    assert "ownerReferences" not in json.loads(created["metadata"]["annotations"][LAST_APPLIED])["metadata"]
    assert rv(apply_3way(cluster, desired, owner=parent)) == rv(created)  # the owner is kept, no write


def test_apply_3way_raises_conflict_when_the_object_changes_under_it(cluster: EmbeddedCluster) -> None:
    apply_3way(cluster, configmap({"k": "v"}))

    class Racing:
        def __init__(self, inner: EmbeddedCluster) -> None:
            self.inner = inner

        def update(self, obj: Obj) -> Obj:
            self.inner.patch(CONFIGMAP, KEY, {"metadata": {"labels": {"raced": "yes"}}})
            return self.inner.update(obj)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

    with pytest.raises(Conflict):
        apply_3way(Racing(cluster), configmap({"k": "new"}))
    assert stored(cluster)["data"] == {"k": "v"}


# --- server-side apply ----------------------------------------------------------------------


def test_apply_ssa_creates_then_makes_no_write_when_nothing_changed(cluster: EmbeddedCluster) -> None:
    first = apply_ssa(cluster, configmap({"k": "v"}), "porchkit")
    assert rv(apply_ssa(cluster, configmap({"k": "v"}), "porchkit")) == rv(first) == rv(stored(cluster))


def test_apply_ssa_corrects_drift_on_a_kind_without_generation(cluster: EmbeddedCluster) -> None:
    # metacontroller #1177: a generation-based skip never re-applied drifted ConfigMaps
    apply_ssa(cluster, configmap({"k": "v"}), "porchkit")
    drifted = stored(cluster)
    cluster.update({**drifted, "data": {"k": "edited by hand"}})
    apply_ssa(cluster, configmap({"k": "v"}), "porchkit")
    assert stored(cluster)["data"] == {"k": "v"}


def test_apply_ssa_drops_server_fields_so_a_read_object_can_be_applied(cluster: EmbeddedCluster) -> None:
    apply_ssa(cluster, configmap({"k": "v"}), "porchkit")
    read = stored(cluster)
    cluster.patch(CONFIGMAP, KEY, {"metadata": {"labels": {"bump": "1"}}})  # read is stale now
    apply_ssa(cluster, {**read, "data": {"k": "w"}}, "porchkit")
    assert stored(cluster)["data"] == {"k": "w"}


def test_apply_ssa_without_force_conflicts_on_a_field_another_manager_owns(cluster: EmbeddedCluster) -> None:
    apply_ssa(cluster, configmap({"k": "v"}), "someone-else")
    with pytest.raises(Conflict, match="someone-else"):
        apply_ssa(cluster, configmap({"k": "mine"}), "porchkit", force=False)
    assert stored(cluster)["data"] == {"k": "v"}


def test_apply_ssa_with_force_takes_ownership_of_the_field(cluster: EmbeddedCluster) -> None:
    apply_ssa(cluster, configmap({"k": "v"}), "someone-else")
    apply_ssa(cluster, configmap({"k": "mine"}), "porchkit")
    now = stored(cluster)
    owners = {m["manager"]: m["fieldsV1"] for m in now["metadata"]["managedFields"]}
    assert now["data"] == {"k": "mine"} and "f:k" in owners["porchkit"]["f:data"]
    assert "f:data" not in owners.get("someone-else", {})


def test_apply_ssa_removes_fields_the_manager_no_longer_applies(cluster: EmbeddedCluster) -> None:
    apply_ssa(cluster, configmap({"k": "v", "old": "x"}), "porchkit")
    apply_ssa(cluster, configmap({"k": "v"}), "porchkit")
    assert stored(cluster)["data"] == {"k": "v"}


# --- both strategies behind one interface ---------------------------------------------------


@pytest.mark.parametrize("strategy", [ServerSideApply("porchkit"), ThreeWayApply()], ids=["ssa", "3way"])
def test_either_strategy_makes_the_cluster_hold_desired_and_is_idempotent(
        cluster: EmbeddedCluster, strategy: ApplyStrategy) -> None:
    strategy(cluster, configmap({"a": "1", "b": "2"}))
    changed = strategy(cluster, configmap({"a": "1", "c": "3"}))
    assert stored(cluster)["data"] == {"a": "1", "c": "3"}
    assert rv(strategy(cluster, configmap({"a": "1", "c": "3"}))) == rv(changed)


def test_a_null_merge_key_does_not_key_a_list_which_is_then_replaced() -> None:
    merged = three_way_merge({"env": [{"name": None, "value": "x"}]}, {}, {"env": [{"name": None, "value": "y"}]})
    assert merged == {"env": [{"name": None, "value": "y"}]}
    ports = three_way_merge({"ports": [{"port": 80, "name": "a"}]}, {}, {"ports": [{"port": None, "name": "a"}]})
    assert ports == {"ports": [{"name": "a"}]}  # keyed by name instead, the null port removed
