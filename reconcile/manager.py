"""Manager: runs any set of controllers in one process, over one shared informer cache.

`run()` goes through these states (`manager.state`):

    new ──▶ syncing ──▶ standby ──▶ running ──▶ stopping ──▶ stopped
             informers    caches      workers     queues drain,
             list+watch   synced      reconcile   Lease released, informers stop

* syncing: every controller's informers start (one per watched scope, shared by all controllers)
  and, with leader election, the campaign for the Lease starts alongside (a warm standby: a
  replica that takes over has its caches full already). Caches that have not synced within
  `sync_timeout` end the run.
* standby: the caches are synced; without leader election this state lasts no time at all.
* running: leading (or not electing), each controller's workers start.
* stopping, after `stop()`, SIGTERM or SIGINT (handlers are installed while `run()` runs on the
  main thread; a second signal ends the process at once, with status 1): the queues stop handing
  out keys, the reconciles in flight finish (waiting up to `grace_period`), the Lease is
  released so a standby takes over at once (unless a reconcile is still running: then it is
  left to expire, lest the standby start on the same keys), and the informers stop. Last, the
  callbacks given to `on_stop()` run: an owner of controllers added while running (the
  supervisor of DecoratorControllers) releases what they hold beyond the manager's reach (hook
  threads, connections), so that nothing of the run outlives it.
* Leadership lost (the Lease could not be renewed for `renew_deadline`, or another holder shows up):
  workers stop the same way, the Lease is not released, and `run()` returns 1. The process must
  then exit, as controller-runtime's does: another replica leads now, and a fresh process can
  stand by again.
* Fencing, with leader election: every controller gets the manager's `fence` (fencing.py), open
  while the Lease is provably held (`renew_deadline` from the start of the last successful
  renewal, by the monotonic clock). Once it closes, no reconcile starts, and every write of one
  in flight (and every hook call or other side effect guarded by `fencing.check()`) fails with
  NotLeading, even before the campaign notices the loss: a process resumed from SIGSTOP checks
  the time before its first request, not after its next renewal attempt. The Events controllers
  record are writes of their reconciles: fenced too.

`run()` returns 0 after a requested stop whose reconciles all finished in time, and 1 when the
caches did not sync, leadership was lost, or reconciles were still running after the grace period.
Time (sync timeout, grace period, lease timing) is read from the injected clock; a manager runs once.
`retry_deterministic=False` is for one-off runs (a local preview): every controller then records a
deterministic error (errors.py) once instead of retrying it.
Does not: serve HTTP (health.py serves the manager's checks and metrics), or configure logging.
"""

from __future__ import annotations

import logging
import signal
import socket
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import Literal

from reconcile.cache import InformerCache
from reconcile.clock import SYSTEM_CLOCK, Clock
from reconcile.cluster import Cluster
from reconcile.controller import Controller, EventRecorder
from reconcile.fencing import Fence, LeaseFence
from reconcile.leaderelection import LeaderElector
from reconcile.metrics import Metrics

State = Literal["new", "syncing", "standby", "running", "stopping", "stopped"]
POLL = 0.1  # real seconds between the supervisor's looks at signals and informers

log = logging.getLogger("porchkit.manager")


@dataclass(frozen=True, slots=True)
class LeaderElection:
    """Lease-based leader election (`coordination.k8s.io/v1` Lease `namespace/name`), with
    controller-runtime's timing. `identity` defaults to `<hostname>_<uuid>`."""

    namespace: str
    name: str
    identity: str = ""
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


def default_identity() -> str:
    """A leader election identity unique to this process, as controller-runtime makes it."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


class Manager:
    """Runs controllers over one InformerCache on one Cluster; see the module docstring.

    Build it, `add()` controllers, then `run()` (on the main thread to get signal handling, or on
    any thread and call `stop()`). `cluster`, `cache`, `clock` and `metrics` are public: controllers
    are built from them. `fence` is None without leader election."""

    def __init__(self, cluster: Cluster, *, clock: Clock = SYSTEM_CLOCK, metrics: Metrics | None = None,
                 events: EventRecorder | None = None, leader_election: LeaderElection | None = None,
                 sync_timeout: float = 120.0, grace_period: float = 30.0, retry_deterministic: bool = True) -> None:
        if sync_timeout <= 0 or grace_period < 0:
            raise ValueError(f"need sync_timeout > 0 and grace_period >= 0, not {sync_timeout} / {grace_period}")
        self.cluster, self.clock = cluster, clock
        self.metrics = metrics if metrics is not None else Metrics()
        self.events = events
        self.cache = InformerCache(cluster, clock=clock)
        self.controllers: list[Controller] = []
        self.sync_timeout, self.grace_period = sync_timeout, grace_period
        self.retry_deterministic = retry_deterministic
        self.elector: LeaderElector | None = None
        self.fence: Fence | None = None
        if (election := leader_election) is not None:
            self.elector = LeaderElector(cluster, election.name, election.namespace,
                                         election.identity or default_identity(),
                                         lease_duration=election.lease_duration,
                                         renew_deadline=election.renew_deadline,
                                         retry_period=election.retry_period, clock=clock)
            self.fence = LeaseFence(self.elector)
            self.metrics.leading(election.name, False)
        self.metrics.track_informers(lambda: self.cache.informers, clock)

        self._cond = threading.Condition()  # guards the fields below; the supervisor waits on it
        self._state: State = "new"
        self._stop_requested = False
        self._leading = False
        self._lost = False
        self._signalled: int | None = None  # set by the signal handler, which takes no lock
        self._forced = False  # a second signal: exiting now, no grace period
        self._workers: list[threading.Thread] = []
        self._threads_of: dict[str, list[threading.Thread]] = {}
        self._campaign: threading.Thread | None = None
        self._cache_stop = threading.Event()
        self._elector_stop = threading.Event()
        self._drain_lock = threading.Lock()
        self._drained: bool | None = None
        self._on_stop: list[Callable[[], None]] = []

    # --- wiring -------------------------------------------------------------------------------

    def add(self, controller: Controller) -> None:
        """Wire a controller in: it reports to this manager's metrics (and event recorder, unless it
        has its own), is fenced by its fence, retries deterministic errors or not as it says, and
        subscribes to the shared cache. Raises ValueError for a second controller of the same name
        (names label metrics and logs) or another clock.

        Controllers are usually added before `run()`. One added while the manager runs (a
        controller built from an object, such as a DecoratorController) gets its informers started
        at once and its workers as soon as the manager leads; its first reconciles may come before
        its informers have synced, so it reads through the cache (`cache.get`/`cache.list` wait
        for a sync) rather than from an informer directly. Raises RuntimeError once stopping."""
        with self._cond:
            if self._state in ("stopping", "stopped"):
                raise RuntimeError("the manager is stopping: no controller can be added")
            if any(existing.name == controller.name for existing in self.controllers):
                raise ValueError(f"a controller named {controller.name!r} was already added")
            if controller.clock is not self.clock:
                raise ValueError(f"controller {controller.name!r} reads another clock than its manager")
            controller.metrics = self.metrics
            controller.fence = self.fence
            controller.retry_deterministic = self.retry_deterministic
            self.metrics.track_queue(controller.queue)
            if controller.events is None:
                controller.events = self.events
            controller.bind(self.cache)
            self.controllers.append(controller)
            if self._state == "running":
                self._run_controller(controller)

    def remove(self, controller: Controller) -> bool:
        """Take a controller out while the manager runs (or before): its queue shuts down (so the
        changes it still hears are dropped), this waits (up to the grace period) for its reconciles
        in flight, then it unsubscribes and releases its informers (one nobody else holds stops:
        not before, as a reconcile in flight reads them). Returns False if a reconcile was still
        running after the grace period. Removing an unknown controller does nothing."""
        with self._cond:
            if controller not in self.controllers:
                return True
            self.controllers.remove(controller)
            threads = self._threads_of.pop(controller.name, [])
        drained = controller.queue.shutdown(drain=True, timeout=self.grace_period)
        controller.unbind()
        self.metrics.untrack_queue(controller.queue)
        if drained:
            for thread in threads:
                thread.join()
            with self._cond:
                self._workers = [worker for worker in self._workers if worker not in threads]
        return drained

    def on_stop(self, callback: Callable[[], None]) -> None:
        """Call `callback` once, when a run stops: after the workers and informers have, before
        `run()` returns. An exception it raises is logged; the other callbacks run all the same."""
        with self._cond:
            self._on_stop.append(callback)

    # --- state, for health checks ---------------------------------------------------------------

    @property
    def state(self) -> State:
        return self._state

    @property
    def leading(self) -> bool:
        """Whether this manager may reconcile: it holds the Lease, or elects no leader."""
        return self._leading if self.elector is not None else self._state == "running"

    def unsynced(self) -> list[str]:
        """The kinds whose informers have not finished their first list, sorted."""
        return sorted({str(informer.kind) for informer in self.cache.informers if not informer.synced.is_set()})

    def ready(self) -> str | None:
        """None when this replica is ready (synced, and leading or a healthy standby); else why not."""
        state = self._state
        if state == "new":
            return "the manager has not started"
        if state in ("stopping", "stopped"):
            return "the manager is shutting down"
        unsynced = self.unsynced()
        if unsynced:
            return f"informer caches not synced yet: {', '.join(unsynced)}"
        if self.elector is not None and not self._leading:
            elector, now = self.elector, self.clock.monotonic()
            if elector.observed_at is None or now - elector.observed_at > elector.lease_duration:
                return f"standing by, but the Lease {elector.key} could not be read for {elector.lease_duration:g}s"
        return None

    # --- running --------------------------------------------------------------------------------

    def stop(self) -> None:
        """Ask `run()` to shut down gracefully; returns at once (thread-safe, idempotent)."""
        with self._cond:
            self._stop_requested = True
            self._cond.notify_all()

    def run(self) -> int:
        """Run until stopped; see the module docstring for the states and the exit status."""
        self._start()  # raises for a second run, before anything of the first is touched
        restore = self._install_signal_handlers()
        try:
            code = self._supervise()
        finally:
            try:
                drained = self._shutdown()
            finally:
                restore()
        return code if drained else 1

    def _start(self) -> None:
        with self._cond:
            if self._state != "new":
                raise RuntimeError("a manager runs only once")
            self._state = "syncing"
        log.info("starting %d controller(s): %s", len(self.controllers),
                 ", ".join(c.name for c in self.controllers) or "none")
        self.cache.start(self._cache_stop)
        if self.elector is not None:
            self._campaign = threading.Thread(target=self._elect, name="leader-election", daemon=True)
            self._campaign.start()

    def _supervise(self) -> int:
        """Start workers once synced and leading; return the exit status when the run must end."""
        deadline = self.clock.monotonic() + self.sync_timeout
        with self._cond:
            while True:
                if self._signalled is not None:
                    log.info("received %s: shutting down", signal.Signals(self._signalled).name)
                    return 0
                if self._stop_requested:
                    log.info("stop requested: shutting down")
                    return 0
                if self._lost:
                    log.error("leadership lost: stopping, so that only the new leader reconciles")
                    return 1
                if self._state == "syncing":
                    unsynced = self.unsynced()
                    if not unsynced:
                        self._state = "standby"
                        log.info("informer caches synced" + (
                            f"; waiting to lead Lease {self.elector.key}" if self.elector is not None else ""))
                    elif self.clock.monotonic() >= deadline:
                        log.error("informer caches not synced within %gs: %s", self.sync_timeout,
                                  ", ".join(unsynced))
                        return 1
                if self._state == "standby" and (self.elector is None or self._leading):
                    self._start_workers()
                self._cond.wait(POLL)

    def _start_workers(self) -> None:  # with self._cond held
        self._state = "running"
        for controller in self.controllers:
            self._run_controller(controller)
        log.info("workers started: %s", ", ".join(f"{c.name} x{c.workers}" for c in self.controllers) or "none")

    def _run_controller(self, controller: Controller) -> None:  # with self._cond held
        threads = controller.run(self._cache_stop)
        self._threads_of[controller.name] = threads
        self._workers += threads

    def _elect(self) -> None:
        assert self.elector is not None
        try:
            lost = self.elector.run(self._elector_stop, self._started_leading, self._stopped_leading)
        except Exception:  # a bug in the campaign: without it this replica must not go on
            log.exception("leader election failed")
            lost = True
        if lost:
            with self._cond:
                self._lost = True
                self._cond.notify_all()

    def _started_leading(self) -> None:
        assert self.elector is not None
        self.metrics.leading(self.elector.name, True)
        with self._cond:
            self._leading = True
            self._cond.notify_all()

    def _stopped_leading(self) -> bool:
        """On the campaign's thread, before the Lease is released: drain first, then release (only
        when every reconcile finished: otherwise a standby would start on the same keys)."""
        assert self.elector is not None
        self.metrics.leading(self.elector.name, False)
        with self._cond:
            self._leading = False
            if not self._elector_stop.is_set():
                self._lost = True  # not asked to stop: the Lease was lost
            self._cond.notify_all()
        return self._stop_workers()

    # --- stopping -------------------------------------------------------------------------------

    def _shutdown(self) -> bool:
        """Drain workers, end the campaign (releasing the Lease), stop informers. True when every
        reconcile in flight finished within the grace period."""
        with self._cond:
            if self._state in ("new", "stopped"):
                return True
            self._state = "stopping"
        if self._campaign is not None:
            assert self.elector is not None
            self._elector_stop.set()
            self.elector.wake()
            self._campaign.join()  # bounded: draining takes at most the grace period
        drained = self._stop_workers()
        self._cache_stop.set()
        self.cache.stop()
        with self._cond:
            callbacks = list(self._on_stop)
        for callback in callbacks:
            try:
                callback()
            except Exception:  # one owner's failure to clean up must not keep the others from theirs
                log.exception("an on_stop callback failed")
        with self._cond:
            self._state = "stopped"
        log.info("stopped")
        return drained

    def _stop_workers(self) -> bool:
        """Shut every queue down, waiting up to the grace period for reconciles in flight; once."""
        with self._drain_lock:
            if self._drained is not None:
                return self._drained
            with self._cond:
                controllers = list(self.controllers)
            for controller in controllers:
                controller.queue.shutdown()  # no new keys from now on, for any controller
            deadline = self.clock.monotonic() + (0.0 if self._forced else self.grace_period)
            drained = True
            for controller in controllers:
                left = max(0.0, deadline - self.clock.monotonic())
                drained = controller.queue.shutdown(drain=True, timeout=left) and drained
            if drained:
                for worker in self._workers:
                    worker.join()  # each is past its last key: get() returns None after shutdown
            else:
                busy = sum(worker.is_alive() for worker in self._workers)
                log.error("%d reconcile(s) still running after the %gs grace period", busy, self.grace_period)
            self._drained = drained
            return drained

    def _install_signal_handlers(self) -> Callable[[], None]:
        """SIGTERM and SIGINT request a graceful stop, a second one exits at once (SystemExit 1); only on
        the main thread (Python delivers signals there). Returns a function restoring the old ones."""
        if threading.current_thread() is not threading.main_thread():
            return lambda: None

        def handle(signum: int, frame: FrameType | None) -> None:
            # No locks here: the handler runs between two bytecodes of the main thread, which may
            # hold any of them. The supervisor polls `_signalled`.
            if self._signalled is not None:
                self._forced = True
                raise SystemExit(1)
            self._signalled = signum

        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
        for sig in previous:
            signal.signal(sig, handle)

        def restore() -> None:
            for sig, handler in previous.items():
                signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        return restore
