"""What the end-to-end tests of DecoratorControllers share: hook servers as processes, and a stage.

* `hook_server` (a fixture, tests.hookprocesses) starts a script of tests/decorators/hookservers
  as a separate `python3` process and gives its port; every process started is killed after the
  test.
* `stage` (a fixture) builds an `EmbeddedCluster` with the DecoratorController CRD and runs a
  manager with the DecoratorControllers' controller on it (`Decorators(manager, Options(...))`),
  as `porchkit manager --controllers decorator` does (with MANAGER_POLICY); it is stopped after
  the test.
* helpers to read what the controllers left on the cluster (Events, metrics), to wait until a
  decorator is idle (tests.hookstage, shared with tests/mapctl), and to edit an object despite
  conflicts.

Import the fixtures into a test module (`from tests.decorators.hooks_support import hook_server`)
to use them there.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from decorators.crds import decorator_controller_crd
from decorators.instance import DecoratorInstance, Options
from decorators.supervisor import Decorators
from reconcile import Conflict, Kind, ObjectKey
from reconcile.cluster import Obj
from reconcile.embedded import EmbeddedCluster
from reconcile.events import EventRecorder
from reconcile.hooks import HookPolicy
from reconcile.manager import Manager
from tests.hookprocesses import HookServer, hook_servers
from tests.hookstage import WAIT, HookStage
from tests.waiting import eventually, settled

HOOKSERVERS = Path(__file__).resolve().parent / "hookservers"
DECORATOR_CONTROLLER = Kind("metacontroller.k8s.io/v1alpha1", "DecoratorController")
# What the stage's manager lets hooks do, as `porchkit manager --python-hooks
# tests.decorators.pyhooks,decorators.examples --secret-namespaces default` would.
MANAGER_POLICY = HookPolicy.for_manager(["tests.decorators.pyhooks", "decorators.examples"], ["default"])

__all__ = ["DECORATOR_CONTROLLER", "WAIT", "HookServer", "Stage", "closed_port", "decorator_controller",
           "eventually", "hook_server", "settled", "stage"]


hook_server = hook_servers(HOOKSERVERS)


class Stage(HookStage[DecoratorInstance]):
    """An embedded cluster (DecoratorController CRD installed) and a manager running the
    DecoratorControllers on it, on a thread; `resolve` points webhook hosts at local servers.
    `cluster`, when given, is the (empty) embedded cluster to use."""

    def __init__(self, resolve: Mapping[str, str], cluster: EmbeddedCluster | None = None) -> None:
        cluster = cluster if cluster is not None else EmbeddedCluster()
        cluster.create(decorator_controller_crd())
        manager = Manager(cluster, events=EventRecorder(cluster, "porchkit-decorators"), grace_period=5.0)
        self.decorators = Decorators(manager, Options(resolve=dict(resolve), hook_policy=MANAGER_POLICY))
        super().__init__(cluster, manager, self.decorators)

    def get(self, kind: Kind, name: str, namespace: str = "") -> Obj | None:
        return self.cluster.get(kind, ObjectKey(namespace, name))

    def activity(self, name: str) -> tuple[float]:
        return (self.metric("porchkit_hook_requests_total", controller=name),)

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
