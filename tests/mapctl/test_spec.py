"""Parsing a MapController: what it compiles to, what it refuses, and which field each error names."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from mapctl.spec import (
    MAP_CONTROLLER,
    MapSpec,
    OutputRule,
    ResourceRef,
    SpecError,
    parse_map_controller,
)
from reconcile import Kind, ReconcileError
from reconcile.fields import hook_version

MAP = {"webhook": {"url": "http://snapshotschedule-controller.metacontroller/map"}}
TOMBSTONE = {"webhook": {"url": "http://snapshotschedule-controller.metacontroller/tombstone"}}


def map_controller(name: str = "snapshotschedule-controller", **spec: Any) -> dict[str, Any]:
    """The proposal's SnapshotSchedule example, with `spec` fields replaced (None removes one)."""
    body: dict[str, Any] = {
        "parentResource": {"apiVersion": "ark.example.com/v1alpha1", "resource": "snapshotschedules"},
        "inputResources": [{"apiVersion": "v1", "resource": "persistentvolumeclaims"}],
        "outputResources": [{"apiVersion": "snapshot.storage.k8s.io/v1", "resource": "volumesnapshots"}],
        "resyncPeriodSeconds": 5,
        "hooks": {"map": copy.deepcopy(MAP), "tombstone": copy.deepcopy(TOMBSTONE)},
    }
    body.update(spec)
    body = {k: v for k, v in body.items() if v is not None}
    return {"apiVersion": MAP_CONTROLLER.api_version, "kind": MAP_CONTROLLER.kind,
            "metadata": {"name": name}, "spec": body}


def error(obj: Any) -> SpecError:
    with pytest.raises(SpecError) as caught:
        parse_map_controller(obj)
    return caught.value


class TestWhatItCompilesTo:
    def test_the_proposal_example_parses_into_every_field(self) -> None:
        assert parse_map_controller(map_controller()) == MapSpec(
            name="snapshotschedule-controller",
            parent=ResourceRef("ark.example.com/v1alpha1", "snapshotschedules"),
            inputs=(ResourceRef("v1", "persistentvolumeclaims"),),
            outputs=(OutputRule("snapshot.storage.k8s.io/v1", "volumesnapshots", "OnDelete"),),
            map_hook=MAP,
            tombstone_hook=TOMBSTONE,
            resync_period=5.0,
        )

    def test_the_kind_is_porchkits_own(self) -> None:
        assert Kind("porchkit.dev/v1alpha1", "MapController") == MAP_CONTROLLER

    def test_several_inputs_and_outputs_keep_their_order(self) -> None:
        spec = parse_map_controller(map_controller(
            inputResources=[{"apiVersion": "v1", "resource": "configmaps"},
                            {"apiVersion": "v1", "resource": "secrets"}],
            outputResources=[{"apiVersion": "v1", "resource": "services"},
                             {"apiVersion": "apps/v1", "resource": "deployments"}]))
        assert [r.resource for r in spec.inputs] == ["configmaps", "secrets"]
        assert [r.resource for r in spec.outputs] == ["services", "deployments"]

    def test_an_input_kind_may_also_be_an_output_kind(self) -> None:
        cms = {"apiVersion": "v1", "resource": "configmaps"}
        spec = parse_map_controller(map_controller(inputResources=[cms], outputResources=[cms]))
        assert spec.inputs[0].resource == spec.outputs[0].resource == "configmaps"

    def test_the_tombstone_hook_is_optional(self) -> None:
        assert parse_map_controller(map_controller(hooks={"map": MAP})).tombstone_hook is None
        assert parse_map_controller(map_controller(hooks={"map": MAP, "tombstone": None})).tombstone_hook is None

    def test_unknown_fields_are_ignored(self) -> None:
        obj = map_controller(surprise=True)
        obj["spec"]["parentResource"]["revisionHistory"] = {}
        assert parse_map_controller(obj).name == "snapshotschedule-controller"

    def test_the_object_is_not_changed_and_shares_nothing_with_the_result(self) -> None:
        obj = map_controller()
        before = copy.deepcopy(obj)
        spec = parse_map_controller(obj)
        assert obj == before
        obj["spec"]["hooks"]["map"]["webhook"]["url"] = "http://elsewhere/"
        assert spec.map_hook["webhook"]["url"] == MAP["webhook"]["url"]


class TestUpdateMethods:
    @pytest.mark.parametrize(("written", "method"), [
        ("OnDelete", "OnDelete"), ("Recreate", "Recreate"), ("InPlace", "InPlace"),
        ("RollingRecreate", "Recreate"), ("RollingInPlace", "InPlace"), ("", "OnDelete"), (None, "OnDelete"),
    ])
    def test_each_method_normalises_to_a_plain_one(self, written: str | None, method: str) -> None:
        rule = {"apiVersion": "v1", "resource": "services", "updateStrategy": {"method": written}}
        assert parse_map_controller(map_controller(outputResources=[rule])).outputs[0].method == method

    def test_an_absent_update_strategy_means_on_delete(self) -> None:
        assert parse_map_controller(map_controller()).outputs[0].method == "OnDelete"

    @pytest.mark.parametrize(("written", "shown"), [("Rolling", '"Rolling"'), (3, "a number")])
    def test_an_unknown_method_names_the_field(self, written: Any, shown: str) -> None:
        rules = [{"apiVersion": "v1", "resource": "services"},
                 {"apiVersion": "v1", "resource": "secrets", "updateStrategy": {"method": written}}]
        assert str(error(map_controller(outputResources=rules))) == (
            f"spec.outputResources[1].updateStrategy.method: {shown} is not an update method "
            "(OnDelete, Recreate, InPlace, RollingRecreate, RollingInPlace)")


class TestResyncPeriod:
    @pytest.mark.parametrize(("written", "period"), [(None, None), (30, 30.0), (1, 1.0), (0, 1.0), (-5, 1.0)])
    def test_periods_below_one_second_mean_one_second(self, written: int | None, period: float | None) -> None:
        assert parse_map_controller(map_controller(resyncPeriodSeconds=written)).resync_period == period

    @pytest.mark.parametrize(("written", "problem"), [
        ("5", "must be an integer, not a string"), (1.5, "must be an integer, not a number"),
        (True, "must be an integer, not a boolean"), (2**31, f"{2**31} is too large (at most {2**31 - 1})"),
    ])
    def test_a_bad_period_names_the_field(self, written: Any, problem: str) -> None:
        assert str(error(map_controller(resyncPeriodSeconds=written))) == f"spec.resyncPeriodSeconds: {problem}"


class TestHooks:
    def test_hooks_are_required(self) -> None:
        assert str(error(map_controller(hooks=None))) == "spec.hooks: required"

    def test_the_map_hook_is_required(self) -> None:
        assert str(error(map_controller(hooks={"tombstone": TOMBSTONE}))) == "spec.hooks.map: required"

    @pytest.mark.parametrize("name", ["map", "tombstone"])
    def test_an_unknown_hook_version_names_the_hook(self, name: str) -> None:
        hooks: dict[str, Any] = {"map": MAP, name: {**MAP, "version": "v3"}}
        message = f'spec.hooks.{name}.version: "v3" is not a hook version (v1, v2)'
        assert str(error(map_controller(hooks=hooks))) == message

    def test_a_hook_that_is_not_a_map_names_the_hook(self) -> None:
        message = "spec.hooks.map: must be a map, not a string"
        assert str(error(map_controller(hooks={"map": "http://x/map"}))) == message

    def test_hook_version_defaults_to_v1(self) -> None:
        spec = parse_map_controller(map_controller(hooks={"map": MAP, "tombstone": {**TOMBSTONE, "version": "v2"}}))
        assert hook_version(spec.map_hook) == "v1"
        assert hook_version(spec.tombstone_hook) == "v2"
        assert hook_version(None) == "v1"


class TestRefusals:
    @pytest.mark.parametrize(("spec", "message"), [
        ({"parentResource": None}, "spec.parentResource: required"),
        ({"parentResource": {"resource": "snapshotschedules"}}, "spec.parentResource.apiVersion: required"),
        ({"parentResource": {"apiVersion": "v1", "resource": 7}},
         "spec.parentResource.resource: must be a string, not a number"),
        ({"inputResources": None}, "spec.inputResources: at least one resource is required"),
        ({"inputResources": []}, "spec.inputResources: at least one resource is required"),
        ({"inputResources": {"apiVersion": "v1"}}, "spec.inputResources: must be a list, not a map"),
        ({"inputResources": [{"apiVersion": "v1", "resource": "pods"}, "pods"]},
         "spec.inputResources[1]: must be a map, not a string"),
        ({"outputResources": []}, "spec.outputResources: at least one resource is required"),
        ({"outputResources": [{"apiVersion": "v1", "resource": ""}]}, "spec.outputResources[0].resource: required"),
        ({"outputResources": [{"apiVersion": "v1", "resource": "x", "updateStrategy": "InPlace"}]},
         "spec.outputResources[0].updateStrategy: must be a map, not a string"),
    ])
    def test_each_problem_names_its_field(self, spec: dict[str, Any], message: str) -> None:
        assert str(error(map_controller(**spec))) == message

    def test_two_outputs_with_one_plural_are_refused_as_status_would_merge_them(self) -> None:
        rules = [{"apiVersion": "v1", "resource": "events"}, {"apiVersion": "events.k8s.io/v1", "resource": "events"}]
        assert str(error(map_controller(outputResources=rules))) == (
            'spec.outputResources[1].resource: "events" is already named by spec.outputResources[0] '
            "(status counts are keyed by resource)")

    def test_two_inputs_with_one_plural_are_refused(self) -> None:
        rules = [{"apiVersion": "v1", "resource": "pods"}] * 2
        assert error(map_controller(inputResources=rules)).field == "spec.inputResources[1].resource"

    def test_a_name_that_cannot_be_a_label_value_is_refused(self) -> None:
        name = "a." * 40 + "b"  # a valid object name, 81 characters
        assert error(map_controller(name=name)).field == "metadata.name"

    def test_a_missing_name_or_spec_is_required(self) -> None:
        obj = map_controller()
        del obj["metadata"]["name"]
        assert str(error(obj)) == "metadata.name: required"
        assert str(error({"metadata": {"name": "x"}})) == "spec: required"
        assert str(error({"metadata": {"name": "x"}, "spec": []})) == "spec: must be a map, not a list"
        assert str(error([])) == "<object>: must be a map, not a list"

    def test_a_spec_error_is_a_reconcile_error_carrying_field_and_problem(self) -> None:
        err = error(map_controller(hooks={}))
        assert isinstance(err, ReconcileError)
        assert (err.field, err.problem) == ("spec.hooks.map", "required")
