"""Time, injected: every timeout, back-off, resync and lease in the runtime reads a Clock.

`SystemClock` is real time. `FakeClock` only moves when a test calls `advance()`, and wakes any
thread waiting through it, so tests of back-off, delayed requeues and leases step time instead
of sleeping.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    def monotonic(self) -> float:
        """Seconds on a clock that never goes back: for intervals, deadlines and back-off."""

    def time(self) -> float:
        """Seconds since the epoch: for timestamps written into objects."""

    def wait(self, condition: threading.Condition, timeout: float | None) -> None:
        """Wait on `condition` (held by the caller) until notified or `timeout` clock-seconds pass.
        Callers re-check their own state afterwards: a wake-up may be early."""


class SystemClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def time(self) -> float:
        return time.time()

    def wait(self, condition: threading.Condition, timeout: float | None) -> None:
        condition.wait(timeout)


SYSTEM_CLOCK = SystemClock()


class FakeClock:
    """A clock that moves only when told to; thread-safe."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._now = start
        self._lock = threading.Lock()
        self._waiting: set[threading.Condition] = set()

    def monotonic(self) -> float:
        return self._now

    def time(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds
            waiting = list(self._waiting)
        for condition in waiting:
            with condition:
                condition.notify_all()

    def wait(self, condition: threading.Condition, timeout: float | None) -> None:
        if timeout is not None and timeout <= 0:
            return
        with self._lock:
            self._waiting.add(condition)
        try:
            # Woken by notify (new work) or by advance(); the real-time bound only keeps a test
            # that forgot to advance from hanging forever.
            condition.wait(1.0)
        finally:
            with self._lock:
                self._waiting.discard(condition)
