"""MapControllers at the edges: parents feeding each other, tampered marks, a parent re-created
under its name, and a status write that loses a race."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mapctl.context import Settled
from mapctl.inputs import CATCH_UP, settled_verdict
from mapctl.keys import INPUT_ANNOTATION
from reconcile.cluster import Obj, ObjectKey
from tests.mapctl.pyhooks import CALLS
from tests.mapctl.support import (
    BUCKET,
    CONFIGMAP,
    WAIT,
    Stage,
    bucket,
    configmap,
    map_controller,
    python,
    rule,
    service,
    stage,
)
from tests.waiting import eventually

__all__ = ["stage"]  # a fixture, imported to be found here

MakeStage = Callable[..., Stage]


def test_two_parents_of_one_namespace_never_take_each_others_outputs_as_inputs(stage: MakeStage) -> None:
    # ConfigMaps in and out, empty selectors: the proposal's guard (not controlled by this parent)
    # alone lets a's outputs be b's inputs and back, a new generation each time.
    # (Both parents want the same output name here: one of them reports it taken, and retries.)
    live = stage()
    live.create(map_controller("copy", map_hook=python("map_copy"), inputs=[rule("v1", "configmaps")],
                               outputs=[rule("v1", "configmaps", "InPlace")]),
                configmap("seed"), bucket("a"), bucket("b"))
    eventually(lambda: live.get(CONFIGMAP, "seed-configmap"), WAIT)
    eventually(lambda: all((live.status(p).get("inputs") or {}).get("configmaps") == {"total": 1} for p in "ab"),
               WAIT)
    live.wait_idle("copy")  # a cascade would have shown by now: a pass or two
    assert set(CALLS.per_subject("map_copy")) == {"ConfigMap/seed"}
    assert {obj["metadata"]["name"] for obj in live.cluster.list(CONFIGMAP, namespace="default").items} == {
        "seed", "seed-configmap"}


def test_an_output_whose_input_annotation_was_edited_stays_with_its_live_input(stage: MakeStage) -> None:
    live = stage()
    live.start(map_controller("copy", map_hook=python("map_copy"), tombstone=python("tombstone_keep"),
                              outputs=[rule("v1", "configmaps", "OnDelete")]),
               service("web"), bucket())
    before = live.get(CONFIGMAP, "web-service")
    assert before is not None
    live.edit(CONFIGMAP, "web-service",
              lambda obj: obj["metadata"]["annotations"].update({INPUT_ANNOTATION: "Service/default/gone"}))
    live.wait_idle("copy")
    after = live.get(CONFIGMAP, "web-service")
    assert after is not None and after["metadata"]["uid"] == before["metadata"]["uid"]
    assert CALLS.count("tombstone_keep", before["metadata"]["labels"]["mapctl.porchkit.dev/map-key"]) == 0


def test_a_parent_recreated_under_its_name_gets_its_outputs_again(stage: MakeStage) -> None:
    live = stage()
    live.start(map_controller("copy", map_hook=python("map_copy")), service("web"), bucket())
    first = live.get(BUCKET, "bucket")
    assert first is not None
    live.delete(BUCKET, "bucket")
    second = live.create(bucket())[0]

    def owned_by_second() -> bool:
        output = live.get(CONFIGMAP, "web-service")
        refs = (output or {}).get("metadata", {}).get("ownerReferences") or []
        return any(ref.get("uid") == second["metadata"]["uid"] for ref in refs)
    eventually(owned_by_second, WAIT)
    eventually(lambda: (live.status().get("outputs") or {}).get("configmaps") == {"total": 1}, WAIT)


class _RacingStatusWriter:
    """The cluster, except that one status write of a Bucket, once armed, finds the status just
    changed by another writer (the parent's own controller, say)."""

    def __init__(self, cluster: Any) -> None:
        self.cluster, self.armed, self.raced = cluster, False, False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cluster, name)

    def update_status(self, obj: Obj) -> Obj:
        if obj.get("kind") == BUCKET.kind and self.armed and not self.raced:
            self.raced = True
            theirs = self.cluster.get(BUCKET, ObjectKey.of(obj))
            theirs.setdefault("status", {})["phase"] = "Ready"
            self.cluster.update_status(theirs)
        return self.cluster.update_status(obj)  # type: ignore[no-any-return]


def test_a_status_write_that_loses_a_race_is_counted_again(stage: MakeStage) -> None:
    live = stage()
    racing = _RacingStatusWriter(live.cluster)
    live.start(map_controller("copy", map_hook=python("map_copy")), service("web"), bucket())
    instance = live.maps.running["copy"]
    instance.context.cluster = racing
    racing.armed = True
    live.create(service("api"))
    eventually(lambda: racing.raced and live.status().get("inputs") == {"services": {"total": 2}}, WAIT)
    eventually(lambda: live.status().get("outputs") == {"configmaps": {"total": 2}}, WAIT)
    assert live.status()["phase"] == "Ready"  # the other writer's field is kept


def test_a_pass_skips_the_hook_only_when_nothing_it_sees_changed_or_the_cache_lags_its_own_writes() -> None:
    last = Settled("parent-1", "7", frozenset({("apps/Deployment", "out", "12")}), due=100.0, at=50.0)
    same = Settled("parent-1", "7", frozenset({("apps/Deployment", "out", "12")}), None)
    assert settled_verdict(None, same, 60.0) == "ask"  # never asked
    assert settled_verdict(last, same, 60.0) == "unchanged"
    assert settled_verdict(last, same, 100.0) == "ask"  # its resync is due
    assert settled_verdict(last, Settled("parent-2", "7", same.outputs, None), 60.0) == "ask"  # the parent changed
    assert settled_verdict(last, Settled("parent-1", "8", same.outputs, None), 60.0) == "ask"  # the input changed
    lagging = Settled("parent-1", "7", frozenset({("apps/Deployment", "out", "11")}), None)  # an older output
    assert settled_verdict(last, lagging, 50.0 + CATCH_UP / 2) == "behind"
    assert settled_verdict(last, lagging, 50.0 + CATCH_UP * 2) == "ask"  # waited long enough: someone else's change
