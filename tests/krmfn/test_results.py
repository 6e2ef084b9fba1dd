"""Results: builders fill resourceRef and file from the object; an error result fails the run."""

from __future__ import annotations

import pytest

from krmfn import Result, annotations, error, info, results, warning

DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {
        "name": "web",
        "namespace": "team-a",
        "annotations": {annotations.PATH: "deployment.yaml", annotations.INDEX: "1"},
    },
}


def test_a_result_about_an_object_names_it_and_its_file() -> None:
    result = error("too many replicas", resource=DEPLOYMENT, field="spec.replicas")
    assert result.to_dict() == {
        "message": "too many replicas",
        "severity": "error",
        "resourceRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "namespace": "team-a"},
        "field": {"path": "spec.replicas"},
        "file": {"path": "deployment.yaml", "index": 1},
    }


def test_field_and_file_accept_full_mappings_and_tags() -> None:
    result = warning(
        "use 3",
        field={"path": "spec.replicas", "currentValue": 5, "proposedValue": 3},
        file="deployment.yaml",
        tags={"rule": "replicas"},
    )
    assert result.to_dict() == {
        "message": "use 3",
        "severity": "warning",
        "field": {"path": "spec.replicas", "currentValue": 5, "proposedValue": 3},
        "file": {"path": "deployment.yaml"},
        "tags": {"rule": "replicas"},
    }


def test_cluster_scoped_objects_have_no_namespace_in_their_ref() -> None:
    assert info("ok", resource={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}}).resource_ref == {
        "apiVersion": "v1",
        "kind": "Namespace",
        "name": "a",
    }


def test_unknown_severities_are_refused_by_the_builder() -> None:
    with pytest.raises(ValueError, match="severity must be one of error, warning, info"):
        results.result("x", "fatal")  # type: ignore[arg-type]


def test_only_an_error_result_means_a_non_zero_exit() -> None:
    assert results.exit_code([]) == 0
    assert results.exit_code([info("a"), warning("b"), Result("c", severity=None)]) == 0
    assert results.exit_code([info("a"), error("b")]) == 1


def test_results_read_from_input_keep_what_they_carry() -> None:
    data = {"message": "old", "resourceRef": {"metadata": {"name": "x"}}, "field": {"suggestedValue": 1}}
    assert Result.from_dict(data).to_dict() == data
