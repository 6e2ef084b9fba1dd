"""Leader election on a Lease: acquire, renew, expire, release, races, and the leading loop.

Single steps (`try_acquire_or_renew`) are driven by hand on a fake clock; the loop runs on a
thread. Hand-over between whole managers is in test_manager.py.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from reconcile import FakeClock, ObjectKey
from reconcile.embedded import EmbeddedCluster
from reconcile.errors import ServerError
from reconcile.fencing import LeaseFence
from reconcile.leaderelection import LEASE, LeaderElector, micro_time, parse_time
from tests.waiting import eventually, step_until

KEY = ObjectKey("default", "lock")


def candidate(cluster: Any, clock: FakeClock, identity: str) -> LeaderElector:
    return LeaderElector(cluster, KEY.name, KEY.namespace, identity, clock=clock)


def spec(cluster: EmbeddedCluster) -> dict[str, Any]:
    lease = cluster.get(LEASE, KEY)
    assert lease is not None
    return dict(lease["spec"])


def test_the_first_candidate_creates_the_lease_and_holds_it(cluster: EmbeddedCluster, clock: FakeClock) -> None:
    a = candidate(cluster, clock, "a")
    assert a.try_acquire_or_renew()
    held = spec(cluster)
    assert (held["holderIdentity"], held["leaseDurationSeconds"], held["leaseTransitions"]) == ("a", 15, 0)
    assert parse_time(held["renewTime"]) == clock.time() and a.observed_at == clock.monotonic()


def test_a_held_lease_is_not_taken_before_it_expires(cluster: EmbeddedCluster, clock: FakeClock) -> None:
    a, b = candidate(cluster, clock, "a"), candidate(cluster, clock, "b")
    assert a.try_acquire_or_renew()
    clock.advance(14.9)
    assert not b.try_acquire_or_renew()
    assert b.holder == "a" and spec(cluster)["holderIdentity"] == "a"


def test_an_expired_lease_is_taken_over_and_the_transition_counted(cluster: EmbeddedCluster,
                                                                   clock: FakeClock) -> None:
    a, b = candidate(cluster, clock, "a"), candidate(cluster, clock, "b")
    assert a.try_acquire_or_renew()
    clock.advance(15.1)
    assert b.try_acquire_or_renew()
    held = spec(cluster)
    assert (held["holderIdentity"], held["leaseTransitions"]) == ("b", 1)
    assert held["acquireTime"] == micro_time(clock.time())


def test_renewing_moves_renew_time_and_keeps_acquire_time(cluster: EmbeddedCluster, clock: FakeClock) -> None:
    a = candidate(cluster, clock, "a")
    assert a.try_acquire_or_renew()
    acquired = spec(cluster)["acquireTime"]
    clock.advance(2)
    assert a.try_acquire_or_renew()
    held = spec(cluster)
    assert held["acquireTime"] == acquired and held["renewTime"] == micro_time(clock.time())
    assert held["leaseTransitions"] == 0


def test_a_released_lease_is_taken_at_once_and_only_the_holder_can_release(cluster: EmbeddedCluster,
                                                                          clock: FakeClock) -> None:
    a, b = candidate(cluster, clock, "a"), candidate(cluster, clock, "b")
    assert a.try_acquire_or_renew()
    assert not b.release()
    assert a.release()
    assert spec(cluster)["holderIdentity"] == ""
    assert b.try_acquire_or_renew()  # no waiting for the 15 s
    assert spec(cluster)["holderIdentity"] == "b"


class Interleaved:
    """The cluster, running `meanwhile` once between a Lease read and the next write."""

    def __init__(self, cluster: EmbeddedCluster, meanwhile: Callable[[], Any]) -> None:
        self.cluster, self.meanwhile = cluster, meanwhile

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cluster, name)

    def update(self, obj: dict[str, Any]) -> Any:
        meanwhile, self.meanwhile = self.meanwhile, lambda: None
        meanwhile()
        return self.cluster.update(obj)


def test_of_two_candidates_racing_for_an_expired_lease_exactly_one_wins(cluster: EmbeddedCluster,
                                                                        clock: FakeClock) -> None:
    assert candidate(cluster, clock, "old").try_acquire_or_renew()
    clock.advance(16)
    b = candidate(cluster, clock, "b")
    b_won: list[bool] = []
    a = candidate(Interleaved(cluster, lambda: b_won.append(b.try_acquire_or_renew())), clock, "a")
    assert not a.try_acquire_or_renew()  # b wrote between a's read and a's write: a Conflict
    assert b_won == [True] and spec(cluster)["holderIdentity"] == "b"


def test_timings_that_cannot_work_are_refused(cluster: EmbeddedCluster) -> None:
    with pytest.raises(ValueError, match="lease_duration > renew_deadline > retry_period"):
        LeaderElector(cluster, "lock", "default", "a", lease_duration=10, renew_deadline=10)
    with pytest.raises(ValueError, match="identity"):
        LeaderElector(cluster, "lock", "default", "")


class Flaky:
    """The cluster, with Lease requests failing while `down`."""

    def __init__(self, cluster: EmbeddedCluster) -> None:
        self.cluster, self.down = cluster, False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cluster, name)

    def get(self, kind: Any, key: ObjectKey) -> Any:
        if self.down:
            raise ServerError("unreachable")
        return self.cluster.get(kind, key)


class Loop:
    """`elector.run` on a thread, recording the callbacks."""

    def __init__(self, elector: LeaderElector) -> None:
        self.elector, self.stop, self.events, self.lost = elector, threading.Event(), [], None
        self.thread = threading.Thread(target=self._run)
        self.thread.start()

    def _run(self) -> None:
        self.lost = self.elector.run(self.stop, lambda: self.events.append("started"),
                                     lambda: self.events.append("stopped"))

    def end(self) -> bool | None:
        self.stop.set()
        self.elector.wake()
        self.thread.join(5)
        assert not self.thread.is_alive()
        return self.lost


def test_a_leader_that_cannot_renew_for_the_renew_deadline_steps_down_without_releasing(
        cluster: EmbeddedCluster, clock: FakeClock) -> None:
    flaky = Flaky(cluster)
    loop = Loop(candidate(flaky, clock, "a"))
    try:
        eventually(lambda: loop.events == ["started"])
        flaky.down = True
        took = step_until(clock, lambda: not loop.thread.is_alive(), limit=15, step=0.5)
        assert 10 <= took <= 12.5  # renew_deadline, give or take a retry period
    finally:
        lost = loop.end()
    assert lost is True and loop.events == ["started", "stopped"]
    assert spec(cluster)["holderIdentity"] == "a"  # not released: it could not even reach the server


class Hanging:
    """The cluster, with Lease reads that block while `hang` is set (a request with no answer)."""

    def __init__(self, cluster: EmbeddedCluster) -> None:
        self.cluster, self.hang, self.answer = cluster, threading.Event(), threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cluster, name)

    def get(self, kind: Any, key: ObjectKey) -> Any:
        if self.hang.is_set():
            self.answer.wait(10)
        return self.cluster.get(kind, key)


def test_a_renewal_that_hangs_ends_leadership_at_the_renew_deadline_before_another_can_lead(
        cluster: EmbeddedCluster, clock: FakeClock) -> None:
    hanging = Hanging(cluster)
    elector = candidate(hanging, clock, "a")
    fence = LeaseFence(elector)
    loop = Loop(elector)
    try:
        eventually(lambda: loop.events == ["started"])
        hanging.hang.set()
        took = step_until(clock, lambda: not fence.holds(), limit=15, step=0.5)
        assert took == 10  # the renew deadline, not whenever the request returns
        took += step_until(clock, lambda: not loop.thread.is_alive(), limit=5, step=0.5)
        assert took <= 10 + 2 + 0.5  # then one retry period, at most, to read who holds the Lease for the log
        assert loop.events == ["started", "stopped"]
        assert not candidate(cluster, clock, "b").try_acquire_or_renew()  # the lease has not expired yet
    finally:
        hanging.answer.set()
        lost = loop.end()
    assert lost is True


def test_a_leader_whose_work_is_still_running_leaves_the_lease_to_expire(cluster: EmbeddedCluster,
                                                                          clock: FakeClock) -> None:
    elector, stop, events = candidate(cluster, clock, "a"), threading.Event(), []
    thread = threading.Thread(target=elector.run, args=(stop, lambda: events.append("started"), lambda: False))
    thread.start()
    eventually(lambda: events == ["started"])
    stop.set()
    elector.wake()
    thread.join(5)
    assert spec(cluster)["holderIdentity"] == "a"  # not released: a standby must wait for the expiry


def test_a_leader_that_sees_another_holder_steps_down_at_its_next_renewal(cluster: EmbeddedCluster,
                                                                          clock: FakeClock) -> None:
    loop = Loop(candidate(cluster, clock, "a"))
    try:
        eventually(lambda: loop.events == ["started"])
        lease = cluster.get(LEASE, KEY)
        assert lease is not None
        cluster.update({**lease, "spec": {**lease["spec"], "holderIdentity": "intruder"}})
        took = step_until(clock, lambda: not loop.thread.is_alive(), limit=5, step=0.5)
        assert took <= 2.5
    finally:
        lost = loop.end()
    assert lost is True and spec(cluster)["holderIdentity"] == "intruder"


def test_stopping_a_leader_releases_the_lease_after_its_stop_callback(cluster: EmbeddedCluster,
                                                                      clock: FakeClock) -> None:
    loop = Loop(candidate(cluster, clock, "a"))
    eventually(lambda: loop.events == ["started"])
    assert loop.end() is False
    assert loop.events == ["started", "stopped"] and spec(cluster)["holderIdentity"] == ""


def test_stopping_a_candidate_that_never_led_calls_no_callback(cluster: EmbeddedCluster, clock: FakeClock) -> None:
    assert candidate(cluster, clock, "a").try_acquire_or_renew()
    loop = Loop(candidate(cluster, clock, "b"))
    clock.advance(2)
    assert loop.end() is False
    assert loop.events == [] and spec(cluster)["holderIdentity"] == "a"


class Slow:
    """The cluster, with each Lease read taking `seconds` of the fake clock."""

    def __init__(self, cluster: EmbeddedCluster, clock: FakeClock, seconds: float) -> None:
        self.cluster, self.clock, self.seconds = cluster, clock, seconds

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cluster, name)

    def get(self, kind: Any, key: ObjectKey) -> Any:
        self.clock.advance(self.seconds)
        return self.cluster.get(kind, key)


def test_the_lease_is_provably_held_until_the_renew_deadline_after_the_start_of_the_last_renewal(
        cluster: EmbeddedCluster, clock: FakeClock) -> None:
    a = candidate(Slow(cluster, clock, 3), clock, "a")
    start = clock.monotonic()
    assert a.try_acquire_or_renew()
    # not from when the answer came, 3 s later: the other candidates count from the renewTime
    # stamped when the attempt started
    assert a.leading_until == start + a.renew_deadline
    assert parse_time(spec(cluster)["renewTime"]) == start
    assert a.release() and a.leading_until is None


def test_a_leader_that_sees_another_holder_stops_being_provably_leading_at_once(cluster: EmbeddedCluster,
                                                                                clock: FakeClock) -> None:
    a = candidate(cluster, clock, "a")
    assert a.try_acquire_or_renew() and a.leading_until is not None
    lease = cluster.get(LEASE, KEY)
    assert lease is not None
    cluster.update({**lease, "spec": {**lease["spec"], "holderIdentity": "intruder"}})
    assert not a.try_acquire_or_renew()
    assert a.leading_until is None
