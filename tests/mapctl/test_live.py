"""MapControllers running live: a manager on the embedded cluster, python hooks counting their calls.

Each test runs the MapControllers' controller as `porchkit manager --controllers map` does
(tests/mapctl/support.py), creates a MapController over Buckets and some inputs, and asserts what
ends up on the cluster (outputs, their marks, the Bucket's status) and how often the map and
tombstone hooks were asked, per input (tests/mapctl/pyhooks.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from mapctl.context import InputKey
from mapctl.keys import CONTROLLER_LABEL, INPUT_ANNOTATION, MAP_KEY_LABEL, map_key
from reconcile.clock import FakeClock
from reconcile.cluster import Obj, ObjectKey
from tests.mapctl import pyhooks
from tests.mapctl.pyhooks import CALLS
from tests.mapctl.support import (
    BUCKET,
    CONFIGMAP,
    GADGET,
    MAP_CONTROLLER,
    SECRET,
    SERVICE,
    WAIT,
    Stage,
    bucket,
    configmap,
    map_controller,
    python,
    rule,
    secret,
    service,
    stage,
)
from tests.waiting import eventually, settled

__all__ = ["stage"]  # a fixture, imported to be found here

MakeStage = Callable[..., Stage]


def with_labels(**labels: str) -> Callable[[Obj], None]:
    return lambda obj: obj["metadata"].update(labels=labels)


def with_annotations(**values: str) -> Callable[[Obj], None]:
    return lambda obj: obj["metadata"].setdefault("annotations", {}).update(values)


def with_spec(**fields: Any) -> Callable[[Obj], None]:
    return lambda obj: obj["spec"].update(fields)


def data(live: Stage, name: str) -> dict[str, Any] | None:
    """The data of the ConfigMap `name`, or None when there is none."""
    found = live.get(CONFIGMAP, name)
    return None if found is None else dict(found.get("data") or {})


def copier(live: Stage, *objs: Obj, **spec: Any) -> None:
    """MapController `copy` (map_copy: Service -> ConfigMap `<name>-service`, InPlace) started over objs."""
    live.start(map_controller("copy", map_hook=python("map_copy"), **spec), *objs)


# --- selection -----------------------------------------------------------------------------------


class TestSelection:
    def test_match_labels_select_inputs_of_the_parents_namespace_only(self, stage: MakeStage) -> None:
        live = stage()
        copier(live, service("web", {"app": "web"}), service("db", {"app": "db"}),
               service("web", {"app": "web"}, namespace="elsewhere"), bucket(selector={"matchLabels": {"app": "web"}}))
        assert live.output_names("copy") == {"web-service"}
        assert live.outputs("copy", namespace="elsewhere") == {}
        assert CALLS.per_subject("map_copy") == {"Service/web": 1}
        assert live.status()["inputs"] == {"services": {"total": 1}}

    def test_match_expressions_select_inputs(self, stage: MakeStage) -> None:
        live = stage()
        selector = {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["front", "edge"]},
                                         {"key": "legacy", "operator": "DoesNotExist"}]}
        copier(live, service("a", {"tier": "front"}), service("b", {"tier": "edge"}), service("c", {"tier": "back"}),
               service("d", {"tier": "front", "legacy": "yes"}), service("e"), bucket(selector=selector))
        assert live.output_names("copy") == {"a-service", "b-service"}
        assert set(CALLS.per_subject("map_copy")) == {"Service/a", "Service/b"}

    @pytest.mark.parametrize("selector", [None, {}], ids=["absent", "empty"])
    def test_an_empty_selector_selects_every_input_of_the_namespace(self, stage: MakeStage,
                                                                    selector: dict[str, Any] | None) -> None:
        live = stage()
        copier(live, service("a", {"app": "a"}), service("b"), service("c", namespace="elsewhere"),
               bucket(selector=selector))
        assert live.output_names("copy") == {"a-service", "b-service"}
        assert live.status()["inputs"] == {"services": {"total": 2}}

    def test_an_input_whose_labels_stop_matching_loses_its_outputs(self, stage: MakeStage) -> None:
        live = stage()
        copier(live, service("web", {"app": "web"}), service("api", {"app": "web"}),
               bucket(selector={"matchLabels": {"app": "web"}}))
        assert live.output_names("copy") == {"web-service", "api-service"}
        live.edit(SERVICE, "web", with_labels(app="other"))
        eventually(lambda: live.get(CONFIGMAP, "web-service") is None, WAIT)
        live.wait_idle("copy")
        assert live.output_names("copy") == {"api-service"}
        assert CALLS.per_subject("map_copy") == {"Service/web": 1, "Service/api": 1}  # no hook for a detach
        assert live.status()["inputs"] == {"services": {"total": 1}}

    def test_an_input_whose_labels_start_matching_is_mapped(self, stage: MakeStage) -> None:
        live = stage()
        copier(live, service("web", {"app": "web"}), service("api", {"app": "other"}),
               bucket(selector={"matchLabels": {"app": "web"}}))
        assert live.output_names("copy") == {"web-service"}
        live.edit(SERVICE, "api", with_labels(app="web"))
        eventually(lambda: live.get(CONFIGMAP, "api-service"), WAIT)
        live.wait_idle("copy")
        assert CALLS.per_subject("map_copy") == {"Service/web": 1, "Service/api": 1}
        assert live.status()["inputs"] == {"services": {"total": 2}}

    def test_inputs_of_two_kinds_are_mapped_independently(self, stage: MakeStage) -> None:
        live = stage()
        copier(live, service("a", value="1"), secret("a", value="1"), service("b"), bucket(),
               inputs=[rule("v1", "services"), rule("v1", "secrets")])
        assert live.output_names("copy") == {"a-service", "a-secret", "b-service"}
        assert CALLS.per_subject("map_copy") == {"Service/a": 1, "Secret/a": 1, "Service/b": 1}
        live.edit(SECRET, "a", with_annotations(value="2"))
        eventually(lambda: (data(live, "a-secret") or {}).get("value") == "2", WAIT)
        live.wait_idle("copy")
        assert CALLS.per_subject("map_copy") == {"Service/a": 1, "Secret/a": 2, "Service/b": 1}
        assert data(live, "a-service") == {"input": "Service/a", "value": "1", "flavour": ""}
        assert live.status()["inputs"] == {"secrets": {"total": 1}, "services": {"total": 2}}


class TestRecursionGuard:
    def test_outputs_of_an_input_kind_never_become_inputs_of_their_own_parent(self, stage: MakeStage) -> None:
        live = stage()
        copier(live, configmap("a"), configmap("b"), bucket(),
               inputs=[rule("v1", "configmaps")], outputs=[rule("v1", "configmaps", "InPlace")])
        assert live.output_names("copy") == {"a-configmap", "b-configmap"}
        assert CALLS.per_subject("map_copy") == {"ConfigMap/a": 1, "ConfigMap/b": 1}
        live.edit(CONFIGMAP, "a", with_annotations(value="again"))  # a pass that rewrites an output
        eventually(lambda: (data(live, "a-configmap") or {}).get("value") == "again", WAIT)
        live.wait_idle("copy")
        assert CALLS.per_subject("map_copy") == {"ConfigMap/a": 2, "ConfigMap/b": 1}
        assert live.output_names("copy") == {"a-configmap", "b-configmap"}
        assert live.status()["inputs"] == {"configmaps": {"total": 2}}
        assert live.status()["outputs"] == {"configmaps": {"total": 2}}


# --- map keys ------------------------------------------------------------------------------------


class TestMapKeys:
    def test_outputs_carry_the_map_key_the_controller_and_the_input(self, stage: MakeStage) -> None:
        live = stage()
        copier(live, service("web"), bucket())
        [output] = live.outputs("copy").values()
        labels, annotations = output["metadata"]["labels"], output["metadata"]["annotations"]
        assert labels[MAP_KEY_LABEL] == map_key(SERVICE, "default", "web")
        assert labels[CONTROLLER_LABEL] == "copy"
        assert annotations[INPUT_ANNOTATION] == "Service/default/web"
        parent = live.get(BUCKET, "bucket")
        assert parent is not None
        [owner] = output["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["uid"], owner["controller"]) == ("Bucket", parent["metadata"]["uid"], True)

    def test_two_map_controllers_on_one_parent_kind_leave_each_others_outputs_alone(self, stage: MakeStage) -> None:
        live = stage()
        live.create(map_controller("copy", map_hook=python("map_copy")),
                    map_controller("pair", map_hook=python("map_pair")), service("a", value="1"), bucket())
        eventually(lambda: live.output_names("copy") == {"a-service"}
                   and live.output_names("pair") == {"a-keep", "a-drop"}, WAIT)
        pair = {name: obj["metadata"]["uid"] for name, obj in live.outputs("pair").items()}
        live.edit(SERVICE, "a", with_annotations(value="2"))
        eventually(lambda: (data(live, "a-service") or {}).get("value") == "2", WAIT)
        eventually(lambda: CALLS.count("map_pair", "Service/a") >= 2, WAIT)
        assert {name: obj["metadata"]["uid"] for name, obj in live.outputs("pair").items()} == pair
        assert live.output_names("copy") == {"a-service"}

    def test_two_map_controllers_on_one_parent_kind_let_its_status_settle(self, stage: MakeStage) -> None:
        live = stage()
        live.create(map_controller("copy", map_hook=python("map_copy")),
                    map_controller("pair", map_hook=python("map_pair")), service("a"), bucket())
        eventually(lambda: live.output_names("pair") == {"a-keep", "a-drop"} and live.mapped(), WAIT)
        settled(lambda: (live.get(BUCKET, "bucket") or {})["metadata"]["resourceVersion"], quiet=0.2, timeout=0.8)


# --- update strategies ---------------------------------------------------------------------------


class TestUpdateStrategies:
    def changed(self, stage: MakeStage, method: str) -> tuple[Stage, Obj, Obj]:
        """The output of `a` before and after the input's change asked for another value."""
        live = stage()
        copier(live, service("a", value="1"), bucket(), outputs=[rule("v1", "configmaps", method)])
        before = live.get(CONFIGMAP, "a-service")
        live.edit(SERVICE, "a", with_annotations(value="2"))
        eventually(lambda: CALLS.count("map_copy", "Service/a") == 2, WAIT)
        live.wait_idle("copy")
        after = live.get(CONFIGMAP, "a-service")
        assert before is not None and after is not None
        return live, before, after

    def test_on_delete_keeps_a_changed_desired_state_until_the_output_is_deleted(self, stage: MakeStage) -> None:
        live, before, after = self.changed(stage, "OnDelete")
        assert after["metadata"]["uid"] == before["metadata"]["uid"]
        assert after["data"]["value"] == "1"
        live.delete(CONFIGMAP, "a-service")
        recreated = eventually(lambda: live.get(CONFIGMAP, "a-service"), WAIT)
        assert recreated["data"]["value"] == "2"

    def test_in_place_updates_the_output(self, stage: MakeStage) -> None:
        _, before, after = self.changed(stage, "InPlace")
        assert after["metadata"]["uid"] == before["metadata"]["uid"]
        assert after["data"]["value"] == "2"

    def test_recreate_deletes_the_output_then_creates_it(self, stage: MakeStage) -> None:
        _, before, after = self.changed(stage, "Recreate")
        assert after["metadata"]["uid"] != before["metadata"]["uid"]
        assert after["data"]["value"] == "2"


# --- incremental passes --------------------------------------------------------------------------


@pytest.fixture
def three(stage: MakeStage) -> Stage:
    """MapController `copy` over the Services a, b and c, each mapped once."""
    live = stage()
    copier(live, service("a"), service("b"), service("c"), bucket())
    assert CALLS.per_subject("map_copy") == {"Service/a": 1, "Service/b": 1, "Service/c": 1}
    return live


class TestIncremental:
    def test_changing_one_input_calls_the_hook_for_that_input_alone(self, three: Stage) -> None:
        three.edit(SERVICE, "b", with_annotations(value="new"))
        eventually(lambda: (data(three, "b-service") or {}).get("value") == "new", WAIT)
        three.wait_idle("copy")
        assert CALLS.per_subject("map_copy") == {"Service/a": 1, "Service/b": 2, "Service/c": 1}

    def test_an_output_changed_by_hand_is_restored_by_its_inputs_hook_alone(self, three: Stage) -> None:
        three.edit(CONFIGMAP, "b-service", lambda obj: obj["data"].update(value="by hand"))
        eventually(lambda: CALLS.count("map_copy", "Service/b") == 2, WAIT)
        three.wait_idle("copy")
        assert data(three, "b-service") == {"input": "Service/b", "value": "", "flavour": ""}
        assert CALLS.per_subject("map_copy") == {"Service/a": 1, "Service/b": 2, "Service/c": 1}

    def test_an_output_deleted_by_hand_is_restored_by_its_inputs_hook_alone(self, three: Stage) -> None:
        gone = three.get(CONFIGMAP, "b-service")
        assert gone is not None
        three.delete(CONFIGMAP, "b-service")
        restored = eventually(lambda: three.get(CONFIGMAP, "b-service"), WAIT)
        three.wait_idle("copy")
        assert restored["metadata"]["uid"] != gone["metadata"]["uid"]
        assert CALLS.per_subject("map_copy") == {"Service/a": 1, "Service/b": 2, "Service/c": 1}

    def test_changing_the_parents_spec_maps_every_input_again_once(self, three: Stage) -> None:
        three.edit(BUCKET, "bucket", with_spec(flavour="salty"))
        eventually(lambda: all((data(three, f"{name}-service") or {}).get("flavour") == "salty" for name in "abc"),
                   WAIT)
        three.wait_idle("copy")
        assert CALLS.per_subject("map_copy") == {"Service/a": 2, "Service/b": 2, "Service/c": 2}

    def test_writing_the_parents_status_calls_no_hook(self, three: Stage) -> None:
        three.edit(BUCKET, "bucket", lambda obj: obj["status"].update(note="mine"), status=True)
        three.wait_idle("copy")
        assert CALLS.per_subject("map_copy") == {"Service/a": 1, "Service/b": 1, "Service/c": 1}
        assert three.status()["note"] == "mine"


class TestStaleCache:
    def test_a_key_queued_again_during_its_pass_asks_no_hook_for_the_passs_own_writes(self,
                                                                                     stage: MakeStage) -> None:
        # What a relist, a resync or a second watch does: the key comes back while its pass is in
        # flight. The pass's writes reach the cache 0.2s later, as a busy API server's watch may.
        live = stage(lag=0.2)
        pyhooks.GATE.release()
        live.start(map_controller("gated", map_hook=python("map_gated")), service("a"), bucket())
        assert CALLS.count("map_gated", "Service/a") == 1
        pyhooks.GATE.close()
        live.edit(SERVICE, "a", with_annotations(value="2"))
        eventually(lambda: pyhooks.GATE.in_flight == 1, WAIT)
        live.maps.running["gated"].inputs.queue.add(
            InputKey("default", "bucket", map_key(SERVICE, "default", "a"), "", "Service", "a"))
        pyhooks.GATE.release()
        eventually(lambda: (data(live, "a-service") or {}).get("value") == "2", WAIT)
        live.wait_idle("gated")
        assert live.events("bucket", "MapError") == []
        assert CALLS.count("map_gated", "Service/a") == 2

    def test_the_status_counts_outputs_the_cache_sees_only_after_the_status_pass(self, stage: MakeStage) -> None:
        live = stage(lag=0.4)  # longer than the status settle time (support.STATUS_SETTLE)
        live.start(map_controller("copy", map_hook=python("map_copy")), service("a"), bucket())
        assert live.output_names("copy") == {"a-service"}
        assert live.manager.cache.get(CONFIGMAP, ObjectKey("default", "a-service")) is not None
        assert live.status()["outputs"] == {"configmaps": {"total": 1}}


# --- tombstones ----------------------------------------------------------------------------------


def pairs(live: Stage, *objs: Obj, **spec: Any) -> None:
    """MapController `pair` (map_pair: `<name>-keep` and `<name>-drop`; tombstone_keep) over objs."""
    live.start(map_controller("pair", map_hook=python("map_pair"), tombstone=python("tombstone_keep"), **spec),
               *objs)


class TestTombstones:
    def test_without_a_tombstone_hook_a_deleted_inputs_outputs_are_deleted(self, stage: MakeStage) -> None:
        live = stage()
        copier(live, service("a"), service("b"), bucket())
        live.delete(SERVICE, "a")
        eventually(lambda: live.get(CONFIGMAP, "a-service") is None, WAIT)
        live.wait_idle("copy")
        assert live.output_names("copy") == {"b-service"}
        assert CALLS.per_subject("map_copy") == {"Service/a": 1, "Service/b": 1}

    def test_the_tombstone_hook_keeps_only_the_outputs_it_returns_and_never_edits_them(self,
                                                                                       stage: MakeStage) -> None:
        live = stage()
        pairs(live, service("a"), service("b"), bucket())
        kept = live.get(CONFIGMAP, "a-keep")
        assert kept is not None
        live.delete(SERVICE, "a")
        eventually(lambda: live.get(CONFIGMAP, "a-drop") is None, WAIT)
        live.wait_idle("pair")
        assert live.output_names("pair") == {"a-keep", "b-keep", "b-drop"}
        after = live.get(CONFIGMAP, "a-keep")
        assert after is not None
        assert after["metadata"]["resourceVersion"] == kept["metadata"]["resourceVersion"]
        assert after["data"] == {"input": "a"}  # not the hook's edited copy
        assert CALLS.per_subject("tombstone_keep") == {map_key(SERVICE, "default", "a"): 1}
        assert live.status()["outputs"] == {"configmaps": {"total": 3}}

    def test_kept_outputs_are_asked_about_again_every_resync_period(self, stage: MakeStage) -> None:
        live = stage(clock=FakeClock())
        live.create(map_controller("pair", map_hook=python("map_pair"), tombstone=python("tombstone_keep"),
                                   resyncPeriodSeconds=30), service("a"), bucket())
        live.step_until(lambda: live.get(CONFIGMAP, "a-drop"), limit=10)
        live.delete(SERVICE, "a")
        live.step_until(lambda: live.get(CONFIGMAP, "a-drop") is None, limit=10)
        assert CALLS.count("tombstone_keep") == 1
        waited = live.step_until(lambda: CALLS.count("tombstone_keep") == 2, limit=45, step=2)
        assert 28 <= waited <= 32, waited
        kept = live.get(CONFIGMAP, "a-keep")
        assert kept is not None and kept["data"] == {"input": "a"}
        pyhooks.TOMBSTONE.set(False)  # from now on the hook keeps nothing
        waited = live.step_until(lambda: live.get(CONFIGMAP, "a-keep") is None, limit=45, step=2)
        assert 28 <= waited <= 32, waited
        assert CALLS.count("tombstone_keep") == 3


# --- status --------------------------------------------------------------------------------------


def condition_status(**conditions: str) -> Callable[[Obj], None]:
    return lambda obj: obj.update(status={"conditions": [{"type": kind, "status": value}
                                                         for kind, value in conditions.items()]})


class TestStatus:
    def test_inputs_and_outputs_are_counted_with_each_true_condition(self, stage: MakeStage) -> None:
        live = stage()
        live.start(map_controller("gadgets", map_hook=python("map_gadget"),
                                  inputs=[rule("v1", "services"), rule("v1", "secrets")],
                                  outputs=[rule(GADGET.api_version, "gadgets", "InPlace")]),
                   service("a"), service("b"), service("c"), secret("s"), bucket())
        live.edit(GADGET, "a-gadget", condition_status(Ready="True", Synced="False"), status=True)
        live.edit(GADGET, "b-gadget", condition_status(Ready="False"), status=True)
        live.edit(GADGET, "c-gadget", condition_status(Ready="True"), status=True)
        eventually(lambda: live.status().get("outputs", {}).get("gadgets", {}).get("Ready") == 2, WAIT)
        live.wait_idle("gadgets")
        status = live.status()
        assert status["inputs"] == {"secrets": {"total": 1}, "services": {"total": 3}}
        assert status["outputs"] == {"gadgets": {"Ready": 2, "Synced": 0, "total": 4}}
        assert status["observedGeneration"] == 1
        mapped = live.mapped()
        assert mapped is not None
        assert (mapped["status"], mapped["reason"], mapped["observedGeneration"]) == ("True", "Mapped", 1)

    def test_observed_generation_follows_the_parents_spec(self, three: Stage) -> None:
        three.edit(BUCKET, "bucket", with_spec(flavour="salty"))
        eventually(lambda: three.status()["observedGeneration"] == 2, WAIT)
        mapped = three.mapped()
        assert mapped is not None and mapped["observedGeneration"] == 2

    def test_status_fields_the_user_set_are_kept(self, stage: MakeStage) -> None:
        live = stage()
        live.create(bucket())
        live.edit(BUCKET, "bucket", lambda obj: obj.update(status={"note": "mine", "phase": "Filling"}), status=True)
        copier(live, service("a"))
        status = live.status()
        assert (status["note"], status["phase"]) == ("mine", "Filling")
        assert status["inputs"] == {"services": {"total": 1}}
        live.create(service("b"))  # a later status write keeps them too
        eventually(lambda: live.status()["inputs"] == {"services": {"total": 2}}, WAIT)
        assert (live.status()["note"], live.status()["phase"]) == ("mine", "Filling")


# --- parallelism ---------------------------------------------------------------------------------


class TestParallelism:
    def test_no_more_hook_calls_run_at_once_than_spec_parallelism(self, stage: MakeStage) -> None:
        live = stage()
        live.prepare(map_controller("gated", map_hook=python("map_gated"), parallelism=4), bucket())
        live.create(*(service(f"s{i}") for i in range(8)))
        eventually(lambda: pyhooks.GATE.in_flight == 4, WAIT)
        assert settled(lambda: pyhooks.GATE.in_flight, quiet=0.3) == 4  # the other 4 wait their turn
        pyhooks.GATE.release()
        eventually(lambda: len(live.output_names("gated")) == 8, WAIT)
        live.wait_idle("gated")
        assert pyhooks.GATE.most == 4
        assert CALLS.per_subject("map_gated") == {f"Service/s{i}": 1 for i in range(8)}


# --- the supervisor ------------------------------------------------------------------------------


class TestSupervisor:
    def test_editing_a_map_controllers_spec_restarts_it(self, stage: MakeStage) -> None:
        live = stage()
        copier(live, service("a"), bucket())
        old = live.maps.running["copy"]
        live.edit(MAP_CONTROLLER, "copy", lambda obj: obj["spec"]["hooks"].update(map=python("map_pair")),
                  namespace="")
        eventually(lambda: live.output_names("copy") == {"a-keep", "a-drop"}, WAIT)
        assert live.maps.running["copy"] is not old
        live.wait_idle("copy")
        assert live.output_names("copy") == {"a-keep", "a-drop"}

    def test_deleting_a_map_controller_stops_it_and_leaves_its_outputs(self, stage: MakeStage) -> None:
        live = stage()
        copier(live, service("a"), bucket())
        output = live.get(CONFIGMAP, "a-service")
        live.delete(MAP_CONTROLLER, "copy", namespace="")
        eventually(lambda: "copy" not in live.maps.running, WAIT)
        assert not [c for c in live.manager.controllers if c.name.startswith("map/copy")]
        live.edit(SERVICE, "a", with_annotations(value="unseen"))
        live.create(service("b"))
        eventually(lambda: live.manager.cache.get(SERVICE, ObjectKey("default", "b")), WAIT)
        assert settled(CALLS.total, quiet=0.3) == 1
        assert live.get(CONFIGMAP, "a-service") == output
        assert live.get(CONFIGMAP, "b-service") is None
