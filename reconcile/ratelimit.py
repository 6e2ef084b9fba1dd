"""Rate limiters: how long a key waits before the work queue hands it out again.

Owns the retry arithmetic, after client-go's `default_rate_limiters.go`: a per-key exponential
back-off (`ItemBackoff`), an overall token bucket (`Bucket`) and the larger of several
(`MaxOf`). `default_rate_limiter()` is controller-runtime's default: 5 ms doubling to 1000 s per
key, and at most 10 retries/s overall with bursts of 100.
Promises: no I/O and no threads; time is read only from the injected clock; each limiter is
thread-safe, so one may be shared by several queues.
Does not: schedule anything. The queue (workqueue.py) asks `when()` and does the waiting.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from typing import Protocol

from reconcile.clock import SYSTEM_CLOCK, Clock


class RateLimiter(Protocol):
    """What the work queue asks of a rate limiter (client-go's three methods)."""

    def when(self, item: Hashable) -> float:
        """Seconds `item` should wait before its next try. Called once per retry: it counts a failure
        (or reserves a token), so asking twice means two retries."""
        ...

    def forget(self, item: Hashable) -> None:
        """Stop tracking `item` (call after a success): its next `when()` starts from the beginning."""
        ...

    def failures(self, item: Hashable) -> int:
        """How many times `when()` was asked for `item` since it was last forgotten."""
        ...


class ItemBackoff:
    """Per-item exponential back-off: `first`, then doubling per failure, never more than `cap`.

    The n-th `when(item)` since the last `forget(item)` returns min(cap, first * 2**(n-1)).
    Items are tracked independently; memory is one dict entry per item that has failed and not
    yet been forgotten.
    """

    def __init__(self, first: float = 0.005, cap: float = 1000.0) -> None:
        if not 0 < first <= cap:
            raise ValueError(f"ItemBackoff needs 0 < first <= cap, got first={first}, cap={cap}")
        self.first, self.cap = first, cap
        self._failures: dict[Hashable, int] = {}
        self._lock = threading.Lock()

    def when(self, item: Hashable) -> float:
        with self._lock:
            exp = self._failures.get(item, 0)
            self._failures[item] = exp + 1
        # Clamp the exponent so 2.0**exp cannot overflow; the product may become inf, which min() caps.
        return min(self.cap, self.first * 2.0 ** min(exp, 1000))

    def forget(self, item: Hashable) -> None:
        with self._lock:
            self._failures.pop(item, None)

    def failures(self, item: Hashable) -> int:
        with self._lock:
            return self._failures.get(item, 0)


class Bucket:
    """An overall token bucket: `rate` tokens per second, holding at most `burst`, shared by all items.

    `when()` reserves the next token and returns how long until it is available (0 while the bucket
    holds tokens), so reservations queue up at 1/rate intervals once the burst is spent. The bucket
    starts full. It tracks no items: `forget` does nothing and `failures` is always 0.
    """

    def __init__(self, rate: float = 10.0, burst: int = 100, *, clock: Clock = SYSTEM_CLOCK) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError(f"Bucket needs rate > 0 and burst >= 1, got rate={rate}, burst={burst}")
        self.rate, self.burst = rate, burst
        self._clock = clock
        self._tokens = float(burst)  # negative: tokens already promised to waiting reservations
        self._last = clock.monotonic()
        self._lock = threading.Lock()

    def when(self, item: Hashable) -> float:
        with self._lock:
            now = self._clock.monotonic()
            self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.rate)
            self._last = now
            self._tokens -= 1.0
            return 0.0 if self._tokens >= 0 else -self._tokens / self.rate

    def forget(self, item: Hashable) -> None:
        pass

    def failures(self, item: Hashable) -> int:
        return 0


class MaxOf:
    """The largest delay of several limiters; every limiter is asked, so each records the retry."""

    def __init__(self, *limiters: RateLimiter) -> None:
        if not limiters:
            raise ValueError("MaxOf needs at least one rate limiter")
        self.limiters = limiters

    def when(self, item: Hashable) -> float:
        return max([limiter.when(item) for limiter in self.limiters])

    def forget(self, item: Hashable) -> None:
        for limiter in self.limiters:
            limiter.forget(item)

    def failures(self, item: Hashable) -> int:
        return max(limiter.failures(item) for limiter in self.limiters)


def default_rate_limiter(clock: Clock = SYSTEM_CLOCK) -> MaxOf:
    """controller-runtime's default: MaxOf(ItemBackoff(5 ms → 1000 s), Bucket(10/s, burst 100))."""
    return MaxOf(ItemBackoff(), Bucket(clock=clock))
