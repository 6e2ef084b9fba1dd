"""Conditions behave like metav1.Condition: transition time moves only with status."""

from __future__ import annotations

import copy

import pytest

from reconcile import conditions, objects

T0, T1 = 1_700_000_000.0, 1_700_000_100.0


def test_a_new_condition_gets_a_transition_time() -> None:
    out = conditions.set_condition([], "Ready", "True", "NoErrors", "fine", now=T0, observed_generation=3)
    assert out == [{"type": "Ready", "status": "True", "reason": "NoErrors", "message": "fine",
                    "lastTransitionTime": "2023-11-14T22:13:20Z", "observedGeneration": 3}]


def test_reasserting_the_same_status_keeps_the_transition_time_but_updates_the_rest() -> None:
    first = conditions.set_condition([], "Ready", "False", "Waiting", "a", now=T0)
    second = conditions.set_condition(first, "Ready", "False", "StillWaiting", "b", now=T1, observed_generation=2)
    assert second[0]["lastTransitionTime"] == first[0]["lastTransitionTime"]
    assert (second[0]["reason"], second[0]["message"], second[0]["observedGeneration"]) == ("StillWaiting", "b", 2)


def test_a_status_change_moves_the_transition_time() -> None:
    first = conditions.set_condition([], "Ready", "False", "Waiting", now=T0)
    second = conditions.set_condition(first, "Ready", "True", "Done", now=T1)
    assert second[0]["lastTransitionTime"] == objects.rfc3339(T1) != first[0]["lastTransitionTime"]


def test_other_conditions_keep_their_order_and_inputs_are_not_changed() -> None:
    given = [{"type": "A", "status": "True"}, {"type": "B", "status": "False"}]
    before = copy.deepcopy(given)
    out = conditions.set_condition(given, "A", "False", "X", now=T0)
    assert [c["type"] for c in out] == ["A", "B"] and given == before
    assert conditions.remove_condition(out, "A") == [{"type": "B", "status": "False"}]


def test_an_unknown_status_is_refused() -> None:
    with pytest.raises(ValueError, match="must be one of True, False, Unknown"):
        conditions.set_condition([], "Ready", "true", "X", now=T0)  # type: ignore[arg-type]


def test_with_condition_takes_observed_generation_from_the_object() -> None:
    obj = {"metadata": {"name": "a", "generation": 7}, "status": {"conditions": []}}
    out = conditions.with_condition(obj, "Stalled", "True", "ValidationError", "bad", now=T0)
    assert conditions.is_true(out, "Stalled") and not conditions.is_true(obj, "Stalled")
    assert out["status"]["conditions"][0]["observedGeneration"] == 7


def test_accessors_tolerate_malformed_objects() -> None:
    odd = {"metadata": {"labels": "x", "finalizers": "y", "ownerReferences": [1, {"controller": True, "uid": "u"}]}}
    assert objects.labels_of(odd) == {} and objects.finalizers_of(odd) == []
    assert objects.controller_of(odd) == {"controller": True, "uid": "u"}
    assert objects.labels_of({"metadata": None}) == {} and not objects.is_deleting({})


def test_with_label_copies() -> None:
    obj = {"metadata": {"name": "a", "labels": {"x": "1"}}}
    out = objects.with_label(obj, "y", "2")
    assert out["metadata"]["labels"] == {"x": "1", "y": "2"} and obj["metadata"]["labels"] == {"x": "1"}


def test_owner_reference_points_at_the_owner() -> None:
    owner = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "o", "uid": "123"}}
    assert objects.owner_reference(owner) == {"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "123",
                                              "controller": True, "blockOwnerDeletion": True}
