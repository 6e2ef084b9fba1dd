"""The pipeline file (a Δ-controller controller spec): validation, routing, target stamping."""

from __future__ import annotations

import pytest

from deltapipe import PipelineError
from deltapipe.spec import PipelineSpec

PIPELINE = {"@project": {"metadata": "$.metadata"}}


def test_sources_route_objects_by_kind_group_namespace_and_labels() -> None:
    spec = PipelineSpec.from_dict({
        "sources": [{"kind": "Deployment", "apiGroup": "apps", "namespace": "prod",
                     "labelSelector": {"matchLabels": {"tier": "web"}}},
                    {"kind": "Service", "apiGroup": ""}],
        "pipeline": [{"@join": True}, PIPELINE]})
    objects = [
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "a", "namespace": "prod",
                                                                      "labels": {"tier": "web"}}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "b", "namespace": "dev",
                                                                      "labels": {"tier": "web"}}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "c", "namespace": "prod"}},
        {"apiVersion": "other.io/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "prod",
                                                                          "labels": {"tier": "web"}}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}},
        {"apiVersion": "x.io/v1", "kind": "Service", "metadata": {"name": "t"}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}},
    ]
    routed = spec.route(objects)
    assert {k: [o["metadata"]["name"] for o in v] for k, v in routed.items()} == {"Deployment": ["a"],
                                                                                 "Service": ["s"]}


def test_without_sources_every_object_goes_to_the_pipeline() -> None:
    spec = PipelineSpec.from_dict({"pipeline": PIPELINE})
    out = spec.build().evaluate(spec.route([{"kind": "A", "metadata": {"name": "a"}},
                                            {"kind": "B", "metadata": {"name": "b"}}]))
    assert [o["metadata"]["name"] for o in out] == ["a", "b"]


@pytest.mark.parametrize(("target", "api_version"), [
    ({"apiGroup": "example.com", "version": "v2", "kind": "X"}, "example.com/v2"),
    ({"apiGroup": "example.com", "kind": "X"}, "example.com/v1"),
    ({"kind": "X"}, "v1"),
    ({"apiVersion": "a.io/v1beta1", "kind": "X"}, "a.io/v1beta1"),
])
def test_the_target_is_stamped_on_every_output(target: dict, api_version: str) -> None:
    spec = PipelineSpec.from_dict({"pipeline": PIPELINE, "target": target})
    out = spec.build().evaluate({"A": [{"kind": "A", "metadata": {"name": "a"}}]})
    assert (out[0]["apiVersion"], out[0]["kind"]) == (api_version, "X")


def test_target_type_defaults_to_updater() -> None:
    spec = PipelineSpec.from_dict({"pipeline": PIPELINE, "target": {"kind": "X"}})
    assert spec.target is not None and spec.target.type == "Updater"


@pytest.mark.parametrize(("raw", "message"), [
    ([], "expected a map with sources, pipeline and target"),
    ({}, "the field 'pipeline' is required"),
    ({"pipeline": PIPELINE, "sources": {"kind": "A"}}, "sources: expected a list"),
    ({"pipeline": PIPELINE, "sources": [{"apiGroup": "x"}]}, "sources[0].kind: expected a kind name"),
    ({"pipeline": PIPELINE, "sources": [{"kind": "A"}, {"kind": "A"}]}, "each kind may appear once"),
    ({"pipeline": PIPELINE, "sources": [{"kind": "A", "labelSelector": []}]}, "sources[0].labelSelector"),
    ({"pipeline": PIPELINE, "sources": [{"kind": "A", "namespace": 1}]}, "sources[0].namespace"),
    ({"pipeline": PIPELINE, "target": {"apiGroup": "x"}}, "target.kind: expected a kind name"),
    ({"pipeline": PIPELINE, "target": {"kind": "X", "type": "Merger"}}, "target.type: expected Updater or Patcher"),
])
def test_invalid_specs_name_the_field(raw: object, message: str) -> None:
    with pytest.raises(PipelineError) as caught:
        PipelineSpec.from_dict(raw)
    assert message in str(caught.value)


def test_a_bad_label_selector_is_reported_when_routing() -> None:
    spec = PipelineSpec.from_dict({"pipeline": PIPELINE, "sources": [
        {"kind": "A", "labelSelector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}}]})
    with pytest.raises(PipelineError, match=r"sources\[A\].labelSelector: .*unknown operator 'Near'"):
        spec.route([{"kind": "A", "metadata": {"name": "a", "labels": {"a": "b"}}}])
