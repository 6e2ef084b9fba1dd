"""Controller: turns changes seen by informers into keys, and keys into reconcile calls.

A controller has one primary kind and a reconcile function `reconcile(key) -> Outcome`. Its
watches map every change of a watched kind to primary keys: `For(kind)` (the object itself),
`Owns(kind)` (the controller owner of a child, when it is of the primary kind) and
`Watches(kind, mapper)` (any function of the object). Keys go through a WorkQueue, so a key is
never reconciled twice at once and a burst of changes collapses into one call.

Outcomes (see outcome.py): Done forgets the key's back-off; RequeueAfter forgets it and re-adds
the key after the delay; Terminal is recorded (log, an Event, metrics) and not retried; any
other exception is retried with per-key exponential back-off.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from reconcile.clock import SYSTEM_CLOCK, Clock
from reconcile.cluster import Kind, Obj, ObjectKey
from reconcile.errors import ApiError, Terminal
from reconcile.informer import Informer
from reconcile.objects import controller_of
from reconcile.outcome import Done, Outcome, RequeueAfter
from reconcile.workqueue import WorkQueue

Reconcile = Callable[[ObjectKey], Outcome | None]
Mapper = Callable[[Obj], Iterable[ObjectKey]]

log = logging.getLogger("porchkit.controller")


@dataclass(frozen=True)
class Watch:
    """A watched kind and how its objects map to primary keys (`to_keys` gets the primary kind)."""

    kind: Kind
    to_keys: Callable[[Obj, Kind], Iterable[ObjectKey]]
    namespace: str = ""
    labels: Any = None


def For(kind: Kind, **scope: Any) -> Watch:  # noqa: N802 - reads as a declaration: For(DEPLOYMENT)
    """The primary kind itself: an object's change reconciles that object."""
    return Watch(kind, lambda obj, primary: [ObjectKey.of(obj)], **scope)


def Owns(kind: Kind, **scope: Any) -> Watch:  # noqa: N802
    """Children: a change reconciles the child's controller owner, if it is of the primary kind."""
    def owner_key(obj: Obj, primary: Kind) -> list[ObjectKey]:
        ref = controller_of(obj)
        if ref is None or ref.get("kind") != primary.kind or ref.get("apiVersion") != primary.api_version:
            return []
        return [ObjectKey(ObjectKey.of(obj).namespace, str(ref.get("name")))]
    return Watch(kind, owner_key, **scope)


def Watches(kind: Kind, mapper: Mapper, **scope: Any) -> Watch:  # noqa: N802
    """Any other kind: `mapper(obj)` names the primary keys a change affects."""
    return Watch(kind, lambda obj, primary: mapper(obj), **scope)


class Informers(Protocol):
    def informer(self, kind: Kind, *, namespace: str = "", labels: Any = None) -> Informer: ...


class Metrics(Protocol):
    def reconciled(self, controller: str, result: str, seconds: float) -> None: ...


class EventRecorder(Protocol):
    def record(self, kind: Kind, key: ObjectKey, event_type: str, reason: str, message: str) -> None: ...


class _NoMetrics:
    def reconciled(self, controller: str, result: str, seconds: float) -> None:
        pass


@dataclass
class Controller:
    name: str
    kind: Kind
    reconcile: Reconcile
    watches: Sequence[Watch] = ()
    workers: int = 1
    clock: Clock = SYSTEM_CLOCK
    metrics: Metrics = field(default_factory=_NoMetrics)
    events: EventRecorder | None = None
    queue: WorkQueue[ObjectKey] = field(init=False)

    def __post_init__(self) -> None:
        self.queue = WorkQueue(name=self.name, clock=self.clock)

    # --- wiring ---------------------------------------------------------------------------

    def bind(self, informers: Informers) -> list[Informer]:
        """Subscribe to the informers of the primary kind and every watch; returns them."""
        used = []
        for watch in (For(self.kind), *self.watches):
            informer = informers.informer(watch.kind, namespace=watch.namespace, labels=watch.labels)
            informer.add_handler(self._handler(watch, informer))
            used.append(informer)
        return used

    def _handler(self, watch: Watch, informer: Informer) -> Callable[[Obj | None, Obj | None], None]:
        def enqueue(old: Obj | None, new: Obj | None) -> None:
            # Changes found by a list (start-up, relist) go in at low priority, so that live
            # changes overtake the flood.
            low = informer.listing
            for obj in (old, new):
                if obj is not None:
                    for key in watch.to_keys(obj, self.kind):
                        self.queue.add(key, low_priority=low)
        return enqueue

    # --- running --------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> list[threading.Thread]:
        """Start the worker threads; they stop when `stop` is set and the queue shuts down."""
        threads = [threading.Thread(target=self._work, name=f"{self.name}-{i}", daemon=True)
                   for i in range(self.workers)]
        for thread in threads:
            thread.start()
        return threads

    def _work(self) -> None:
        while (key := self.queue.get()) is not None:
            try:
                self.process(key)
            finally:
                self.queue.done(key)

    def process(self, key: ObjectKey) -> str:
        """Reconcile one key and act on the outcome; returns the result label for metrics."""
        reconcile_id = uuid.uuid4().hex[:8]
        started = time.perf_counter()
        result = "success"
        try:
            outcome = self.reconcile(key) or Done()
            self.queue.forget(key)
            if isinstance(outcome, RequeueAfter):
                result = "requeue_after"
                self.queue.add_after(key, outcome.seconds)
        except Terminal as err:
            result = "terminal_error"
            self.queue.forget(key)
            log.warning("%s %s: %s (not retried)", self.name, key, err,
                        extra={"controller": self.name, "key": str(key), "reconcile_id": reconcile_id})
            self._record(key, "Warning", "ReconcileFailed", str(err))
        except Exception as err:
            result = "error"
            self.queue.add_rate_limited(key)
            log.error("%s %s: %s (retry %d, with back-off)", self.name, key, err, self.queue.num_requeues(key),
                      exc_info=not isinstance(err, ApiError),
                      extra={"controller": self.name, "key": str(key), "reconcile_id": reconcile_id})
            self._record(key, "Warning", "ReconcileError", str(err))
        self.metrics.reconciled(self.name, result, time.perf_counter() - started)
        return result

    def _record(self, key: ObjectKey, event_type: str, reason: str, message: str) -> None:
        if self.events is not None:
            try:
                self.events.record(self.kind, key, event_type, reason, message)
            except Exception:  # an event is best effort: never fail a reconcile over it
                log.debug("could not record an event for %s", key, exc_info=True)

