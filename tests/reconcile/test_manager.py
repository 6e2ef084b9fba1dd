"""The manager: shared informers, start after sync, graceful stop, leader hand-over, SIGTERM, its CLI.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from porchkit import cli
from reconcile import FakeClock, Kind, ObjectKey
from reconcile.controller import Controller
from reconcile.embedded import EmbeddedCluster
from reconcile.leaderelection import LEASE
from reconcile.manager import LeaderElection, Manager
from reconcile.outcome import Done
from tests.reconcile.support import (
    GatedLists,
    Partitioned,
    Running,
    configmap,
    manager_process,
)
from tests.waiting import blocked, eventually, step_until

CONFIGMAP = Kind("v1", "ConfigMap")
SECRET = Kind("v1", "Secret")
ELECTION = LeaderElection(namespace="default", name="porchkit-test")


# --- wiring and start-up ---------------------------------------------------------------------------


def recorder(clock: FakeClock, name: str = "cm", seen: list[ObjectKey] | None = None,
             kind: Kind = CONFIGMAP) -> tuple[Controller, list[ObjectKey]]:
    """A controller that records each key it reconciles."""
    keys: list[ObjectKey] = [] if seen is None else seen
    return Controller(name, kind, lambda key: keys.append(key) or Done(), clock=clock), keys


def test_controllers_watching_one_kind_share_one_informer(cluster: EmbeddedCluster, clock: FakeClock,
                                                          run: Callable[[Manager], Running]) -> None:
    manager = Manager(cluster, clock=clock)
    first, first_seen = recorder(clock, "first")
    second, second_seen = recorder(clock, "second")
    manager.add(first)
    manager.add(second)
    run(manager)
    cluster.create(configmap("a"))
    eventually(lambda: first_seen and second_seen)
    assert [str(informer.kind) for informer in manager.cache.informers] == ["ConfigMap"]
    assert manager.state == "running" and manager.leading


def test_workers_start_only_once_every_cache_has_synced(cluster: EmbeddedCluster, clock: FakeClock,
                                                        run: Callable[[Manager], Running]) -> None:
    cluster.create(configmap("a"))
    gated = GatedLists(cluster)
    manager = Manager(gated, clock=clock)  # type: ignore[arg-type]
    controller, seen = recorder(clock)
    manager.add(controller)
    assert blocked(run(manager).thread)  # waiting for the cache, not on its way to it
    assert manager.state == "syncing" and seen == [] and manager.unsynced() == ["ConfigMap"]
    gated.release()
    eventually(lambda: seen == [ObjectKey("default", "a")])
    assert manager.state == "running"


def test_caches_that_do_not_sync_in_time_end_the_run_with_status_1(cluster: EmbeddedCluster, clock: FakeClock,
                                                                   run: Callable[[Manager], Running]) -> None:
    gated = GatedLists(cluster)
    manager = Manager(gated, clock=clock, sync_timeout=60)  # type: ignore[arg-type]
    manager.add(recorder(clock)[0])
    running = run(manager)
    assert blocked(running.thread)  # its sync deadline is set: the clock may move
    assert manager.ready() == "informer caches not synced yet: ConfigMap"
    clock.advance(61)
    try:
        eventually(lambda: manager.state != "syncing")
    finally:
        gated.release(fail=True)  # the list never answers: let the informer's thread end
    assert running.wait() == 1


def test_a_controller_is_refused_twice_by_name_with_another_clock_or_once_stopping(
        cluster: EmbeddedCluster, clock: FakeClock, run: Callable[[Manager], Running]) -> None:
    manager = Manager(cluster, clock=clock)
    manager.add(recorder(clock)[0])
    with pytest.raises(ValueError, match="already added"):
        manager.add(recorder(clock)[0])
    with pytest.raises(ValueError, match="another clock"):
        manager.add(recorder(FakeClock(), "other")[0])
    running = run(manager)
    eventually(lambda: manager.state == "running")
    with pytest.raises(ValueError, match="already added"):
        manager.add(recorder(clock)[0])
    manager.stop()
    assert running.wait() == 0
    with pytest.raises(RuntimeError, match="stopping"):
        manager.add(recorder(clock, "late")[0])


def test_a_controller_added_while_running_starts_on_every_cached_object_and_new_changes(
        cluster: EmbeddedCluster, clock: FakeClock, run: Callable[[Manager], Running]) -> None:
    cluster.create(configmap("before"))
    manager = Manager(cluster, clock=clock)
    manager.add(recorder(clock, "first")[0])
    run(manager)
    eventually(lambda: manager.state == "running")
    late, seen = recorder(clock, "late", kind=SECRET)  # a kind no informer watched yet
    watching, seen_too = recorder(clock, "late-cm")
    manager.add(late)
    manager.add(watching)
    eventually(lambda: seen_too == [ObjectKey("default", "before")])
    cluster.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "default"}})
    cluster.create(configmap("after"))
    eventually(lambda: seen == [ObjectKey("default", "s")] and ObjectKey("default", "after") in seen_too)
    assert [c.name for c in manager.controllers] == ["first", "late", "late-cm"]


def test_a_removed_controller_finishes_its_reconcile_in_flight_and_sees_no_more_changes(
        cluster: EmbeddedCluster, clock: FakeClock, run: Callable[[Manager], Running]) -> None:
    entered, release = threading.Event(), threading.Event()
    seen: list[ObjectKey] = []

    def slow(key: ObjectKey) -> Done:
        seen.append(key)
        entered.set()
        release.wait(5)
        return Done()

    manager = Manager(cluster, clock=clock)
    controller = Controller("slow", CONFIGMAP, slow, clock=clock)
    manager.add(controller)
    run(manager)
    cluster.create(configmap("a"))
    assert entered.wait(5)
    removed: list[bool] = []
    remover = threading.Thread(target=lambda: removed.append(manager.remove(controller)))
    remover.start()
    assert blocked(remover) and removed == []  # waits for the reconcile in flight
    release.set()
    remover.join(5)
    assert removed == [True] and manager.controllers == []
    cluster.create(configmap("b"))
    other, other_seen = recorder(clock, "other")
    manager.add(other)
    eventually(lambda: ObjectKey("default", "b") in other_seen)
    assert seen == [ObjectKey("default", "a")]
    [informer] = manager.cache.informers
    assert len(informer._handlers) == 1  # the removed controller's handler is gone, the new one's is there


def test_running_a_manager_a_second_time_is_refused_and_leaves_the_first_run_going(
        cluster: EmbeddedCluster, clock: FakeClock, run: Callable[[Manager], Running]) -> None:
    manager = Manager(cluster, clock=clock)
    controller, seen = recorder(clock)
    manager.add(controller)
    run(manager)
    eventually(lambda: manager.state == "running")
    with pytest.raises(RuntimeError, match="runs only once"):
        manager.run()
    assert manager.state == "running"
    cluster.create(configmap("after"))
    eventually(lambda: ObjectKey("default", "after") in seen)


# --- stopping -------------------------------------------------------------------------------------

def blocking_controller(clock: FakeClock) -> tuple[Controller, threading.Event, threading.Event, list[str]]:
    """A controller whose reconcile signals `entered`, then waits for `release`."""
    entered, release, finished = threading.Event(), threading.Event(), []

    def reconcile(key: ObjectKey) -> Done:
        entered.set()
        release.wait(10)
        finished.append(key.name)
        return Done()

    return Controller("slow", CONFIGMAP, reconcile, clock=clock), entered, release, finished


def test_stop_waits_for_the_reconcile_in_flight_then_returns_0(cluster: EmbeddedCluster, clock: FakeClock,
                                                               run: Callable[[Manager], Running]) -> None:
    controller, entered, release, finished = blocking_controller(clock)
    manager = Manager(cluster, clock=clock)
    manager.add(controller)
    running = run(manager)
    cluster.create(configmap("a"))
    assert entered.wait(5)
    manager.stop()
    eventually(lambda: manager.state == "stopping")
    assert blocked(running.thread)  # draining, not stopped
    cluster.create(configmap("b"))  # no new reconcile starts while stopping
    release.set()
    assert running.wait() == 0
    assert finished == ["a"] and manager.state == "stopped"


def test_a_reconcile_still_running_after_the_grace_period_makes_the_status_1(
        cluster: EmbeddedCluster, clock: FakeClock, run: Callable[[Manager], Running]) -> None:
    controller, entered, release, _ = blocking_controller(clock)
    manager = Manager(cluster, clock=clock, grace_period=30)
    manager.add(controller)
    running = run(manager)
    cluster.create(configmap("a"))
    assert entered.wait(5)
    manager.stop()
    try:
        step_until(clock, lambda: not running.thread.is_alive(), limit=40, step=1)
        assert running.wait() == 1
    finally:
        release.set()


def test_on_stop_callbacks_run_once_after_the_reconciles_in_flight_even_if_one_fails(
        cluster: EmbeddedCluster, clock: FakeClock, run: Callable[[Manager], Running],
        caplog: pytest.LogCaptureFixture) -> None:
    controller, entered, release, finished = blocking_controller(clock)
    manager = Manager(cluster, clock=clock)
    manager.add(controller)
    called: list[tuple[str, list[str], str]] = []

    def failing() -> None:
        called.append(("failing", list(finished), manager.state))
        raise RuntimeError("could not close")

    manager.on_stop(failing)
    manager.on_stop(lambda: called.append(("second", list(finished), manager.state)))
    running = run(manager)
    cluster.create(configmap("a"))
    assert entered.wait(5)
    manager.stop()
    eventually(lambda: manager.state == "stopping")
    assert blocked(running.thread) and called == []  # not while a reconcile is still in flight
    release.set()
    assert running.wait() == 0
    assert called == [("failing", ["a"], "stopping"), ("second", ["a"], "stopping")]
    assert "an on_stop callback failed" in caplog.text and manager.state == "stopped"


# --- leader election ------------------------------------------------------------------------------

def elected(cluster: Any, clock: FakeClock, identity: str) -> tuple[Manager, list[ObjectKey]]:
    manager = Manager(cluster, clock=clock, leader_election=LeaderElection(
        ELECTION.namespace, ELECTION.name, identity=identity))
    controller, seen = recorder(clock)
    manager.add(controller)
    return manager, seen


def holder(cluster: EmbeddedCluster) -> str:
    return str(lease_spec(cluster).get("holderIdentity") or "")


def renew_time(cluster: EmbeddedCluster) -> str:
    return str(lease_spec(cluster).get("renewTime") or "")


def lease_spec(cluster: EmbeddedCluster) -> dict[str, Any]:
    lease = cluster.get(LEASE, ObjectKey(ELECTION.namespace, ELECTION.name))
    return dict((lease or {}).get("spec") or {})


def test_of_two_managers_only_the_leader_reconciles_while_the_other_stands_by_warm(
        cluster: EmbeddedCluster, clock: FakeClock, run: Callable[[Manager], Running]) -> None:
    a, a_seen = elected(cluster, clock, "a")
    run(a)
    eventually(lambda: a.state == "running")
    b, b_seen = elected(cluster, clock, "b")
    run(b)
    eventually(lambda: b.state == "standby")
    cluster.create(configmap("x"))
    step_until(clock, lambda: a_seen, limit=5)
    eventually(lambda: len(b.cache.informers[0]) == 1)  # the standby's cache is kept warm
    renewed = renew_time(cluster)
    clock.advance(10)  # several renewals
    eventually(lambda: renew_time(cluster) != renewed)  # the leader has renewed since
    assert a_seen == [ObjectKey("default", "x")] and b_seen == []
    assert (a.leading, b.leading, holder(cluster)) == (True, False, "a")
    assert b.ready() is None  # a healthy standby is ready


def test_when_the_leader_stops_the_standby_takes_over_at_its_next_retry(
        cluster: EmbeddedCluster, clock: FakeClock, run: Callable[[Manager], Running]) -> None:
    a, _ = elected(cluster, clock, "a")
    a_run = run(a)
    eventually(lambda: a.state == "running")
    b, b_seen = elected(cluster, clock, "b")
    run(b)
    eventually(lambda: b.state == "standby")
    cluster.create(configmap("x"))
    assert a_run.stop() == 0
    assert holder(cluster) == ""  # released on the way out
    took = step_until(clock, lambda: b.state == "running", limit=ELECTION.lease_duration)
    assert took <= ELECTION.retry_period + 0.5
    step_until(clock, lambda: b_seen, limit=5)
    assert holder(cluster) == "b"


def test_when_the_leader_stops_renewing_it_steps_down_and_the_standby_takes_over_after_expiry(
        cluster: EmbeddedCluster, clock: FakeClock, run: Callable[[Manager], Running]) -> None:
    partitioned = Partitioned(cluster)
    a, a_seen = elected(partitioned, clock, "a")
    a_run = run(a)
    eventually(lambda: a.state == "running")
    b, b_seen = elected(cluster, clock, "b")
    run(b)
    eventually(lambda: b.state == "standby")
    partitioned.cut()  # a's renewals fail from now on; the Lease still names it
    a_stopped_at: list[float] = []

    def a_has_stopped() -> bool:
        if not a_run.thread.is_alive() and not a_stopped_at:
            a_stopped_at.append(clock.monotonic())
        return bool(a_stopped_at)

    start = clock.monotonic()
    took = step_until(clock, lambda: a_has_stopped() and b.state == "running",
                      limit=ELECTION.lease_duration + 2 * ELECTION.retry_period)
    assert a_run.wait() == 1  # lost leadership: the process must exit
    assert a_stopped_at[0] - start <= ELECTION.renew_deadline + ELECTION.retry_period
    assert took <= ELECTION.lease_duration + ELECTION.retry_period
    assert holder(cluster) == "b"
    cluster.create(configmap("after"))
    step_until(clock, lambda: ObjectKey("default", "after") in b_seen, limit=5)
    assert ObjectKey("default", "after") not in a_seen


# --- the process: SIGTERM and the command line -------------------------------------------------------

def test_sigterm_lets_the_reconcile_in_flight_finish_releases_the_lease_and_exits_0(tmp_path: Path) -> None:
    with EmbeddedCluster(persist_to=tmp_path) as seed:
        seed.create(configmap("slow-one"))
    process = manager_process("--leader-elect", state=tmp_path)
    watchdog = threading.Timer(30, process.kill)  # never hang the suite on a stuck child
    watchdog.start()
    try:
        assert process.stdout is not None
        first = process.stdout.readline()  # blocks until the reconcile has started
        assert first.strip() == "started default/slow-one", process.stderr.read() if process.stderr else ""
        signalled = time.monotonic()
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=15)
    finally:
        watchdog.cancel()
        watchdog.join()
        process.kill()
        process.wait()
    assert process.returncode == 0, err
    assert out.strip().splitlines() == ["finished default/slow-one"]
    assert time.monotonic() - signalled < 10
    assert "received SIGTERM" in err
    with EmbeddedCluster(persist_to=tmp_path) as after:
        lease = after.get(LEASE, ObjectKey("default", "porchkit-manager"))
        assert lease is not None and lease["spec"]["holderIdentity"] == ""


@pytest.fixture(name="slow_controller_known")
def slow_controller_known_fixture() -> Iterator[None]:
    """`porchkit manager` knows the `slow` test controller; the root logger is restored afterwards."""
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    cli.CONTROLLERS["slow"] = "tests.reconcile.manager_script:slow_controllers"
    yield
    del cli.CONTROLLERS["slow"]
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.mark.parametrize(("argv", "message"), [
    (["--controllers", "nope", "--embedded"],
     "unknown controller 'nope' (available: approval, decorator, map, packagevariant, packagevariantset)"),
    (["--controllers", ",", "--embedded"],
     "no controllers to run (available: approval, decorator, map, packagevariant, packagevariantset)"),
    (["--state", "somewhere"], "--state keeps the embedded API server's objects: it needs --embedded"),
    (["--embedded", "--context", "kind"], "--embedded runs its own API server"),
    (["--leader-election-namespace", "x"], "--leader-election-namespace needs --leader-elect"),
])
def test_a_bad_manager_flag_is_one_line_on_stderr_and_status_1(argv: list[str], message: str,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["manager", *argv]) == 1
    err = capsys.readouterr().err
    assert err.startswith("porchkit: ") and message in err and err.count("\n") == 1


@pytest.mark.usefixtures("slow_controller_known")
def test_a_bad_health_address_is_refused_before_anything_starts(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["manager", "--embedded", "--health-addr", "localhost"]) == 1
    assert capsys.readouterr().err == "porchkit: --health-addr: bad address 'localhost': expected host:port or :port\n"


@pytest.mark.usefixtures("slow_controller_known")
def test_an_unusable_kubeconfig_is_one_line_on_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "kubeconfig"
    assert cli.main(["manager", "--controllers", "slow", "--kubeconfig", str(missing)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[-1].startswith(f"porchkit: kubeconfig {missing}")
