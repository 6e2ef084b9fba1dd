"""MapControllers against a real API server (`make e2e`), as `porchkit manager --controllers map` runs them.

The MapController CRD comes from deploy/crds and the example CRDs from testdata/mapctl; the
controllers run under `map_controllers(manager, hook_policy=...)` (mapctl.manager) on a
KubeCluster, one manager per test, on a thread. Each test works in a namespace of its own and
names its MapController uniquely (MapControllers are cluster-scoped, and every manager runs all
of them).

Checked against the real server: outputs created for the selected inputs only, owned by their
parent and tagged with their input's map key; outputs deleted when their input stops being
selected (by the controller: nothing here waits on kube-controller-manager's garbage collector);
the parent's status written through the status subresource of a custom resource (a plain update
would drop it); the SnapshotSchedule example's python hooks taking, keeping and expiring snapshots
on a clock the test moves; a webhook map hook on loopback; and one failing input reported as a
`MapError` Event on its parent and in the parent's `Mapped` condition while the others are mapped.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import secrets
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from mapctl.examples import snapshots
from mapctl.keys import CONTROLLER_LABEL, INPUT_ANNOTATION, MAP_KEY_LABEL, map_key
from mapctl.manager import map_controllers
from mapctl.parents import condition_type
from mapctl.spec import MAP_CONTROLLER
from reconcile import Cluster, Conflict, Kind, NotFound, Obj, ObjectKey
from reconcile.clock import SystemClock
from reconcile.events import EventRecorder
from reconcile.hooks import HookPolicy
from reconcile.manager import Manager
from tests.e2e.mapctl_hooks import FAIL_KEY, MIRROR_LABEL, MirrorHook
from tests.e2e.support import eventually, served
from tests.reconcile.support import Running

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "testdata" / "mapctl"
MAP_CRD_FILE = ROOT / "deploy" / "crds" / "porchkit.dev_mapcontrollers.yaml"
CRD = Kind("apiextensions.k8s.io/v1", "CustomResourceDefinition")
CONFIGMAP = Kind("v1", "ConfigMap")
SERVICE = Kind("v1", "Service")
PVC = Kind("v1", "PersistentVolumeClaim")
EVENT = Kind("v1", "Event")
# as deploy/mapctl-deployment.yaml starts the manager: --python-hooks mapctl.examples
HOOK_POLICY = HookPolicy.for_manager(["mapctl.examples"], [])
SERVICE_DIRECTORY = Kind("examples.porchkit.dev/v1alpha1", "ServiceDirectory")
SNAPSHOT_SCHEDULE = Kind("examples.porchkit.dev/v1alpha1", "SnapshotSchedule")
VOLUME_SNAPSHOT = Kind("snapshot.storage.k8s.io/v1", "VolumeSnapshot")
MIRROR = Kind("e2e.porchkit.dev/v1", "Mirror")
HOUR = 3600


def load(path: Path) -> list[Obj]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def manifests(example: str, name: str) -> list[Obj]:
    return load(EXAMPLES / example / name)


def mirror_crd() -> Obj:
    """A namespaced parent kind of the webhook tests: a selector in spec, a status subresource."""
    return {"apiVersion": CRD.api_version, "kind": CRD.kind, "metadata": {"name": "mirrors.e2e.porchkit.dev"},
            "spec": {"group": "e2e.porchkit.dev", "scope": "Namespaced",
                     "names": {"kind": "Mirror", "listKind": "MirrorList", "plural": "mirrors", "singular": "mirror"},
                     "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                                   "schema": {"openAPIV3Schema": {"type": "object",
                                                                  "x-kubernetes-preserve-unknown-fields": True}}}]}}


@pytest.fixture(scope="module")
def crds(kubeconfig: str) -> None:
    """The MapController CRD and the parent, input and output CRDs of the tests, installed and served."""
    from reconcile.kube import KubeCluster

    cluster = KubeCluster.from_kubeconfig(kubeconfig)
    try:
        wanted = [*load(MAP_CRD_FILE),
                  *manifests("configmap-per-service", "crd-servicedirectory.yaml"),
                  *manifests("snapshotschedule", "crd-snapshotschedule.yaml"),
                  *manifests("snapshotschedule", "crd-volumesnapshot.yaml"), mirror_crd()]
        for crd in wanted:
            if cluster.get(CRD, ObjectKey("", crd["metadata"]["name"])) is None:
                cluster.create(crd)
        for kind in (MAP_CONTROLLER, SERVICE_DIRECTORY, SNAPSHOT_SCHEDULE, VOLUME_SNAPSHOT, MIRROR):
            eventually(functools.partial(served, cluster, kind))
    finally:
        cluster.close()


def map_manager(cluster: Cluster) -> Manager:
    """`map_controllers` on the real server, as `porchkit manager --controllers map --python-hooks mapctl.examples`
    runs it."""
    manager = Manager(cluster, events=EventRecorder(cluster, "porchkit-manager"), grace_period=5)
    manager.add(map_controllers(manager, hook_policy=HOOK_POLICY))
    return manager


@pytest.fixture
def start(cluster: Cluster, namespace: str, crds: None) -> Iterator[Callable[[Obj], Obj]]:
    """`start(map_controller)`: creates it (named uniquely; the name it got is in the answer) and
    runs the MapControllers; both are stopped and deleted after the test."""
    made: list[str] = []
    running: list[Running] = []

    def run(obj: Obj) -> Obj:
        obj = copy.deepcopy(obj)
        obj["metadata"]["name"] = f"{obj['metadata']['name'][:40]}-{secrets.token_hex(3)}"
        created = cluster.create(obj)
        made.append(created["metadata"]["name"])
        running.append(Running(map_manager(cluster)))
        return created

    yield run
    for each in running:
        each.stop(30)
    for name in made:
        with contextlib.suppress(NotFound):
            cluster.delete(MAP_CONTROLLER, ObjectKey("", name))


class OffsetClock(SystemClock):
    """Real time plus an offset the test moves forward: the SnapshotSchedule hooks' clock. The
    controller's own resyncs run in real time (the server's watches and timers do), so a jump of
    hours here is seen within one resyncPeriodSeconds."""

    def __init__(self) -> None:
        self.offset = 0.0

    def time(self) -> float:
        return super().time() + self.offset

    def jump(self, seconds: float) -> None:
        self.offset += seconds


# --- reading the cluster ----------------------------------------------------------------------


def get(cluster: Cluster, kind: Kind, namespace: str, name: str) -> Obj | None:
    return cluster.get(kind, ObjectKey(namespace, name))


def listed(cluster: Cluster, kind: Kind, namespace: str) -> list[Obj]:
    return list(cluster.list(kind, namespace=namespace).items)


def names(objs: list[Obj]) -> set[str]:
    return {obj["metadata"]["name"] for obj in objs}


def owned_by(obj: Obj, owner: Obj) -> bool:
    return any(ref.get("uid") == owner["metadata"]["uid"] and ref.get("controller")
               for ref in obj["metadata"].get("ownerReferences") or [])


def outputs_of(cluster: Cluster, kind: Kind, parent: Obj) -> dict[str, Obj]:
    """The objects of `kind` in the parent's namespace that the parent controls, by name."""
    return {obj["metadata"]["name"]: obj for obj in listed(cluster, kind, parent["metadata"]["namespace"])
            if owned_by(obj, parent)}


def mapped(status: Mapping[str, Any], controller: Obj) -> dict[str, Any] | None:
    """The parent's condition of MapController `controller`, if it has one."""
    wanted = condition_type(controller["metadata"]["name"])
    found = [c for c in status.get("conditions") or [] if c.get("type") == wanted]
    return dict(found[0]) if found else None


def status_counts(cluster: Cluster, kind: Kind, namespace: str, name: str) -> tuple[Any, Any] | None:
    obj = get(cluster, kind, namespace, name)
    status = (obj or {}).get("status") or {}
    return (status.get("inputs"), status.get("outputs")) if status else None


def events(cluster: Cluster, namespace: str, about: str, reason: str) -> list[Obj]:
    return [event for event in listed(cluster, EVENT, namespace)
            if event["involvedObject"].get("name") == about and event.get("reason") == reason]


def edit(cluster: Cluster, kind: Kind, namespace: str, name: str, change: Callable[[Obj], None]) -> Obj:
    """Read, change and update an object, again on Conflict (the controller may write too)."""
    for _ in range(20):
        obj = get(cluster, kind, namespace, name)
        assert obj is not None, f"{kind.kind} {namespace}/{name} is gone"
        change(obj)
        try:
            return cluster.update(obj)
        except Conflict:
            continue
    raise AssertionError(f"could not update {kind.kind} {namespace}/{name}")


def create_in(cluster: Cluster, namespace: str, objs: list[Obj]) -> list[Obj]:
    return [cluster.create({**obj, "metadata": {**obj["metadata"], "namespace": namespace}}) for obj in objs]


def configmap(name: str, labels: dict[str, str], data: dict[str, str]) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}, "data": data}


# --- the ConfigMap-per-Service example (a pipeline hook) ----------------------------------------


def test_configmap_per_service_maps_selected_services_and_deletes_on_label_removal(
        cluster: Cluster, namespace: str, start: Callable[[Obj], Obj]) -> None:
    (controller_manifest,) = manifests("configmap-per-service", "mapcontroller.yaml")
    (directory_manifest,) = manifests("configmap-per-service", "servicedirectory.yaml")
    create_in(cluster, namespace, manifests("configmap-per-service", "services.yaml"))
    (directory,) = create_in(cluster, namespace, [directory_manifest])
    controller = start(controller_manifest)

    def endpoints() -> dict[str, Obj]:
        return outputs_of(cluster, CONFIGMAP, directory)

    found = eventually(lambda: (cms := endpoints()) and set(cms) == {"web-endpoint", "api-endpoint"} and cms)
    assert found["web-endpoint"]["data"] == {"host": f"web.{namespace}.svc.cluster.local", "port": "80"}
    assert found["api-endpoint"]["data"] == {"host": f"api.{namespace}.svc.cluster.local", "port": "9000"}
    web = found["web-endpoint"]["metadata"]
    assert web["labels"][MAP_KEY_LABEL] == map_key(SERVICE, namespace, "web")
    assert web["labels"][CONTROLLER_LABEL] == controller["metadata"]["name"]
    assert web["annotations"][INPUT_ANNOTATION] == f"Service/{namespace}/web"
    assert get(cluster, CONFIGMAP, namespace, "database-endpoint") is None  # not exposed

    # The status went through the subresource: a plain update of a CRD with one drops `status`.
    expected = ({"services": {"total": 2}}, {"configmaps": {"total": 2}})
    eventually(lambda: status_counts(cluster, SERVICE_DIRECTORY, namespace, "exposed-services") == expected)
    parent = get(cluster, SERVICE_DIRECTORY, namespace, "exposed-services")
    assert parent is not None
    assert parent["metadata"]["generation"] == directory["metadata"]["generation"]  # status does not bump it
    assert parent["status"]["observedGeneration"] == parent["metadata"]["generation"]
    assert (mapped(parent["status"], controller) or {}).get("status") == "True"

    # InPlace: a Service's new first port reaches its ConfigMap.
    def new_port(service: Obj) -> None:
        service["spec"]["ports"][0]["port"] = 9443
    edit(cluster, SERVICE, namespace, "api", new_port)
    eventually(lambda: ((get(cluster, CONFIGMAP, namespace, "api-endpoint") or {}).get("data") or {}).get("port")
               == "9443")

    # No longer selected: the controller itself deletes the ConfigMap, and the status counts one.
    def unexpose(service: Obj) -> None:
        del service["metadata"]["labels"]["expose"]
    edit(cluster, SERVICE, namespace, "web", unexpose)
    eventually(lambda: get(cluster, CONFIGMAP, namespace, "web-endpoint") is None)
    eventually(lambda: status_counts(cluster, SERVICE_DIRECTORY, namespace, "exposed-services")
               == ({"services": {"total": 1}}, {"configmaps": {"total": 1}}))
    assert set(endpoints()) == {"api-endpoint"}


# --- the SnapshotSchedule example (python hooks, a clock the test moves) ---------------------------


@pytest.fixture
def hook_clock(monkeypatch: pytest.MonkeyPatch) -> OffsetClock:
    clock = OffsetClock()
    monkeypatch.setattr(snapshots, "clock", clock)
    return clock


@pytest.fixture
def tombstones(monkeypatch: pytest.MonkeyPatch) -> list[tuple[list[str], list[str]]]:
    """Each tombstone call of the example's hook, as (snapshots offered, snapshots kept), recorded
    by a wrapper installed before any MapController is built (a python hook is looked up then)."""
    calls: list[tuple[list[str], list[str]]] = []
    original = snapshots.tombstone_snapshots

    # wraps: a python hook must be a function of the module it names, and this one stands in for the example's
    @functools.wraps(original)
    def recording(request: Mapping[str, Any]) -> dict[str, Any]:
        answer = original(request)
        offered = sorted((request.get("outputs") or {}).get(snapshots.SNAPSHOT_GROUP) or {})
        calls.append((offered, sorted(o["metadata"]["name"] for o in answer["outputs"])))
        return answer

    monkeypatch.setattr(snapshots, "tombstone_snapshots", recording)
    return calls


def test_snapshot_schedule_takes_keeps_and_expires_snapshots(
        cluster: Cluster, namespace: str, start: Callable[[Obj], Obj], hook_clock: OffsetClock,
        tombstones: list[tuple[list[str], list[str]]]) -> None:
    (controller_manifest,) = manifests("snapshotschedule", "mapcontroller.yaml")
    controller_manifest["spec"]["resyncPeriodSeconds"] = 1  # the hooks' clock jumps; passes come each second
    (schedule_manifest,) = manifests("snapshotschedule", "snapshotschedule.yaml")
    schedule_manifest["spec"].update(snapshotInterval="1h", snapshotTTL="3h")
    create_in(cluster, namespace, manifests("snapshotschedule", "pvcs.yaml"))
    (schedule,) = create_in(cluster, namespace, [schedule_manifest])
    start(controller_manifest)

    def by_pvc() -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for snapshot in outputs_of(cluster, VOLUME_SNAPSHOT, schedule).values():
            found.setdefault(snapshot["spec"]["source"]["persistentVolumeClaimName"], []).append(
                snapshot["metadata"]["name"])
        return {pvc: sorted(found_names) for pvc, found_names in found.items()}

    def counts(pvcs: int, snaps: int) -> bool:
        return status_counts(cluster, SNAPSHOT_SCHEDULE, namespace, "my-app-snapshots") == (
            {"persistentvolumeclaims": {"total": pvcs}}, {"volumesnapshots": {"total": snaps}})

    first = eventually(lambda: (found := by_pvc()) and set(found) == {"data-my-app-0", "data-my-app-1"}
                       and all(len(v) == 1 for v in found.values()) and found)
    snapshot = get(cluster, VOLUME_SNAPSHOT, namespace, first["data-my-app-1"][0])
    assert snapshot is not None and snapshot["metadata"]["labels"][MAP_KEY_LABEL] == \
        map_key(PVC, namespace, "data-my-app-1")
    eventually(lambda: counts(2, 2))  # scratch is not selected

    hook_clock.jump(HOUR)  # the interval has passed: a second snapshot of each, the first one kept
    second = eventually(lambda: (found := by_pvc()) and all(len(v) == 2 for v in found.values()) and found)
    assert all(set(first[pvc]) < set(second[pvc]) for pvc in first)
    eventually(lambda: counts(2, 4))

    # The PVC goes; its unexpired snapshots stay (the tombstone hook keeps them), counted by status.
    cluster.delete(PVC, ObjectKey(namespace, "data-my-app-1"))
    eventually(lambda: get(cluster, PVC, namespace, "data-my-app-1") is None)
    kept = second["data-my-app-1"]
    eventually(lambda: sum(1 for offered, answer in tombstones if offered == kept == answer) >= 2)
    assert by_pvc()["data-my-app-1"] == kept  # two tombstone passes over them, nothing deleted
    eventually(lambda: counts(1, 4))

    hook_clock.jump(3 * HOUR)  # every snapshot taken so far has expired
    eventually(lambda: "data-my-app-1" not in by_pvc())
    final = eventually(lambda: (found := by_pvc()) and len(found["data-my-app-0"]) == 1
                       and not set(found["data-my-app-0"]) & set(second["data-my-app-0"]) and found)
    assert set(final) == {"data-my-app-0"}  # a fresh snapshot of the PVC that remains, nothing else
    eventually(lambda: counts(1, 1))


# --- a webhook map hook, and a failing input --------------------------------------------------------


@pytest.fixture
def mirror_hook() -> Iterator[MirrorHook]:
    hook = MirrorHook()
    yield hook
    hook.close()


def mirror_controller(url: str) -> Obj:
    return {"apiVersion": MAP_CONTROLLER.api_version, "kind": MAP_CONTROLLER.kind, "metadata": {"name": "mirror"},
            "spec": {"parentResource": {"apiVersion": MIRROR.api_version, "resource": "mirrors"},
                     "inputResources": [{"apiVersion": "v1", "resource": "configmaps"}],
                     "outputResources": [{"apiVersion": "v1", "resource": "configmaps",
                                          "updateStrategy": {"method": "InPlace"}}],
                     "hooks": {"map": {"webhook": {"url": url, "timeout": "10s"}}}}}


def mirror_parent(cluster: Cluster, namespace: str) -> Obj:
    return cluster.create({"apiVersion": MIRROR.api_version, "kind": MIRROR.kind,
                           "metadata": {"name": "mirror", "namespace": namespace},
                           "spec": {"selector": {"matchLabels": {"mirror": "yes"}}}})


def test_a_webhook_map_hook_on_loopback_mirrors_each_selected_input(
        cluster: Cluster, namespace: str, start: Callable[[Obj], Obj], mirror_hook: MirrorHook) -> None:
    parent = mirror_parent(cluster, namespace)
    create_in(cluster, namespace, [configmap("a", {"mirror": "yes"}, {"k": "1"}),
                                   configmap("b", {"mirror": "yes"}, {"k": "2"}),
                                   configmap("ignored", {}, {"k": "3"})])
    start(mirror_controller(mirror_hook.url))

    found = eventually(lambda: (out := outputs_of(cluster, CONFIGMAP, parent)) and len(out) == 2 and out)
    assert {name: obj["data"] for name, obj in found.items()} == {"a-mirror": {"k": "1"}, "b-mirror": {"k": "2"}}
    assert found["a-mirror"]["metadata"]["labels"][MIRROR_LABEL] == "a"
    eventually(lambda: status_counts(cluster, MIRROR, namespace, "mirror")
               == ({"configmaps": {"total": 2}}, {"configmaps": {"total": 2}}))  # the mirrors are not inputs
    assert mirror_hook.calls_for("ignored") == 0 and mirror_hook.calls_for("a-mirror") == 0

    edit(cluster, CONFIGMAP, namespace, "a", lambda cm: cm["data"].update(k="10"))
    eventually(lambda: (get(cluster, CONFIGMAP, namespace, "a-mirror") or {}).get("data") == {"k": "10"})

    cluster.delete(CONFIGMAP, ObjectKey(namespace, "b"))  # no tombstone hook: its mirror goes
    eventually(lambda: get(cluster, CONFIGMAP, namespace, "b-mirror") is None)
    assert set(outputs_of(cluster, CONFIGMAP, parent)) == {"a-mirror"}


def test_a_failing_input_is_a_map_error_event_on_the_parent_while_the_others_are_mapped(
        cluster: Cluster, namespace: str, start: Callable[[Obj], Obj], mirror_hook: MirrorHook) -> None:
    parent = mirror_parent(cluster, namespace)
    create_in(cluster, namespace, [configmap("good-1", {"mirror": "yes"}, {"k": "1"}),
                                   configmap("bad", {"mirror": "yes"}, {FAIL_KEY: "no mirror for you"}),
                                   configmap("good-2", {"mirror": "yes"}, {"k": "2"})])
    controller = start(mirror_controller(mirror_hook.url))

    eventually(lambda: set(outputs_of(cluster, CONFIGMAP, parent)) == {"good-1-mirror", "good-2-mirror"})
    (event, *_) = eventually(lambda: events(cluster, namespace, "mirror", "MapError"))
    assert event["type"] == "Warning" and event["involvedObject"]["kind"] == MIRROR.kind
    assert f"ConfigMap/{namespace}/bad" in event["message"] and "no mirror for you" in event["message"]

    def condition() -> dict[str, Any] | None:
        return mapped((get(cluster, MIRROR, namespace, "mirror") or {}).get("status") or {}, controller)

    failed = eventually(lambda: (c := condition()) and c["status"] == "False" and c)
    assert failed["reason"] == "MapError"
    assert failed["message"].startswith("1 of 3 inputs failed; first: ") and f"ConfigMap/{namespace}/bad" in \
        failed["message"]
    assert get(cluster, CONFIGMAP, namespace, "bad-mirror") is None
    assert mirror_hook.calls_for("bad") >= 1

    def fixed(cm: Obj) -> None:
        cm["data"] = {"k": "fixed"}
    edit(cluster, CONFIGMAP, namespace, "bad", fixed)  # its next pass succeeds: the failure is forgotten
    eventually(lambda: (get(cluster, CONFIGMAP, namespace, "bad-mirror") or {}).get("data") == {"k": "fixed"})
    eventually(lambda: (c := condition()) and c["status"] == "True")
    eventually(lambda: status_counts(cluster, MIRROR, namespace, "mirror")
               == ({"configmaps": {"total": 3}}, {"configmaps": {"total": 3}}))
