"""The work queue keeps client-go's promises: fair, stingy, thread-safe, clean shutdown.

Time is a FakeClock wherever the queue's timing matters. Tests that prove a blocked thread is woken
use the system clock instead: there a missed wake-up hangs the thread, which the join timeout
reports, where a FakeClock's one-second safety poll would hide it.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from reconcile.clock import SYSTEM_CLOCK, FakeClock
from reconcile.cluster import ObjectKey
from reconcile.ratelimit import Bucket, ItemBackoff
from reconcile.workqueue import WorkQueue
from tests.waiting import blocked, eventually

JOIN = 5.0  # real seconds after which a thread that should have returned counts as hung


@pytest.fixture(autouse=True)
def no_leaked_threads() -> Iterator[None]:
    before = set(threading.enumerate())
    yield
    leaked = [t.name for t in threading.enumerate() if t not in before]
    assert not leaked, f"threads left running: {leaked}"


@pytest.fixture
def fake_clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def queue(fake_clock: FakeClock) -> WorkQueue[str]:
    return WorkQueue(name="test", clock=fake_clock, rate_limiter=ItemBackoff(first=1.0, cap=60.0))


class Background:
    """Runs fn() in a daemon thread and keeps what it returned."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.result: Any = "<still running>"
        self._thread = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self._thread.start()

    def _run(self, fn: Callable[[], Any]) -> None:
        self.result = fn()

    @property
    def blocked(self) -> bool:
        return blocked(self._thread)

    def join(self) -> Any:
        self._thread.join(JOIN)
        assert not self._thread.is_alive(), "the thread did not return"
        return self.result


# -- stingy: deduplication and per-key exclusivity


def test_adding_a_waiting_key_again_is_a_no_op(queue: WorkQueue[str]) -> None:
    for key in ("ns/a", "ns/b", "ns/a", "ns/a", "ns/b"):
        queue.add(key)
    assert len(queue) == 2
    assert queue.pop_ready() == ["ns/a", "ns/b"]


def test_a_key_being_processed_is_not_handed_out_again_before_done(queue: WorkQueue[str]) -> None:
    queue.add("ns/a")
    assert queue.get() == "ns/a"
    queue.add("ns/a")
    assert queue.pop_ready() == []
    assert queue.get(timeout=0) is None
    queue.done("ns/a")
    assert queue.pop_ready() == ["ns/a"]


def test_a_key_added_while_processing_comes_back_exactly_once_after_done(queue: WorkQueue[str]) -> None:
    queue.add("ns/a")
    assert queue.pop_ready() == ["ns/a"]
    for _ in range(5):
        queue.add("ns/a")
    queue.done("ns/a")
    assert queue.pop_ready() == ["ns/a"]
    queue.done("ns/a")
    assert queue.pop_ready() == []


def test_done_for_a_key_not_being_processed_raises(queue: WorkQueue[str]) -> None:
    with pytest.raises(ValueError, match="not being processed"):
        queue.done("ns/a")
    queue.add("ns/a")
    queue.done(queue.get() or "")
    with pytest.raises(ValueError):
        queue.done("ns/a")  # twice


def test_no_key_is_ever_processed_by_two_workers_at_once_and_no_add_is_lost() -> None:
    queue: WorkQueue[str] = WorkQueue(name="stress", clock=SYSTEM_CLOCK)
    keys = [f"ns/k{i}" for i in range(20)]
    record = threading.Lock()
    order = itertools.count()
    producing = threading.Event()
    active: Counter[str] = Counter()
    processed: Counter[str] = Counter()
    last_added: dict[str, int] = {}
    last_started: dict[str, int] = {}
    overlaps: list[str] = []
    adds = 0

    def note_add(key: str) -> None:
        nonlocal adds
        last_added[key], adds = next(order), adds + 1  # before the add itself: see the final assert

    def produce(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(2000):
            key = rng.choice(keys)
            with record:
                note_add(key)
            if rng.random() < 0.05:
                queue.add_after(key, rng.random() * 0.002)
            else:
                queue.add(key, low_priority=rng.random() < 0.3)

    def work(seed: int) -> None:
        rng = random.Random(seed)
        while (key := queue.get()) is not None:
            with record:
                active[key] += 1
                if active[key] > 1:
                    overlaps.append(key)
                last_started[key] = next(order)
                processed[key] += 1
                if producing.is_set() and rng.random() < 0.1:  # a reconcile that triggers itself
                    note_add(key)
                    queue.add(key)
            time.sleep(0)  # let other threads run while this key is "processing"
            with record:
                active[key] -= 1
            queue.done(key)

    producing.set()
    workers = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(8)]
    producers = [threading.Thread(target=produce, args=(100 + i,), daemon=True) for i in range(4)]
    for thread in workers + producers:
        thread.start()
    for thread in producers:
        thread.join(JOIN * 6)
    with record:
        producing.clear()  # from here on nothing adds, so the queue can only empty
    time.sleep(0.01)  # every add_after (at most 2 ms) is due
    eventually(lambda: not len(queue), JOIN * 6, interval=0.001)
    assert queue.shutdown(drain=True, timeout=JOIN)
    for thread in workers:
        thread.join(JOIN)
    assert not any(thread.is_alive() for thread in workers + producers)

    assert overlaps == []
    # A key's last add came before its last processing started (else that add was lost).
    assert {key: last_started.get(key, -1) > last_added[key] for key in last_added} == dict.fromkeys(last_added, True)
    assert sum(processed.values()) < adds  # and deduplication did happen


# -- fair: FIFO and priority


def test_ready_keys_are_served_first_in_first_out(queue: WorkQueue[str]) -> None:
    for key in ("ns/c", "ns/a", "ns/b"):
        queue.add(key)
    assert [queue.get(), queue.get(), queue.get()] == ["ns/c", "ns/a", "ns/b"]


def test_a_key_that_comes_back_after_done_joins_the_end_of_the_line(queue: WorkQueue[str]) -> None:
    queue.add("ns/a")
    queue.add("ns/b")
    assert queue.get() == "ns/a"
    queue.add("ns/a")
    queue.add("ns/c")
    queue.done("ns/a")
    assert queue.pop_ready() == ["ns/b", "ns/c", "ns/a"]


def test_low_priority_keys_are_served_after_normal_ones(queue: WorkQueue[str]) -> None:
    for i in range(3):
        queue.add(f"resync/{i}", low_priority=True)
    queue.add("changed/a")
    assert queue.get() == "changed/a"
    queue.add("changed/b")
    assert queue.pop_ready() == ["changed/b", "resync/0", "resync/1", "resync/2"]


def test_a_normal_add_raises_a_waiting_low_priority_key(queue: WorkQueue[str]) -> None:
    queue.add("ns/a", low_priority=True)
    queue.add("ns/b", low_priority=True)
    queue.add("ns/c")
    queue.add("ns/b")
    queue.add("ns/c", low_priority=True)  # never lowers
    assert len(queue) == 3
    assert queue.pop_ready() == ["ns/c", "ns/b", "ns/a"]


def test_a_key_parked_behind_its_processing_returns_at_its_priority(queue: WorkQueue[str]) -> None:
    queue.add("ns/a")
    queue.add("ns/b")
    assert queue.get() == "ns/a"
    queue.add("ns/a", low_priority=True)
    queue.add("ns/c")
    queue.done("ns/a")
    assert queue.pop_ready() == ["ns/b", "ns/c", "ns/a"]


# -- delayed adds


def test_add_after_holds_the_key_until_its_time(queue: WorkQueue[str], fake_clock: FakeClock) -> None:
    queue.add_after("ns/a", 5.0)
    assert len(queue) == 0
    fake_clock.advance(4.9)
    assert queue.pop_ready() == []
    fake_clock.advance(0.1)
    assert len(queue) == 1
    assert queue.pop_ready() == ["ns/a"]


def test_add_after_the_shortest_pending_delay_wins(queue: WorkQueue[str], fake_clock: FakeClock) -> None:
    queue.add_after("ns/a", 10.0)
    queue.add_after("ns/a", 3.0)
    queue.add_after("ns/b", 3.0)
    queue.add_after("ns/b", 10.0)
    fake_clock.advance(3.0)
    assert sorted(queue.pop_ready()) == ["ns/a", "ns/b"]
    queue.done("ns/a")
    queue.done("ns/b")
    fake_clock.advance(7.0)
    assert queue.pop_ready() == []  # neither 10 s add survives


def test_delayed_keys_come_out_in_due_order(queue: WorkQueue[str], fake_clock: FakeClock) -> None:
    for key, delay in (("ns/c", 3.0), ("ns/a", 1.0), ("ns/b", 2.0)):
        queue.add_after(key, delay)
    fake_clock.advance(5.0)
    assert queue.pop_ready() == ["ns/a", "ns/b", "ns/c"]


def test_an_immediate_add_cancels_a_pending_delayed_one(queue: WorkQueue[str], fake_clock: FakeClock) -> None:
    queue.add_after("ns/a", 5.0)
    queue.add("ns/a")
    assert queue.pop_ready() == ["ns/a"]
    queue.done("ns/a")
    fake_clock.advance(5.0)
    assert queue.pop_ready() == []


def test_add_after_on_a_waiting_key_is_a_no_op(queue: WorkQueue[str], fake_clock: FakeClock) -> None:
    queue.add("ns/a")
    queue.add_after("ns/a", 5.0)
    assert queue.pop_ready() == ["ns/a"]
    queue.done("ns/a")
    fake_clock.advance(5.0)
    assert queue.pop_ready() == []


def test_add_after_during_processing_requeues_after_the_delay(queue: WorkQueue[str], fake_clock: FakeClock) -> None:
    queue.add("ns/a")
    assert queue.get() == "ns/a"
    queue.add_after("ns/a", 5.0)  # the reconcile returned RequeueAfter(5)
    queue.done("ns/a")
    assert queue.pop_ready() == []
    fake_clock.advance(5.0)
    assert queue.pop_ready() == ["ns/a"]


def test_add_after_with_no_delay_adds_now(queue: WorkQueue[str]) -> None:
    queue.add_after("ns/a", 0.0)
    queue.add_after("ns/b", -1.0)
    assert queue.pop_ready() == ["ns/a", "ns/b"]


def test_many_cancelled_delays_still_leave_exactly_the_live_ones(queue: WorkQueue[str], fake_clock: FakeClock) -> None:
    for round_ in range(50):
        for i in range(20):
            queue.add_after(f"ns/{i}", 100.0 + round_)
            queue.add(f"ns/{i}")  # cancels it
        assert sorted(queue.pop_ready()) == sorted(f"ns/{i}" for i in range(20))
        for i in range(20):
            queue.done(f"ns/{i}")
    queue.add_after("ns/last", 200.0)
    fake_clock.advance(1000.0)
    assert queue.pop_ready() == ["ns/last"]


# -- rate-limited adds


def test_each_failure_doubles_the_wait(fake_clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock=fake_clock, rate_limiter=ItemBackoff(first=1.0, cap=60.0))
    for wait in (1.0, 2.0, 4.0):
        queue.add_rate_limited("ns/a")
        fake_clock.advance(wait - 0.5)
        assert queue.pop_ready() == []
        fake_clock.advance(0.5)
        assert queue.pop_ready() == ["ns/a"]
        queue.done("ns/a")


def test_the_wait_stops_growing_at_the_cap(fake_clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock=fake_clock, rate_limiter=ItemBackoff(first=1.0, cap=4.0))
    for wait in (1.0, 2.0, 4.0, 4.0, 4.0):
        queue.add_rate_limited("ns/a")
        fake_clock.advance(wait - 0.01)
        assert queue.pop_ready() == []
        fake_clock.advance(0.01)
        assert queue.pop_ready() == ["ns/a"]
        queue.done("ns/a")


def test_forget_resets_the_back_off(queue: WorkQueue[str], fake_clock: FakeClock) -> None:
    for _ in range(3):
        queue.add_rate_limited("ns/a")
        fake_clock.advance(60.0)
        queue.done(queue.pop_ready()[0])
    assert queue.num_requeues("ns/a") == 3
    queue.forget("ns/a")
    assert queue.num_requeues("ns/a") == 0
    queue.add_rate_limited("ns/a")
    fake_clock.advance(1.0)
    assert queue.pop_ready() == ["ns/a"]


def test_the_bucket_limits_the_overall_retry_rate(fake_clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock=fake_clock, rate_limiter=Bucket(rate=1.0, burst=2, clock=fake_clock))
    for i in range(5):
        queue.add_rate_limited(f"ns/{i}")
    assert queue.pop_ready() == ["ns/0", "ns/1"]
    for expected in ("ns/2", "ns/3", "ns/4"):
        fake_clock.advance(1.0)  # one token a second
        assert queue.pop_ready() == [expected]


def test_the_default_limiter_backs_off_from_5_ms_on_the_queue_clock(fake_clock: FakeClock) -> None:
    queue: WorkQueue[str] = WorkQueue(clock=fake_clock)
    queue.add_rate_limited("ns/a")
    assert queue.pop_ready() == []
    fake_clock.advance(0.005)
    assert queue.pop_ready() == ["ns/a"]


# -- blocking get


def test_get_blocks_until_a_key_is_added() -> None:
    queue: WorkQueue[str] = WorkQueue(clock=SYSTEM_CLOCK)
    getter = Background(queue.get)
    assert getter.blocked
    queue.add("ns/a")
    assert getter.join() == "ns/a"


def test_a_blocked_get_wakes_when_a_delayed_key_falls_due(queue: WorkQueue[str], fake_clock: FakeClock) -> None:
    queue.add_after("ns/a", 10.0)
    getter = Background(queue.get)
    fake_clock.advance(9.0)
    assert getter.blocked
    fake_clock.advance(1.0)
    assert getter.join() == "ns/a"


def test_a_get_sleeping_until_a_later_key_wakes_for_an_earlier_one() -> None:
    queue: WorkQueue[str] = WorkQueue(clock=SYSTEM_CLOCK)
    queue.add_after("ns/late", 3600.0)
    getter = Background(queue.get)
    assert getter.blocked
    queue.add_after("ns/soon", 0.01)
    assert getter.join() == "ns/soon"


def test_get_returns_none_when_its_timeout_passes(queue: WorkQueue[str], fake_clock: FakeClock) -> None:
    assert queue.get(timeout=0) is None
    getter = Background(lambda: queue.get(timeout=5.0))
    fake_clock.advance(4.9)
    assert getter.blocked
    fake_clock.advance(0.1)
    assert getter.join() is None


# -- shutdown


def test_shutdown_wakes_every_blocked_getter() -> None:
    queue: WorkQueue[str] = WorkQueue(clock=SYSTEM_CLOCK)
    getters = [Background(queue.get) for _ in range(4)]
    assert all(getter.blocked for getter in getters)
    queue.shutdown()
    assert [getter.join() for getter in getters] == [None] * 4


def test_after_shutdown_nothing_is_handed_out_and_adds_are_ignored(queue: WorkQueue[str]) -> None:
    queue.add("ns/a")
    queue.add_after("ns/b", 1.0)
    assert queue.shutdown() is True
    queue.add("ns/c")
    queue.add_after("ns/d", 0.0)
    queue.add_rate_limited("ns/e")
    assert (queue.shutting_down, len(queue), queue.get(), queue.pop_ready()) == (True, 0, None, [])


def test_drain_waits_for_the_keys_in_flight() -> None:
    queue: WorkQueue[str] = WorkQueue(clock=SYSTEM_CLOCK)
    for key in ("ns/a", "ns/b", "ns/c"):
        queue.add(key)
    assert queue.pop_ready() == ["ns/a", "ns/b", "ns/c"]
    queue.add("ns/a")  # parked: dropped by the shutdown, not run during the drain
    drainer = Background(lambda: queue.shutdown(drain=True))
    queue.done("ns/b")
    assert drainer.blocked
    assert queue.get() is None
    queue.done("ns/a")
    queue.done("ns/c")
    assert drainer.join() is True
    assert len(queue) == 0


def test_a_drain_that_times_out_reports_keys_still_in_flight(queue: WorkQueue[str], fake_clock: FakeClock) -> None:
    queue.add("ns/a")
    assert queue.get() == "ns/a"
    drainer = Background(lambda: queue.shutdown(drain=True, timeout=30.0))
    fake_clock.advance(29.0)
    assert drainer.blocked
    fake_clock.advance(1.0)
    assert drainer.join() is False
    queue.done("ns/a")  # a worker may still finish later
    assert queue.shutdown() is True


# -- state and metrics


def test_len_counts_waiting_keys_but_not_delayed_ones_before_they_are_due(
    queue: WorkQueue[str], fake_clock: FakeClock
) -> None:
    queue.add("ns/a")
    queue.add("ns/b")
    assert queue.get() == "ns/a"
    assert queue.len() == 1
    queue.add("ns/a")  # parked behind its own processing: counted, yet get() can't take it
    queue.add_after("ns/c", 5.0)
    assert len(queue) == 2
    fake_clock.advance(5.0)
    assert len(queue) == 3


def test_keys_can_be_any_hashable_type(fake_clock: FakeClock) -> None:
    queue: WorkQueue[ObjectKey] = WorkQueue(clock=fake_clock)
    queue.add(ObjectKey("ns", "a"))
    queue.add(ObjectKey("ns", "a"))
    assert queue.pop_ready() == [ObjectKey("ns", "a")]


class RecordingMetrics:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, float]] = []

    def added(self, name: str) -> None:
        self.events.append(("added", name, 1))

    def depth(self, name: str, n: int) -> None:
        self.events.append(("depth", name, n))

    def retried(self, name: str) -> None:
        self.events.append(("retried", name, 1))

    def queue_latency(self, name: str, seconds: float) -> None:
        self.events.append(("queue_latency", name, seconds))

    def work_duration(self, name: str, seconds: float) -> None:
        self.events.append(("work_duration", name, seconds))


def test_metrics_callbacks_report_adds_depth_retries_and_durations(fake_clock: FakeClock) -> None:
    metrics = RecordingMetrics()
    queue: WorkQueue[str] = WorkQueue(
        name="pv", clock=fake_clock, rate_limiter=ItemBackoff(first=1.0, cap=60.0), metrics=metrics
    )
    queue.add("ns/a")
    queue.add("ns/a")  # a no-op: not counted
    queue.add("ns/b")
    fake_clock.advance(3.0)
    assert queue.get() == "ns/a"
    fake_clock.advance(2.0)
    queue.done("ns/a")
    queue.add_rate_limited("ns/a")
    fake_clock.advance(1.0)
    assert queue.pop_ready() == ["ns/b", "ns/a"]
    queue.shutdown()
    assert metrics.events == [
        ("added", "pv", 1), ("depth", "pv", 1),
        ("added", "pv", 1), ("depth", "pv", 2),
        ("queue_latency", "pv", 3.0), ("depth", "pv", 1),
        ("work_duration", "pv", 2.0),
        ("retried", "pv", 1),
        ("added", "pv", 1), ("depth", "pv", 2),  # ns/a falls due
        ("queue_latency", "pv", 6.0), ("depth", "pv", 1),
        ("queue_latency", "pv", 0.0), ("depth", "pv", 0),
        ("depth", "pv", 0),  # shutdown
    ]
