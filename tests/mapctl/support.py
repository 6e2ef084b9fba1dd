"""What the live MapController tests share: a running stage, objects to feed it, hook servers.

* `stage` (a fixture) builds an `EmbeddedCluster` with the MapController CRD and two CRDs of
  its own (`Bucket`, the parent kind, and `Gadget`, an output kind with a status), and runs a
  manager with the MapControllers' controller on it (`MapControllers(manager, Options(...))`), as
  `porchkit manager --controllers map` does (with MANAGER_POLICY), on a thread; it is stopped after the test.
  `stage(clock=FakeClock())` runs everything on a fake clock (resyncs, back-off, settle delays):
  move it with `Stage.step_until`. The python hooks' records (tests/mapctl/pyhooks.py) are reset
  for each test.
* `hook_server` (a fixture) starts a script of tests/mapctl/hookservers as a process of its own
  and gives its port; every process started is killed after the test.
* helpers to read what the controllers left (outputs, Events, the parent's status and `Mapped`
  condition, metrics), to wait until a MapController is idle, and to edit objects despite
  conflicts; builders for the objects the tests create.

Import the fixtures into a test module (`from tests.mapctl.support import stage`) to use them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

import mapctl.instance
from mapctl.crds import map_controller_crd
from mapctl.instance import MapInstance, Options
from mapctl.keys import CONTROLLER_LABEL
from mapctl.parents import MAPPED_SUFFIX
from mapctl.spec import MAP_CONTROLLER
from mapctl.supervisor import MapControllers
from reconcile import Conflict, Kind, ObjectKey
from reconcile.clock import SYSTEM_CLOCK, Clock, FakeClock
from reconcile.cluster import Obj, WatchEvent
from reconcile.controller import Controller
from reconcile.embedded import EmbeddedCluster
from reconcile.events import EventRecorder
from reconcile.hooks import HookPolicy
from reconcile.manager import Manager
from tests.hookprocesses import HookServer, hook_servers
from tests.hookstage import WAIT, HookStage
from tests.mapctl import pyhooks
from tests.waiting import eventually, step_until

HOOKSERVERS = Path(__file__).resolve().parent / "hookservers"
STATUS_SETTLE = 0.1  # seconds from an input pass to its parent's status write, in tests
# What the stage's manager lets hooks do, as `porchkit manager --python-hooks tests.mapctl.pyhooks,mapctl.examples
# --secret-namespaces default` would.
MANAGER_POLICY = HookPolicy.for_manager(["tests.mapctl.pyhooks", "mapctl.examples"], ["default"])

CRD = Kind("apiextensions.k8s.io/v1", "CustomResourceDefinition")
NAMESPACE = Kind("v1", "Namespace")
BUCKET = Kind("example.com/v1", "Bucket")
GADGET = Kind("example.com/v1", "Gadget")
SERVICE = Kind("v1", "Service")
SECRET = Kind("v1", "Secret")
CONFIGMAP = Kind("v1", "ConfigMap")

__all__ = ["BUCKET", "CONFIGMAP", "GADGET", "MAP_CONTROLLER", "SECRET", "SERVICE", "WAIT", "HookServer", "Stage",
           "bucket", "configmap", "hook_server", "map_controller", "python", "rule", "secret", "service", "stage",
           "webhook"]


# --- objects -------------------------------------------------------------------------------------


def _crd(kind: Kind, plural: str) -> Obj:
    group, version = kind.api_version.split("/")
    return {"apiVersion": CRD.api_version, "kind": CRD.kind, "metadata": {"name": f"{plural}.{group}"},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"kind": kind.kind, "listKind": f"{kind.kind}List", "plural": plural,
                               "singular": kind.kind.lower()},
                     "versions": [{"name": version, "served": True, "storage": True,
                                   "subresources": {"status": {}},
                                   "schema": {"openAPIV3Schema": {"type": "object",
                                                                  "x-kubernetes-preserve-unknown-fields": True}}}]}}


def bucket(name: str = "bucket", *, selector: dict[str, Any] | None = None, namespace: str = "default",
           **spec: Any) -> Obj:
    """A parent: its `spec.selector` picks its inputs; `spec.flavour` reaches map_copy's outputs."""
    body: dict[str, Any] = dict(spec)
    if selector is not None:
        body["selector"] = selector
    return {"apiVersion": BUCKET.api_version, "kind": BUCKET.kind, "metadata": {"name": name, "namespace": namespace},
            "spec": body}


def _input(kind: Kind, name: str, labels: dict[str, str] | None, namespace: str,
           annotations: dict[str, str]) -> Obj:
    return {"apiVersion": kind.api_version, "kind": kind.kind,
            "metadata": {"name": name, "namespace": namespace, "labels": labels or {}, "annotations": annotations}}


def service(name: str, labels: dict[str, str] | None = None, *, namespace: str = "default", **annotations: str) -> Obj:
    return {**_input(SERVICE, name, labels, namespace, annotations), "spec": {"ports": [{"port": 80}]}}


def secret(name: str, labels: dict[str, str] | None = None, *, namespace: str = "default", **annotations: str) -> Obj:
    return {**_input(SECRET, name, labels, namespace, annotations), "data": {}}


def configmap(name: str, labels: dict[str, str] | None = None, *, namespace: str = "default",
              **annotations: str) -> Obj:
    return {**_input(CONFIGMAP, name, labels, namespace, annotations), "data": {"own": name}}


def rule(api_version: str, resource: str, method: str | None = None) -> dict[str, Any]:
    found: dict[str, Any] = {"apiVersion": api_version, "resource": resource}
    if method:
        found["updateStrategy"] = {"method": method}
    return found


def python(function: str, timeout: str | None = None) -> dict[str, Any]:
    hook: dict[str, Any] = {"function": f"tests.mapctl.pyhooks:{function}"}
    if timeout:
        hook["timeout"] = timeout
    return {"python": hook}


def webhook(url: str, *, timeout: str = "2s") -> dict[str, Any]:
    return {"webhook": {"url": url, "timeout": timeout}}


def map_controller(name: str, *, map_hook: dict[str, Any], tombstone: dict[str, Any] | None = None,
                   inputs: list[dict[str, Any]] | None = None, outputs: list[dict[str, Any]] | None = None,
                   **spec: Any) -> Obj:
    """A MapController over Buckets: inputs Services, outputs ConfigMaps (InPlace) unless told
    otherwise; `spec` adds fields such as resyncPeriodSeconds or parallelism."""
    hooks = {"map": map_hook, **({"tombstone": tombstone} if tombstone else {})}
    return {"apiVersion": MAP_CONTROLLER.api_version, "kind": MAP_CONTROLLER.kind, "metadata": {"name": name},
            "spec": {"parentResource": rule(BUCKET.api_version, "buckets"),
                     "inputResources": inputs or [rule("v1", "services")],
                     "outputResources": outputs or [rule("v1", "configmaps", "InPlace")],
                     "hooks": hooks, **spec}}


# --- hook servers --------------------------------------------------------------------------------


hook_server = hook_servers(HOOKSERVERS)


# --- the stage -----------------------------------------------------------------------------------


class LaggingWatches:
    """A cluster whose watches of `kind` hand over each change `lag` seconds after reading it, one
    at a time (everything else is the cluster's own)."""

    def __init__(self, cluster: EmbeddedCluster, kind: Kind, lag: float) -> None:
        self.cluster, self.kind, self.lag = cluster, kind, lag

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cluster, name)

    def watch(self, kind: Kind, **options: Any) -> Iterator[WatchEvent]:
        stream = self.cluster.watch(kind, **options)
        return _Lagging(stream, self.lag) if kind == self.kind else stream


class _Lagging(Iterator[WatchEvent]):
    def __init__(self, stream: Iterator[WatchEvent], lag: float) -> None:
        self.stream, self.lag = stream, lag

    def __next__(self) -> WatchEvent:
        event = next(self.stream)
        if event.type != "BOOKMARK":
            time.sleep(self.lag)  # the latency being simulated, not a wait for something to happen
        return event

    def close(self) -> None:
        getattr(self.stream, "close", lambda: None)()


class Stage(HookStage[MapInstance]):
    """An embedded cluster (the MapController, Bucket and Gadget CRDs installed, and a namespace
    `elsewhere`) and a manager running the MapControllers on it, on a thread; `resolve` points
    webhook hosts at local servers. `reports` holds every input pass's report, in order. With
    `lag`, the manager sees every ConfigMap change `lag` seconds late (a watch that lags writes, as
    a busy API server's does); `cluster` is the embedded cluster itself, without lag."""

    def __init__(self, resolve: Mapping[str, str], clock: Clock, lag: float = 0.0) -> None:
        self.clock, self.lag = clock, lag
        self.cluster = EmbeddedCluster(clock=clock)
        for obj in (map_controller_crd(), _crd(BUCKET, "buckets"), _crd(GADGET, "gadgets"),
                    {"apiVersion": NAMESPACE.api_version, "kind": NAMESPACE.kind, "metadata": {"name": "elsewhere"}}):
            self.cluster.create(obj)
        seen: Any = LaggingWatches(self.cluster, CONFIGMAP, lag) if lag else self.cluster
        manager = Manager(seen, clock=clock, grace_period=5.0,
                          events=EventRecorder(self.cluster, "porchkit-mapctl", clock=clock))
        self.reports: list[tuple[str, Any, Any]] = []  # appended from worker threads (list.append is atomic)
        self.maps = MapControllers(manager, Options(resolve=dict(resolve), hook_policy=MANAGER_POLICY,
                                                    report=lambda *report: self.reports.append(report)))
        super().__init__(self.cluster, manager, self.maps)

    # --- writing ---------------------------------------------------------------------------------

    def create(self, *objs: Obj) -> list[Obj]:
        return [self.cluster.create(obj) for obj in objs]

    def delete(self, kind: Kind, name: str, namespace: str = "default") -> None:
        self.cluster.delete(kind, ObjectKey(namespace, name))

    def edit(self, kind: Kind, name: str, change: Callable[[Obj], None], namespace: str = "default", *,
             status: bool = False) -> Obj:
        """Read, change and write an object (its status subresource with `status`), again on
        Conflict (the controllers write too)."""
        for _ in range(20):
            obj = self.get(kind, name, namespace)
            assert obj is not None, f"{kind.kind} {namespace}/{name} is gone"
            change(obj)
            try:
                return self.cluster.update_status(obj) if status else self.cluster.update(obj)
            except Conflict:
                continue
        raise AssertionError(f"could not update {kind.kind} {namespace}/{name}")

    # --- reading ---------------------------------------------------------------------------------

    def get(self, kind: Kind, name: str, namespace: str = "default") -> Obj | None:
        return self.cluster.get(kind, ObjectKey(namespace, name))

    def outputs(self, controller: str, kind: Kind = CONFIGMAP, namespace: str = "default") -> dict[str, Obj]:
        """The objects of `kind` carrying the controller label of MapController `controller`, by name."""
        return {obj["metadata"]["name"]: obj for obj in self.cluster.list(kind, namespace=namespace).items
                if obj["metadata"].get("labels", {}).get(CONTROLLER_LABEL) == controller}

    def output_names(self, controller: str, kind: Kind = CONFIGMAP) -> set[str]:
        return set(self.outputs(controller, kind))

    def status(self, parent: str = "bucket", namespace: str = "default") -> dict[str, Any]:
        found = self.get(BUCKET, parent, namespace)
        assert found is not None, f"Bucket {namespace}/{parent} is gone"
        status: dict[str, Any] = found.get("status") or {}
        return status

    def mapped(self, parent: str = "bucket", namespace: str = "default") -> dict[str, Any] | None:
        """The parent's `<controller>.mapctl.porchkit.dev/Mapped` condition, if it has one."""
        for condition in self.status(parent, namespace).get("conditions") or []:
            if str(condition.get("type")).endswith(MAPPED_SUFFIX):
                found: dict[str, Any] = condition
                return found
        return None

    # --- waiting ---------------------------------------------------------------------------------

    def horizon(self, instance: MapInstance, controller: Controller) -> float:
        """An input's key due within a clock-second is part of the reaction (an output's echo, a
        retry), a parent's within the status settle time (the status write an input pass asked for)."""
        return mapctl.instance.STATUS_SETTLE + 0.5 if controller is instance.parents else 1.0

    def activity(self, name: str) -> tuple[int, int]:
        return len(self.reports), pyhooks.CALLS.total()

    def wait_idle(self, name: str, quiet: float | None = None, *, what: str = "") -> None:
        """Wait until MapController `name` is idle and no pass or hook call has happened for `quiet` s
        (by default 0.1 s more than the watch lag; real time: with a FakeClock, step it instead)."""
        assert not isinstance(self.clock, FakeClock), "a fake clock does not move by itself: use step_until"
        super().wait_idle(name, self.lag + 0.1 if quiet is None else quiet, what=what or f"MapController {name}")

    def step_until(self, check: Callable[[], Any], *, limit: float, step: float = 0.25) -> float:
        """Advance the fake clock in steps until `check()` holds; the clock-seconds it took."""
        assert isinstance(self.clock, FakeClock), "step_until needs stage(clock=FakeClock())"
        return step_until(self.clock, check, limit=limit, step=step)

    def start(self, controller: Obj, *objs: Obj) -> None:
        """`prepare` the MapController and the Buckets among `objs`, then create the other objects,
        and wait until the MapController is idle.

        In this order each input is queued once, by its own watch. A MapController started over
        parents and inputs that exist already may queue an input twice (the replay of its watch,
        and the parent's first pass), and a second pass that runs before the cache has seen the
        first one's writes asks the hook again (see TestStaleCache in test_live.py)."""
        self.prepare(controller, *(obj for obj in objs if Kind.of(obj) == BUCKET))
        self.create(*(obj for obj in objs if Kind.of(obj) != BUCKET))
        self.wait_idle(controller["metadata"]["name"])

    def prepare(self, controller: Obj, *parents: Obj) -> None:
        """Create the MapController, then the parents, and wait until each parent's first pass is over."""
        name = controller["metadata"]["name"]
        self.create(controller)
        eventually(lambda: name in self.maps.running, WAIT)
        self.create(*parents)
        eventually(lambda: all(self.mapped(p["metadata"]["name"], p["metadata"]["namespace"]) for p in parents), WAIT)


@pytest.fixture
def stage(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Stage]]:
    """`stage(resolve={"host": "127.0.0.1:port"}, clock=FakeClock(), lag=0.3)`: a running Stage, stopped
    after the test; the python hooks' records start empty. An input pass asks for its parent's
    status write STATUS_SETTLE seconds later (instead of the production delay), so that tests
    see the status soon."""
    made: list[Stage] = []
    pyhooks.reset()
    monkeypatch.setattr(mapctl.instance, "STATUS_SETTLE", STATUS_SETTLE)

    def make(resolve: Mapping[str, str] | None = None, clock: Clock = SYSTEM_CLOCK, lag: float = 0.0) -> Stage:
        made.append(Stage(resolve or {}, clock, lag))
        return made[-1]

    yield make
    pyhooks.GATE.release()  # a test that failed midway must not leave hook threads waiting
    for each in made:
        each.close()
    pyhooks.reset()
