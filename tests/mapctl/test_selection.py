"""Input selection: the parent's duck-typed selector, its namespace, and the recursion guard."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from mapctl.selection import SelectorError, is_input, parent_selector
from reconcile import EmbeddedCluster, Kind, ReconcileError

PARENT_UID = "11111111-2222-3333-4444-555555555555"


def parent(selector: Any = None, *, namespace: str = "default", uid: str = PARENT_UID, **spec: Any) -> dict[str, Any]:
    body = {"selector": selector, **spec} if selector is not None else spec
    meta: dict[str, Any] = {"name": "schedule", "uid": uid}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": "ark.example.com/v1alpha1", "kind": "SnapshotSchedule", "metadata": meta, "spec": body}


def pvc(name: str = "data-0", *, namespace: str = "default", labels: dict[str, str] | None = None,
        owners: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels is not None:
        meta["labels"] = labels
    if owners is not None:
        meta["ownerReferences"] = owners
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta}


def owner(uid: str, *, controller: bool = True) -> dict[str, Any]:
    return {"apiVersion": "ark.example.com/v1alpha1", "kind": "SnapshotSchedule", "name": "schedule", "uid": uid,
            "controller": controller}


def selects(schedule: dict[str, Any], obj: dict[str, Any]) -> bool:
    return is_input(obj, schedule, parent_selector(schedule))


class TestEmptySelector:
    @pytest.mark.parametrize("schedule", [
        parent(), parent({}), parent({"matchLabels": {}, "matchExpressions": []}),
        parent({"matchLabels": None, "matchExpressions": None}),
        {"metadata": {"namespace": "default"}}, {"metadata": {"namespace": "default"}, "spec": None},
    ])
    def test_an_absent_or_empty_selector_selects_every_object_of_the_namespace(self, schedule: dict[str, Any]) -> None:
        assert selects(schedule, pvc())
        assert selects(schedule, pvc(labels={"app": "db"}))
        assert selects(schedule, {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                  "metadata": {"namespace": "default"}})


class TestLabels:
    def test_match_labels_must_all_hold(self) -> None:
        schedule = parent({"matchLabels": {"app": "db", "tier": "data"}})
        assert selects(schedule, pvc(labels={"app": "db", "tier": "data", "extra": "x"}))
        assert not selects(schedule, pvc(labels={"app": "db"}))
        assert not selects(schedule, pvc())

    def test_not_in_matches_an_absent_key_and_in_does_not(self) -> None:
        assert selects(parent({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]}), pvc())
        assert not selects(parent({"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]}), pvc())

    def test_expressions_and_match_labels_combine(self) -> None:
        schedule = parent({"matchLabels": {"app": "db"},
                           "matchExpressions": [{"key": "backup", "operator": "DoesNotExist"}]})
        assert selects(schedule, pvc(labels={"app": "db"}))
        assert not selects(schedule, pvc(labels={"app": "db", "backup": "no"}))

    def test_fields_other_than_the_two_selector_fields_are_ignored(self) -> None:
        assert selects(parent({"matchLabels": {"app": "db"}, "comment": "hi"}), pvc(labels={"app": "db"}))


class TestNamespace:
    def test_an_object_of_another_namespace_is_never_an_input(self) -> None:
        assert not selects(parent(), pvc(namespace="other"))

    def test_a_cluster_scoped_parent_takes_only_cluster_scoped_inputs(self) -> None:
        schedule = parent(namespace="")
        assert not selects(schedule, pvc())
        assert selects(schedule, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})


class TestRecursionGuard:
    def test_an_object_controlled_by_the_parent_is_not_its_input(self) -> None:
        assert not selects(parent(), pvc(owners=[owner(PARENT_UID)]))

    def test_an_object_controlled_by_another_object_is_an_input(self) -> None:
        assert selects(parent(), pvc(owners=[owner("another-uid")]))

    def test_a_parent_that_only_co_owns_an_object_still_maps_it(self) -> None:
        assert selects(parent(), pvc(owners=[owner(PARENT_UID, controller=False)]))

    def test_a_parent_without_a_uid_excludes_nothing(self) -> None:
        assert selects(parent(uid=""), pvc(owners=[{"kind": "SnapshotSchedule", "controller": True}]))

    def test_outputs_a_real_api_server_made_for_the_parent_are_left_out(self) -> None:
        # ConfigMaps both in and out: the parent's own output must not feed back into it
        with EmbeddedCluster() as cluster:
            deployment = cluster.create({
                "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
                "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {
                    "metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}})
            ref = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                   "uid": deployment["metadata"]["uid"], "controller": True}
            for name, owners in (("source", []), ("output", [ref])):
                cluster.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
                    "name": name, "namespace": "default", "labels": {"app": "web"}, "ownerReferences": owners}})
            configmaps = cluster.list(Kind("v1", "ConfigMap"), namespace="default").items
        selector = parent_selector(deployment)
        assert sorted(o["metadata"]["name"] for o in configmaps if is_input(o, deployment, selector)) == ["source"]


class TestSelectorErrors:
    @pytest.mark.parametrize(("selector", "field", "problem"), [
        ("app=db", "spec.selector", "must be a map, not a string"),
        ({"matchLabels": ["app"]}, "spec.selector.matchLabels", "must be a map, not a list"),
        ({"matchLabels": {"app": 1}}, 'spec.selector.matchLabels["app"]', "must be a string, not a number"),
        ({"matchExpressions": {"key": "a"}}, "spec.selector.matchExpressions", "must be a list, not a map"),
        ({"matchExpressions": ["a"]}, "spec.selector.matchExpressions[0]", "must be a map, not a string"),
        ({"matchExpressions": [{"operator": "Exists"}]}, "spec.selector.matchExpressions[0].key", "required"),
        ({"matchExpressions": [{"key": "a"}]}, "spec.selector.matchExpressions[0].operator", "required"),
        ({"matchExpressions": [{"key": "a", "operator": "Equals"}]}, "spec.selector.matchExpressions[0].operator",
         '"Equals" is not a selector operator (In, NotIn, Exists, DoesNotExist)'),
        ({"matchExpressions": [{"key": "a", "operator": "In"}]}, "spec.selector.matchExpressions[0].values",
         "must not be empty for In"),
        ({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]},
         "spec.selector.matchExpressions[0].values", "must be empty for Exists"),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": "x"}]},
         "spec.selector.matchExpressions[0].values", "must be a list, not a string"),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["ok", 2]}]},
         "spec.selector.matchExpressions[0].values[1]", "must be a string, not a number"),
    ])
    def test_each_problem_names_its_field(self, selector: Any, field: str, problem: str) -> None:
        with pytest.raises(SelectorError) as caught:
            parent_selector(parent(selector))
        assert str(caught.value) == f"{field}: {problem}"
        assert isinstance(caught.value, ReconcileError)

    @pytest.mark.parametrize(("selector", "field"), [
        ({"matchLabels": {"bad key!": "x"}}, 'spec.selector.matchLabels["bad key!"]'),
        ({"matchLabels": {"app": "not a value"}}, 'spec.selector.matchLabels["app"]'),
        ({"matchExpressions": [{"key": "-a", "operator": "Exists"}]}, "spec.selector.matchExpressions[0].key"),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["x" * 64]}]},
         "spec.selector.matchExpressions[0].values[0]"),
    ])
    def test_invalid_label_syntax_names_the_key_or_value(self, selector: Any, field: str) -> None:
        with pytest.raises(SelectorError) as caught:
            parent_selector(parent(selector))
        assert caught.value.field == field
        assert "is not a valid label" in caught.value.problem

    def test_a_spec_that_is_not_a_map_is_refused(self) -> None:
        with pytest.raises(SelectorError, match=r"^spec: must be a map, not a list$"):
            parent_selector({"spec": []})


def test_selection_changes_neither_object() -> None:
    schedule, obj = parent({"matchLabels": {"app": "db"}}), pvc(labels={"app": "db"}, owners=[owner("x")])
    before = copy.deepcopy((schedule, obj))
    assert selects(schedule, obj)
    assert (schedule, obj) == before
