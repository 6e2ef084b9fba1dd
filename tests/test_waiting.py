"""The waiting helpers of tests/waiting.py return what was awaited, and a timeout says what it was
and what was seen last."""

from __future__ import annotations

import itertools
import threading

import pytest

from reconcile import FakeClock
from tests.waiting import blocked, eventually, settled, step_until


def test_eventually_returns_the_first_true_value_the_check_returns() -> None:
    answers = iter([None, 0, {}, {"ready": True}, {"later": True}])
    assert eventually(lambda: next(answers)) == {"ready": True}


def test_eventually_names_the_lambda_and_its_last_value_when_it_times_out() -> None:
    with pytest.raises(AssertionError) as failure:
        eventually(lambda: [], timeout=0.05)
    assert str(failure.value) == "waited 0.05s for eventually(lambda: [], timeout=0.05); it last returned []"


def test_eventually_names_a_function_by_its_name_or_the_caller_by_what() -> None:
    def drafts_pushed() -> bool:
        return False

    with pytest.raises(AssertionError, match=r"waited 0\.01s for .*drafts_pushed; it last returned False$"):
        eventually(drafts_pushed, timeout=0.01)
    with pytest.raises(AssertionError, match=r"^waited 0\.01s for the informer to catch up; it last returned False; "
                                             r"then: \['t-1'\]$"):
        eventually(drafts_pushed, timeout=0.01, what="the informer to catch up", show=lambda: ["t-1"])


def test_eventually_lets_an_assertion_in_the_check_fail_at_once_unless_asked_to_retry_it() -> None:
    calls = itertools.count()

    def asserting() -> None:
        assert next(calls) >= 3, "not yet"

    with pytest.raises(AssertionError, match="not yet"):
        eventually(asserting, timeout=5)
    assert next(calls) == 1  # one call: the assertion was not retried

    calls = itertools.count()
    assert eventually(asserting, timeout=5, asserts=True) is None  # None: an assertion that passed
    assert next(calls) == 4


def test_eventually_with_asserts_chains_the_last_assertion_to_the_timeout() -> None:
    def never() -> None:
        raise AssertionError("still 2 dependents")

    with pytest.raises(AssertionError, match="it last failed: still 2 dependents") as failure:
        eventually(never, timeout=0.02, asserts=True)
    assert str(failure.value.__cause__) == "still 2 dependents"


def test_eventually_stops_at_once_on_any_other_exception() -> None:
    calls = itertools.count()

    def broken() -> bool:
        next(calls)
        raise KeyError("metadata")

    with pytest.raises(KeyError):
        eventually(broken, timeout=5, asserts=True)
    assert next(calls) == 1


def test_settled_returns_the_value_once_it_stops_changing() -> None:
    values = iter([1, 2, 3])
    assert settled(lambda: next(values, 3), quiet=0.05) == 3


def test_settled_fails_with_the_last_value_when_it_keeps_changing() -> None:
    counter = itertools.count()
    with pytest.raises(AssertionError, match=r"^waited 0\.1s for .* to settle; it last returned \d+$"):
        settled(lambda: next(counter), quiet=0.05, timeout=0.1, interval=0.001)


def test_step_until_advances_the_clock_until_the_check_holds_and_says_how_far() -> None:
    clock = FakeClock(start=0)
    assert step_until(clock, lambda: clock.time() >= 2, limit=5, step=0.5, pause=0) == 2
    assert clock.time() == 2


def test_step_until_counts_only_its_own_steps_towards_the_limit() -> None:
    clock, calls = FakeClock(start=0), itertools.count(1)

    def check() -> bool:
        clock.advance(10)  # the code under test moves the clock too
        return next(calls) == 3

    assert step_until(clock, check, limit=2, step=1, pause=0) == 2
    assert clock.time() == 32


def test_step_until_fails_past_its_limit_of_clock_seconds() -> None:
    clock = FakeClock(start=0)
    with pytest.raises(AssertionError, match=r"^waited 1 clock-seconds for .*lambda: False.*; it last returned False$"):
        step_until(clock, lambda: False, limit=1, step=0.5, pause=0)
    assert clock.time() == 1.5  # it stepped past the limit, then gave up


def test_blocked_is_true_for_a_thread_waiting_on_an_event_and_false_for_one_that_ended() -> None:
    gate = threading.Event()
    waiter = threading.Thread(target=lambda: gate.wait(5), name="waiter")
    finisher = threading.Thread(target=lambda: None, name="finisher")
    waiter.start()
    finisher.start()
    try:
        assert blocked(waiter) is True
        assert blocked(finisher) is False
    finally:
        gate.set()
        waiter.join(5)
        finisher.join(5)


def test_blocked_fails_for_a_thread_that_neither_waits_nor_ends() -> None:
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            pass

    spinner = threading.Thread(target=spin, name="spinner")
    spinner.start()
    try:
        with pytest.raises(AssertionError, match=r"waited 0\.05s for spinner to block in a wait or end"):
            blocked(spinner, timeout=0.05)
    finally:
        stop.set()
        spinner.join(5)
