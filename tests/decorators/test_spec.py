"""Parsing a DecoratorController: what it compiles to, what it refuses, and which field each error names."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from decorators.spec import (
    DECORATOR_CONTROLLER,
    FINALIZER_PREFIX,
    AttachmentRule,
    DecoratorSpec,
    SpecError,
    parse_decorator,
    resolve_rule,
)
from reconcile import Kind, ReconcileError, ResourceInfo
from reconcile.embedded import EmbeddedCluster
from reconcile.fields import hook_version

SYNC = {"webhook": {"url": "http://service-per-pod.metacontroller/sync-service-per-pod", "timeout": "10s"}}


def decorator(name: str = "service-per-pod", **spec: Any) -> dict[str, Any]:
    """The service-per-pod example of Metacontroller's docs, with `spec` fields replaced."""
    body: dict[str, Any] = {
        "resources": [{"apiVersion": "apps/v1", "resource": "statefulsets",
                       "annotationSelector": {"matchExpressions": [
                           {"key": "service-per-pod-label", "operator": "Exists"},
                           {"key": "service-per-pod-ports", "operator": "Exists"}]}}],
        "attachments": [{"apiVersion": "v1", "resource": "services"}],
        "hooks": {"sync": copy.deepcopy(SYNC)},
    }
    body.update(spec)
    return {"apiVersion": DECORATOR_CONTROLLER.api_version, "kind": DECORATOR_CONTROLLER.kind,
            "metadata": {"name": name}, "spec": body}


def error_of(obj: dict[str, Any]) -> SpecError:
    with pytest.raises(SpecError) as caught:
        parse_decorator(obj)
    return caught.value


def with_resource(**fields: Any) -> dict[str, Any]:
    return decorator(resources=[{"apiVersion": "apps/v1", "resource": "statefulsets", **fields}])


@pytest.fixture(scope="module")
def served() -> Iterator[list[ResourceInfo]]:
    with EmbeddedCluster() as cluster:
        yield cluster.resources()


class TestTheDocumentedExample:
    def test_service_per_pod_compiles_to_one_rule_with_an_annotation_selector(self) -> None:
        spec = parse_decorator(decorator())
        assert isinstance(spec, DecoratorSpec)
        assert spec.name == "service-per-pod"
        [rule] = spec.resources
        assert (rule.api_version, rule.resource, rule.ignore_status_changes) == ("apps/v1", "statefulsets", False)
        assert rule.labels.empty
        assert rule.annotations.matches({"service-per-pod-label": "pod-name", "service-per-pod-ports": "80:80"})
        assert not rule.annotations.matches({"service-per-pod-label": "pod-name"})
        assert spec.attachments == (AttachmentRule("v1", "services", "OnDelete"),)
        assert spec.sync == SYNC and spec.finalize is None and spec.customize is None
        assert spec.resync_period is None and spec.endpoint_configs == ()

    def test_the_finalizer_is_named_with_dot_io_and_the_controller_name(self) -> None:
        spec = parse_decorator(decorator("my-dc"))
        assert spec.finalizer == "metacontroller.io/decoratorcontroller-my-dc"
        assert spec.finalizer.startswith(FINALIZER_PREFIX)

    def test_parsing_leaves_the_object_unchanged_and_shares_nothing_with_it(self) -> None:
        obj = decorator(hooks={"sync": copy.deepcopy(SYNC), "finalize": {}},
                        endpointConfigs=[{"host": "a.example", "caBundle": {"inline": "x"}}])
        before = copy.deepcopy(obj)
        spec = parse_decorator(obj)
        assert obj == before
        assert spec.sync is not None and spec.sync is not obj["spec"]["hooks"]["sync"]
        obj["spec"]["hooks"]["sync"]["webhook"]["url"] = "http://changed"
        obj["spec"]["endpointConfigs"][0]["host"] = "changed"
        assert spec.sync["webhook"]["url"] == SYNC["webhook"]["url"]
        assert spec.endpoint_configs[0]["host"] == "a.example"

    def test_unknown_fields_are_ignored_as_the_api_server_prunes_them(self) -> None:
        obj = decorator(somethingNew=True)
        obj["spec"]["resources"][0]["extra"] = {"x": 1}
        obj["spec"]["resources"][0]["labelSelector"] = {"matchLabels": {"app": "web"}, "future": 1}
        obj["spec"]["attachments"][0]["note"] = "hi"
        spec = parse_decorator(obj)
        assert spec.resources[0].labels.matches({"app": "web"})


class TestRequiredFields:
    def test_a_missing_name_is_an_error(self) -> None:
        obj = decorator()
        del obj["metadata"]["name"]
        assert str(error_of(obj)) == "metadata.name: required"

    def test_a_missing_spec_is_an_error(self) -> None:
        obj = decorator()
        del obj["spec"]
        assert str(error_of(obj)) == "spec: required"

    @pytest.mark.parametrize("resources", [None, []])
    def test_at_least_one_resource_rule_is_required(self, resources: Any) -> None:
        err = error_of(decorator(resources=resources))
        assert err.field == "spec.resources"

    def test_a_resource_rule_without_api_version_names_it(self) -> None:
        err = error_of(decorator(resources=[{"resource": "pods"}]))
        assert str(err) == "spec.resources[0].apiVersion: required"

    def test_a_typo_for_resource_is_a_missing_resource(self) -> None:
        err = error_of(decorator(resources=[{"apiVersion": "v1", "resource": "pods"},
                                            {"apiVersion": "v1", "resources": "pods"}]))
        assert str(err) == "spec.resources[1].resource: required"

    def test_an_attachment_rule_without_resource_names_it(self) -> None:
        err = error_of(decorator(attachments=[{"apiVersion": "v1", "resource": "services"}, {"apiVersion": "v1"}]))
        assert str(err) == "spec.attachments[1].resource: required"

    def test_a_non_string_api_version_is_an_error(self) -> None:
        err = error_of(decorator(attachments=[{"apiVersion": 1, "resource": "services"}]))
        assert str(err) == "spec.attachments[0].apiVersion: must be a string, not a number"

    def test_resources_must_be_a_list_of_maps(self) -> None:
        assert error_of(decorator(resources={"apiVersion": "v1"})).field == "spec.resources"
        assert error_of(decorator(resources=["pods"])).field == "spec.resources[0]"

    def test_ignore_status_changes_must_be_a_boolean(self) -> None:
        assert parse_decorator(with_resource(ignoreStatusChanges=True)).resources[0].ignore_status_changes
        err = error_of(with_resource(ignoreStatusChanges="yes"))
        assert str(err) == "spec.resources[0].ignoreStatusChanges: must be a boolean, not a string"

    def test_spec_errors_are_reconcile_errors_with_the_field_first(self) -> None:
        err = error_of(decorator(resources=[{"resource": "pods"}]))
        assert isinstance(err, ReconcileError)
        assert (err.field, err.problem) == ("spec.resources[0].apiVersion", "required")


class TestUpdateMethods:
    @pytest.mark.parametrize(("written", "method"), [
        (None, "OnDelete"), ("", "OnDelete"), ("OnDelete", "OnDelete"), ("Recreate", "Recreate"),
        ("InPlace", "InPlace"), ("RollingRecreate", "Recreate"), ("RollingInPlace", "InPlace")])
    def test_methods_are_normalised(self, written: str | None, method: str) -> None:
        strategy = {} if written is None else {"method": written}
        spec = parse_decorator(decorator(attachments=[{"apiVersion": "v1", "resource": "services",
                                                       "updateStrategy": strategy}]))
        assert spec.attachments[0].method == method

    def test_an_absent_update_strategy_means_on_delete(self) -> None:
        assert parse_decorator(decorator()).attachments[0].method == "OnDelete"

    @pytest.mark.parametrize("written", ["onDelete", "Rolling", 3])
    def test_an_unknown_method_is_an_error(self, written: Any) -> None:
        err = error_of(decorator(attachments=[{"apiVersion": "v1", "resource": "services",
                                               "updateStrategy": {"method": written}}]))
        assert err.field == "spec.attachments[0].updateStrategy.method"
        assert "not an update method" in str(err)


class TestResyncPeriod:
    @pytest.mark.parametrize(("written", "period"), [(None, None), (30, 30.0), (1, 1.0), (0, 1.0), (-5, 1.0)])
    def test_below_one_second_even_zero_means_one_second(self, written: int | None, period: float | None) -> None:
        assert parse_decorator(decorator(resyncPeriodSeconds=written)).resync_period == period

    @pytest.mark.parametrize(("written", "kind"), [(True, "a boolean"), ("30", "a string"), (30.5, "a number")])
    def test_it_must_be_an_integer(self, written: Any, kind: str) -> None:
        err = error_of(decorator(resyncPeriodSeconds=written))
        assert str(err) == f"spec.resyncPeriodSeconds: must be an integer, not {kind}"

    def test_it_must_fit_in_an_int32(self) -> None:
        assert error_of(decorator(resyncPeriodSeconds=2**31)).field == "spec.resyncPeriodSeconds"


class TestHooks:
    @pytest.mark.parametrize("hooks", ["absent", None])
    def test_no_hooks_is_an_error_as_in_metacontroller(self, hooks: Any) -> None:
        obj = decorator(hooks=hooks)
        if hooks == "absent":
            del obj["spec"]["hooks"]
        assert str(error_of(obj)) == "spec.hooks: no hooks defined"

    @pytest.mark.parametrize("hooks", [{}, {"customize": {"webhook": {"url": "http://h"}}}, {"sync": None}])
    def test_hooks_with_neither_sync_nor_finalize_are_refused(self, hooks: Any) -> None:
        assert str(error_of(decorator(hooks=hooks))) == (
            "spec.hooks: needs a sync or a finalize hook; with neither, no target can ever be synced")

    @pytest.mark.parametrize("name", ["sync", "finalize"])
    def test_either_sync_or_finalize_alone_is_enough(self, name: str) -> None:
        spec = parse_decorator(decorator(hooks={name: {"webhook": {"url": "http://h"}}}))
        assert (spec.sync is None, spec.finalize is None) == (name != "sync", name != "finalize")

    @pytest.mark.parametrize("period", [-1, -2147483648, 0])
    def test_a_negative_or_zero_resync_period_means_every_second_as_in_metacontroller(self, period: int) -> None:
        assert parse_decorator(decorator(resyncPeriodSeconds=period)).resync_period == 1.0

    @pytest.mark.parametrize("period", ["60", 1.5, True])
    def test_a_resync_period_that_is_not_an_integer_is_refused(self, period: Any) -> None:
        assert str(error_of(decorator(resyncPeriodSeconds=period))).startswith(
            "spec.resyncPeriodSeconds: must be an integer, not ")

    def test_hooks_must_be_a_map(self) -> None:
        assert str(error_of(decorator(hooks=["sync"]))) == "spec.hooks: must be a map, not a list"

    @pytest.mark.parametrize("name", ["sync", "finalize", "customize"])
    def test_a_hook_that_is_not_a_map_is_an_error(self, name: str) -> None:
        err = error_of(decorator(hooks={name: "http://hook"}))
        assert str(err) == f"spec.hooks.{name}: must be a map, not a string"

    def test_an_empty_finalize_hook_turns_the_finalizer_on(self) -> None:
        spec = parse_decorator(decorator(hooks={"sync": SYNC, "finalize": {}}))
        assert spec.finalize == {} and spec.finalize_enabled

    def test_a_null_finalize_hook_is_no_finalize_hook(self) -> None:
        spec = parse_decorator(decorator(hooks={"sync": SYNC, "finalize": None}))
        assert spec.finalize is None and not spec.finalize_enabled

    @pytest.mark.parametrize("version", ["v1", "v2"])
    def test_versions_v1_and_v2_are_accepted(self, version: str) -> None:
        spec = parse_decorator(decorator(hooks={"sync": {**SYNC, "version": version}}))
        assert hook_version(spec.sync) == version

    def test_a_hook_without_version_is_v1(self) -> None:
        assert hook_version(parse_decorator(decorator()).sync) == "v1"
        assert hook_version(None) == "v1"

    @pytest.mark.parametrize("version", ["v3", "V2", "", 2])
    def test_any_other_version_is_an_error(self, version: Any) -> None:
        err = error_of(decorator(hooks={"sync": SYNC, "customize": {**SYNC, "version": version}}))
        assert err.field == "spec.hooks.customize.version"
        assert "is not a hook version (v1, v2)" in str(err)

    def test_webhook_fields_are_left_to_the_hook_client(self) -> None:
        spec = parse_decorator(decorator(hooks={"sync": {"webhook": {"timeout": "10x"}}}))
        assert spec.sync == {"webhook": {"timeout": "10x"}}

    def test_endpoint_configs_must_be_a_list_of_maps(self) -> None:
        assert error_of(decorator(endpointConfigs={"host": "x"})).field == "spec.endpointConfigs"
        assert error_of(decorator(endpointConfigs=["x"])).field == "spec.endpointConfigs[0]"


class TestSelectors:
    def test_every_problem_names_its_exact_field(self) -> None:
        err = error_of(with_resource(annotationSelector={"matchExpressions": [
            {"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Gt", "values": ["1"]}]}))
        assert err.field == "spec.resources[0].annotationSelector.matchExpressions[1].operator"
        assert str(err) == (f"{err.field}: \"Gt\" is not a selector operator (In, NotIn, Exists, DoesNotExist)")

    def test_operators_are_case_sensitive(self) -> None:
        err = error_of(with_resource(labelSelector={"matchExpressions": [{"key": "a", "operator": "in",
                                                                         "values": ["x"]}]}))
        assert err.field == "spec.resources[0].labelSelector.matchExpressions[0].operator"

    @pytest.mark.parametrize("operator", ["In", "NotIn"])
    def test_in_and_not_in_need_values(self, operator: str) -> None:
        err = error_of(with_resource(labelSelector={"matchExpressions": [{"key": "a", "operator": operator}]}))
        assert str(err) == \
            f"spec.resources[0].labelSelector.matchExpressions[0].values: must not be empty for {operator}"

    @pytest.mark.parametrize("operator", ["Exists", "DoesNotExist"])
    def test_exists_and_does_not_exist_take_no_values(self, operator: str) -> None:
        err = error_of(with_resource(labelSelector={"matchExpressions": [{"key": "a", "operator": operator,
                                                                         "values": ["x"]}]}))
        assert err.field == "spec.resources[0].labelSelector.matchExpressions[0].values"

    def test_an_expression_needs_a_key(self) -> None:
        err = error_of(with_resource(labelSelector={"matchExpressions": [{"operator": "Exists"}]}))
        assert str(err) == "spec.resources[0].labelSelector.matchExpressions[0].key: required"

    def test_a_label_key_must_have_label_syntax(self) -> None:
        err = error_of(with_resource(labelSelector={"matchLabels": {"bad key": "x"}}))
        assert err.field == 'spec.resources[0].labelSelector.matchLabels["bad key"]'
        assert "is not a valid key" in str(err)

    def test_a_match_label_value_must_be_a_string(self) -> None:
        err = error_of(with_resource(labelSelector={"matchLabels": {"replicas": 3}}))
        assert str(err) == 'spec.resources[0].labelSelector.matchLabels["replicas"]: must be a string, not a number'

    @pytest.mark.parametrize("value", ["has space", "http://example.com/x", "x" * 64, "-leading-dash"])
    def test_annotation_values_must_have_label_syntax(self, value: str) -> None:
        err = error_of(with_resource(annotationSelector={"matchAnnotations": {"note": value}}))
        assert err.field == 'spec.resources[0].annotationSelector.matchAnnotations["note"]'
        assert "annotation selectors take label syntax" in str(err)

    def test_annotation_expression_values_must_have_label_syntax(self) -> None:
        err = error_of(with_resource(annotationSelector={"matchExpressions": [
            {"key": "owner", "operator": "In", "values": ["team-a", "team b"]}]}))
        assert err.field == "spec.resources[0].annotationSelector.matchExpressions[0].values[1]"

    def test_annotation_keys_must_have_label_syntax(self) -> None:
        err = error_of(with_resource(annotationSelector={"matchExpressions": [
            {"key": "Example.com/x", "operator": "Exists"}]}))
        assert err.field == "spec.resources[0].annotationSelector.matchExpressions[0].key"

    def test_match_annotations_is_the_equality_map_of_an_annotation_selector(self) -> None:
        rule = parse_decorator(with_resource(annotationSelector={"matchAnnotations": {"tier": "gold"}})).resources[0]
        assert rule.annotations.matches({"tier": "gold"})
        assert not rule.annotations.matches({"tier": "silver"})
        assert rule.labels.empty

    def test_match_labels_in_an_annotation_selector_is_not_its_equality_map(self) -> None:
        rule = parse_decorator(with_resource(annotationSelector={"matchLabels": {"tier": "gold"}})).resources[0]
        assert rule.annotations.empty

    def test_match_expressions_must_be_a_list(self) -> None:
        err = error_of(with_resource(labelSelector={"matchExpressions": {"key": "a"}}))
        assert str(err) == "spec.resources[0].labelSelector.matchExpressions: must be a list, not a map"

    def test_a_selector_must_be_a_map(self) -> None:
        assert str(error_of(with_resource(labelSelector="app=web"))) == \
            "spec.resources[0].labelSelector: must be a map, not a string"


class TestResolveRule:
    def test_a_served_resource_resolves_to_its_kind(self, served: list[ResourceInfo]) -> None:
        info = resolve_rule("apps/v1", "statefulsets", served)
        assert info is not None
        assert (info.kind, info.namespaced) == (Kind("apps/v1", "StatefulSet"), True)

    def test_a_cluster_scoped_resource_resolves_as_cluster_scoped(self, served: list[ResourceInfo]) -> None:
        info = resolve_rule("rbac.authorization.k8s.io/v1", "clusterroles", served)
        assert info is not None and not info.namespaced

    @pytest.mark.parametrize(("api_version", "resource"), [
        ("apps/v1beta1", "statefulsets"), ("v1", "Pods"), ("v1", "pod"), ("apps/v1", "pods")])
    def test_an_unserved_version_or_name_resolves_to_none(self, served: list[ResourceInfo], api_version: str,
                                                          resource: str) -> None:
        assert resolve_rule(api_version, resource, served) is None
