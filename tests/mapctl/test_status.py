"""Aggregated status: totals per input and output resource, and per-condition counts of "True"."""

from __future__ import annotations

import copy
import json
from typing import Any

from mapctl.parents import already_reported, failure_message
from mapctl.status import aggregate


def snapshot(*conditions: tuple[str, str]) -> dict[str, Any]:
    return {"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot", "metadata": {"name": "s"},
            "status": {"conditions": [{"type": kind, "status": status} for kind, status in conditions]}}


def test_the_documented_shape_with_mixed_conditions() -> None:
    outputs = [snapshot(("Ready", "True"), ("Degraded", "False")), snapshot(("Ready", "True")),
               snapshot(("Ready", "False"), ("Degraded", "True")), snapshot(("Ready", "Unknown")),
               {"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot", "metadata": {"name": "new"}}]
    assert aggregate({"persistentvolumeclaims": 20}, {"volumesnapshots": outputs}, 3) == {
        "inputs": {"persistentvolumeclaims": {"total": 20}},
        "observedGeneration": 3,
        "outputs": {"volumesnapshots": {"Degraded": 1, "Ready": 2, "total": 5}},
    }


def test_a_condition_type_never_true_is_counted_as_zero() -> None:
    counts = aggregate({}, {"services": [snapshot(("Stalled", "False")), snapshot(("Stalled", "Unknown"))]}, 1)
    assert counts["outputs"]["services"] == {"Stalled": 0, "total": 2}


def test_an_output_listing_a_type_twice_counts_once() -> None:
    counts = aggregate({}, {"services": [snapshot(("Ready", "True"), ("Ready", "True"))]}, 1)
    assert counts["outputs"]["services"] == {"Ready": 1, "total": 1}


def test_only_the_exact_status_true_counts() -> None:
    counts = aggregate({}, {"services": [snapshot(("Ready", "true")), snapshot(("Ready", "TRUE"))]}, 1)
    assert counts["outputs"]["services"]["Ready"] == 0


def test_malformed_conditions_are_skipped() -> None:
    odd: list[dict[str, Any]] = [
        {"status": {"conditions": "Ready"}}, {"status": None}, {"status": {"conditions": [None, "x", {}]}},
        {"status": {"conditions": [{"type": 5, "status": "True"}, {"type": "", "status": "True"}]}}]
    assert aggregate({}, {"services": odd}, 1)["outputs"]["services"] == {"total": 4}


def test_a_condition_named_total_cannot_overwrite_the_total() -> None:
    counts = aggregate({}, {"services": [snapshot(("total", "True"))] * 3}, 1)
    assert counts["outputs"]["services"] == {"total": 3}


def test_every_resource_given_appears_even_when_empty() -> None:
    assert aggregate({"configmaps": 0, "secrets": 2}, {"services": [], "deployments": []}, None) == {
        "inputs": {"configmaps": {"total": 0}, "secrets": {"total": 2}},
        "observedGeneration": None,
        "outputs": {"deployments": {"total": 0}, "services": {"total": 0}},
    }


def test_keys_are_sorted_at_every_level_whatever_the_input_order() -> None:
    outputs = {"zebras": [snapshot(("b", "True"), ("A", "True"))], "apples": []}
    status = aggregate({"zz": 1, "aa": 2}, outputs, 7)
    assert list(status) == ["inputs", "observedGeneration", "outputs"]
    assert list(status["inputs"]) == ["aa", "zz"]
    assert list(status["outputs"]) == ["apples", "zebras"]
    assert list(status["outputs"]["zebras"]) == ["A", "b", "total"]
    reordered = aggregate({"aa": 2, "zz": 1}, dict(reversed(outputs.items())), 7)
    assert json.dumps(reordered) == json.dumps(status)


def test_the_outputs_are_not_changed() -> None:
    outputs = {"services": [snapshot(("Ready", "True"))]}
    before = copy.deepcopy(outputs)
    aggregate({}, outputs, 1)
    assert outputs == before


def test_a_status_written_for_the_same_activity_and_mapping_and_untouched_since_stands() -> None:
    status = {"inputs": {"services": {"total": 2}}}
    last = (3, "fp", json.dumps(status, sort_keys=True))
    assert already_reported(last, 3, "fp", {"inputs": {"services": {"total": 2}}})
    assert not already_reported(None, 3, "fp", status)  # never written
    assert not already_reported(last, 4, "fp", status)  # an input changed since
    assert not already_reported(last, 3, "other", status)  # the parent's mapping changed
    assert not already_reported(last, 3, "fp", {"inputs": {}})  # someone else rewrote the status


def test_the_failure_message_counts_the_failed_inputs_and_quotes_the_first() -> None:
    assert failure_message({}, 5) == ""
    assert failure_message({"a": "hook said no", "b": "timeout"}, 5) == "2 of 5 inputs failed; first: hook said no"
    assert failure_message({"a": "hook said no"}, 1) == "1 of 1 input failed; first: hook said no"
