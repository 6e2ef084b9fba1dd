"""Fencing and contention: a replica that cannot prove it holds its Lease starts no reconcile and
sends no write, and every 409 Conflict a reconcile's write gets is counted and logged.

Time is a FakeClock. A jump past the renew deadline is what a process resumed from SIGSTOP (or
a long pause) sees: nothing has run meanwhile, not even the elector's next renewal attempt, so
whatever the workers do next must be decided by the time alone. Writes are checked through both
backends: EmbeddedCluster, and KubeCluster over HTTP to an embedded server (tests/reconcile/apiserver.py).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from reconcile import FakeClock, Kind, ObjectKey, fencing
from reconcile.cluster import Cluster
from reconcile.controller import ERROR, FENCED, SUCCESS, Controller
from reconcile.embedded import EmbeddedCluster
from reconcile.errors import AlreadyExists, Conflict, NotLeading
from reconcile.events import EVENT, EventRecorder
from reconcile.fencing import LeaseFence
from reconcile.leaderelection import LEASE, LeaderElector
from reconcile.manager import LeaderElection, Manager
from reconcile.metrics import Metrics
from reconcile.outcome import Done
from tests.reconcile.support import Running, configmap
from tests.waiting import eventually, step_until

CONFIGMAP = Kind("v1", "ConfigMap")
NAMESPACE = Kind("v1", "Namespace")
A, X = ObjectKey("default", "a"), ObjectKey("default", "x")
ELECTION = LeaderElection(namespace="default", name="fence-test", identity="a")


@dataclass
class Backend:
    """The cluster a controller writes through, and the embedded server that holds the state."""

    cluster: Cluster
    embedded: EmbeddedCluster

    def revision(self) -> int:
        return int(self.embedded.list(CONFIGMAP).resource_version)


@pytest.fixture(params=["embedded", "kube-http"])
def backend(request: pytest.FixtureRequest, clock: FakeClock, tmp_path: Path) -> Iterator[Backend]:
    with EmbeddedCluster(clock=clock) as embedded:
        if request.param == "embedded":
            yield Backend(embedded, embedded)
            return
        from reconcile.kube import KubeCluster
        from tests.reconcile.apiserver import ApiServer, write_kubeconfig

        with ApiServer(embedded, token="t") as api:
            kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", api.url, token="t")
            with KubeCluster.from_kubeconfig(kubeconfig) as kube:
                yield Backend(kube, embedded)


def leader(cluster: Cluster, clock: FakeClock) -> LeaderElector:
    """An elector that has just taken the Lease, by hand: its loop never runs."""
    elector = LeaderElector(cluster, ELECTION.name, ELECTION.namespace, ELECTION.identity, clock=clock)
    assert elector.try_acquire_or_renew()
    return elector


# --- the fence, by hand -------------------------------------------------------------------------------


def test_no_reconcile_starts_once_the_renew_deadline_has_passed_since_the_last_renewal(
        cluster: EmbeddedCluster, clock: FakeClock) -> None:
    elector = leader(cluster, clock)
    seen: list[ObjectKey] = []

    def reconcile(key: ObjectKey) -> Done:
        seen.append(key)
        return Done()

    controller = Controller("cm", CONFIGMAP, reconcile, clock=clock, fence=LeaseFence(elector))
    clock.advance(elector.renew_deadline - 0.5)
    assert controller.process(X) == SUCCESS
    clock.advance(0.5)  # the renew deadline, and no renewal: the elector's loop never even ran
    assert controller.process(X) == FENCED
    assert seen == [X]
    assert controller.queue.num_requeues(X) == 1  # put back with back-off, not dropped
    assert elector.try_acquire_or_renew()  # a renewal opens the fence again
    assert controller.process(X) == SUCCESS and seen == [X, X]


WRITES: dict[str, Callable[[Cluster], Any]] = {
    "create": lambda c: c.create(configmap("new")),
    "update": lambda c: c.update({**(c.get(CONFIGMAP, A) or {}), "data": {"k": "2"}}),
    "update_status": lambda c: c.update_status({**(c.get(NAMESPACE, ObjectKey("", "default")) or {}),
                                                "status": {"phase": "Active"}}),
    "patch": lambda c: c.patch(CONFIGMAP, A, {"data": {"k": "2"}}),
    "apply": lambda c: c.apply(configmap("a", k="2"), field_manager="test"),
    "delete": lambda c: c.delete(CONFIGMAP, A),
}


@pytest.mark.parametrize("verb", WRITES)
def test_a_write_of_a_reconcile_paused_past_the_renew_deadline_is_refused_and_never_sent(
        backend: Backend, clock: FakeClock, verb: str) -> None:
    backend.embedded.create(configmap("a", k="1"))
    elector = leader(backend.embedded, clock)
    raised: list[Exception] = []

    def reconcile(key: ObjectKey) -> Done:
        clock.advance(elector.renew_deadline)  # the process stops here, and resumes this much later
        try:
            WRITES[verb](backend.cluster)
        except Exception as err:
            raised.append(err)
            raise
        return Done()

    events = EventRecorder(backend.embedded, "test", clock=clock)
    controller = Controller("cm", CONFIGMAP, reconcile, clock=clock, fence=LeaseFence(elector), events=events)
    before = backend.revision()
    assert controller.process(A) == ERROR
    assert [type(err) for err in raised] == [NotLeading]
    assert "cannot prove it still holds it" in str(raised[0])
    assert backend.revision() == before  # nothing written, not even a Warning Event
    assert backend.embedded.list(EVENT).items == []
    assert controller.queue.num_requeues(A) == 1


def test_the_guard_for_hooks_and_other_side_effects_follows_the_fence_of_the_running_reconcile(
        cluster: EmbeddedCluster, clock: FakeClock) -> None:
    elector = leader(cluster, clock)
    outcomes: list[str] = []

    def reconcile(key: ObjectKey) -> Done:
        fencing.check()  # a hook calls this right before each call
        outcomes.append("called")
        clock.advance(elector.renew_deadline)
        try:
            fencing.check()
        except NotLeading:
            outcomes.append("refused")
        return Done()

    Controller("cm", CONFIGMAP, reconcile, clock=clock, fence=LeaseFence(elector)).process(X)
    assert outcomes == ["called", "refused"]
    fencing.check()  # outside any reconcile, nothing is fenced


# --- a manager whose renewals stop ---------------------------------------------------------------------


class StuckLease:
    """The cluster, with Lease requests hanging while `stuck` (a network that stopped answering:
    the elector cannot learn anything before its requests time out)."""

    def __init__(self, cluster: EmbeddedCluster) -> None:
        self.cluster, self.stuck, self.answer = cluster, threading.Event(), threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cluster, name)

    def _wait(self, kind: Kind) -> None:
        if kind == LEASE and self.stuck.is_set():
            self.answer.wait(10)

    def get(self, kind: Kind, key: ObjectKey) -> Any:
        self._wait(kind)
        return self.cluster.get(kind, key)

    def update(self, obj: dict[str, Any]) -> Any:
        self._wait(Kind.of(obj))
        return self.cluster.update(obj)


def test_a_leader_past_its_renew_deadline_writes_nothing_and_starts_nothing_before_its_elector_notices(
        cluster: EmbeddedCluster, clock: FakeClock, run: Callable[[Manager], Running]) -> None:
    lease = StuckLease(cluster)
    entered, resume = threading.Event(), threading.Event()
    seen: list[ObjectKey] = []
    refused: list[Exception] = []

    def reconcile(key: ObjectKey) -> Done:
        seen.append(key)
        if key == X:
            entered.set()
            resume.wait(10)
            try:
                cluster.create(configmap("written-by-x"))
            except NotLeading as err:
                refused.append(err)
                raise
        return Done()

    manager = Manager(lease, clock=clock, leader_election=ELECTION,
                      events=EventRecorder(cluster, "test", clock=clock))
    controller = Controller("cm", CONFIGMAP, reconcile, clock=clock)
    manager.add(controller)
    running = run(manager)
    try:
        eventually(lambda: manager.state == "running")
        cluster.create(configmap("x"))
        assert entered.wait(5)
        lease.stuck.set()  # from now on the elector learns nothing
        clock.advance(ELECTION.renew_deadline)  # the pause: past the renew deadline in one step
        resume.set()
        eventually(lambda: refused)  # the write in flight was refused
        cluster.create(configmap("y"))
        eventually(lambda: controller.queue.num_requeues(ObjectKey("default", "y")) >= 1)  # handed out, put back
        assert ObjectKey("default", "y") not in seen  # ... without a reconcile
        assert running.thread.is_alive()  # all of this before the manager stopped
        step_until(clock, lambda: not running.thread.is_alive(), limit=2 * ELECTION.retry_period)
    finally:
        lease.answer.set()
    assert running.wait() == 1
    assert cluster.get(CONFIGMAP, ObjectKey("default", "written-by-x")) is None
    assert cluster.list(EVENT).items == []


@contextlib.contextmanager
def leading_a(cluster: EmbeddedCluster, clock: FakeClock) -> Iterator[tuple[StuckLease, threading.Thread, list[bool]]]:
    """Elector `a` running on a thread through a StuckLease, once it leads: yields the lease, the
    thread, and what its `run` returned (once the thread ends). Afterwards the lease answers again
    and the elector is stopped and joined."""
    lease = StuckLease(cluster)
    a = LeaderElector(lease, ELECTION.name, ELECTION.namespace, "a", clock=clock)
    stop, started = threading.Event(), threading.Event()
    outcome: list[bool] = []
    loop = threading.Thread(target=lambda: outcome.append(a.run(stop, started.set, lambda: None)))
    loop.start()
    try:
        assert started.wait(5)
        yield lease, loop, outcome
    finally:
        lease.answer.set()
        stop.set()
        a.wake()
        loop.join(5)


def test_the_lost_leadership_line_names_the_replica_that_took_over(
        cluster: EmbeddedCluster, clock: FakeClock, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="porchkit.leaderelection")
    with leading_a(cluster, clock) as (lease, loop, outcome):
        lease.stuck.set()  # a is paused: it neither renews nor reads
        clock.advance(ELECTION.lease_duration + 1)  # long enough for the Lease to expire
        b = LeaderElector(cluster, ELECTION.name, ELECTION.namespace, "b", clock=clock)
        assert b.try_acquire_or_renew()
        lease.answer.set()  # a resumes
        loop.join(5)
    assert outcome == [True]
    assert "lease default/fence-test: a lost leadership to b" in caplog.text


def test_a_leader_that_cannot_read_the_lease_says_the_holder_is_unknown(
        cluster: EmbeddedCluster, clock: FakeClock, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="porchkit.leaderelection")
    with leading_a(cluster, clock) as (lease, loop, _):
        lease.stuck.set()
        step_until(clock, lambda: not loop.is_alive(), limit=ELECTION.renew_deadline + 2 * ELECTION.retry_period)
    assert ("a lost leadership: lease expired; holder unknown (not renewed within the 10s renew deadline; "
            "the Lease could not be read)") in caplog.text


# --- contention -------------------------------------------------------------------------------------


def conflicts(metrics: Metrics, controller: str = "cm", group: str = "", kind: str = "ConfigMap") -> float:
    value = metrics.registry.get_sample_value("porchkit_write_conflicts_total",
                                              {"controller": controller, "group": group, "kind": kind})
    return value or 0.0


def test_a_conflict_is_counted_once_and_logged_even_when_the_reconcile_swallows_it(
        backend: Backend, clock: FakeClock, caplog: pytest.LogCaptureFixture) -> None:
    backend.embedded.create(configmap("a", k="1"))

    def reconcile(key: ObjectKey) -> Done:
        read = backend.cluster.get(CONFIGMAP, key)
        assert read is not None
        backend.embedded.update({**read, "data": {"k": "by the other writer"}})  # between our read and write
        with contextlib.suppress(Conflict):  # as many helpers do: the next pass starts from a fresh read
            backend.cluster.update({**read, "data": {"k": "ours"}})
        with pytest.raises(AlreadyExists):
            backend.cluster.create(configmap("a"))  # a 409 too, but not contention: not counted
        return Done()

    metrics = Metrics()
    caplog.set_level(logging.DEBUG, logger="porchkit.fencing")
    assert Controller("cm", CONFIGMAP, reconcile, clock=clock, metrics=metrics).process(A) == SUCCESS
    assert conflicts(metrics) == 1
    [line] = [r.getMessage() for r in caplog.records if r.name == "porchkit.fencing"]
    assert line == "write conflict: controller cm, ConfigMap default/a: another writer changed it first (409 Conflict)"


def test_every_conflict_with_a_second_writer_updating_the_same_targets_is_counted(
        cluster: EmbeddedCluster, clock: FakeClock, run: Callable[[Manager], Running]) -> None:
    targets = [ObjectKey("default", f"t{i}") for i in range(3)]
    for key in targets:
        cluster.create(configmap(key.name, n="0"))
    seen_conflicts: list[ObjectKey] = []
    stop = threading.Event()

    def reconcile(key: ObjectKey) -> Done:
        current = cluster.get(CONFIGMAP, key)
        if current is None or current["data"].get("stamp") == current["data"]["n"]:
            return Done()
        stamped = {**current, "data": {**current["data"], "stamp": current["data"]["n"]}}
        try:
            cluster.update(stamped)
        except Conflict:
            seen_conflicts.append(key)
            raise  # retried with back-off
        return Done()

    def other_writer() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            for key in targets:
                cluster.patch(CONFIGMAP, key, {"data": {"n": str(n)}})

    manager = Manager(cluster, clock=clock)
    manager.add(Controller("cm", CONFIGMAP, reconcile, clock=clock, workers=2))
    running = run(manager)
    writer = threading.Thread(target=other_writer)
    writer.start()
    try:
        eventually(lambda: len(seen_conflicts) >= 5, timeout=30)
    finally:
        stop.set()
        writer.join()
    assert running.stop() == 0  # every reconcile has finished: nothing can be counted after this
    assert conflicts(manager.metrics) == len(seen_conflicts)
    assert "porchkit_write_conflicts_total{controller=\"cm\",group=\"\",kind=\"ConfigMap\"}" in manager.metrics.render()
