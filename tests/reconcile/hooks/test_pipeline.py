"""Pipeline hooks: a Δ pipeline computes the answer in-process from the request's objects."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from reconcile.hooks import Hook, HookConfigError, HookError
from tests.reconcile.hooks.conftest import TARGET, sync_request

MakeHook = Callable[..., Hook]

STATEFULSET = {**TARGET, "spec": {"replicas": 3}}
INFO_CONFIGMAP = {
    "name": "statefulset-info",
    "pipeline": [{"@project": {"metadata": {"name": {"@concat": ["$.metadata.name", "-info"]},
                                            "namespace": "$.metadata.namespace"},
                               "data": {"replicas": {"@string": "$.spec.replicas"}}}}],
    "target": {"apiVersion": "v1", "kind": "ConfigMap"},
}


def settings(name: str, namespace: str = "shop", **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace},
            "data": data}


def test_a_pipeline_projects_the_target_into_a_configmap(make_hook: MakeHook) -> None:
    hook = make_hook({"pipeline": INFO_CONFIGMAP})
    assert (hook.kind, hook.target) == ("pipeline", "pipeline statefulset-info")
    assert hook.call(sync_request(STATEFULSET)) == {"attachments": [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web-info", "namespace": "shop"},
         "data": {"replicas": "3"}}]}


def test_without_sources_only_the_target_feeds_the_pipeline(make_hook: MakeHook) -> None:
    everything = {"pipeline": [{"@project": {"metadata": "$.metadata", "seen": "$.kind"}}]}
    hook = make_hook({"pipeline": everything})
    request = sync_request(STATEFULSET)
    request["attachments"] = {"ConfigMap.v1": {"web-settings": settings("web-settings", size="large")}}
    answer = hook.call(request)  # neither the controller nor the attachment is seen
    assert [(o["metadata"]["name"], o["seen"]) for o in answer["attachments"]] == [("web", "StatefulSet")]


def test_with_sources_attachments_and_related_objects_are_routed_to_them(make_hook: MakeHook) -> None:
    joined = {
        "sources": [{"kind": "StatefulSet", "apiGroup": "apps"}, {"kind": "ConfigMap"}],
        "pipeline": [
            {"@join": {"@eq": [{"@concat": ["$.StatefulSet.metadata.name", "-settings"]},
                               "$.ConfigMap.metadata.name"]}},
            {"@project": {"metadata": {"name": {"@concat": ["$.StatefulSet.metadata.name", "-sized"]},
                                       "namespace": "$.StatefulSet.metadata.namespace"},
                          "data": {"size": "$.ConfigMap.data.size"}}}],
        "target": {"apiVersion": "v1", "kind": "ConfigMap"},
    }
    hook = make_hook({"pipeline": joined})
    request = sync_request(STATEFULSET)
    request["related"] = {"ConfigMap.v1": {"web-settings": settings("web-settings", size="large"),
                                           "db-settings": settings("db-settings", size="small")}}
    assert hook.call(request) == {"attachments": [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web-sized", "namespace": "shop"},
         "data": {"size": "large"}}]}


def test_outputs_go_to_the_output_field_and_are_shape_checked(make_hook: MakeHook) -> None:
    hook = make_hook({"pipeline": INFO_CONFIGMAP, "version": "v2"}, output_field="outputs",
                     shape={"outputs": (list,)})
    assert [o["metadata"]["name"] for o in hook.call({"parent": STATEFULSET})["outputs"]] == ["web-info"]
    strict = make_hook({"pipeline": INFO_CONFIGMAP, "version": "v2"}, output_field="children")
    with pytest.raises(HookError, match="unknown field 'children'"):
        strict.call(sync_request(STATEFULSET))


@pytest.mark.parametrize(("pipeline", "message"), [
    ({"name": "no stages"}, "spec.hooks.sync.pipeline: the field 'pipeline' is required"),
    ({"pipeline": [{"@reshape": {}}]}, "spec.hooks.sync.pipeline: stage 1: unknown pipeline operation '@reshape'"),
    ("just text", "spec.hooks.sync.pipeline: expected a map with sources, pipeline and target, got string"),
])
def test_a_bad_pipeline_spec_is_a_config_error_naming_the_field(pipeline: Any, message: str,
                                                                make_hook: MakeHook) -> None:
    with pytest.raises(HookConfigError) as raised:
        make_hook({"pipeline": pipeline})
    assert raised.value.field == "spec.hooks.sync.pipeline"
    assert str(raised.value).startswith(message)


def test_an_evaluation_error_is_a_deterministic_hook_error_naming_the_pipeline(make_hook: MakeHook) -> None:
    numbers = {"name": "numbers", "pipeline": [{"@project": {"metadata": "$.metadata", "n": {"@int": "$.kind"}}}]}
    with pytest.raises(HookError) as raised:
        make_hook({"pipeline": numbers}).call(sync_request(STATEFULSET))
    assert str(raised.value).startswith("pipeline numbers: stage 1 (@project)")
    assert "@int: expected an integer" in str(raised.value)
    assert raised.value.deterministic  # a pipeline is pure: the same request fails again


def test_a_closed_pipeline_hook_refuses_calls(make_hook: MakeHook) -> None:
    hook = make_hook({"pipeline": INFO_CONFIGMAP})
    hook.close()
    with pytest.raises(HookError, match="cancelled: the hook was closed"):
        hook.call(sync_request(STATEFULSET))
