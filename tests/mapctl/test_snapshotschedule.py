"""The SnapshotSchedule example (testdata/mapctl/snapshotschedule), live, on a FakeClock.

The example's manifests are loaded into an embedded API server, and a manager runs the
MapControllers on it as `porchkit manager --controllers map` does. The python hooks
(mapctl/examples/snapshots.py) read the same FakeClock as the API server and the controllers,
so days pass in milliseconds. The tests assert what a user would see with kubectl: which
VolumeSnapshots exist, when they come and go, the schedule's status, and its Events.

`Stage` is shared with tests/mapctl/test_configmap_per_service.py.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mapctl.crds import map_controller_crd
from mapctl.examples import snapshots
from mapctl.examples.snapshots import TAKEN_AT_ANNOTATION, parse_time
from mapctl.instance import MapInstance, Options
from mapctl.keys import CONTROLLER_LABEL, INPUT_ANNOTATION, MAP_KEY_LABEL
from mapctl.manager import map_controllers
from mapctl.parents import MAPPED_SUFFIX
from mapctl.supervisor import MapControllers
from reconcile import Conflict, Kind, ObjectKey
from reconcile.clock import FakeClock
from reconcile.cluster import Cluster, Obj
from reconcile.embedded import EmbeddedCluster
from reconcile.events import EventRecorder
from reconcile.hooks import HookPolicy
from reconcile.manager import Manager
from reconcile.manifests import load_manifests, read_manifests
from reconcile.objects import controller_of
from tests.hookstage import HookStage
from tests.reconcile.support import Running
from tests.waiting import eventually, step_until

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "testdata" / "mapctl" / "snapshotschedule"

SCHEDULE = Kind("examples.porchkit.dev/v1alpha1", "SnapshotSchedule")
PVC = Kind("v1", "PersistentVolumeClaim")
SNAPSHOT = Kind("snapshot.storage.k8s.io/v1", "VolumeSnapshot")
CONTROLLER = "snapshotschedule-controller"
START = 1_700_000_000.0
HOUR, DAY = 3600, 86400

LIMIT = 30.0  # clock-seconds a wait may take: the controllers' own delays are fractions of one
STEP = 0.05  # clock-seconds per step of a wait...
REAL_STEP = 0.005  # ...and real seconds the threads get after each


# --- the stage ------------------------------------------------------------------------------------


class Stage(HookStage[MapInstance]):
    """An example's manifests in an embedded cluster on `clock` (the MapController CRD installed
    first), and a manager running the MapControllers on a thread, all reading `clock`."""

    def __init__(self, example: Path, clock: FakeClock,
                 seen_through: Callable[[EmbeddedCluster], Cluster] = lambda cluster: cluster) -> None:
        """`seen_through` wraps the cluster as the manager sees it (to hold back a watch, say)."""
        self.clock = clock
        self.cluster = EmbeddedCluster(clock=clock)
        self.cluster.create(map_controller_crd())
        load_manifests(self.cluster, read_manifests([example]))
        manager = Manager(seen_through(self.cluster), clock=clock, grace_period=5.0,
                          events=EventRecorder(self.cluster, "porchkit-mapctl", clock=clock))
        # as under `porchkit manager --python-hooks mapctl.examples` (deploy/mapctl-deployment.yaml)
        self.maps = MapControllers(manager, Options(hook_policy=HookPolicy.for_manager(["mapctl.examples"], [])))
        super().__init__(self.cluster, manager, self.maps)

    # --- time -------------------------------------------------------------------------------------

    def until(self, check: Callable[[], Any], *, limit: float = LIMIT, show: Callable[[], Any] | None = None) -> Any:
        """`check()` once it holds (returned), stepping the clock meanwhile: the controllers wait
        a fraction of a clock-second before some passes. Fails past `limit` clock-seconds, with
        what `show()` says then."""
        found = None

        @functools.wraps(check)  # a failure names `check`
        def holds() -> Any:
            nonlocal found
            found = check()
            return found
        step_until(self.clock, holds, limit=limit, step=STEP, pause=REAL_STEP, show=show)
        return found

    def advance_to(self, when: float) -> None:
        """Move the clock to `when` in one jump: a timer due meanwhile fires once, late."""
        assert when >= self.clock.time(), "the clock does not go back"
        self.clock.advance(when - self.clock.time())

    def settled_calls(self, controller: str, hook: str, *, at_least: float = 0) -> float:
        """How many times the hook was called, once that is `at_least` and the controller is idle."""
        self.until(lambda: self.hook_calls(controller, hook) >= at_least)
        self.until(lambda: self.idle(controller))
        return self.hook_calls(controller, hook)

    # --- reading ----------------------------------------------------------------------------------

    def list(self, kind: Kind) -> list[Obj]:
        return self.cluster.list(kind, namespace="default").items

    def get(self, kind: Kind, name: str) -> Obj | None:
        return self.cluster.get(kind, ObjectKey("default", name))

    def status(self, kind: Kind, name: str) -> dict[str, Any]:
        found = self.get(kind, name)
        assert found is not None, f"{kind.kind} {name} is gone"
        status: dict[str, Any] = found.get("status") or {}
        return status

    def status_until(self, kind: Kind, name: str, check: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """The status of `name` once `check` accepts it; fails past LIMIT clock-seconds."""
        status: dict[str, Any] = {}

        def accepted() -> bool:
            nonlocal status
            status = self.status(kind, name)
            return check(status)
        step_until(self.clock, accepted, limit=LIMIT, step=STEP, pause=REAL_STEP,
                   what=f"an accepted status of {kind.kind} {name}", show=lambda: status)
        return status

    def hook_calls(self, controller: str, hook: str) -> float:
        """How many times `hook` of MapController `controller` was called, whatever the outcome
        (porchkit_hook_requests_total)."""
        return self.metric("porchkit_hook_requests_total", controller=controller, hook=hook)

    # --- writing ----------------------------------------------------------------------------------

    def edit(self, kind: Kind, name: str, change: Callable[[Obj], None]) -> Obj:
        """Read, change and update an object, again on Conflict (the controllers write too)."""
        for _ in range(20):
            obj = self.get(kind, name)
            assert obj is not None, f"{kind.kind} {name} is gone"
            change(obj)
            try:
                return self.cluster.update(obj)
            except Conflict:
                continue
        raise AssertionError(f"could not update {kind.kind} {name}")


def mapped(status: dict[str, Any]) -> dict[str, Any]:
    """The status's Mapped condition ({} when there is none)."""
    return next((c for c in status.get("conditions") or [] if str(c.get("type")).endswith(MAPPED_SUFFIX)), {})


def counts(status: dict[str, Any]) -> tuple[Any, Any, str | None]:
    """What a status counts, and whether it says every input was mapped."""
    return status.get("inputs"), status.get("outputs"), mapped(status).get("status")


# --- fixtures -------------------------------------------------------------------------------------


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    """The one clock: the API server's, the controllers' and the example hooks'."""
    fake = FakeClock(start=START)
    monkeypatch.setattr(snapshots, "clock", fake)
    return fake


@pytest.fixture
def stage(clock: FakeClock) -> Iterator[Stage]:
    running = Stage(EXAMPLE, clock)
    yield running
    running.close()


# --- reading snapshots ------------------------------------------------------------------------------


def taken(snapshot: Obj) -> float:
    seconds = parse_time(snapshot["metadata"]["annotations"][TAKEN_AT_ANNOTATION])
    assert seconds is not None
    return seconds


def by_pvc(stage: Stage, owner: str = "my-app-snapshots") -> dict[str, list[float]]:
    """When the snapshots `owner` holds were taken, per source PVC, oldest first."""
    found: dict[str, list[float]] = {}
    for snapshot in stage.list(SNAPSHOT):
        ref = controller_of(snapshot)
        if ref is not None and ref.get("name") == owner:
            found.setdefault(snapshot["spec"]["source"]["persistentVolumeClaimName"], []).append(taken(snapshot))
    return {pvc: sorted(times) for pvc, times in sorted(found.items())}


def snapshots_until(stage: Stage, expected: dict[str, int],
                    also: Callable[[dict[str, list[float]]], bool] = lambda found: True) -> dict[str, list[float]]:
    """by_pvc, once the number of snapshots per PVC is `expected` and `also` accepts them."""
    def check() -> dict[str, list[float]] | None:
        found = by_pvc(stage)
        return found if {pvc: len(times) for pvc, times in found.items()} == expected and also(found) else None
    found: dict[str, list[float]] = stage.until(check, show=lambda: by_pvc(stage))
    return found


def counted_until(stage: Stage, pvcs: int, snapshots: int, schedule: str = "my-app-snapshots") -> None:
    """Wait until the schedule's status counts `pvcs` PVCs and `snapshots` snapshots, all mapped."""
    expected = ({"persistentvolumeclaims": {"total": pvcs}}, {"volumesnapshots": {"total": snapshots}}, "True")
    stage.status_until(SCHEDULE, schedule, lambda status: counts(status) == expected)


def first_snapshots(stage: Stage) -> dict[str, list[float]]:
    found = snapshots_until(stage, {"data-my-app-0": 1, "data-my-app-1": 1})
    counted_until(stage, 2, 2)
    return found


# --- the schedule at work ---------------------------------------------------------------------------


def test_each_selected_pvc_gets_a_snapshot_and_the_unselected_one_none(stage: Stage) -> None:
    first_snapshots(stage)  # data-my-app-0 and -1 (app: my-app), not scratch (app: batch-jobs)
    for snapshot in stage.list(SNAPSHOT):
        pvc = snapshot["spec"]["source"]["persistentVolumeClaimName"]
        meta = snapshot["metadata"]
        assert meta["name"] == f"{pvc}-{int(taken(snapshot))}"
        assert meta["labels"][CONTROLLER_LABEL] == CONTROLLER
        assert re.fullmatch(r"mk-[0-9a-f]{32}", meta["labels"][MAP_KEY_LABEL])
        assert meta["annotations"][INPUT_ANNOTATION] == f"PersistentVolumeClaim/default/{pvc}"
        owner = controller_of(snapshot)
        assert owner is not None and (owner["kind"], owner["name"]) == ("SnapshotSchedule", "my-app-snapshots")
    status = stage.status(SCHEDULE, "my-app-snapshots")
    assert status["observedGeneration"] == 1
    assert (mapped(status)["reason"], mapped(status)["message"]) == ("Mapped", "")


def test_one_snapshot_per_interval_and_none_in_between(stage: Stage) -> None:
    first = first_snapshots(stage)
    newest = max(times[0] for times in first.values())
    calls = stage.settled_calls(CONTROLLER, "map", at_least=2)

    # Two minutes short of the interval: the resync period (60 s) brings each PVC's hook back,
    # and it takes nothing.
    stage.advance_to(newest + 6 * HOUR - 120)
    stage.settled_calls(CONTROLLER, "map", at_least=calls + 2)
    assert {pvc: len(times) for pvc, times in by_pvc(stage).items()} == {"data-my-app-0": 1, "data-my-app-1": 1}

    stage.advance_to(newest + 6 * HOUR)
    found = snapshots_until(stage, {"data-my-app-0": 2, "data-my-app-1": 2})
    assert all(times[1] - times[0] >= 6 * HOUR for times in found.values())
    counted_until(stage, 2, 4)


def test_a_deleted_pvcs_snapshots_are_kept_until_they_expire(stage: Stage) -> None:
    first = first_snapshots(stage)
    stage.advance_to(max(times[0] for times in first.values()) + 6 * HOUR)
    second = snapshots_until(stage, {"data-my-app-0": 2, "data-my-app-1": 2})
    tombstones = stage.hook_calls(CONTROLLER, "tombstone")

    stage.cluster.delete(PVC, ObjectKey("default", "data-my-app-1"))
    stage.until(lambda: stage.hook_calls(CONTROLLER, "tombstone") > tombstones)
    counted_until(stage, 1, 4)  # the detached snapshots are kept, and still counted
    assert by_pvc(stage) == second

    # Past the TTL of the first snapshots, not of the second: each PVC loses its oldest, and
    # the live one (its newest an interval old) takes a new one.
    oldest, recent = min(t[0] for t in second.values()), min(t[1] for t in second.values())
    stage.advance_to(oldest + 10 * DAY + HOUR)
    assert stage.clock.time() < recent + 10 * DAY
    found = snapshots_until(stage, {"data-my-app-0": 2, "data-my-app-1": 1},
                            lambda found: found["data-my-app-0"][1] >= oldest + 10 * DAY)
    assert found["data-my-app-0"][0] == second["data-my-app-0"][1]
    assert found["data-my-app-1"] == second["data-my-app-1"][1:]
    counted_until(stage, 1, 3)

    # Past the TTL of the second ones: the detached PVC has none left; the live one keeps the
    # one it took last (younger than an interval, so no new one yet).
    latest = found["data-my-app-0"][1]
    stage.advance_to(max(t[1] for t in second.values()) + 10 * DAY + 1)
    assert stage.clock.time() < latest + 6 * HOUR
    assert snapshots_until(stage, {"data-my-app-0": 1}) == {"data-my-app-0": [latest]}
    counted_until(stage, 1, 1)


# --- failures -----------------------------------------------------------------------------------------

# Both pass the CRD's pattern, so on any API server they reach the hook, which refuses them. (The
# embedded server enforces no CRD schema at all: docs/embedded-cluster.md.)
INVALID = {
    "zero interval": ({"snapshotInterval": "0h", "snapshotTTL": "10d"},
                      'spec.snapshotInterval: "0h" must be longer than zero'),
    "ttl below interval": ({"snapshotInterval": "6h", "snapshotTTL": "5h"},
                           'spec.snapshotTTL: "5h" is shorter than spec.snapshotInterval "6h": every snapshot would '
                           'expire before the next'),
}


@pytest.mark.parametrize(("spec", "problem"), INVALID.values(), ids=INVALID.keys())
def test_an_invalid_schedule_is_a_map_error_naming_the_field_and_spares_the_other(
        stage: Stage, spec: dict[str, str], problem: str) -> None:
    first_snapshots(stage)
    stage.cluster.create({"apiVersion": SCHEDULE.api_version, "kind": SCHEDULE.kind,
                          "metadata": {"name": "broken-snapshots", "namespace": "default"},
                          "spec": {**spec, "selector": {"matchLabels": {"app": "my-app"}}}})

    events = stage.until(lambda: len(found := stage.events("broken-snapshots", "MapError")) == 2 and found)
    assert {event["type"] for event in events} == {"Warning"}
    assert sorted(event["message"] for event in events) == [
        f"map PersistentVolumeClaim/default/{pvc}: mapctl.examples.snapshots:map_snapshots raised ValueError: "
        f"{problem}" for pvc in ("data-my-app-0", "data-my-app-1")]
    status = stage.status_until(SCHEDULE, "broken-snapshots",
                                lambda status: mapped(status).get("message", "").startswith("2 of 2 inputs failed"))
    assert (mapped(status)["status"], mapped(status)["reason"]) == ("False", "MapError")
    assert mapped(status)["message"].endswith(problem)
    assert status["outputs"] == {"volumesnapshots": {"total": 0}}
    assert by_pvc(stage, "broken-snapshots") == {}

    # The first schedule, over the same PVCs, goes on as before: mapped, and on time.
    assert counts(stage.status(SCHEDULE, "my-app-snapshots"))[2] == "True"
    assert stage.events("my-app-snapshots", "MapError") == []
    stage.advance_to(stage.clock.time() + 6 * HOUR)
    snapshots_until(stage, {"data-my-app-0": 2, "data-my-app-1": 2})
    counted_until(stage, 2, 4)
    assert by_pvc(stage, "broken-snapshots") == {}


# --- the manager -----------------------------------------------------------------------------------


def test_stopping_a_manager_built_as_porchkit_manager_builds_it_stops_its_map_controllers(clock: FakeClock) -> None:
    """The face's factory, as `porchkit manager --controllers map` calls it: the manager's stop alone
    stops every MapController it runs, and their hooks' threads end."""
    with EmbeddedCluster(clock=clock) as cluster:
        manager = Manager(cluster, clock=clock, grace_period=5.0)
        manager.add(map_controllers(manager, hook_policy=HookPolicy.for_manager(["mapctl.examples"], [])))
        load_manifests(cluster, read_manifests([EXAMPLE]))
        running = Running(manager)
        step_until(clock, lambda: cluster.list(SNAPSHOT, namespace="default").items, limit=LIMIT, step=STEP,
                   pause=REAL_STEP)
        hook_threads = [t for t in threading.enumerate() if t.name.startswith("hook mapctl.examples.")]
        assert hook_threads
        assert running.stop() == 0
    assert [controller.name for controller in manager.controllers] == ["mapcontroller"]
    eventually(lambda: not any(thread.is_alive() for thread in hook_threads))
