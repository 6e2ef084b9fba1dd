"""What the live tests of the hook controllers (tests/decorators, tests/mapctl) share: a stage.

`HookStage(cluster, manager, supervisor)` adds the supervisor's controller to the manager and
runs it on a thread, as `porchkit manager` does, until `close()`. It reads what the controllers
left (Events, metrics) and tells when an instance is idle: nothing queued, in hand or due within
`horizon(instance, controller)` seconds (1 unless a stage says otherwise); `wait_idle` waits until
it is, and until no reconcile and none of the stage's `activity` has happened for `quiet` seconds.
"""

from __future__ import annotations

import re
from collections.abc import Hashable
from typing import Any, Generic

from reconcile import Kind
from reconcile.cluster import Obj
from reconcile.controller import Controller
from reconcile.embedded import EmbeddedCluster
from reconcile.idle import busy
from reconcile.manager import Manager
from reconcile.supervisor import InstanceT, Supervisor
from tests.reconcile.support import Running
from tests.waiting import eventually, settled

EVENT = Kind("v1", "Event")
WAIT = 10.0  # seconds: the longest any test waits for a condition


class HookStage(Generic[InstanceT]):
    """See the module docstring."""

    def __init__(self, cluster: EmbeddedCluster, manager: Manager, supervisor: Supervisor[InstanceT]) -> None:
        self.cluster, self.manager, self.supervisor = cluster, manager, supervisor
        manager.add(supervisor.controller())
        self.running = Running(manager)

    def close(self) -> None:
        try:
            self.running.stop()
        finally:
            self.supervisor.stop_all()
            self.cluster.close()

    # --- reading the cluster -------------------------------------------------------------------

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

    # --- waiting ---------------------------------------------------------------------------------

    def horizon(self, instance: InstanceT, controller: Controller) -> float:
        """Seconds within which a key due is part of the reaction under way, not a later one."""
        return 1.0

    def activity(self, name: str) -> tuple[Hashable, ...]:
        """What moves while instance `name` works, besides the reconciles (hook calls, say)."""
        return ()

    def idle(self, name: str) -> bool:
        """True when the instance `name` runs and none of its controllers has a key queued, in
        hand or due within its horizon."""
        instance = self.supervisor.running.get(name)
        return instance is not None and not any(busy(c.queue, self.horizon(instance, c))
                                                for c in instance.controllers)

    def wait_idle(self, name: str, quiet: float = 0.2, *, what: str = "") -> None:
        """Wait until `name` is idle and no reconcile nor `activity` has happened for `quiet` s."""
        def state() -> tuple[Any, ...]:
            return (self.idle(name), self.metric("controller_runtime_reconcile_total"), *self.activity(name))
        eventually(lambda: settled(state, quiet, WAIT)[0], WAIT, interval=0, what=f"{what or name} to be idle")
