"""Write-back: labels, annotations, status and our finalizer as the hook's answer wants them, or no write."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from decorators.protocol import parse_response
from decorators.writeback import write_back

OURS = "metacontroller.io/decoratorcontroller-dc"
THEIRS = "example.com/keep"


def target(*, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
           finalizers: list[str] | None = None, status: Any = "absent") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "web", "namespace": "default", "uid": "u1", "resourceVersion": "7"}
    if labels is not None:
        meta["labels"] = labels
    if annotations is not None:
        meta["annotations"] = annotations
    if finalizers is not None:
        meta["finalizers"] = finalizers
    obj: dict[str, Any] = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": meta,
                           "spec": {"replicas": 3}}
    if status != "absent":
        obj["status"] = status
    return obj


def apply(obj: dict[str, Any], answer: dict[str, Any], release: str | None = OURS) -> Any:
    return write_back(obj, parse_response(answer), release)


class TestLabelsAndAnnotations:
    @pytest.mark.parametrize("field", ["labels", "annotations"])
    def test_a_string_sets_null_deletes_and_unnamed_keys_stay(self, field: str) -> None:
        given: dict[str, Any] = {field: {"keep": "1", "change": "old", "drop": "x"}}
        obj = target(**given)
        change = apply(obj, {field: {"change": "new", "drop": None, "add": "2"}})
        assert change.object["metadata"][field] == {"keep": "1", "change": "new", "add": "2"}
        assert change.metadata_changed and not change.status_changed

    def test_labels_are_added_to_a_target_without_any(self) -> None:
        change = apply(target(), {"labels": {"pod-name": "nginx-2"}})
        assert change.object["metadata"]["labels"] == {"pod-name": "nginx-2"}

    def test_deleting_the_last_label_removes_the_map(self) -> None:
        change = apply(target(labels={"a": "1"}), {"labels": {"a": None}})
        assert "labels" not in change.object["metadata"]

    def test_deleting_a_key_that_is_not_there_writes_nothing(self) -> None:
        assert apply(target(labels={"a": "1"}), {"labels": {"b": None}, "annotations": {"c": None}}) is None

    def test_setting_what_is_already_there_writes_nothing(self) -> None:
        obj = target(labels={"a": "1"}, annotations={"b": "2"}, status={"ready": 1}, finalizers=[OURS])
        assert apply(obj, {"labels": {"a": "1"}, "annotations": {"b": "2"}, "status": {"ready": 1.0},
                           "attachments": [], "finalized": False}) is None


class TestStatus:
    def test_absent_or_null_status_keeps_the_targets_status(self) -> None:
        obj = target(status={"ready": 1})
        assert apply(obj, {}) is None
        assert apply(obj, {"status": None}) is None

    def test_a_status_map_replaces_the_status_wholesale(self) -> None:
        change = apply(target(status={"ready": 1, "old": {"x": 1}}), {"status": {"ready": 2}})
        assert change.object["status"] == {"ready": 2}
        assert change.status_changed and not change.metadata_changed

    def test_an_empty_status_is_a_change_when_the_target_has_none(self) -> None:
        change = apply(target(), {"status": {}})
        assert change is not None and change.status_changed
        assert change.object["status"] == {}

    def test_an_empty_status_is_no_change_when_the_target_has_an_empty_one(self) -> None:
        assert apply(target(status={}), {"status": {}}) is None

    def test_the_spec_is_carried_over_untouched(self) -> None:
        change = apply(target(), {"status": {"a": 1}, "labels": {"b": "2"}})
        assert change.object["spec"] == {"replicas": 3}
        assert change.object["metadata"]["resourceVersion"] == "7"


class TestFinalizer:
    def test_finalized_removes_our_finalizer_and_keeps_the_others_in_order(self) -> None:
        change = apply(target(finalizers=[THEIRS, OURS, "z.io/last"]), {"finalized": True})
        assert change.object["metadata"]["finalizers"] == [THEIRS, "z.io/last"]
        assert change.metadata_changed and not change.status_changed

    def test_removing_the_only_finalizer_removes_the_list(self) -> None:
        change = apply(target(finalizers=[OURS]), {"finalized": True})
        assert "finalizers" not in change.object["metadata"]

    def test_finalized_without_our_finalizer_writes_nothing(self) -> None:
        assert apply(target(finalizers=[THEIRS]), {"finalized": True}) is None

    def test_not_finalized_keeps_our_finalizer(self) -> None:
        assert apply(target(finalizers=[OURS]), {"finalized": False}) is None

    def test_without_a_finalizer_to_release_nothing_is_released(self) -> None:
        assert apply(target(finalizers=[OURS]), {"finalized": True}, release=None) is None

    def test_all_changes_come_together(self) -> None:
        change = apply(target(labels={"a": "1"}, finalizers=[OURS]),
                       {"labels": {"a": "2"}, "status": {"s": True}, "finalized": True})
        meta = change.object["metadata"]
        assert (meta["labels"], "finalizers" in meta, change.object["status"]) == ({"a": "2"}, False, {"s": True})
        assert change.metadata_changed and change.status_changed


class TestPurity:
    def test_the_target_is_never_changed_and_the_result_shares_nothing(self) -> None:
        obj = target(labels={"a": "1"}, annotations={"b": "2"}, finalizers=[OURS], status={"deep": {"x": [1]}})
        answer = {"labels": {"a": None, "c": "3"}, "annotations": {"b": "9"}, "status": {"deep": {"y": [2]}},
                  "finalized": True}
        before = copy.deepcopy((obj, answer))
        response = parse_response(answer)
        change = write_back(obj, response, OURS)
        assert change is not None and (obj, answer) == before
        change.object["status"]["deep"]["y"].append(3)
        change.object["spec"]["replicas"] = 9
        assert (obj, answer) == before
        assert response.status == {"deep": {"y": [2]}}


class TestAddingOurFinalizer:
    def test_it_rides_with_the_labels_in_one_object(self) -> None:
        change = write_back(target(labels={"a": "1"}, finalizers=[THEIRS]), parse_response({"labels": {"b": "2"}}),
                            None, OURS)
        assert change is not None and change.metadata_changed and not change.status_changed
        assert change.object["metadata"]["labels"] == {"a": "1", "b": "2"}
        assert change.object["metadata"]["finalizers"] == [THEIRS, OURS]

    def test_it_alone_is_still_a_write(self) -> None:
        change = write_back(target(), parse_response({}), None, OURS)
        assert change is not None and change.object["metadata"]["finalizers"] == [OURS]

    def test_a_finalized_answer_keeps_it_off(self) -> None:
        assert write_back(target(), parse_response({"finalized": True}), OURS, OURS) is None
