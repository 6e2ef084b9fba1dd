"""Rate limiters: per-item back-off doubles up to its cap, the bucket bounds the overall rate."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from reconcile.clock import FakeClock
from reconcile.ratelimit import Bucket, ItemBackoff, MaxOf, RateLimiter, default_rate_limiter


@pytest.fixture
def fake_clock() -> FakeClock:
    return FakeClock()


def test_each_failure_doubles_the_back_off_up_to_the_cap() -> None:
    backoff = ItemBackoff(first=1.0, cap=10.0)
    assert [backoff.when("ns/a") for _ in range(6)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


def test_the_default_back_off_runs_from_5_ms_to_1000_s() -> None:
    backoff = ItemBackoff()
    waits = [backoff.when("ns/a") for _ in range(30)]
    assert waits[:3] == [0.005, 0.01, 0.02]
    assert waits[-1] == 1000.0
    assert max(waits) == 1000.0


def test_back_off_is_tracked_per_item() -> None:
    backoff = ItemBackoff(first=1.0, cap=60.0)
    backoff.when("ns/a")
    backoff.when("ns/a")
    assert backoff.when("ns/b") == 1.0
    assert (backoff.failures("ns/a"), backoff.failures("ns/b"), backoff.failures("ns/c")) == (2, 1, 0)


def test_forget_resets_the_back_off() -> None:
    backoff = ItemBackoff(first=1.0, cap=60.0)
    for _ in range(4):
        backoff.when("ns/a")
    backoff.forget("ns/a")
    assert backoff.failures("ns/a") == 0
    assert backoff.when("ns/a") == 1.0


def test_thousands_of_failures_stay_at_the_cap_without_overflow() -> None:
    backoff = ItemBackoff(first=1e300, cap=1e308)
    for _ in range(5000):
        wait = backoff.when("ns/a")
    assert wait == 1e308


def test_the_bucket_lets_a_burst_through_then_spaces_requests_at_its_rate(fake_clock: FakeClock) -> None:
    bucket = Bucket(rate=10.0, burst=3, clock=fake_clock)
    waits = [bucket.when(f"ns/{i}") for i in range(6)]
    assert waits == pytest.approx([0.0, 0.0, 0.0, 0.1, 0.2, 0.3])


def test_the_bucket_refills_with_clock_time_but_never_beyond_its_burst(fake_clock: FakeClock) -> None:
    bucket = Bucket(rate=10.0, burst=2, clock=fake_clock)
    assert [bucket.when("x") for _ in range(3)] == pytest.approx([0.0, 0.0, 0.1])
    fake_clock.advance(0.1)  # pays back the reservation; the bucket is empty again
    assert bucket.when("x") == pytest.approx(0.1)
    fake_clock.advance(3600)
    assert [bucket.when("x") for _ in range(3)] == pytest.approx([0.0, 0.0, 0.1])


def test_the_bucket_tracks_no_items(fake_clock: FakeClock) -> None:
    bucket = Bucket(rate=1.0, burst=1, clock=fake_clock)
    bucket.when("ns/a")
    bucket.forget("ns/a")
    assert bucket.failures("ns/a") == 0
    assert bucket.when("ns/a") == pytest.approx(1.0)  # forget gives no token back


def test_max_of_gives_the_largest_delay_and_every_limiter_counts_the_retry(fake_clock: FakeClock) -> None:
    backoff = ItemBackoff(first=0.01, cap=100.0)
    limiter = MaxOf(backoff, Bucket(rate=1.0, burst=2, clock=fake_clock))
    waits = [limiter.when("ns/a") for _ in range(4)]
    assert waits == pytest.approx([0.01, 0.02, 1.0, 2.0])  # back-off first, then the empty bucket
    assert limiter.failures("ns/a") == backoff.failures("ns/a") == 4
    limiter.forget("ns/a")
    assert limiter.failures("ns/a") == 0


def test_the_default_limiter_is_per_item_back_off_with_an_overall_bucket(fake_clock: FakeClock) -> None:
    limiter = default_rate_limiter(fake_clock)
    first = [limiter.when(f"ns/{i}") for i in range(100)]
    assert first == [0.005] * 100  # the burst of 100 absorbs one retry of 100 keys
    assert limiter.when("ns/100") == pytest.approx(0.1)  # then 10 per second
    assert limiter.when("ns/0") == pytest.approx(0.2)  # the bucket outweighs ns/0's 10 ms back-off


def test_the_limiters_satisfy_the_protocol(fake_clock: FakeClock) -> None:
    limiters: list[RateLimiter] = [ItemBackoff(), Bucket(clock=fake_clock), MaxOf(ItemBackoff())]
    assert all(limiter.failures("k") == 0 for limiter in limiters)


@pytest.mark.parametrize("make", [
    lambda: ItemBackoff(first=0.0),
    lambda: ItemBackoff(first=2.0, cap=1.0),
    lambda: Bucket(rate=0.0, clock=FakeClock()),
    lambda: Bucket(burst=0, clock=FakeClock()),
    lambda: MaxOf(),
])
def test_nonsensical_settings_are_refused(make: Callable[[], object]) -> None:
    with pytest.raises(ValueError):
        make()
