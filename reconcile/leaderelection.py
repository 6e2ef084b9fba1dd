"""Leader election with a `coordination.k8s.io/v1` Lease, after client-go's leaderelection package.

Promises:
  * at most one identity holds the Lease at a time: every write is a create, or an update carrying
    the resourceVersion last read, so of two candidates racing for it one gets a Conflict and
    stays a candidate;
  * a candidate takes the Lease when it is absent, released (holderIdentity ""), or expired:
    renewTime + leaseDurationSeconds < now, judged with the injected clock's `time()`;
  * a leader renews every `retry_period`; if no renewal has succeeded for `renew_deadline` (a
    request that hangs counts as failed once the deadline passes), or another holder shows up,
    it stops leading (`on_stopped_leading`), well before the `lease_duration` after which a
    candidate may take over, and logs who holds the Lease now (read afresh: "lost leadership
    to B"), or that nobody can say ("lease expired; holder unknown");
  * `leading_until` is the clock.monotonic() until which the Lease is provably held: the start
    of the last successful acquire or renewal plus `renew_deadline` (None once another holder is
    seen or the Lease is released). It is what fencing.py checks before every write and hook
    call: it needs no request, and it runs out on its own, even in a process that was paused
    and has not yet noticed;
  * on shutdown a leader releases the Lease (holderIdentity "", renewTime now, leaseDurationSeconds 1),
    so a standby takes over at its next retry instead of waiting for expiry, unless work it
    started is still running (then the Lease is left to expire);
  * `leaseTransitions` counts changes of holder.
Does not: start or stop controllers (manager.py does, from the callbacks), or read wall-clock time.
Defaults are controller-runtime's: 15 s / 10 s / 2 s.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

from reconcile.clock import SYSTEM_CLOCK, Clock
from reconcile.cluster import Cluster, Kind, Obj, ObjectKey
from reconcile.errors import ApiError, Conflict, NotFound

LEASE = Kind("coordination.k8s.io/v1", "Lease")
POLL = 0.05  # real seconds between looks at `stop` while pausing on a real clock
T = TypeVar("T")

log = logging.getLogger("porchkit.leaderelection")


def micro_time(seconds: float) -> str:
    """A Kubernetes MicroTime: `2024-01-01T00:00:00.000000Z`."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(value: Any) -> float | None:
    """Seconds since the epoch of a MicroTime or RFC 3339 time; None when absent or unreadable."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()


def is_expired(spec: dict[str, Any], now: float) -> bool:
    """Whether a Lease spec's holder has let it lapse by `now` (epoch seconds)."""
    renewed = parse_time(spec.get("renewTime")) or parse_time(spec.get("acquireTime"))
    if renewed is None:
        return True
    return renewed + float(spec.get("leaseDurationSeconds") or 0) < now


class LeaderElector:
    """One candidate for the Lease `namespace/name`; see the module docstring."""

    def __init__(self, cluster: Cluster, name: str, namespace: str, identity: str, *,
                 lease_duration: float = 15.0, renew_deadline: float = 10.0, retry_period: float = 2.0,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        if not lease_duration > renew_deadline > retry_period > 0:
            raise ValueError("need lease_duration > renew_deadline > retry_period > 0, not "
                             f"{lease_duration} / {renew_deadline} / {retry_period}")
        if not identity:
            raise ValueError("a leader election identity must not be empty")
        self.cluster, self.key, self.identity = cluster, ObjectKey(namespace, name), identity
        self.lease_duration, self.renew_deadline, self.retry_period = lease_duration, renew_deadline, retry_period
        self.clock = clock
        self.holder = ""  # the holderIdentity last observed ("" when none)
        self.last_renewed: float | None = None  # clock.monotonic() of our last successful write
        self.observed_at: float | None = None  # clock.monotonic() of our last successful read (for readiness)
        self.leading_until: float | None = None  # see the module docstring; fencing.py reads it
        self._wake = threading.Condition()

    @property
    def name(self) -> str:
        return self.key.name

    # --- one step -----------------------------------------------------------------------------

    def try_acquire_or_renew(self) -> bool:
        """One attempt to take or keep the Lease; True when we hold it afterwards. Never blocks
        beyond the requests; a Conflict (another candidate wrote first) or any API error is False."""
        started, now = self.clock.monotonic(), self.clock.time()
        try:
            current = self.cluster.get(LEASE, self.key)
            self.observed_at = self.clock.monotonic()
            if current is None:
                self._write(None, self._spec(now, None), started)
                return True
            spec = current.get("spec") or {}
            self.holder = str(spec.get("holderIdentity") or "")
            if self.holder and self.holder != self.identity and not is_expired(spec, now):
                self.leading_until = None
                return False
            self._write(current, self._spec(now, spec), started)
            return True
        except Conflict:
            log.debug("lease %s: another candidate wrote first", self.key)
            return False
        except ApiError as err:
            log.warning("lease %s: could not acquire or renew: %s", self.key, err)
            return False

    def release(self) -> bool:
        """Give the Lease up if we hold it, so a standby takes over at once; True if released."""
        try:
            current = self.cluster.get(LEASE, self.key)
            if current is None or (current.get("spec") or {}).get("holderIdentity") != self.identity:
                return False
            now = micro_time(self.clock.time())
            spec = {**current["spec"], "holderIdentity": "", "leaseDurationSeconds": 1,
                    "acquireTime": now, "renewTime": now}
            self.cluster.update({**current, "spec": spec})
        except (ApiError, NotFound) as err:
            log.warning("lease %s: could not release: %s", self.key, err)
            return False
        self.holder, self.last_renewed, self.leading_until = "", None, None
        return True

    def _spec(self, now: float, old: dict[str, Any] | None) -> dict[str, Any]:
        stamp = micro_time(now)
        spec = {"holderIdentity": self.identity, "leaseDurationSeconds": max(1, round(self.lease_duration)),
                "acquireTime": stamp, "renewTime": stamp, "leaseTransitions": 0}
        if old is not None:
            transitions = int(old.get("leaseTransitions") or 0)
            if old.get("holderIdentity") == self.identity:
                spec["acquireTime"] = old.get("acquireTime") or stamp
                spec["leaseTransitions"] = transitions
            else:
                spec["leaseTransitions"] = transitions + 1
        return spec

    def _write(self, current: Obj | None, spec: dict[str, Any], started: float) -> None:
        """Create or renew the Lease; `started` is when this attempt began (clock.monotonic()):
        the others count the lease from a renewTime stamped then, so the fence must too."""
        if current is None:
            self.cluster.create({"apiVersion": LEASE.api_version, "kind": LEASE.kind,
                                 "metadata": {"name": self.key.name, "namespace": self.key.namespace},
                                 "spec": spec})
        else:  # carries current's resourceVersion: a Conflict if anyone wrote since we read
            self.cluster.update({**current, "spec": spec})
        self.holder, self.last_renewed = self.identity, self.clock.monotonic()
        self.leading_until = started + self.renew_deadline

    # --- the loop -------------------------------------------------------------------------------

    def run(self, stop: threading.Event, on_started_leading: Callable[[], None],
            on_stopped_leading: Callable[[], bool | None], *, release_on_cancel: bool = True) -> bool:
        """Campaign until leading, lead until `stop` is set or the Lease is lost; for a thread.

        `on_started_leading` should return promptly. `on_stopped_leading` is called once leadership
        ends either way, before the Lease is released, so it may block to drain work in flight; if
        it returns False (work is still running), the Lease is not released but left to expire,
        so that no standby starts on the same objects meanwhile. Returns True when leadership was
        lost (or never had, if `stop` came first: False)."""
        while not self.try_acquire_or_renew():
            if self._pause(stop, self.retry_period):
                return False
        log.info("lease %s: %s started leading", self.key, self.identity)
        on_started_leading()
        lost = False
        try:
            while not self._pause(stop, self.retry_period):
                assert self.last_renewed is not None
                if self._renew_by(self.last_renewed + self.renew_deadline):
                    continue
                if self.holder != self.identity or self.clock.monotonic() - self.last_renewed >= self.renew_deadline:
                    lost = True
                    self._log_loss()
                    break
        finally:
            drained = on_stopped_leading()
            if not lost and release_on_cancel and drained is not False:
                self.release()
        return lost

    def _renew_by(self, deadline: float) -> bool:
        """`try_acquire_or_renew`, waited for no later than `deadline` (clock.monotonic()): a
        request that hangs must not keep this replica leading past its renew deadline, while a
        candidate may take the expired Lease. A hung attempt is left behind until it returns;
        it can then only renew a Lease we no longer act on."""
        return self._by(deadline, self.try_acquire_or_renew, "renew") is True

    def _log_loss(self) -> None:
        """Say who holds the Lease now: the holder the last attempt saw, else a fresh read (waited
        for up to one retry period), since a process that was paused knows nothing newer."""
        holder: str | None = self.holder
        if holder == self.identity:
            holder = self._by(self.clock.monotonic() + self.retry_period, self._read_holder, "read")
        if holder and holder != self.identity:
            log.warning("lease %s: %s lost leadership to %s", self.key, self.identity, holder)
            return
        why = "the Lease could not be read" if holder is None else "the Lease names no other holder yet"
        log.warning("lease %s: %s lost leadership: lease expired; holder unknown (not renewed within the %gs "
                    "renew deadline; %s)", self.key, self.identity, self.renew_deadline, why)

    def _read_holder(self) -> str | None:
        """The Lease's holderIdentity ("" when released or absent), None when it cannot be read."""
        try:
            lease = self.cluster.get(LEASE, self.key)
        except ApiError as err:
            log.debug("lease %s: could not read the holder: %s", self.key, err)
            return None
        return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")

    def _by(self, deadline: float, request: Callable[[], T], what: str) -> T | None:
        """`request()` on a thread of its own, waited for until `deadline` (clock.monotonic());
        None when it has not answered by then."""
        outcome: list[T] = []

        def attempt() -> None:
            answer = request()
            with self._wake:
                outcome.append(answer)
                self._wake.notify_all()

        threading.Thread(target=attempt, name=f"lease-{what}-{self.key.name}", daemon=True).start()
        with self._wake:
            while not outcome and (left := deadline - self.clock.monotonic()) > 0:
                self.clock.wait(self._wake, min(left, POLL))
            return outcome[0] if outcome else None

    def wake(self) -> None:
        """Cut a pause short (after setting the `stop` given to `run`)."""
        with self._wake:
            self._wake.notify_all()

    def _pause(self, stop: threading.Event, seconds: float) -> bool:
        """Wait `seconds` clock-seconds or until `stop`; True when stopped."""
        deadline = self.clock.monotonic() + seconds
        with self._wake:
            while not stop.is_set() and (left := deadline - self.clock.monotonic()) > 0:
                self.clock.wait(self._wake, min(left, POLL))
        return stop.is_set()
