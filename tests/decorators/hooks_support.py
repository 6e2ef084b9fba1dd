"""What the end-to-end tests of DecoratorControllers share: hook servers as processes, and a stage.

* `hook_server` (a fixture) starts a script of tests/decorators/hookservers as a separate
  `python3` process and gives its port (the script prints it on its first line); every process
  started is killed after the test.
* `stage` (a fixture) builds an `EmbeddedCluster` with the DecoratorController CRD and runs a
  manager with the DecoratorControllers' controller on it (`Decorators(manager, Options(...))`),
  as `porchkit manager --controllers decorator` does (with MANAGER_POLICY); it is stopped after
  the test.
* helpers to read what the controllers left on the cluster (Events, metrics), to wait until a
  decorator is idle, and to edit an object despite conflicts.

Import the fixtures into a test module (`from tests.decorators.hooks_support import hook_server`)
to use them there.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from decorators.crds import decorator_controller_crd
from decorators.instance import Options
from decorators.supervisor import Decorators
from reconcile import Conflict, Kind, ObjectKey
from reconcile.cluster import Obj
from reconcile.embedded import EmbeddedCluster
from reconcile.events import EventRecorder
from reconcile.hooks import HookPolicy
from reconcile.manager import Manager
from tests.reconcile.support import Running, ScriptProcesses
from tests.waiting import eventually, settled

HOOKSERVERS = Path(__file__).resolve().parent / "hookservers"
DECORATOR_CONTROLLER = Kind("metacontroller.k8s.io/v1alpha1", "DecoratorController")
EVENT = Kind("v1", "Event")
WAIT = 10.0  # seconds: the longest any test waits for a condition
# What the stage's manager lets hooks do, as `porchkit manager --python-hooks
# tests.decorators.pyhooks,decorators.examples --secret-namespaces default` would.
MANAGER_POLICY = HookPolicy.for_manager(["tests.decorators.pyhooks", "decorators.examples"], ["default"])

__all__ = ["DECORATOR_CONTROLLER", "WAIT", "HookServer", "Stage", "closed_port", "decorator_controller",
           "eventually", "hook_server", "settled", "stage"]


@dataclass(frozen=True)
class HookServer:
    """A hook script running as a process of its own on 127.0.0.1:`port`."""

    script: str
    port: int
    process: subprocess.Popen[str]

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def calls(self) -> dict[str, dict[str, list[float]]]:
        """faulty.py only: path -> "ns/name" -> the time.monotonic() of each call."""
        with urllib.request.urlopen(f"http://{self.address}/calls", timeout=5) as answer:
            found: dict[str, dict[str, list[float]]] = json.loads(answer.read())
        return found

    def times(self, path: str, target: str) -> list[float]:
        """faulty.py only: when `target` ("ns/name") was called on `path`."""
        return self.calls().get(path, {}).get(target, [])


@pytest.fixture
def hook_server(tmp_path: Path) -> Iterator[Callable[[str], HookServer]]:
    """`start("faulty")` runs hookservers/faulty.py and returns it once it listens. Its stderr goes
    to `<tmp_path>/<script>.stderr` (a hook call the controller gives up on is a broken pipe there)."""
    processes = ScriptProcesses(tmp_path)

    def start(script: str) -> HookServer:
        port, process = processes.start(HOOKSERVERS / f"{script}.py")
        return HookServer(script, port, process)

    yield start
    processes.stop()


class Stage:
    """An embedded cluster (DecoratorController CRD installed) and a manager running the
    DecoratorControllers on it, on a thread; `resolve` points webhook hosts at local servers.
    `cluster`, when given, is the (empty) embedded cluster to use."""

    def __init__(self, resolve: Mapping[str, str], cluster: EmbeddedCluster | None = None) -> None:
        self.cluster = cluster if cluster is not None else EmbeddedCluster()
        self.cluster.create(decorator_controller_crd())
        self.manager = Manager(self.cluster, events=EventRecorder(self.cluster, "porchkit-decorators"),
                               grace_period=5.0)
        self.decorators = Decorators(self.manager, Options(resolve=dict(resolve), hook_policy=MANAGER_POLICY))
        self.manager.add(self.decorators.controller())
        self.running = Running(self.manager)

    def close(self) -> None:
        try:
            self.running.stop()
        finally:
            self.decorators.stop_all()
            self.cluster.close()

    # --- reading the cluster -------------------------------------------------------------------

    def get(self, kind: Kind, name: str, namespace: str = "") -> Obj | None:
        return self.cluster.get(kind, ObjectKey(namespace, name))

    def events(self, name: str, reason: str, namespace: str = "default") -> list[Obj]:
        """The Events recorded about the object `name` (cluster-scoped objects' go to `default`)."""
        return [event for event in self.cluster.list(EVENT, namespace=namespace).items
                if event["involvedObject"].get("name") == name and event.get("reason") == reason]

    def metric(self, series: str, /, **labels: str) -> float:
        """The sum of the samples of `series` whose labels include `labels` (0 when there is none)."""
        total = 0.0
        for line in self.manager.metrics.render().splitlines():
            found = re.fullmatch(rf"{re.escape(series)}\{{(.*)\}} (\S+)", line)
            if found and labels.items() <= dict(re.findall(r'(\w+)="([^"]*)"', found.group(1))).items():
                total += float(found.group(2))
        return total

    def idle(self, decorator: str) -> bool:
        """True when no controller of `decorator` has a key queued, due soon, or in hand."""
        instance = self.decorators.running.get(decorator)
        return instance is not None and not any(
            len(c.queue) or c.queue.in_flight() or ((due := c.queue.next_due()) is not None and due < 1.0)
            for c in instance.controllers)

    def wait_idle(self, decorator: str, quiet: float = 0.2) -> None:
        """Wait until `decorator` is idle and no reconcile or hook call has happened for `quiet` s."""
        def state() -> tuple[bool, float, float]:
            return (self.idle(decorator), self.metric("porchkit_hook_requests_total", controller=decorator),
                    self.metric("controller_runtime_reconcile_total"))
        eventually(lambda: settled(state, quiet, WAIT)[0], WAIT, interval=0, what=f"{decorator} to be idle")

    # --- writing ---------------------------------------------------------------------------------

    def edit(self, kind: Kind, name: str, change: Callable[[Obj], None], namespace: str = "") -> Obj:
        """Read, change and update an object, again on Conflict (the controllers write too)."""
        for _ in range(20):
            obj = self.get(kind, name, namespace)
            assert obj is not None, f"{kind.kind} {namespace}/{name} is gone"
            change(obj)
            try:
                return self.cluster.update(obj)
            except Conflict:  # a controller wrote meanwhile
                continue
        raise AssertionError(f"could not update {kind.kind} {namespace}/{name}")


@pytest.fixture
def stage() -> Iterator[Callable[..., Stage]]:
    """`stage(resolve={"host": "127.0.0.1:port"}, cluster=...)`: a running Stage, stopped after the test."""
    made: list[Stage] = []

    def make(resolve: Mapping[str, str] | None = None, cluster: EmbeddedCluster | None = None) -> Stage:
        made.append(Stage(resolve or {}, cluster))
        return made[-1]

    yield make
    for each in made:
        each.close()


def decorator_controller(name: str, *, resources: list[dict[str, Any]], hooks: dict[str, Any],
                         attachments: list[dict[str, Any]] | None = None, **spec: Any) -> Obj:
    """A DecoratorController object; `spec` adds fields such as resyncPeriodSeconds."""
    return {"apiVersion": DECORATOR_CONTROLLER.api_version, "kind": DECORATOR_CONTROLLER.kind,
            "metadata": {"name": name},
            "spec": {"resources": resources, "attachments": attachments or [], "hooks": hooks, **spec}}


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port
