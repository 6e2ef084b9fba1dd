"""Target selection: rules by group+kind, label AND annotation selectors with the API server's semantics."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from decorators.selection import TargetSelector
from decorators.spec import ResourceRule, compile_selector, resolve_rule
from reconcile import ResourceInfo
from reconcile.embedded import EmbeddedCluster


@pytest.fixture(scope="module")
def served() -> Iterator[list[ResourceInfo]]:
    with EmbeddedCluster() as cluster:
        yield cluster.resources()


def info(served: list[ResourceInfo], api_version: str, resource: str) -> ResourceInfo:
    found = resolve_rule(api_version, resource, served)
    assert found is not None
    return found


def rule(api_version: str = "apps/v1", resource: str = "statefulsets", *, labels: Any = None,
         annotations: Any = None, ignore_status_changes: bool = False) -> ResourceRule:
    return ResourceRule(api_version, resource, compile_selector(labels, "labelSelector"),
                        compile_selector(annotations, "annotationSelector", match_key="matchAnnotations"),
                        ignore_status_changes)


def statefulset(name: str = "web", *, labels: dict[str, str] | None = None,
                annotations: dict[str, str] | None = None, api_version: str = "apps/v1") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if labels is not None:
        meta["labels"] = labels
    if annotations is not None:
        meta["annotations"] = annotations
    return {"apiVersion": api_version, "kind": "StatefulSet", "metadata": meta}


def selector(served: list[ResourceInfo], *rules: ResourceRule) -> TargetSelector:
    return TargetSelector([(info(served, r.api_version, r.resource), r) for r in rules])


def expression(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"matchExpressions": [{"key": key, "operator": operator, **({"values": list(values)} if values else {})}]}


class TestEverything:
    @pytest.mark.parametrize("written", [None, {}, {"matchLabels": {}, "matchExpressions": []}])
    def test_an_absent_or_empty_selector_matches_every_object(self, served: list[ResourceInfo], written: Any) -> None:
        targets = selector(served, rule(labels=written, annotations=written))
        assert targets.matches(statefulset())
        assert targets.matches(statefulset(labels={"a": "b"}, annotations={"c": "d"}))
        assert targets.matches({"apiVersion": "apps/v1", "kind": "StatefulSet"})  # no metadata at all

    def test_an_object_of_another_kind_never_matches(self, served: list[ResourceInfo]) -> None:
        targets = selector(served, rule())
        assert not targets.matches({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}})
        assert targets.rule_for({"apiVersion": "v1", "kind": "Pod"}) is None

    def test_the_version_is_ignored_but_the_group_is_not(self, served: list[ResourceInfo]) -> None:
        targets = selector(served, rule())
        assert targets.matches(statefulset(api_version="apps/v1beta2"))
        assert not targets.matches(statefulset(api_version="example.com/v1"))


class TestSemantics:
    def test_match_labels_needs_the_key_with_that_value(self, served: list[ResourceInfo]) -> None:
        targets = selector(served, rule(labels={"matchLabels": {"app": "web"}}))
        assert targets.matches(statefulset(labels={"app": "web", "x": "y"}))
        assert not targets.matches(statefulset(labels={"app": "db"}))
        assert not targets.matches(statefulset())

    def test_not_in_matches_an_object_without_the_key(self, served: list[ResourceInfo]) -> None:
        targets = selector(served, rule(labels=expression("tier", "NotIn", "test")))
        assert targets.matches(statefulset())
        assert targets.matches(statefulset(labels={"tier": "prod"}))
        assert not targets.matches(statefulset(labels={"tier": "test"}))

    def test_in_never_matches_an_absent_key_even_in_empty_string(self, served: list[ResourceInfo]) -> None:
        targets = selector(served, rule(labels=expression("tier", "In", "")))
        assert not targets.matches(statefulset())
        assert not targets.matches(statefulset(labels={"other": ""}))
        assert targets.matches(statefulset(labels={"tier": ""}))

    def test_exists_and_does_not_exist(self, served: list[ResourceInfo]) -> None:
        exists = selector(served, rule(labels=expression("tier", "Exists")))
        absent = selector(served, rule(labels=expression("tier", "DoesNotExist")))
        assert exists.matches(statefulset(labels={"tier": ""})) and not exists.matches(statefulset())
        assert absent.matches(statefulset()) and not absent.matches(statefulset(labels={"tier": "x"}))

    def test_requirements_are_anded(self, served: list[ResourceInfo]) -> None:
        targets = selector(served, rule(labels={"matchLabels": {"app": "web"},
                                                "matchExpressions": [{"key": "tier", "operator": "Exists"}]}))
        assert targets.matches(statefulset(labels={"app": "web", "tier": "a"}))
        assert not targets.matches(statefulset(labels={"app": "web"}))
        assert not targets.matches(statefulset(labels={"tier": "a"}))

    def test_a_target_must_match_both_the_label_and_the_annotation_selector(self, served: list[ResourceInfo]) -> None:
        targets = selector(served, rule(labels={"matchLabels": {"app": "web"}},
                                        annotations={"matchAnnotations": {"decorate": "yes"}}))
        assert targets.matches(statefulset(labels={"app": "web"}, annotations={"decorate": "yes"}))
        assert not targets.matches(statefulset(labels={"app": "web"}))
        assert not targets.matches(statefulset(annotations={"decorate": "yes"}))

    def test_the_annotation_selector_reads_annotations_not_labels(self, served: list[ResourceInfo]) -> None:
        targets = selector(served, rule(annotations=expression("service-per-pod-label", "Exists")))
        assert targets.matches(statefulset(annotations={"service-per-pod-label": "pod-name"}))
        assert not targets.matches(statefulset(labels={"service-per-pod-label": "pod-name"}))


class TestRulesByGroupKind:
    def test_the_last_rule_of_one_group_kind_counts(self, served: list[ResourceInfo]) -> None:
        first = rule(labels={"matchLabels": {"app": "web"}})
        last = rule(labels={"matchLabels": {"app": "db"}})
        targets = selector(served, first, last)
        assert targets.rule_for(statefulset()) is last
        assert targets.matches(statefulset(labels={"app": "db"}))
        assert not targets.matches(statefulset(labels={"app": "web"}))

    def test_kinds_lists_each_group_kind_once(self, served: list[ResourceInfo]) -> None:
        targets = selector(served, rule(), rule("v1", "pods"), rule(labels={"matchLabels": {"a": "b"}}))
        assert [i.kind.kind for i in targets.kinds()] == ["StatefulSet", "Pod"]

    def test_an_owner_reference_finds_its_target_kind(self, served: list[ResourceInfo]) -> None:
        targets = selector(served, rule("rbac.authorization.k8s.io/v1", "clusterroles"))
        ref = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "name": "x", "uid": "1",
               "controller": True}
        found = targets.resource_for(ref)
        assert found is not None and not found.namespaced
        assert targets.resource_for({"apiVersion": "v1", "kind": "ConfigMap"}) is None


class TestIgnoreStatusChanges:
    def test_a_status_only_update_is_dropped(self, served: list[ResourceInfo]) -> None:
        targets = selector(served, rule(ignore_status_changes=True))
        old = {**statefulset(labels={"a": "b"}), "status": {"replicas": 1}}
        old["metadata"]["generation"] = 2
        new = {**old, "status": {"replicas": 2}}
        assert targets.ignores_update(old, new)

    @pytest.mark.parametrize("change", ["generation", "labels", "annotations", "deletionTimestamp"])
    def test_a_metadata_change_or_a_deletion_is_never_dropped(self, served: list[ResourceInfo], change: str) -> None:
        targets = selector(served, rule(ignore_status_changes=True))
        old = statefulset(labels={"a": "b"}, annotations={"c": "d"})
        old["metadata"]["generation"] = 2
        new = {**old, "metadata": {**old["metadata"], change: {"generation": 3, "labels": {"a": "x"},
                                                                "annotations": {}, "deletionTimestamp": "now"}[change]}}
        assert not targets.ignores_update(old, new)

    def test_a_resync_of_the_same_object_is_never_dropped(self, served: list[ResourceInfo]) -> None:
        targets = selector(served, rule(ignore_status_changes=True))
        obj = statefulset()
        assert not targets.ignores_update(obj, obj)

    def test_without_the_option_nothing_is_dropped(self, served: list[ResourceInfo]) -> None:
        targets = selector(served, rule())
        old = statefulset()
        assert not targets.ignores_update(old, {**old, "status": {"replicas": 2}})
