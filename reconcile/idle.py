"""Running controllers once, to a standstill: what porchkit's local `... reconcile -f DIR` commands do.

`run_until_idle(manager)` runs the manager on a thread, waits for its caches to sync, and returns
once no controller has had anything to do for `quiet` seconds: no key ready in any queue, none
due within `horizon` seconds, and no reconcile in flight. Keys parked for longer (a back-off
after repeated errors, a periodic RequeueAfter) are not waited for: a local run reports what is
stuck instead of retrying it for ever. The manager is stopped before returning, whatever happened.

`quiet` covers the hop from a write to the watch event that wakes the next controller (on the
embedded cluster, well under a millisecond; the default leaves a wide margin on a loaded machine).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from reconcile.errors import ReconcileError
from reconcile.manager import Manager
from reconcile.workqueue import WorkQueue

__all__ = ["busy", "run_until_idle"]

_POLL = 0.01


def run_until_idle(manager: Manager, *, quiet: float = 0.25, horizon: float = 2.0, timeout: float = 600.0) -> None:
    """Run `manager` until its controllers are idle (see the module docstring), then stop it.

    Raises ReconcileError if the caches do not sync, the manager stops on its own, or the
    controllers are still busy after `timeout` real seconds."""
    outcome: list[int] = []
    failed: list[RuntimeError] = []

    def run() -> None:
        try:
            outcome.append(manager.run())
        except RuntimeError as err:  # the process cannot start threads (a tight `ulimit -v`, say)
            failed.append(err)

    runner = threading.Thread(target=run, name="local-manager", daemon=True)
    try:
        runner.start()
    except RuntimeError as err:
        raise ReconcileError(f"the controllers could not start: {err}") from err
    try:
        _wait_running(manager, runner, timeout)
        _wait_idle(manager, runner, quiet, horizon, timeout)
    except ReconcileError:
        manager.stop()
        runner.join()  # a manager that could not start a thread is still unwinding: its error is the one to tell
        if not failed:
            raise
    finally:
        manager.stop()
        runner.join()
    if failed:
        raise ReconcileError(f"the controllers could not run: {failed[0]}") from failed[0]
    if outcome and outcome[0] != 0:
        raise ReconcileError("the controllers did not stop cleanly (a reconcile outlived the grace period)")


def _wait_running(manager: Manager, runner: threading.Thread, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while manager.state != "running":
        if not runner.is_alive() or manager.state in ("stopping", "stopped"):
            raise ReconcileError(f"the controllers stopped before starting: {manager.ready() or 'no reason given'}")
        if time.monotonic() > deadline:
            raise ReconcileError(f"the controllers did not start within {timeout:g}s: {manager.ready()}")
        time.sleep(_POLL)


def _wait_idle(manager: Manager, runner: threading.Thread, quiet: float, horizon: float, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    idle_since: float | None = None
    while True:
        now = time.monotonic()
        busy_now = any(busy(c.queue, horizon) for c in manager.controllers)
        if busy_now:
            idle_since = None
        elif idle_since is None:
            idle_since = now
        elif now - idle_since >= quiet:
            return
        if not runner.is_alive():
            raise ReconcileError("the controllers stopped unexpectedly")
        if now > deadline:
            raise ReconcileError(f"the controllers were still busy after {timeout:g}s")
        time.sleep(_POLL)


def busy(queue: WorkQueue[Any], horizon: float) -> bool:
    """Whether `queue` has a key ready, one due within `horizon` seconds (of its clock), or one
    being reconciled. Tests wait for `not busy` before asserting that nothing more happened."""
    due = queue.next_due()
    return bool(len(queue) or queue.in_flight() or (due is not None and due <= horizon))
