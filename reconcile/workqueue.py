"""Deduplicating, rate-limited work queue of object keys: informer threads add, worker threads take.

The contract (after client-go's util/workqueue doc.go):

* Fair: ready keys are handed out first in, first out, at two priority levels. A key added with
  `low_priority=True` (initial lists, resyncs) is served only when no normal key is ready, so
  real changes overtake a resync flood; a normal add raises a waiting low-priority key.
* Stingy: a key is never handed to two workers at once; adding a key that is already waiting is
  a no-op; adding one that is being processed makes it come back once, after `done()`.
* Many producers and consumers: every method is thread-safe; any thread may add, get and finish.
* Shutdown: `shutdown()` wakes every waiting `get`, which then returns None, and later adds are
  ignored; `shutdown(drain=True)` also waits until the keys in flight are done.

Each key has at most one pending entry: waiting (ready, or parked behind its own processing) or
delayed. The earliest wins: an immediate add cancels a pending delayed one, and `add_after` on a
waiting key, or with a later time than one already pending, changes nothing. Delayed keys sit in a
heap that `get` and `pop_ready` move from as they fall due, waiting through `clock.wait`; there is
no timer thread. Time is read only from the injected clock.
Does not: know about objects, watches or controllers (informer.py, controller.py), compute
back-off (ratelimit.py), or keep global state: metrics go to the `metrics` object it is given.
"""

from __future__ import annotations

import heapq
import threading
from collections import deque
from collections.abc import Hashable
from typing import Generic, NamedTuple, Protocol, TypeVar

from reconcile.clock import SYSTEM_CLOCK, Clock
from reconcile.ratelimit import RateLimiter, default_rate_limiter

K = TypeVar("K", bound=Hashable)


class QueueMetrics(Protocol):
    """Per-queue metric hooks, named after controller-runtime's `workqueue_*` series.

    Called with the queue's lock held: keep them quick and never call back into the queue.
    """

    def added(self, name: str) -> None:
        """A key started waiting (workqueue_adds_total); adds that change nothing are not counted."""
        ...

    def depth(self, name: str, n: int) -> None:
        """The number of waiting keys changed to `n` (workqueue_depth; the same number as `len()`)."""
        ...

    def retried(self, name: str) -> None:
        """`add_rate_limited` was called (workqueue_retries_total)."""
        ...

    def queue_latency(self, name: str, seconds: float) -> None:
        """A key was handed out `seconds` after it started waiting (workqueue_queue_duration_seconds)."""
        ...

    def work_duration(self, name: str, seconds: float) -> None:
        """A key was done `seconds` after it was handed out (workqueue_work_duration_seconds)."""
        ...


class NoMetrics:
    """The default: records nothing."""

    def added(self, name: str) -> None:
        pass

    def depth(self, name: str, n: int) -> None:
        pass

    def retried(self, name: str) -> None:
        pass

    def queue_latency(self, name: str, seconds: float) -> None:
        pass

    def work_duration(self, name: str, seconds: float) -> None:
        pass


NO_METRICS = NoMetrics()


class _Waiting(NamedTuple):
    seq: int  # matches the key's entry in a ready deque; older entries there are stale
    low: bool
    since: float  # clock.monotonic() when the key started waiting, for queue_latency


class WorkQueue(Generic[K]):
    """A deduplicating, rate-limited, two-priority work queue of keys (see the module docstring).

    A worker loops `key = get()`, processes it, then `forget(key)` on success or
    `add_rate_limited(key)` on failure, and always `done(key)`.
    """

    def __init__(
        self,
        *,
        name: str = "",
        clock: Clock = SYSTEM_CLOCK,
        rate_limiter: RateLimiter | None = None,
        metrics: QueueMetrics = NO_METRICS,
    ) -> None:
        """`name` labels the metrics; `rate_limiter` defaults to `default_rate_limiter(clock)`."""
        self.name = name
        self._clock = clock
        self._limiter = rate_limiter if rate_limiter is not None else default_rate_limiter(clock)
        self._metrics = metrics
        self._lock = threading.Lock()
        self._work = threading.Condition(self._lock)  # getters wait here: a key may be ready
        self._idle = threading.Condition(self._lock)  # drain waits here: nothing left in flight
        self._waiting: dict[K, _Waiting] = {}  # client-go's "dirty" set
        self._normal: deque[tuple[int, K]] = deque()
        self._low: deque[tuple[int, K]] = deque()
        self._processing: dict[K, float] = {}  # key -> when it was handed out
        self._delayed: dict[K, float] = {}  # key -> when it falls due
        self._heap: list[tuple[float, int, K]] = []  # (due, seq, key); entries not in _delayed are stale
        self._seq = 0
        self._shutting_down = False

    # -- adding

    def add(self, key: K, *, low_priority: bool = False) -> None:
        """Make `key` ready now; a no-op if it is already waiting (except to raise its priority).
        A key being processed comes back once, after `done()`. Cancels a pending delayed add."""
        with self._lock:
            if not self._shutting_down:
                self._add(key, low_priority, self._clock.monotonic())

    def add_after(self, key: K, delay: float) -> None:
        """Add `key` (at normal priority) once `delay` clock-seconds have passed. The earliest pending
        add wins: a no-op if the key is already waiting or is due sooner; `delay <= 0` is `add`."""
        with self._lock:
            if self._shutting_down:
                return
            now = self._clock.monotonic()
            if delay <= 0:
                self._add(key, False, now)
                return
            due, pending = now + delay, self._delayed.get(key)
            if key in self._waiting or (pending is not None and pending <= due):
                return
            self._delayed[key] = due
            self._seq += 1
            heapq.heappush(self._heap, (due, self._seq, key))
            if len(self._heap) > 64 and len(self._heap) > 2 * len(self._delayed):
                self._heap = [entry for entry in self._heap if self._delayed.get(entry[2]) == entry[0]]
                heapq.heapify(self._heap)
            if self._heap[0][1] == self._seq:
                self._work.notify()  # a getter may be sleeping until a later due time

    def add_rate_limited(self, key: K) -> None:
        """Add `key` after the delay its rate limiter gives (which counts one more failure)."""
        if self._shutting_down:
            return
        delay = self._limiter.when(key)  # outside our lock: the limiter has its own
        with self._lock:
            self._metrics.retried(self.name)
        self.add_after(key, delay)

    def forget(self, key: K) -> None:
        """Reset `key`'s back-off (call after it was processed successfully). Does not dequeue the key."""
        self._limiter.forget(key)

    def num_requeues(self, key: K) -> int:
        """How many rate-limited adds `key` has had since it was last forgotten."""
        return self._limiter.failures(key)

    # -- taking

    def get(self, timeout: float | None = None) -> K | None:
        """The next ready key, now marked as being processed; call `done(key)` when finished.
        Blocks (through the clock) up to `timeout` clock-seconds, forever if None. Returns None on
        timeout or shutdown."""
        with self._lock:
            deadline = None if timeout is None else self._clock.monotonic() + timeout
            while not self._shutting_down:
                now = self._clock.monotonic()
                next_due = self._promote_due(now)
                key = self._take(now)
                if key is not None:
                    return key
                wait = None if deadline is None else deadline - now
                if wait is not None and wait <= 0:
                    return None
                if next_due is not None and (wait is None or next_due - now < wait):
                    wait = next_due - now
                self._clock.wait(self._work, wait)
            return None

    def pop_ready(self) -> list[K]:
        """Every key ready now, in the order `get` would give them, each marked as being processed.
        Never blocks; empty after shutdown. For tests and single-threaded loops."""
        with self._lock:
            if self._shutting_down:
                return []
            now = self._clock.monotonic()
            self._promote_due(now)
            keys = []
            while (key := self._take(now)) is not None:
                keys.append(key)
            return keys

    def done(self, key: K) -> None:
        """Finish processing `key`; if it was added meanwhile, it is ready again now.
        Raises ValueError if `key` is not being processed (e.g. `done` called twice)."""
        with self._lock:
            started = self._processing.pop(key, None)
            if started is None:
                raise ValueError(f"done({key!r}): the key is not being processed")
            self._metrics.work_duration(self.name, self._clock.monotonic() - started)
            waiting = self._waiting.get(key)
            if waiting is not None:
                (self._low if waiting.low else self._normal).append((waiting.seq, key))
                self._work.notify()
            if self._shutting_down and not self._processing:
                self._idle.notify_all()

    # -- state and shutdown

    def len(self) -> int:
        """Keys waiting: ready now, or parked until their own processing is done. Keys delayed and
        not yet due are not counted. Not for gating `get`: a parked key is counted but can't be got."""
        with self._lock:
            self._promote_due(self._clock.monotonic())
            return len(self._waiting)

    def __len__(self) -> int:
        return self.len()

    def next_due(self) -> float | None:
        """Clock-seconds until the earliest delayed key falls due (0 if one is due now), or None."""
        with self._lock:
            now = self._clock.monotonic()
            due = self._promote_due(now)
            return None if due is None else max(0.0, due - now)

    def in_flight(self) -> list[float]:
        """Clock-seconds each key now being processed has been at it (for the unfinished-work and
        longest-running metrics)."""
        with self._lock:
            now = self._clock.monotonic()
            return [now - started for started in self._processing.values()]

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    def shutdown(self, *, drain: bool = False, timeout: float | None = None) -> bool:
        """Stop handing out keys: waiting `get`s return None, and adds are ignored from now on.
        Waiting and delayed keys are dropped. With `drain`, block until every key in flight is done,
        at most `timeout` clock-seconds. Returns True if no key is in flight on return."""
        with self._lock:
            if not self._shutting_down:
                self._shutting_down = True
                self._waiting.clear()
                self._normal.clear()
                self._low.clear()
                self._delayed.clear()
                self._heap.clear()
                self._metrics.depth(self.name, 0)
                self._work.notify_all()
            deadline = None if timeout is None else self._clock.monotonic() + timeout
            while drain and self._processing:
                wait = None if deadline is None else deadline - self._clock.monotonic()
                if wait is not None and wait <= 0:
                    break
                self._clock.wait(self._idle, wait)
            return not self._processing

    # -- internals, called with the lock held

    def _add(self, key: K, low: bool, now: float) -> None:
        self._delayed.pop(key, None)  # an immediate add supersedes a pending delayed one
        waiting = self._waiting.get(key)
        if waiting is not None and (low or not waiting.low):
            return  # already waiting, at this priority or higher
        self._seq += 1
        self._waiting[key] = _Waiting(self._seq, low, now if waiting is None else waiting.since)
        if waiting is None:
            self._metrics.added(self.name)
            self._metrics.depth(self.name, len(self._waiting))
        if key not in self._processing:  # else parked: done() makes it ready
            (self._low if low else self._normal).append((self._seq, key))
            self._work.notify()

    def _take(self, now: float) -> K | None:
        for ready in (self._normal, self._low):
            while ready:
                seq, key = ready.popleft()
                waiting = self._waiting.get(key)
                if waiting is None or waiting.seq != seq:
                    continue  # stale: the key's priority was raised, and it sits in the normal deque
                del self._waiting[key]
                self._processing[key] = now
                self._metrics.queue_latency(self.name, now - waiting.since)
                self._metrics.depth(self.name, len(self._waiting))
                return key
        return None

    def _promote_due(self, now: float) -> float | None:
        """Move delayed keys due by `now` to the ready queue; return when the next one falls due."""
        heap = self._heap
        while heap and heap[0][0] <= now:
            due, _, key = heapq.heappop(heap)
            if self._delayed.get(key) == due:
                self._add(key, False, now)
        while heap and self._delayed.get(heap[0][2]) != heap[0][0]:
            heapq.heappop(heap)  # stale: cancelled or superseded by an earlier time
        return heap[0][0] if heap else None
