"""Controller: turns changes seen by informers into keys, and keys into reconcile calls.

A controller has one primary kind and a reconcile function `reconcile(key) -> Outcome`. Its
watches map every change of a watched kind to primary keys: `For(kind)` (the object itself),
`Owns(kind)` (the controller owner of a child, when it is of the primary kind) and
`Watches(kind, mapper)` (any function of the object). Keys go through a WorkQueue, so a key is
never reconciled twice at once and a burst of changes collapses into one call.

Outcomes (see outcome.py): Done forgets the key's back-off; RequeueAfter forgets it and re-adds
the key after the delay; Terminal is recorded (log, an Event, metrics) and not retried; any
other exception is retried with per-key exponential back-off, except a deterministic one
(errors.py) when `retry_deterministic` is off (a one-off run, such as a local preview): that one
is recorded as a Terminal one is, since the run would only see it again. The Event's reason is
"ReconcileFailed" (Terminal) or "ReconcileError", unless the exception has an `event_reason`
(a DecoratorController's hook failure is a "SyncError", as Metacontroller names it). Each reconcile reports one result
to `metrics`: "success", "requeue_after", "error" or "terminal_error" (controller-runtime's
labels, except that it counts a terminal error as "error" plus a terminal-error counter: see
metrics.py). Every log line written during a reconcile, by whatever logger, carries the
controller, the key and a reconcile id (logs.py).

Fencing (fencing.py): with a `fence` (a manager electing a leader gives it one), a reconcile
starts only while the fence holds (else the key goes back with back-off, and nothing is
reported), and runs under a fencing.Guard, so that its writes (and the hook calls and other
side effects that check the guard) are refused once the fence closes. A reconcile ended that
way (NotLeading) is retried with back-off, without an Event, which would be a write. The guard
also counts the 409 Conflicts its writes get.
"""

from __future__ import annotations

import itertools
import logging
import secrets
import threading
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from reconcile import fencing, logs
from reconcile.clock import SYSTEM_CLOCK, Clock
from reconcile.cluster import Kind, Obj, ObjectKey
from reconcile.errors import NotLeading, ReconcileError, Terminal, is_deterministic
from reconcile.informer import Informer
from reconcile.objects import controller_of
from reconcile.outcome import Done, Outcome, RequeueAfter
from reconcile.selectors import parse_labels
from reconcile.workqueue import NoMetrics, QueueMetrics, WorkQueue

K = TypeVar("K", bound=Hashable)  # a controller's key: an ObjectKey, unless it reconciles something finer
Reconcile = Callable[[K], Outcome]
Mapper = Callable[[Obj], Iterable[K]]

log = logging.getLogger("porchkit.controller")

# Reconcile ids: this process's random prefix and a counter (uuid4 reads the OS's randomness on
# every call, a visible cost when a reconcile takes a few hundred microseconds).
_RUN = secrets.token_hex(4)
_RECONCILES = itertools.count()

# The results of a reconcile, as reported to Metrics.reconciled and returned by Controller.process.
SUCCESS, REQUEUE_AFTER, ERROR, TERMINAL_ERROR = "success", "requeue_after", "error", "terminal_error"
FENCED = "fenced"  # returned by process() for a reconcile not started (the fence was closed); not reported


@dataclass(frozen=True)
class Watch(Generic[K]):
    """A watched kind and how its objects map to primary keys (`to_keys` gets the primary kind).

    `namespace` and `labels` narrow the informer: the API server lists and watches only what
    they select (an object that stops matching `labels` arrives as a deletion, carrying its last
    matching state), and watches that select alike share one informer. `metadata_only` caches
    just the metadata (and asks the server for no more), for kinds whose objects are only mapped
    to keys (children found by owner, say) or selected on their metadata. `changes`, when
    given, says whether a change `(old, new)` is worth a reconcile at all (a status-only update,
    say, may not be): changes it refuses map to no keys. `delay` (seconds) holds the keys back a
    little, so that a burst of changes (the children a reconcile just created) brings one
    reconcile instead of one per change."""

    kind: Kind
    to_keys: Callable[[Obj, Kind], Iterable[K]]
    namespace: str = ""
    labels: Any = None
    metadata_only: bool = False
    changes: Callable[[Obj | None, Obj | None], bool] | None = None
    delay: float = 0.0


def For(kind: Kind, **scope: Any) -> Watch[ObjectKey]:  # noqa: N802 - reads as a declaration: For(DEPLOYMENT)
    """The primary kind itself: an object's change reconciles that object."""
    return Watch(kind, lambda obj, primary: [ObjectKey.of(obj)], **scope)


def Owns(kind: Kind, **scope: Any) -> Watch[ObjectKey]:  # noqa: N802
    """Children: a change reconciles the child's controller owner, if it is of the primary kind."""
    def owner_key(obj: Obj, primary: Kind) -> list[ObjectKey]:
        ref = controller_of(obj)
        if ref is None or ref.get("kind") != primary.kind or ref.get("apiVersion") != primary.api_version:
            return []
        return [ObjectKey(ObjectKey.of(obj).namespace, str(ref.get("name")))]
    return Watch(kind, owner_key, **scope)


def Watches(kind: Kind, mapper: Mapper[K], **scope: Any) -> Watch[K]:  # noqa: N802
    """Any other kind: `mapper(obj)` names the primary keys a change affects."""
    return Watch(kind, lambda obj, primary: mapper(obj), **scope)


class Informers(Protocol):
    """Where a controller gets its informers (reconcile.cache.InformerCache): each `acquire` is
    held until its `release`."""

    def acquire(self, kind: Kind, *, namespace: str = "", labels: Any = None,
                metadata_only: bool = False) -> Informer: ...

    def release(self, informer: Informer) -> None: ...


Handler = Callable[[Obj | None, Obj | None], None]


class Metrics(QueueMetrics, Protocol):
    """What a controller reports (reconcile.metrics.Metrics implements it): its own series, and
    its queue's (the queue is named after the controller). Calls must be quick and thread-safe."""

    def workers_started(self, controller: str, workers: int) -> None:
        """`run` started `workers` workers (controller_runtime_max_concurrent_reconciles)."""
        ...

    def reconcile_started(self, controller: str) -> None:
        """A worker began a reconcile (controller_runtime_active_workers + 1 until `reconciled`)."""
        ...

    def reconciled(self, controller: str, result: str, seconds: float) -> None:
        """A reconcile ended: `result` is SUCCESS, REQUEUE_AFTER, ERROR or TERMINAL_ERROR."""
        ...

    def write_conflict(self, controller: str, group: str, kind: str) -> None:
        """A write of one of its reconciles got a 409 Conflict (porchkit_write_conflicts_total)."""
        ...


class EventRecorder(Protocol):
    def record(self, kind: Kind, key: ObjectKey, event_type: str, reason: str, message: str) -> None: ...


class _NoMetrics(NoMetrics):
    def workers_started(self, controller: str, workers: int) -> None:
        pass

    def reconcile_started(self, controller: str) -> None:
        pass

    def reconciled(self, controller: str, result: str, seconds: float) -> None:
        pass

    def write_conflict(self, controller: str, group: str, kind: str) -> None:
        pass


Scope = tuple[Kind, str, str, bool]  # kind, namespace, label selector (canonical text), metadata only


def _scope(watch: Watch[Any]) -> Scope:
    return (watch.kind, watch.namespace, str(parse_labels(watch.labels)), watch.metadata_only)


@dataclass(frozen=True)
class _Binding:
    """One watch of a controller: the informer it holds and the handler it added."""

    scope: Scope
    informers: Informers
    informer: Informer
    handler: Handler

    def drop(self) -> None:
        self.informer.remove_handler(self.handler)
        self.informers.release(self.informer)


class _QueueRelay:
    """The queue's metrics: whatever the controller's `metrics` is now (a manager sets it when the
    controller is added, after the queue was built)."""

    def __init__(self, controller: Controller) -> None:
        self._controller = controller

    def added(self, name: str) -> None:
        self._controller.metrics.added(name)

    def depth(self, name: str, n: int) -> None:
        self._controller.metrics.depth(name, n)

    def retried(self, name: str) -> None:
        self._controller.metrics.retried(name)

    def queue_latency(self, name: str, seconds: float) -> None:
        self._controller.metrics.queue_latency(name, seconds)

    def work_duration(self, name: str, seconds: float) -> None:
        self._controller.metrics.work_duration(name, seconds)


@dataclass
class Controller(Generic[K]):
    """Reconciles keys of `kind`. Its own objects are watched with `For(kind)` unless `primary`
    says otherwise (a filter on changes, a narrower scope, a custom mapping).

    Keys are the ObjectKeys of `kind`'s objects, unless the controller reconciles something finer
    (a MapController reconciles one parent's one input): then `primary` is required, and
    `event_key` names the object of `kind` that its Events are about. `fence`, when set (by a
    manager that elects a leader), gates every reconcile and everything it writes.
    `retry_deterministic` off gives up on deterministic errors (see the module docstring)."""

    name: str
    kind: Kind
    reconcile: Reconcile[K]
    watches: Sequence[Watch[K]] = ()
    primary: Watch[K] | None = None
    workers: int = 1
    clock: Clock = SYSTEM_CLOCK
    metrics: Metrics = field(default_factory=_NoMetrics)
    events: EventRecorder | None = None
    event_key: Callable[[K], ObjectKey] | None = None
    fence: fencing.Fence | None = None
    retry_deterministic: bool = True
    queue: WorkQueue[K] = field(init=False)
    _late: set[Scope] = field(init=False, default_factory=set)
    _late_lock: threading.Lock = field(init=False, default_factory=threading.Lock)
    _bound: list[_Binding] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        self.queue = WorkQueue(name=self.name, clock=self.clock, metrics=_QueueRelay(self))

    # --- wiring ---------------------------------------------------------------------------

    def bind(self, informers: Informers) -> list[Informer]:
        """Subscribe to the informers of the primary kind and every watch; returns them."""
        used = []
        primary: Watch[Any] = self.primary or For(self.kind)
        for watch in (primary, *self.watches):
            used.append(self._subscribe(informers, watch))
        return used

    def unbind(self) -> None:
        """Unsubscribe from every informer `bind` and `watch_more` subscribed to, and release them
        (an informer nobody else holds then stops: reconcile.cache). Call it once the controller's
        reconciles have ended: they may read what these informers hold."""
        with self._late_lock:
            bound, self._bound = self._bound, []
            self._late.clear()
        for binding in bound:
            binding.drop()

    def watch_more(self, informers: Informers, watch: Watch[K]) -> Informer:
        """Start one more watch while running, for a kind or a selection learnt from the objects
        themselves (an injected kind, an objectSelector's, a parent's selector), and return its
        informer. Once per kind, namespace, label selector and metadata-only (until `unwatch`);
        later calls return the informer of the first."""
        scope = _scope(watch)
        with self._late_lock:
            if scope in self._late:
                return next(b.informer for b in self._bound if b.scope == scope)
            self._late.add(scope)
            binding = self._bind(informers, watch)
        binding.informer.add_handler(binding.handler)  # outside the lock: it replays into the mapper
        return binding.informer

    def unwatch(self, watch: Watch[K]) -> None:
        """Undo `watch_more` for the watch's scope (no object needs it any more: a parent's old
        selection, a kind no objectSelector names now): its changes no longer reach this controller
        and its informer is released. A scope not watched through `watch_more` is left alone."""
        scope = _scope(watch)
        with self._late_lock:
            if scope not in self._late:
                return
            self._late.discard(scope)
            binding = next(b for b in reversed(self._bound) if b.scope == scope)  # not bind()'s
            self._bound.remove(binding)
        binding.drop()

    def _subscribe(self, informers: Informers, watch: Watch[Any]) -> Informer:
        with self._late_lock:
            binding = self._bind(informers, watch)
        binding.informer.add_handler(binding.handler)
        return binding.informer

    def _bind(self, informers: Informers, watch: Watch[Any]) -> _Binding:  # with self._late_lock held
        informer = informers.acquire(watch.kind, namespace=watch.namespace, labels=watch.labels,
                                     metadata_only=watch.metadata_only)
        binding = _Binding(_scope(watch), informers, informer, self._handler(watch, informer))
        self._bound.append(binding)
        return binding

    def _handler(self, watch: Watch[Any], informer: Informer) -> Handler:
        wanted, delay = watch.changes, watch.delay

        def enqueue(old: Obj | None, new: Obj | None) -> None:
            if wanted is not None and not wanted(old, new):
                return
            # Changes found by a list (start-up, relist) go in at low priority, so that live
            # changes overtake the flood.
            low = informer.listing
            for obj in (old, new):
                if obj is not None:
                    for key in watch.to_keys(obj, self.kind):
                        if delay > 0 and not low:
                            self.queue.add_after(key, delay)
                        else:
                            self.queue.add(key, low_priority=low)
        return enqueue

    # --- running --------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> list[threading.Thread]:
        """Start the worker threads; they stop when `stop` is set and the queue shuts down."""
        threads = [threading.Thread(target=self._work, name=f"{self.name}-{i}", daemon=True)
                   for i in range(self.workers)]
        self.metrics.workers_started(self.name, self.workers)
        for thread in threads:
            thread.start()
        return threads

    def _work(self) -> None:
        while (key := self.queue.get()) is not None:
            try:
                self.process(key)
            finally:
                self.queue.done(key)

    def process(self, key: K) -> str:
        """Reconcile one key and act on the outcome; returns the result reported to metrics
        (SUCCESS, REQUEUE_AFTER, ERROR or TERMINAL_ERROR), or FENCED when the fence was closed
        and nothing started. Log lines written meanwhile, on this thread, carry the controller,
        the key and a fresh reconcile id (see logs.py)."""
        if not self._fence_open(key):
            return FENCED
        self.metrics.reconcile_started(self.name)
        started = self.clock.monotonic()
        guard = fencing.Guard(self.name, self.fence, self.metrics)
        with logs.reconcile_context(self.name, str(key), f"{_RUN}{next(_RECONCILES):08x}"), fencing.guarding(guard):
            result = self._reconcile(key)
        self.metrics.reconciled(self.name, result, max(0.0, self.clock.monotonic() - started))
        return result

    def _fence_open(self, key: K) -> bool:
        """Whether a reconcile may start now; if not, the key goes back, with back-off (the
        manager is about to stop this controller, but a key is never dropped on the way)."""
        if self.fence is None:
            return True
        try:
            self.fence.check()
        except NotLeading as err:
            self.queue.add_rate_limited(key)
            log.debug("%s %s: not reconciled: %s", self.name, key, err)
            return False
        return True

    def _reconcile(self, key: K) -> str:
        try:
            outcome = self.reconcile(key)
            if not isinstance(outcome, Done | RequeueAfter):  # a bug in the reconcile: said loudly, retried
                raise TypeError(f"reconcile returned {outcome!r}: return Done() or RequeueAfter(seconds)")
        except NotLeading as err:
            self.queue.add_rate_limited(key)
            log.warning("%s %s: stopped: %s", self.name, key, err)
            return ERROR  # no Event: recording one is a write
        except Terminal as err:
            return self._give_up(key, err, "ReconcileFailed")
        except Exception as err:
            if not self.retry_deterministic and is_deterministic(err):
                return self._give_up(key, err, "ReconcileError")
            self.queue.add_rate_limited(key)
            log.error("%s %s: %s (retry %d, with back-off)", self.name, key, err, self.queue.num_requeues(key),
                      exc_info=not isinstance(err, ReconcileError))
            self._record(key, "Warning", getattr(err, "event_reason", "ReconcileError"), str(err))
            return ERROR
        self.queue.forget(key)
        if isinstance(outcome, RequeueAfter):
            self.queue.add_after(key, outcome.seconds)
            return REQUEUE_AFTER
        return SUCCESS

    def _give_up(self, key: K, err: Exception, reason: str) -> str:
        """Record a failure that retrying cannot fix (`reason` unless the error names its own)."""
        self.queue.forget(key)
        log.warning("%s %s: %s (not retried)", self.name, key, err)
        self._record(key, "Warning", getattr(err, "event_reason", reason), str(err))
        return TERMINAL_ERROR

    def _record(self, key: K, event_type: str, reason: str, message: str) -> None:
        if self.events is not None:
            try:
                about = self.event_key(key) if self.event_key is not None else key
                self.events.record(self.kind, about, event_type, reason, message)  # type: ignore[arg-type]
            except Exception:  # an event is best effort: never fail a reconcile over it
                log.debug("could not record an event for %s", key, exc_info=True)

