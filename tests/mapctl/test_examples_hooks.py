"""The worked examples: the SnapshotSchedule hooks on a FakeClock, the example manifests, and the
hooks built from those manifests as the controller builds them (python and pipeline)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from krmyaml import read_documents
from mapctl.examples import snapshots
from mapctl.examples.snapshots import (
    SNAPSHOT_GROUP,
    TAKEN_AT_ANNOTATION,
    Schedule,
    format_time,
    map_snapshots,
    parse_duration,
    schedule_of,
    snapshot_name,
    tombstone_snapshots,
)
from mapctl.protocol import (
    MAP_SHAPE,
    TOMBSTONE_SHAPE,
    map_request,
    parse_map_response,
    parse_tombstone_response,
    tombstone_request,
)
from mapctl.selection import is_input, parent_selector
from mapctl.spec import MAP_CONTROLLER, parse_map_controller
from reconcile import Kind
from reconcile.clock import FakeClock
from reconcile.embedded import EmbeddedCluster
from reconcile.hooks import Hook, HookError, HookPolicy, build_hook
from reconcile.objects import metadata

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "testdata" / "mapctl"
SNAPSHOT_EXAMPLE = EXAMPLES / "snapshotschedule"
SERVICE_EXAMPLE = EXAMPLES / "configmap-per-service"
MANIFEST_FILES = sorted(EXAMPLES.rglob("*.yaml"))
# The examples' hooks run under a manager started with --python-hooks mapctl.examples (as
# deploy/mapctl-deployment.yaml starts it).
EXAMPLES_POLICY = HookPolicy.for_manager(["mapctl.examples"], [])

START = 1_700_000_000  # 2023-11-14T22:13:20Z
HOUR, DAY = 3600, 86400
DNS_1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")

CONTROLLER = {"apiVersion": MAP_CONTROLLER.api_version, "kind": MAP_CONTROLLER.kind,
              "metadata": {"name": "snapshotschedule-controller"}, "spec": {}}
KEY = "mk-0123456789abcdef0123456789abcdef"


def schedule(interval: Any = "6h", ttl: Any = "10d") -> dict[str, Any]:
    return {"apiVersion": "examples.porchkit.dev/v1alpha1", "kind": "SnapshotSchedule",
            "metadata": {"name": "my-app-snapshots", "namespace": "default", "uid": "parent-uid"},
            "spec": {"snapshotInterval": interval, "snapshotTTL": ttl, "selector": {"matchLabels": {"app": "my-app"}}}}


def pvc(name: str = "data-0") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": "default", "labels": {"app": "my-app"}}}


def observed(desired: dict[str, Any]) -> dict[str, Any]:
    """A desired snapshot as the cluster would hand it back: server fields, the controller's tags,
    a status, and a creationTimestamp in real time (which the hooks must not go by)."""
    meta = desired["metadata"]
    return {**desired,
            "metadata": {**meta, "namespace": "default", "uid": f"uid-{meta['name']}", "resourceVersion": "42",
                         "creationTimestamp": "2020-01-01T00:00:00Z",
                         "labels": {"mapctl.porchkit.dev/map-key": KEY},
                         "annotations": {**meta.get("annotations", {}), "mapctl.porchkit.dev/input": "x"}},
            "status": {"readyToUse": True, "restoreSize": "1Gi"}}


def call_map(snapshots_seen: list[dict[str, Any]], *, parent: dict[str, Any] | None = None,
             claim: dict[str, Any] | None = None) -> dict[str, Any]:
    request = map_request(CONTROLLER, parent or schedule(), KEY, claim or pvc(), {SNAPSHOT_GROUP: snapshots_seen})
    return map_snapshots(request)


def call_tombstone(snapshots_seen: list[dict[str, Any]], *, parent: dict[str, Any] | None = None) -> dict[str, Any]:
    request = tombstone_request(CONTROLLER, parent or schedule(), KEY, {SNAPSHOT_GROUP: snapshots_seen})
    return tombstone_snapshots(request)


def names(answer: dict[str, Any]) -> list[str]:
    return sorted(output["metadata"]["name"] for output in answer["outputs"])


def taken(name: str, seconds: int, *, pvc_name: str = "data-0") -> dict[str, Any]:
    """An observed snapshot of `pvc_name` taken at `seconds`."""
    return observed({"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
                     "metadata": {"name": name, "annotations": {TAKEN_AT_ANNOTATION: format_time(seconds)}},
                     "spec": {"source": {"persistentVolumeClaimName": pvc_name}}})


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock(start=float(START))
    monkeypatch.setattr(snapshots, "clock", fake)
    return fake


class Controller:
    """The controller's part, as far as one PVC's hook sees it: what the hook answered is what it
    observes next time."""

    def __init__(self, clock: FakeClock, parent: dict[str, Any]) -> None:
        self.clock, self.parent = clock, parent
        self.snapshots: list[dict[str, Any]] = []

    def sync(self) -> float:
        answer = call_map(self.snapshots, parent=self.parent)
        self.snapshots = [observed(output) for output in answer["outputs"]]
        return float(answer["resyncAfterSeconds"])

    def run_for(self, seconds: float) -> int:
        """Sync whenever the hook asked to, for `seconds`; the most snapshots held at once."""
        end, most = self.clock.time() + seconds, 0
        while True:
            wait = self.sync()
            most = max(most, len(self.snapshots))
            if self.clock.time() + wait > end:
                return most
            self.clock.advance(wait)


# --- the map hook -----------------------------------------------------------------------------


class TestMapHook:
    def test_the_first_call_takes_a_snapshot_and_comes_back_when_the_next_is_due(self, clock: FakeClock) -> None:
        answer = call_map([])
        assert answer == {
            "outputs": [{"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
                         "metadata": {"name": f"data-0-{START}",
                                      "annotations": {TAKEN_AT_ANNOTATION: "2023-11-14T22:13:20Z"}},
                         "spec": {"source": {"persistentVolumeClaimName": "data-0"}}}],
            "resyncAfterSeconds": 6 * HOUR,
        }

    def test_no_new_snapshot_before_the_interval_has_passed(self, clock: FakeClock) -> None:
        first = observed(call_map([])["outputs"][0])
        clock.advance(6 * HOUR - 1)
        answer = call_map([first])
        assert names(answer) == [f"data-0-{START}"]
        assert answer["resyncAfterSeconds"] == 1

    def test_a_new_snapshot_once_the_newest_is_an_interval_old(self, clock: FakeClock) -> None:
        first = observed(call_map([])["outputs"][0])
        clock.advance(6 * HOUR)
        answer = call_map([first])
        assert names(answer) == [f"data-0-{START}", f"data-0-{START + 6 * HOUR}"]
        assert answer["resyncAfterSeconds"] == 6 * HOUR

    def test_a_late_call_takes_one_snapshot_not_one_per_missed_interval(self, clock: FakeClock) -> None:
        first = observed(call_map([])["outputs"][0])
        clock.advance(20 * HOUR)
        answer = call_map([first])
        assert names(answer) == [f"data-0-{START}", f"data-0-{START + 20 * HOUR}"]
        assert answer["resyncAfterSeconds"] == 6 * HOUR

    def test_a_snapshot_expires_when_its_ttl_has_passed(self, clock: FakeClock) -> None:
        seen = [taken("old", START - 10 * DAY + 1), taken("gone", START - 10 * DAY), taken("recent", START - HOUR)]
        answer = call_map(seen)
        assert names(answer) == ["old", "recent"]
        assert answer["resyncAfterSeconds"] == 1  # "old" expires in one second, before the next is due
        clock.advance(1)
        assert names(call_map(seen)) == ["recent"]

    def test_ten_days_of_six_hourly_snapshots_hold_forty_at_most(self, clock: FakeClock) -> None:
        controller = Controller(clock, schedule("6h", "10d"))
        assert controller.run_for(30 * DAY) == 40
        taken_times = sorted(int(s["metadata"]["name"].rsplit("-", 1)[1]) for s in controller.snapshots)
        assert taken_times[-1] - taken_times[0] == 39 * 6 * HOUR
        assert all(t + 10 * DAY > clock.time() for t in taken_times)

    def test_resync_is_the_earlier_of_the_next_snapshot_and_the_next_expiry(self, clock: FakeClock) -> None:
        parent = schedule("6h", "7h")
        first = observed(call_map([], parent=parent)["outputs"][0])
        clock.advance(6 * HOUR)
        answer = call_map([first], parent=parent)
        assert len(answer["outputs"]) == 2
        assert answer["resyncAfterSeconds"] == 1 * HOUR  # the first expires at 7h; the next is due at 12h
        clock.advance(1 * HOUR)
        answer = call_map([observed(output) for output in answer["outputs"]], parent=parent)
        assert names(answer) == [f"data-0-{START + 6 * HOUR}"]
        assert answer["resyncAfterSeconds"] == 5 * HOUR

    def test_kept_snapshots_come_back_clean(self, clock: FakeClock) -> None:
        seen = taken("data-0-old", START - HOUR)
        seen["metadata"]["annotations"]["metacontroller.k8s.io/last-applied-configuration"] = "{}"
        answer = call_map([seen])
        assert answer["outputs"] == [{
            "apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
            "metadata": {"name": "data-0-old", "annotations": {TAKEN_AT_ANNOTATION: format_time(START - HOUR)}},
            "spec": {"source": {"persistentVolumeClaimName": "data-0"}}}]
        assert seen["status"] == {"readyToUse": True, "restoreSize": "1Gi"}  # the observed object is untouched

    def test_the_taken_at_annotation_wins_over_the_creation_timestamp(self, clock: FakeClock) -> None:
        seen = taken("recent", START - HOUR)  # creationTimestamp says 2020, long expired
        assert names(call_map([seen])) == ["recent"]

    def test_without_the_annotation_the_creation_timestamp_dates_a_snapshot(self, clock: FakeClock) -> None:
        seen = taken("by-hand", 0)
        del seen["metadata"]["annotations"][TAKEN_AT_ANNOTATION]
        seen["metadata"]["creationTimestamp"] = format_time(START - HOUR)
        answer = call_map([seen])
        assert answer["outputs"][0]["metadata"]["annotations"] == {TAKEN_AT_ANNOTATION: format_time(START - HOUR)}
        assert answer["resyncAfterSeconds"] == 5 * HOUR

    def test_a_snapshot_that_cannot_be_dated_is_kept_but_not_counted_as_the_newest(self, clock: FakeClock) -> None:
        seen = taken("mystery", 0)
        seen["metadata"]["annotations"][TAKEN_AT_ANNOTATION] = "last tuesday"
        del seen["metadata"]["creationTimestamp"]
        answer = call_map([seen])
        assert names(answer) == [f"data-0-{START}", "mystery"]
        assert call_tombstone([seen])["outputs"][0]["metadata"]["name"] == "mystery"

    def test_an_input_that_is_not_a_pvc_is_refused(self, clock: FakeClock) -> None:
        with pytest.raises(ValueError, match=r'^input: expected a PersistentVolumeClaim, got "ConfigMap"'):
            call_map([], claim={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}})


# --- durations and the schedule -------------------------------------------------------------------


class TestSchedule:
    @pytest.mark.parametrize(("text", "seconds"), [("90s", 90), ("15m", 900), ("6h", 6 * HOUR), ("10d", 10 * DAY),
                                                   ("1h30m", 5400), ("1d12h", 36 * HOUR), ("1m1m", 120)])
    def test_durations_are_digits_and_a_unit_repeated(self, text: str, seconds: int) -> None:
        assert parse_duration(text, "spec.snapshotInterval") == seconds

    def test_a_schedule_is_read_in_seconds(self) -> None:
        assert schedule_of(schedule("6h", "10d")) == Schedule(interval=6 * HOUR, ttl=10 * DAY)

    @pytest.mark.parametrize("text", ["6x", "", "h", "6", "1.5h", "-1h", "+6h", "6 h", "6H", "1w", "6hh", 6, True])
    @pytest.mark.parametrize("field", ["snapshotInterval", "snapshotTTL"])
    def test_an_invalid_duration_is_a_value_error_naming_the_field(self, clock: FakeClock, text: Any,
                                                                   field: str) -> None:
        parent = schedule(**{"interval" if field == "snapshotInterval" else "ttl": text})
        with pytest.raises(ValueError, match=rf"^spec\.{field}: .* is not a duration"):
            call_map([], parent=parent)

    def test_a_missing_duration_is_required(self, clock: FakeClock) -> None:
        parent = schedule()
        del parent["spec"]["snapshotTTL"]
        with pytest.raises(ValueError, match=r"^spec\.snapshotTTL: required"):
            call_map([], parent=parent)

    def test_a_zero_interval_is_refused(self, clock: FakeClock) -> None:
        with pytest.raises(ValueError, match=r'^spec\.snapshotInterval: "0h" must be longer than zero'):
            call_map([], parent=schedule(interval="0h"))

    def test_a_ttl_shorter_than_the_interval_is_refused(self, clock: FakeClock) -> None:
        with pytest.raises(ValueError, match=r'^spec\.snapshotTTL: "5h" is shorter than spec\.snapshotInterval "6h"'):
            call_map([], parent=schedule("6h", "5h"))

    def test_the_tombstone_hook_refuses_an_invalid_schedule_too(self, clock: FakeClock) -> None:
        with pytest.raises(ValueError, match=r"^spec\.snapshotTTL: "):
            call_tombstone([taken("a", START)], parent=schedule(ttl="ten days"))


# --- names ----------------------------------------------------------------------------------------


class TestNames:
    def test_a_name_is_the_pvc_and_the_unix_seconds(self) -> None:
        assert snapshot_name("data-my-app-0", START) == f"data-my-app-0-{START}"

    def test_a_pvc_name_that_just_fits_is_kept_whole(self) -> None:
        claim = "a" * (253 - len(f"-{START}"))
        assert snapshot_name(claim, START) == f"{claim}-{START}"

    # With 10-digit seconds the cut keeps 231 characters, so the 231st is the prefix's last.
    @pytest.mark.parametrize("claim", ["a" * 253, "b" * 230 + "-" + "c" * 22, "x" * 230 + "." + "y" * 22,
                                       "db." * 83 + "db"])
    def test_a_long_pvc_name_is_shortened_to_a_valid_name(self, claim: str) -> None:
        name = snapshot_name(claim, START)
        assert len(name) <= 253
        assert DNS_1123_SUBDOMAIN.fullmatch(name), name
        assert name.endswith(f"-{START}")
        assert name == snapshot_name(claim, START)  # the same every time, so a later pass finds it

    def test_long_pvc_names_sharing_a_prefix_get_different_names(self) -> None:
        first, second = "p" * 250 + "-0", "p" * 250 + "-1"
        assert snapshot_name(first, START) != snapshot_name(second, START)

    def test_the_map_hook_names_a_long_pvcs_snapshot_the_same_way(self, clock: FakeClock) -> None:
        claim = "data-" + "x" * 248
        answer = call_map([], claim=pvc(claim))
        assert names(answer) == [snapshot_name(claim, START)]
        assert answer["outputs"][0]["spec"]["source"]["persistentVolumeClaimName"] == claim


# --- the tombstone hook ---------------------------------------------------------------------------


class TestTombstoneHook:
    def test_only_unexpired_snapshots_are_kept(self, clock: FakeClock) -> None:
        seen = [taken("new", START - HOUR), taken("old", START - 10 * DAY + 1), taken("expired", START - 10 * DAY),
                taken("ancient", START - 30 * DAY)]
        answer = call_tombstone(seen)
        assert names(answer) == ["new", "old"]
        assert all(set(output) == {"apiVersion", "kind", "metadata", "spec"} for output in answer["outputs"])
        clock.advance(1)
        assert names(call_tombstone(seen)) == ["new"]

    def test_nothing_is_kept_once_all_have_expired(self, clock: FakeClock) -> None:
        assert call_tombstone([taken("a", START - 11 * DAY)]) == {"outputs": []}

    def test_no_snapshot_is_taken_for_a_vanished_pvc(self, clock: FakeClock) -> None:
        assert call_tombstone([]) == {"outputs": []}


# --- the manifests --------------------------------------------------------------------------------


def load(directory: Path) -> list[dict[str, Any]]:
    return [document.obj for document in read_documents([directory])]


def load_into_cluster(cluster: EmbeddedCluster, directory: Path) -> list[dict[str, Any]]:
    """The objects of `directory` created as `map reconcile` would (CRDs first, namespace `default`
    when none is written), but for the MapController, whose CRD is not part of the example."""
    objs = sorted(load(directory), key=lambda obj: obj["kind"] != "CustomResourceDefinition")
    created = []
    for obj in objs:
        if obj["kind"] == MAP_CONTROLLER.kind:
            continue
        if cluster.resource(Kind.of(obj)).namespaced:
            obj = {**obj, "metadata": {"namespace": "default", **obj["metadata"]}}
        created.append(cluster.create(obj))
    return created


def only(objs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [obj for obj in objs if obj["kind"] == kind]


def the_map_controller(directory: Path) -> dict[str, Any]:
    (controller,) = only(load(directory), MAP_CONTROLLER.kind)
    return controller


class TestManifests:
    def test_both_examples_have_their_files(self) -> None:
        assert {path.parent.name for path in MANIFEST_FILES} == {"snapshotschedule", "configmap-per-service"}
        assert (SNAPSHOT_EXAMPLE / "README.md").is_file() and (SERVICE_EXAMPLE / "README.md").is_file()

    @pytest.mark.parametrize("path", MANIFEST_FILES, ids=lambda path: f"{path.parent.name}/{path.name}")
    def test_every_manifest_is_a_kubernetes_object(self, path: Path) -> None:
        objs = [document.obj for document in read_documents([path])]
        assert objs
        for obj in objs:
            assert isinstance(obj.get("apiVersion"), str) and isinstance(obj.get("kind"), str)
            assert metadata(obj).get("name")
            assert "namespace" not in metadata(obj)  # `map reconcile` and kubectl put them where they are run

    def test_the_snapshot_example_loads_into_the_embedded_cluster(self) -> None:
        with EmbeddedCluster() as cluster:
            created = load_into_cluster(cluster, SNAPSHOT_EXAMPLE)
        (parent,) = only(created, "SnapshotSchedule")
        selector = parent_selector(parent)
        claims = only(created, "PersistentVolumeClaim")
        selected = [claim["metadata"]["name"] for claim in claims if is_input(claim, parent, selector)]
        assert sorted(selected) == ["data-my-app-0", "data-my-app-1"]
        assert len(claims) == 3
        assert schedule_of(parent) == Schedule(interval=6 * HOUR, ttl=10 * DAY)

    def test_the_service_example_loads_into_the_embedded_cluster(self) -> None:
        with EmbeddedCluster() as cluster:
            created = load_into_cluster(cluster, SERVICE_EXAMPLE)
        (parent,) = only(created, "ServiceDirectory")
        selector = parent_selector(parent)
        selected = [s["metadata"]["name"] for s in only(created, "Service") if is_input(s, parent, selector)]
        assert sorted(selected) == ["api", "web"]
        assert len(only(created, "Service")) == 3

    def test_the_snapshot_map_controller_parses(self) -> None:
        spec = parse_map_controller(the_map_controller(SNAPSHOT_EXAMPLE))
        assert spec.name == "snapshotschedule-controller"
        assert (spec.parent.api_version, spec.parent.resource) == ("examples.porchkit.dev/v1alpha1",
                                                                   "snapshotschedules")
        assert [(i.api_version, i.resource) for i in spec.inputs] == [("v1", "persistentvolumeclaims")]
        assert [(o.api_version, o.resource, o.method) for o in spec.outputs] == [
            ("snapshot.storage.k8s.io/v1", "volumesnapshots", "OnDelete")]
        assert spec.resync_period == 60
        assert spec.map_hook == {"python": {"function": "mapctl.examples.snapshots:map_snapshots"}}
        assert spec.tombstone_hook == {"python": {"function": "mapctl.examples.snapshots:tombstone_snapshots"}}

    def test_the_service_map_controller_parses(self) -> None:
        spec = parse_map_controller(the_map_controller(SERVICE_EXAMPLE))
        assert spec.name == "configmap-per-service"
        assert (spec.parent.api_version, spec.parent.resource) == ("examples.porchkit.dev/v1alpha1",
                                                                   "servicedirectories")
        assert [(i.api_version, i.resource) for i in spec.inputs] == [("v1", "services")]
        assert [(o.api_version, o.resource, o.method) for o in spec.outputs] == [("v1", "configmaps", "InPlace")]
        assert spec.tombstone_hook is None and "pipeline" in spec.map_hook


# --- the hooks, built from the manifests --------------------------------------------------------


@pytest.fixture
def hooks() -> Iterator[list[Hook]]:
    """Built hooks to close after the test (a python hook owns a thread pool)."""
    built: list[Hook] = []
    yield built
    for hook in built:
        hook.close()


def built(hooks: list[Hook], directory: Path, name: str) -> Hook:
    controller = the_map_controller(directory)
    hook = build_hook(controller["spec"]["hooks"][name], field=f"spec.hooks.{name}",
                      controller=controller["metadata"]["name"], hook=name,
                      shape=MAP_SHAPE if name == "map" else TOMBSTONE_SHAPE, output_field="outputs",
                      policy=EXAMPLES_POLICY)
    assert hook is not None
    hooks.append(hook)
    return hook


class TestPipelineHook:
    def loaded(self) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        with EmbeddedCluster() as cluster:
            created = load_into_cluster(cluster, SERVICE_EXAMPLE)
        (parent,) = only(created, "ServiceDirectory")
        return parent, {s["metadata"]["name"]: s for s in only(created, "Service")}

    def test_each_service_maps_to_one_endpoint_configmap(self, hooks: list[Hook]) -> None:
        hook = built(hooks, SERVICE_EXAMPLE, "map")
        controller = the_map_controller(SERVICE_EXAMPLE)
        parent, services = self.loaded()
        expected = {"web": "80", "api": "9000", "database": "5432"}  # selection is the controller's job
        for name, port in expected.items():
            answer = hook.call(map_request(controller, parent, KEY, services[name], {"ConfigMap.v1": []}))
            response = parse_map_response(answer, namespace="default")
            assert response.outputs == ({"apiVersion": "v1", "kind": "ConfigMap",
                                         "metadata": {"name": f"{name}-endpoint"},
                                         "data": {"host": f"{name}.default.svc.cluster.local", "port": port}},)
            assert response.resync_after is None

    def test_the_parent_and_the_observed_configmaps_emit_nothing(self, hooks: list[Hook]) -> None:
        hook = built(hooks, SERVICE_EXAMPLE, "map")
        controller = the_map_controller(SERVICE_EXAMPLE)
        parent, services = self.loaded()
        seen = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web-endpoint", "namespace": "default"},
                "data": {"host": "stale", "port": "1"}}
        answer = hook.call(map_request(controller, parent, KEY, services["web"], {"ConfigMap.v1": [seen]}))
        assert [output["metadata"]["name"] for output in answer["outputs"]] == ["web-endpoint"]
        assert answer["outputs"][0]["data"]["port"] == "80"

    def test_a_service_without_ports_gets_a_host_only(self, hooks: list[Hook]) -> None:
        hook = built(hooks, SERVICE_EXAMPLE, "map")
        controller = the_map_controller(SERVICE_EXAMPLE)
        parent, _ = self.loaded()
        external = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "search", "namespace": "default"},
                    "spec": {"type": "ExternalName", "externalName": "search.example.com"}}
        answer = hook.call(map_request(controller, parent, KEY, external, {"ConfigMap.v1": []}))
        assert parse_map_response(answer, namespace="default").outputs[0]["data"] == {
            "host": "search.default.svc.cluster.local"}


class TestPythonHooks:
    def test_the_map_hook_takes_a_first_snapshot_of_each_selected_pvc(self, clock: FakeClock,
                                                                       hooks: list[Hook]) -> None:
        hook = built(hooks, SNAPSHOT_EXAMPLE, "map")
        controller = the_map_controller(SNAPSHOT_EXAMPLE)
        with EmbeddedCluster() as cluster:
            created = load_into_cluster(cluster, SNAPSHOT_EXAMPLE)
        (parent,) = only(created, "SnapshotSchedule")
        for claim in only(created, "PersistentVolumeClaim")[:2]:
            name = claim["metadata"]["name"]
            answer = hook.call(map_request(controller, parent, KEY, claim, {SNAPSHOT_GROUP: []}))
            response = parse_map_response(answer, namespace="default")
            assert [o["metadata"]["name"] for o in response.outputs] == [f"{name}-{START}"]
            assert response.outputs[0]["spec"] == {"source": {"persistentVolumeClaimName": name}}
            assert response.resync_after == 6 * HOUR

    def test_the_map_hook_follows_the_fake_clock(self, clock: FakeClock, hooks: list[Hook]) -> None:
        hook = built(hooks, SNAPSHOT_EXAMPLE, "map")
        controller, parent = the_map_controller(SNAPSHOT_EXAMPLE), schedule("6h", "10d")
        first = observed(hook.call(map_request(controller, parent, KEY, pvc(), {SNAPSHOT_GROUP: []}))["outputs"][0])
        clock.advance(6 * HOUR)
        answer = hook.call(map_request(controller, parent, KEY, pvc(), {SNAPSHOT_GROUP: [first]}))
        assert names(answer) == [f"data-0-{START}", f"data-0-{START + 6 * HOUR}"]

    def test_an_invalid_schedule_is_a_hook_error_naming_the_field(self, clock: FakeClock, hooks: list[Hook]) -> None:
        hook = built(hooks, SNAPSHOT_EXAMPLE, "map")
        request = map_request(the_map_controller(SNAPSHOT_EXAMPLE), schedule(interval="6x"), KEY, pvc(),
                              {SNAPSHOT_GROUP: []})
        with pytest.raises(HookError, match=r"map_snapshots raised ValueError: spec\.snapshotInterval: \"6x\""):
            hook.call(request)

    def test_the_tombstone_hook_keeps_the_unexpired_snapshots(self, clock: FakeClock, hooks: list[Hook]) -> None:
        hook = built(hooks, SNAPSHOT_EXAMPLE, "tombstone")
        seen = [taken("data-0-a", START - DAY), taken("data-0-b", START - 11 * DAY)]
        answer = hook.call(tombstone_request(the_map_controller(SNAPSHOT_EXAMPLE), schedule(), KEY,
                                             {SNAPSHOT_GROUP: seen}))
        kept = parse_tombstone_response(answer, namespace="default")
        assert [o["metadata"]["name"] for o in kept] == ["data-0-a"]
