"""The customize hook: parsing related-resource rules, selecting related objects per hook version, the cache."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from decorators.customize import (
    CUSTOMIZE_SHAPE,
    CustomizeCache,
    RelatedRule,
    check_rule,
    customize_request,
    parse_customize_response,
    rule_matches,
    select_related,
)
from decorators.protocol import ResponseError, build_request
from decorators.spec import resolve_rule
from reconcile import FakeClock, Kind, ObjectKey, ResourceInfo
from reconcile.embedded import EmbeddedCluster

NAMESPACE = Kind("v1", "Namespace")
CONTROLLER = {"metadata": {"name": "dc"}, "spec": {}}
CLUSTER_TARGET = {"apiVersion": "example.com/v1", "kind": "GlobalConfigMap", "metadata": {"name": "globalsettings"}}
NS_TARGET = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "nginx", "namespace": "web"}}

NAMESPACES = {"global": {"role": "source"}, "web": {"team": "a"}, "other": {"team": "b"}}
CONFIGMAPS = [("global", "globalsettings", {"app": "cfg"}), ("global", "extra", {"app": "cfg"}),
              ("web", "local", {"app": "cfg"}), ("web", "plain", {}), ("other", "local", {}),
              ("other", "remote", {"app": "cfg"})]


@pytest.fixture(scope="module")
def cluster() -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster() as cluster:
        for name, labels in NAMESPACES.items():
            cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})
        for namespace, name, labels in CONFIGMAPS:
            cluster.create({"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": name, "namespace": namespace, "labels": labels}})
        yield cluster


def namespace_labels(cluster: EmbeddedCluster) -> Any:
    def labels(name: str) -> Mapping[str, str] | None:
        found = cluster.get(NAMESPACE, ObjectKey("", name))
        return None if found is None else found["metadata"].get("labels", {})
    return labels


def resolved(cluster: EmbeddedCluster, rules: tuple[RelatedRule, ...]) -> list[tuple[RelatedRule, ResourceInfo]]:
    served = cluster.resources()
    pairs = []
    for rule in rules:
        info = resolve_rule(rule.api_version, rule.resource, served)
        assert info is not None
        pairs.append((rule, info))
    return pairs


def related(cluster: EmbeddedCluster, rules: list[dict[str, Any]], *, target: dict[str, Any] = CLUSTER_TARGET,
            version: str = "v1") -> dict[str, list[str]]:
    """group key -> sorted "ns/name" of what the customize answer `rules` relates to `target`."""
    pairs = resolved(cluster, parse_customize_response({"relatedResources": rules}))
    found = select_related(pairs, lambda info: cluster.list(info.kind).items, target, target is NS_TARGET, version,
                           namespace_labels(cluster))
    return {group: sorted(str(ObjectKey.of(o)) for o in objs) for group, objs in found.items()}


def configmaps(**rule: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "resource": "configmaps", **rule}


def parse_error(*rules: Any) -> ResponseError:
    with pytest.raises(ResponseError) as caught:
        parse_customize_response({"relatedResources": list(rules)})
    return caught.value


class TestRequest:
    def test_the_target_is_sent_as_parent(self) -> None:
        request = customize_request(CONTROLLER, NS_TARGET)
        assert set(request) == {"controller", "parent"}
        assert request["parent"] is NS_TARGET
        assert request["controller"]["status"] == {} and request["controller"]["kind"] == "DecoratorController"

    def test_the_shape_has_related_resources_only(self) -> None:
        assert dict(CUSTOMIZE_SHAPE) == {"relatedResources": (list, type(None))}


class TestParsing:
    def test_every_field_of_a_rule_is_read(self) -> None:
        [by_names, by_labels] = parse_customize_response({"relatedResources": [
            configmaps(namespace="global", names=["a", "b"]),
            configmaps(labelSelector={"matchLabels": {"app": "cfg"}}, namespaceSelector={})]})
        assert (by_names.namespace, by_names.names, by_names.labels, by_names.namespace_selector) == \
            ("global", ("a", "b"), None, None)
        assert by_labels.labels is not None and by_labels.labels.matches({"app": "cfg"})
        assert by_labels.namespace_selector is not None and by_labels.namespace_selector.empty
        assert (by_labels.namespace, by_labels.names, by_labels.origin) == (None, (), "relatedResources[1]")

    @pytest.mark.parametrize("answer", [{}, {"relatedResources": None}, {"relatedResources": []}])
    def test_no_rules_means_nothing_related(self, answer: dict[str, Any]) -> None:
        assert parse_customize_response(answer) == ()

    @pytest.mark.parametrize("selector", ["labelSelector", "namespaceSelector"])
    def test_names_with_a_selector_is_invalid_even_an_empty_one(self, selector: str) -> None:
        err = parse_error(configmaps(), configmaps(names=["a"], **{selector: {}}))
        assert str(err) == "relatedResources[1]: names cannot be combined with labelSelector or namespaceSelector"

    def test_namespace_with_a_namespace_selector_is_invalid(self) -> None:
        err = parse_error(configmaps(namespace="a", namespaceSelector={"matchLabels": {"x": "y"}}))
        assert str(err) == "relatedResources[0]: namespace cannot be combined with namespaceSelector"

    def test_a_selector_error_names_its_exact_field(self) -> None:
        err = parse_error(configmaps(labelSelector={"matchExpressions": [{"key": "a", "operator": "Gt",
                                                                         "values": ["1"]}]}))
        assert err.field == "relatedResources[0].labelSelector.matchExpressions[0].operator"

    @pytest.mark.parametrize(("rule", "message"), [
        ({"resource": "configmaps"}, "relatedResources[0].apiVersion: required"),
        ({"apiVersion": "v1"}, "relatedResources[0].resource: required"),
        (configmaps(names="a"), "relatedResources[0].names: must be a list, not a string"),
        (configmaps(names=["a", 1]), "relatedResources[0].names[1]: must be a string, not a number"),
        (configmaps(namespace=["a"]), "relatedResources[0].namespace: must be a string, not a list"),
        ("configmaps", "relatedResources[0]: must be an object, not a string"),
    ])
    def test_malformed_rules_name_the_field(self, rule: Any, message: str) -> None:
        assert str(parse_error(rule)) == message

    def test_related_resources_must_be_a_list(self) -> None:
        with pytest.raises(ResponseError, match=r"^relatedResources: must be a list, not an object$"):
            parse_customize_response({"relatedResources": {"apiVersion": "v1"}})

    def test_rules_compare_by_content_not_by_where_they_came_from(self) -> None:
        first = parse_customize_response({"relatedResources": [configmaps(names=["a"])]})
        second = parse_customize_response({"relatedResources": [configmaps(), configmaps(names=["a"])]})
        assert first[0] == second[1] and first[0].origin != second[1].origin


class TestSelectionTypes:
    def test_namespace_and_names_select_the_named_objects(self, cluster: EmbeddedCluster) -> None:
        # The globalconfigmap example's rules: one source ConfigMap, and every Namespace.
        found = related(cluster, [configmaps(namespace="global", names=["globalsettings"]),
                                  {"apiVersion": "v1", "resource": "namespaces", "labelSelector": {}}])
        assert found == {"ConfigMap.v1": ["global/globalsettings"],
                         "Namespace.v1": ["default", "global", "kube-public", "kube-system", "other", "web"]}

    def test_names_without_namespace_look_in_every_namespace(self, cluster: EmbeddedCluster) -> None:
        assert related(cluster, [configmaps(names=["local"])]) == {"ConfigMap.v1": ["other/local", "web/local"]}

    def test_a_label_selector_alone_looks_in_every_namespace(self, cluster: EmbeddedCluster) -> None:
        found = related(cluster, [configmaps(labelSelector={"matchLabels": {"app": "cfg"}})])
        assert found == {"ConfigMap.v1": ["global/extra", "global/globalsettings", "other/remote", "web/local"]}

    def test_namespace_and_labels_select_labelled_objects_of_one_namespace(self, cluster: EmbeddedCluster) -> None:
        found = related(cluster, [configmaps(namespace="web", labelSelector={"matchLabels": {"app": "cfg"}})])
        assert found == {"ConfigMap.v1": ["web/local"]}

    def test_namespace_alone_selects_everything_in_it(self, cluster: EmbeddedCluster) -> None:
        assert related(cluster, [configmaps(namespace="web")]) == {"ConfigMap.v1": ["web/local", "web/plain"]}

    def test_a_namespace_selector_reads_the_labels_of_each_objects_namespace(self, cluster: EmbeddedCluster) -> None:
        found = related(cluster, [configmaps(namespaceSelector={"matchExpressions": [
            {"key": "team", "operator": "Exists"}]}, labelSelector={"matchLabels": {"app": "cfg"}})])
        assert found == {"ConfigMap.v1": ["other/remote", "web/local"]}

    def test_a_rule_with_no_selection_relates_every_object(self, cluster: EmbeddedCluster) -> None:
        assert len(related(cluster, [configmaps()])["ConfigMap.v1"]) == len(CONFIGMAPS)

    def test_rules_of_one_kind_share_a_group_without_duplicates(self, cluster: EmbeddedCluster) -> None:
        found = related(cluster, [configmaps(namespace="global"), configmaps(namespace="global", names=["extra"])])
        assert found == {"ConfigMap.v1": ["global/extra", "global/globalsettings"]}

    def test_every_rules_group_is_present_even_when_nothing_matches(self, cluster: EmbeddedCluster) -> None:
        found = related(cluster, [{"apiVersion": "v1", "resource": "secrets", "names": ["nope"]}])
        assert found == {"Secret.v1": []}

    def test_an_unknown_namespace_matches_no_namespace_selector(self, cluster: EmbeddedCluster) -> None:
        [(rule, info)] = resolved(cluster, parse_customize_response({"relatedResources": [
            configmaps(namespaceSelector={})]}))
        cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "gone"}}
        assert not rule_matches(rule, info, cm, CLUSTER_TARGET, False, "v1", lambda name: None)
        assert rule_matches(rule, info, cm, CLUSTER_TARGET, False, "v1", lambda name: {})

    def test_a_namespace_selector_on_a_cluster_scoped_kind_is_an_error(self, cluster: EmbeddedCluster) -> None:
        with pytest.raises(ResponseError) as caught:
            related(cluster, [configmaps(), {"apiVersion": "v1", "resource": "namespaces", "namespaceSelector": {}}],
                    version="v2")
        assert caught.value.field == "relatedResources[1].namespaceSelector"

    def test_the_selection_goes_into_the_sync_request_as_related(self, cluster: EmbeddedCluster) -> None:
        pairs = resolved(cluster, parse_customize_response({"relatedResources": [
            configmaps(namespace="global", names=["globalsettings"])]}))
        found = select_related(pairs, lambda info: cluster.list(info.kind).items, CLUSTER_TARGET, False, "v1",
                               namespace_labels(cluster))
        request = build_request(CONTROLLER, CLUSTER_TARGET, False, {}, found, finalizing=False, version="v1")
        assert list(request["related"]["ConfigMap.v1"]) == ["global/globalsettings"]


class TestVersionsForANamespacedTarget:
    def test_v1_scopes_a_label_rule_to_the_targets_namespace(self, cluster: EmbeddedCluster) -> None:
        rule = configmaps(labelSelector={"matchLabels": {"app": "cfg"}})
        assert related(cluster, [rule], target=NS_TARGET) == {"ConfigMap.v1": ["web/local"]}

    def test_v2_lets_a_label_rule_look_in_every_namespace(self, cluster: EmbeddedCluster) -> None:
        rule = configmaps(labelSelector={"matchLabels": {"app": "cfg"}})
        assert related(cluster, [rule], target=NS_TARGET, version="v2") == \
            {"ConfigMap.v1": ["global/extra", "global/globalsettings", "other/remote", "web/local"]}

    def test_v1_looks_up_names_in_the_targets_namespace_only(self, cluster: EmbeddedCluster) -> None:
        assert related(cluster, [configmaps(names=["local"])], target=NS_TARGET) == {"ConfigMap.v1": ["web/local"]}
        assert related(cluster, [configmaps(names=["local"])], target=NS_TARGET, version="v2") == \
            {"ConfigMap.v1": ["other/local", "web/local"]}

    def test_v1_accepts_the_targets_own_namespace(self, cluster: EmbeddedCluster) -> None:
        assert related(cluster, [configmaps(namespace="web", names=["plain"])], target=NS_TARGET) == \
            {"ConfigMap.v1": ["web/plain"]}

    def test_v1_refuses_another_namespace_and_v2_allows_it(self, cluster: EmbeddedCluster) -> None:
        rule = configmaps(namespace="other", names=["remote"])
        with pytest.raises(ResponseError) as caught:
            related(cluster, [rule], target=NS_TARGET)
        assert caught.value.field == "relatedResources[0].namespace"
        assert related(cluster, [rule], target=NS_TARGET, version="v2") == {"ConfigMap.v1": ["other/remote"]}

    def test_v1_refuses_a_namespace_selector_and_v2_allows_it(self, cluster: EmbeddedCluster) -> None:
        rule = configmaps(namespaceSelector={"matchLabels": {"team": "b"}})
        with pytest.raises(ResponseError, match=r"^relatedResources\[0\]\.namespaceSelector: needs hook version v2"):
            related(cluster, [rule], target=NS_TARGET)
        assert related(cluster, [rule], target=NS_TARGET, version="v2") == \
            {"ConfigMap.v1": ["other/local", "other/remote"]}

    def test_v1_leaves_out_cluster_scoped_objects_and_v2_keeps_them(self, cluster: EmbeddedCluster) -> None:
        rule = {"apiVersion": "v1", "resource": "namespaces", "labelSelector": {"matchLabels": {"team": "a"}}}
        assert related(cluster, [rule], target=NS_TARGET) == {"Namespace.v1": []}
        assert related(cluster, [rule], target=NS_TARGET, version="v2") == {"Namespace.v1": ["web"]}

    def test_check_rule_applies_v1_limits_only_to_namespaced_targets(self, cluster: EmbeddedCluster) -> None:
        [(rule, info)] = resolved(cluster, parse_customize_response({"relatedResources": [
            configmaps(namespaceSelector={})]}))
        check_rule(rule, info, CLUSTER_TARGET, False, "v1")
        check_rule(rule, info, NS_TARGET, True, "v2")
        with pytest.raises(ResponseError):
            check_rule(rule, info, NS_TARGET, True, "v1")


def target(uid: str = "u1", *, generation: int = 1, labels: dict[str, str] | None = None,
           annotations: dict[str, str] | None = None, name: str = "nginx") -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": name, "namespace": "web", "uid": uid, "generation": generation,
                         "labels": labels or {"app": "web"}, "annotations": annotations or {}}}


RULES = parse_customize_response({"relatedResources": [configmaps(names=["a"])]})


class TestCache:
    def test_an_answer_is_reused_for_the_same_target(self) -> None:
        cache = CustomizeCache(FakeClock())
        assert cache.get(target()) is None
        cache.put(target(), RULES)
        assert cache.get(target()) == RULES

    def test_targets_are_told_apart_by_uid_not_name(self) -> None:
        cache = CustomizeCache(FakeClock())
        cache.put(target("u1"), RULES)
        assert cache.get(target("u2")) is None

    @pytest.mark.parametrize("edit", [{"generation": 2}, {"labels": {"app": "db"}}, {"annotations": {"x": "y"}}])
    def test_a_generation_label_or_annotation_change_invalidates(self, edit: dict[str, Any]) -> None:
        cache = CustomizeCache(FakeClock())
        cache.put(target(), RULES)
        assert cache.get(target(**edit)) is None
        assert cache.get(target()) is None  # the stale entry is not trusted again, even for the old state
        assert [rules for _, _, rules in cache.entries()] == [RULES]  # but still maps related changes

    def test_an_answer_expires_after_the_ttl(self) -> None:
        clock = FakeClock()
        cache = CustomizeCache(clock, ttl=60.0)
        cache.put(target(), RULES)
        clock.advance(59.9)
        assert cache.get(target()) == RULES
        clock.advance(0.1)
        assert cache.get(target()) is None

    def test_the_default_ttl_is_twenty_minutes(self) -> None:
        clock = FakeClock()
        cache = CustomizeCache(clock)
        cache.put(target(), RULES)
        clock.advance(1199.0)
        assert cache.get(target()) == RULES
        clock.advance(1.0)
        assert cache.get(target()) is None

    def test_forget_drops_an_entry(self) -> None:
        cache = CustomizeCache(FakeClock())
        cache.put(target(), RULES)
        cache.forget("u1")
        cache.forget("never-there")
        assert cache.get(target()) is None

    def test_entries_keep_expired_answers_until_their_target_is_forgotten(self) -> None:
        clock = FakeClock()
        cache = CustomizeCache(clock, ttl=10.0)
        cache.put(target("u1", name="a"), RULES)
        clock.advance(5.0)
        cache.put(target("u2", name="b"), ())
        clock.advance(5.0)
        assert cache.get(target("u1", name="a")) is None  # expired for a pass...
        assert cache.entries() == [(ObjectKey("web", "a"), Kind("apps/v1", "StatefulSet"), RULES),
                                   (ObjectKey("web", "b"), Kind("apps/v1", "StatefulSet"), ())]  # ...not for mapping
        cache.forget_target(ObjectKey("web", "a"), Kind("apps/v1", "StatefulSet"))
        assert cache.entries() == [(ObjectKey("web", "b"), Kind("apps/v1", "StatefulSet"), ())]

    def test_a_target_without_uid_is_not_cached(self) -> None:
        cache = CustomizeCache(FakeClock())
        unsaved = target(uid="")
        cache.put(unsaved, RULES)
        assert cache.get(unsaved) is None and cache.entries() == []

    def test_the_cache_does_not_follow_later_edits_of_the_object_it_was_given(self) -> None:
        cache = CustomizeCache(FakeClock())
        obj = target()
        cache.put(obj, RULES)
        obj["metadata"]["labels"]["app"] = "db"
        assert cache.get(target()) == RULES

    def test_workers_may_share_it(self) -> None:
        cache = CustomizeCache(FakeClock())
        errors: list[BaseException] = []

        def work(worker: int) -> None:
            try:
                for i in range(1500):
                    obj = target(f"u{(worker * 7 + i) % 20}", generation=i % 3)
                    cache.put(obj, RULES)
                    cache.get(obj)
                    cache.entries()
                    if i % 5 == 0:
                        cache.forget(f"u{i % 20}")
            except BaseException as err:  # reported by the assertion below
                errors.append(err)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
        interval = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)  # switch threads as often as possible, to provoke races
        try:
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=10)
        finally:
            sys.setswitchinterval(interval)
        assert errors == [] and all(not t.is_alive() for t in threads)
        assert len(cache.entries()) <= 20
