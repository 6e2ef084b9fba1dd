"""The map and tombstone protocol: request shapes, and which answers are accepted or refused (and where)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from mapctl.protocol import (
    MAP_SHAPE,
    TOMBSTONE_SHAPE,
    MapResponse,
    ResponseError,
    group_key,
    map_request,
    parse_map_response,
    parse_tombstone_response,
    tombstone_request,
)
from reconcile import Kind
from reconcile.hooks import HookError
from reconcile.hooks.base import check_response

CONTROLLER = {"apiVersion": "porchkit.dev/v1alpha1", "kind": "MapController",
              "metadata": {"name": "snapshots", "uid": "c-1"}, "spec": {"hooks": {}}, "status": {"stale": True}}
PARENT = {"apiVersion": "ark.example.com/v1alpha1", "kind": "SnapshotSchedule",
          "metadata": {"name": "schedule", "namespace": "default"}, "spec": {}}
INPUT = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data-0", "namespace": "default"}}


def snapshot(name: str, **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
            "metadata": {"name": name, **meta}}


def refused(raw: Any, *, namespace: str = "default", tombstone: bool = False) -> ResponseError:
    with pytest.raises(ResponseError) as caught:
        if tombstone:
            parse_tombstone_response(raw, namespace=namespace)
        else:
            parse_map_response(raw, namespace=namespace)
    return caught.value


class TestRequests:
    def test_group_keys_are_kind_dot_api_version(self) -> None:
        assert group_key(Kind("v1", "ConfigMap")) == "ConfigMap.v1"
        snapshots = Kind("snapshot.storage.k8s.io/v1", "VolumeSnapshot")
        assert group_key(snapshots) == "VolumeSnapshot.snapshot.storage.k8s.io/v1"

    def test_a_map_request_holds_controller_parent_key_input_and_outputs_by_name(self) -> None:
        first, second = snapshot("a", namespace="default"), snapshot("b", namespace="default")
        request = map_request(CONTROLLER, PARENT, "mk-1", INPUT,
                              {"VolumeSnapshot.snapshot.storage.k8s.io/v1": [first, second], "ConfigMap.v1": []})
        assert request == {
            "controller": {"apiVersion": "porchkit.dev/v1alpha1", "kind": "MapController",
                           "metadata": CONTROLLER["metadata"], "spec": CONTROLLER["spec"], "status": {}},
            "parent": PARENT, "mapKey": "mk-1", "input": INPUT,
            "outputs": {"VolumeSnapshot.snapshot.storage.k8s.io/v1": {"a": first, "b": second}, "ConfigMap.v1": {}},
        }

    def test_a_request_holds_the_objects_themselves_and_changes_none(self) -> None:
        output = snapshot("a")
        before = copy.deepcopy((CONTROLLER, PARENT, INPUT, output))
        request = map_request(CONTROLLER, PARENT, "mk-1", INPUT, {"g": [output]})
        assert request["parent"] is PARENT and request["input"] is INPUT and request["outputs"]["g"]["a"] is output
        assert (CONTROLLER, PARENT, INPUT, output) == before

    def test_a_tombstone_request_is_a_map_request_without_input(self) -> None:
        groups = {"VolumeSnapshot.snapshot.storage.k8s.io/v1": [snapshot("a")]}
        tombstone = tombstone_request(CONTROLLER, PARENT, "mk-1", groups)
        expected = map_request(CONTROLLER, PARENT, "mk-1", INPUT, groups)
        del expected["input"]
        assert tombstone == expected

    def test_a_request_is_plain_json(self) -> None:
        request = map_request(CONTROLLER, PARENT, "mk-1", INPUT, {"g": [snapshot("a")]})
        assert json.loads(json.dumps(request)) == request


class TestMapResponse:
    def test_outputs_and_resync_are_read(self) -> None:
        outputs = [snapshot("a"), snapshot("b", namespace="default")]
        response = parse_map_response({"outputs": outputs, "resyncAfterSeconds": 2.5}, namespace="default")
        assert response == MapResponse(outputs=tuple(outputs), resync_after=2.5)
        assert response.outputs[0] is outputs[0]  # the hook's own dict, not a copy

    @pytest.mark.parametrize("raw", [{}, {"outputs": None}, {"outputs": []}])
    def test_absent_or_null_outputs_mean_none(self, raw: dict[str, Any]) -> None:
        assert parse_map_response(raw, namespace="default") == MapResponse(outputs=(), resync_after=None)

    @pytest.mark.parametrize(("written", "resync"), [(None, None), (0, None), (-1, None), (3, 3.0)])
    def test_a_resync_of_zero_or_less_means_none(self, written: float | None, resync: float | None) -> None:
        assert parse_map_response({"resyncAfterSeconds": written}, namespace="").resync_after == resync

    @pytest.mark.parametrize(("raw", "message"), [
        ([], "<response>: must be a JSON object, not a list"),
        ({"outputs": {}}, "outputs: must be a list or null, not an object"),
        ({"resyncAfterSeconds": "5"}, "resyncAfterSeconds: must be a number or null, not a string"),
        ({"resyncAfterSeconds": True}, "resyncAfterSeconds: must be a number or null, not a boolean"),
        ({"resyncAfterSeconds": float("inf")}, "resyncAfterSeconds: must be a finite number, not inf"),
    ])
    def test_fields_of_the_wrong_type_are_refused(self, raw: Any, message: str) -> None:
        assert str(refused(raw)) == message


class TestOutputChecks:
    @pytest.mark.parametrize(("item", "message"), [
        ("a", "outputs[2]: must be an object, not a string"),
        ({"kind": "ConfigMap", "metadata": {"name": "x"}}, "outputs[2].apiVersion: required"),
        ({"apiVersion": "v1", "kind": 5, "metadata": {"name": "x"}}, "outputs[2].kind: must be a string, not a number"),
        ({"apiVersion": "v1", "kind": "ConfigMap"}, "outputs[2].metadata.name: required"),
        ({"apiVersion": "v1", "kind": "ConfigMap", "metadata": []},
         "outputs[2].metadata: must be an object, not a list"),
        ({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": ""}}, "outputs[2].metadata.name: required"),
        ({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": 1}},
         "outputs[2].metadata.namespace: must be a string, not a number"),
        ({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "other"}},
         'outputs[2].metadata.namespace: "other" is not the parent\'s namespace "default"'),
    ])
    def test_a_bad_output_names_its_index_and_field(self, item: Any, message: str) -> None:
        raw = {"outputs": [snapshot("a"), snapshot("b"), item]}
        assert str(refused(raw)) == message
        assert str(refused(raw, tombstone=True)) == message

    def test_an_output_in_the_parents_namespace_or_with_none_is_accepted(self) -> None:
        outputs = parse_map_response({"outputs": [snapshot("a", namespace="default"), snapshot("b", namespace=""),
                                                  snapshot("c")]}, namespace="default").outputs
        assert [o["metadata"]["name"] for o in outputs] == ["a", "b", "c"]

    def test_a_cluster_scoped_parent_takes_no_namespaced_outputs(self) -> None:
        assert refused({"outputs": [snapshot("a", namespace="default")]}, namespace="").field == \
            "outputs[0].metadata.namespace"

    def test_one_object_returned_twice_is_refused_even_across_versions(self) -> None:
        message = 'outputs[1]: VolumeSnapshot "a" is already outputs[0]'
        assert str(refused({"outputs": [snapshot("a"), snapshot("a")]})) == message
        other_version = {**snapshot("a"), "apiVersion": "snapshot.storage.k8s.io/v1beta1"}
        assert refused({"outputs": [snapshot("a"), other_version]}).field == "outputs[1]"

    def test_one_name_in_two_kinds_is_two_outputs(self) -> None:
        config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}
        assert len(parse_map_response({"outputs": [snapshot("a"), config]}, namespace="default").outputs) == 2


class TestTombstoneResponse:
    def test_the_outputs_to_keep_are_returned(self) -> None:
        keep = [snapshot("a")]
        assert parse_tombstone_response({"outputs": keep}, namespace="default") == (keep[0],)

    @pytest.mark.parametrize("raw", [{}, {"outputs": None}])
    def test_no_outputs_means_delete_them_all(self, raw: dict[str, Any]) -> None:
        assert parse_tombstone_response(raw, namespace="default") == ()

    def test_a_tombstone_answer_takes_no_resync(self) -> None:
        assert set(TOMBSTONE_SHAPE) == {"outputs"}
        assert parse_tombstone_response({"outputs": [], "resyncAfterSeconds": "ignored"}, namespace="") == ()


class TestShapesInTheHookClient:
    def test_the_hook_client_accepts_a_full_map_answer_in_strict_mode(self) -> None:
        raw = {"outputs": [snapshot("a")], "resyncAfterSeconds": 1}
        assert check_response(raw, MAP_SHAPE, strict=True, source="map hook") is raw

    def test_the_hook_client_refuses_a_field_the_map_protocol_lacks_in_strict_mode(self) -> None:
        with pytest.raises(HookError, match="unknown field 'status'"):
            check_response({"outputs": [], "status": {}}, MAP_SHAPE, strict=True, source="map hook")
        with pytest.raises(HookError, match="unknown field 'resyncAfterSeconds'"):
            check_response({"outputs": [], "resyncAfterSeconds": 1}, TOMBSTONE_SHAPE, strict=True, source="tombstone")
