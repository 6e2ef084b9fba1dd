"""Fencing: a replica that cannot prove it still holds its Lease makes no write and no hook call.

Leader election alone does not stop a leader that was paused (SIGSTOP, a long GC pause, a frozen
VM) past its lease: when it wakes, its threads carry on with what they were doing, on input that
may be minutes old, while another replica leads. So each reconcile runs under a `Guard`, and
everything it does to the world is checked against the manager's `Fence` first:

  * `Controller.process` does not start a reconcile (the key goes back with back-off);
  * both Cluster backends refuse every write verb (create, update, update_status, patch, apply,
    delete) with NotLeading before sending it — `write()` below;
  * a hook call, or any other side effect of a reconcile (a git push, a request to another
    service), must be preceded by `check()`, on the reconcile's thread, as late as possible.

The Lease is *provably held* until `renew_deadline` after the start of the last successful
renewal, on the monotonic clock (`LeaderElector.leading_until`). Checking that needs no API
call, so a process resuming from a pause knows before its first request. The margin between
`renew_deadline` and `lease_duration` (5 s by default) covers the gap between the two replicas'
clocks. What no client-side check can close: a pause between a check and the moment the request
leaves (microseconds) lets that one request through; Kubernetes has no fencing tokens for writes.

The guard is also where contention is counted: every 409 Conflict a write of a reconcile gets
goes to `porchkit_write_conflicts_total{controller,group,kind}` and a debug log line, here and
nowhere else, because every write of every controller passes this point, whichever helper made
it and whether or not the caller then swallows the Conflict (AlreadyExists, a create racing
another, is not contention and is not counted).

The guard lives in a context variable (per thread, like logs.reconcile_context), so writes and
hook calls made on the reconcile's thread are covered, through whatever Cluster object they go.
Work the reconcile hands to another thread is covered only if that thread runs in a copy of the
reconcile's context (`contextvars.copy_context().run`). Outside any reconcile (start-up, the
leader election itself, tests), nothing is checked or counted.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from reconcile.clock import Clock
from reconcile.cluster import Kind, ObjectKey
from reconcile.errors import AlreadyExists, Conflict, NotLeading

__all__ = ["ConflictMetrics", "Fence", "Guard", "LeaseFence", "check", "guarding", "write"]

log = logging.getLogger("porchkit.fencing")


class Fence(Protocol):
    def check(self) -> None:
        """Return when this replica provably leads now; raise NotLeading otherwise. No I/O."""


class Lease(Protocol):
    """What LeaseFence reads of a LeaderElector."""

    key: ObjectKey
    identity: str
    renew_deadline: float
    clock: Clock

    @property
    def leading_until(self) -> float | None:
        """clock.monotonic() until which the Lease is provably held; None when it is not held."""


class LeaseFence:
    """The fence of a manager that elects a leader: open while its elector's Lease is provably held."""

    def __init__(self, lease: Lease) -> None:
        self.lease = lease

    def holds(self) -> bool:
        until = self.lease.leading_until
        return until is not None and self.lease.clock.monotonic() < until

    def check(self) -> None:
        lease = self.lease
        until = lease.leading_until
        if until is None:
            raise NotLeading(f"lease {lease.key}: {lease.identity} does not hold it: no writes or hook calls")
        late = lease.clock.monotonic() - until
        if late >= 0:
            raise NotLeading(f"lease {lease.key}: {lease.identity} cannot prove it still holds it (not renewed "
                             f"for {late + lease.renew_deadline:.1f}s, renew deadline {lease.renew_deadline:g}s): "
                             "no writes or hook calls")


class ConflictMetrics(Protocol):
    def write_conflict(self, controller: str, group: str, kind: str) -> None:
        """A write of `controller`'s reconcile got a 409 Conflict (porchkit_write_conflicts_total)."""


@dataclass(frozen=True, slots=True)
class Guard:
    """What the reconcile running on a thread is checked against, and reports contention to."""

    controller: str
    fence: Fence | None
    metrics: ConflictMetrics


_current: contextvars.ContextVar[Guard | None] = contextvars.ContextVar("porchkit_guard", default=None)


@contextlib.contextmanager
def guarding(guard: Guard) -> Iterator[None]:
    """Within the block, writes and hook calls on this thread are fenced and counted by `guard`."""
    token = _current.set(guard)
    try:
        yield
    finally:
        _current.reset(token)


def check() -> None:
    """NotLeading when the reconcile running on this thread belongs to a replica that cannot
    prove it still holds its Lease; nothing outside a reconcile or without leader election.
    Call it immediately before any side effect (a hook call, a request to anything else)."""
    guard = _current.get()
    if guard is not None and guard.fence is not None:
        guard.fence.check()


@contextlib.contextmanager
def write(kind: Kind, key: ObjectKey) -> Iterator[None]:
    """Around one write of a Cluster backend: `check()` before it, and a Conflict out of it
    counted (then re-raised) for the reconcile running on this thread."""
    guard = _current.get()
    if guard is None:
        yield
        return
    if guard.fence is not None:
        guard.fence.check()
    try:
        yield
    except Conflict as err:
        if not isinstance(err, AlreadyExists):
            _count_conflict(guard, kind, key)
        raise


def _count_conflict(guard: Guard, kind: Kind, key: ObjectKey) -> None:
    guard.metrics.write_conflict(guard.controller, kind.group, kind.kind)
    log.debug("write conflict: controller %s, %s %s: another writer changed it first (409 Conflict)",
              guard.controller, kind, key)
