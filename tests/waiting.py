"""Waiting, in tests, for what other threads and processes do.

`eventually` polls a check until it holds; `settled` reads a value until it stops changing;
`step_until` polls like `eventually` while moving a FakeClock, for code that waits on clock time;
`blocked` tells a thread blocked in a wait from one still on its way there.
Each fails with an AssertionError saying what it waited for and what it saw last, so that a
timeout reads as more than "condition not reached".

The defaults suit in-process work (the embedded cluster, managers on threads). Callers that wait
on slower things choose their own pace: a real API server gets a minute and 50 ms polls
(tests/e2e/support.py), git servers 20 ms polls (tests/porchvariant/variants_support.py).
"""

from __future__ import annotations

import inspect
import sys
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from reconcile.clock import FakeClock

T = TypeVar("T")

SHOWN = 1000  # characters of a value a failure message shows at most


def eventually(check: Callable[[], T], timeout: float = 5.0, *, interval: float = 0.005, what: str = "",
               asserts: bool = False, show: Callable[[], object] | None = None) -> T:
    """What `check()` returns once that is true, polled every `interval` s. Past `timeout` s, an
    AssertionError naming `what` (by default the check's name, or a lambda's source) with the value
    `check` last returned, and what `show()` returns then, if given.

    With `asserts=True`, `check` may be an assertion: an AssertionError it raises means "not yet"
    (the last one is the failure's cause), and a return of None means it holds. Without it, an
    AssertionError from `check` ends the wait at once, as any other exception always does."""
    deadline = time.monotonic() + timeout
    while True:
        failed: AssertionError | None = None
        try:
            found = check()
        except AssertionError as err:
            if not asserts:
                raise
            failed = err
        else:
            if found or (asserts and found is None):
                return found
        if time.monotonic() > deadline:
            last = f"it last failed: {failed}" if failed is not None else f"it last returned {_shown(found)}"
            headline = f"waited {timeout:g}s for {what or _described(check)}"
            raise AssertionError(_message(headline, last, show)) from failed
        time.sleep(interval)


def settled(read: Callable[[], T], quiet: float = 0.3, timeout: float = 10.0, *, interval: float = 0.02,
            what: str = "") -> T:
    """What `read()` returns once it has returned the same value for `quiet` s, read every `interval`
    s. Still changing after `timeout` s: an AssertionError with the last value."""
    deadline = time.monotonic() + timeout
    value, since = read(), time.monotonic()
    while time.monotonic() - since < quiet:
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout:g}s for {what or _described(read)} to settle; "
                                 f"it last returned {_shown(value)}")
        time.sleep(interval)
        if (now := read()) != value:
            value, since = now, time.monotonic()
    return value


def step_until(clock: FakeClock, check: Callable[[], object], *, limit: float, step: float = 0.25,
               pause: float = 0.02, what: str = "", show: Callable[[], object] | None = None) -> float:
    """Advance `clock` by `step` at a time, giving threads `pause` real seconds after each, until
    `check()` is true; returns the clock-seconds this advanced it. Past `limit` clock-seconds of
    steps, an AssertionError as `eventually` raises. Only these steps count towards `limit`: a
    clock that the code under test also advances does not shorten the wait."""
    elapsed = 0.0
    while not (found := check()):
        if elapsed > limit:
            raise AssertionError(_message(f"waited {limit:g} clock-seconds for {what or _described(check)}",
                                          f"it last returned {_shown(found)}", show))
        clock.advance(step)
        elapsed += step
        time.sleep(pause)
    return elapsed


_WAITS = frozenset(("wait", "join", "_wait_for_tstate_lock"))  # threading's blocking calls, by version


def blocked(thread: threading.Thread, timeout: float = 5.0) -> bool:
    """Whether `thread` is blocked in one of threading's waits (Condition.wait, and so Event.wait;
    Thread.join; not Thread.start's wait for the thread it starts), polled until it is (True) or
    has ended (False): a thread just started, or just woken, is not yet at its wait, and asserting
    that it has not returned proves nothing then. Past `timeout` s of neither, an AssertionError."""
    def state() -> str | None:
        if not thread.is_alive():
            return "ended"
        frame = sys._current_frames().get(thread.ident or 0)
        names = []
        while frame is not None:
            if frame.f_code.co_filename == threading.__file__:
                names.append(frame.f_code.co_name)
            frame = frame.f_back
        # Thread.start waits for the new thread to begin: a moment on the way, not a block
        return "blocked" if _WAITS.intersection(names) and "start" not in names else None
    return eventually(state, timeout, what=f"{thread.name} to block in a wait or end") == "blocked"


def _message(headline: str, last: str, show: Callable[[], object] | None) -> str:
    if show is None:
        return f"{headline}; {last}"
    shown = show()
    return f"{headline}; {last}; then: {shown if isinstance(shown, str) else _shown(shown)}"


def _described(check: Callable[..., object]) -> str:
    """A lambda's source line (what a reader of the test sees), else the callable's name."""
    name = getattr(check, "__qualname__", "")
    if name and "<lambda>" not in name:
        return name
    try:
        source = " ".join(inspect.getsource(check).split())
    except (OSError, TypeError):
        return repr(check)
    return source if len(source) <= 200 else source[:200] + "..."


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= SHOWN else text[:SHOWN] + "..."
