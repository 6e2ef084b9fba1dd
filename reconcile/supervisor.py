"""Controllers of controllers: one running instance (a set of controllers) per object of one kind.

A hook controller (decorators, mapctl) is itself configured by objects: each DecoratorController or
MapController object becomes an instance whose controllers join the manager. `Supervisor` is the
controller over those objects, and its reconcile of one object is always the same:

* new, or changed in what the instance is built from (`fingerprint`): the running instance, if
  any, is stopped and a new one built; its controllers join the manager and start on every cached
  object at once; its condition `Ready` turns True (reconcile.readiness). An object an instance
  cannot be built from is a Warning Event `CreateError` on it and `Ready=False` with the same
  message: `InvalidSpec` (not retried: the next edit is) when building raised one of `invalid`,
  `CreateError` (retried with back-off) when it raised one of `unavailable`, such as
  `UnknownResource` (a CRD not installed yet) or a missing Secret;
* unchanged: nothing;
* deleted (or being deleted): the instance is stopped, then `deleting(obj)` runs.

Stopping an instance releases every informer its controllers held, once their passes have ended
(reconcile.cache): those of scopes no other controller uses stop, so that an edited or deleted
object leaves nothing running or cached behind it. An edit that keeps a scope lists it afresh.

A subclass says how an instance is built (`new_instance`), what it is built from (`fingerprint`),
and may act before an instance starts (`before_start`) or when its object goes (`deleting`).
`failed` keeps why an object could not start, for local previews. Instances need `controllers`,
`fingerprint` and `close()` (which makes a pass waiting on a hook give up at once, and releases
the informers the instance acquired itself).
"""

from __future__ import annotations

import logging
import threading
from typing import Generic, Protocol, TypeVar

from reconcile import objects, readiness
from reconcile.cluster import Kind, Obj, ObjectKey
from reconcile.controller import Controller
from reconcile.errors import ReconcileError, Terminal
from reconcile.manager import Manager
from reconcile.outcome import Done, Outcome

log = logging.getLogger("porchkit.supervisor")


class Instance(Protocol):
    controllers: list[Controller]
    fingerprint: str

    def close(self) -> None: ...


InstanceT = TypeVar("InstanceT", bound=Instance)


class UnknownResource(ReconcileError):
    """A resource the object names is not served by the API server (yet)."""


class CreateError(ReconcileError):
    """The instance could not be started with what the cluster holds (a resource not served, a
    Secret missing): retried, since a CRD or Secret may come; deterministic (reconcile.errors), so
    that a one-off run, where none will, reports it at once."""

    event_reason = "CreateError"
    deterministic = True


class InvalidSpec(Terminal):
    """The object's spec is invalid: nothing to retry until it changes."""

    event_reason = "CreateError"


class Supervisor(Generic[InstanceT]):
    """Runs one instance per object of `kind` in `manager` (see the module docstring)."""

    invalid: tuple[type[Exception], ...] = ()  # building raised it: the spec is wrong
    unavailable: tuple[type[Exception], ...] = (UnknownResource,)  # building raised it: try again later

    def __init__(self, manager: Manager, kind: Kind, name: str) -> None:
        self.manager, self.kind, self.name = manager, kind, name
        self.running: dict[str, InstanceT] = {}
        self.failed: dict[str, str] = {}  # object name -> why it could not start, for local previews
        self._lock = threading.Lock()

    def new_instance(self, obj: Obj) -> InstanceT:
        raise NotImplementedError

    def fingerprint(self, obj: Obj) -> str:
        raise NotImplementedError

    def before_start(self, obj: Obj, instance: InstanceT) -> None:
        """Called with a built instance before its controllers start; raising stops that start."""

    def deleting(self, obj: Obj) -> None:
        """Called once the instance of an object being deleted is stopped."""

    def controller(self) -> Controller:
        return Controller(name=self.name, kind=self.kind, reconcile=self.reconcile, clock=self.manager.clock)

    def reconcile(self, key: ObjectKey) -> Outcome:
        obj = self.manager.cache.get(self.kind, key)
        if obj is None or objects.is_deleting(obj):
            self._stop(key.name)
            if obj is not None:
                self.deleting(obj)
            return Done()
        running = self.running.get(key.name)
        if running is not None and running.fingerprint == self.fingerprint(obj):
            return Done()
        self._stop(key.name)
        instance = self._build(obj, key.name)
        try:
            self.before_start(obj, instance)
        except Exception:
            instance.close()  # never started: its hooks (a python pool, connections) go with it; retried
            raise
        with self._lock:
            self.running[key.name] = instance
            self.failed.pop(key.name, None)
        for controller in instance.controllers:
            self.manager.add(controller)
        log.info("%s %s started: %s", self.kind.kind, key.name, ", ".join(c.name for c in instance.controllers))
        readiness.record(self.manager.cluster, obj, None, now=self.manager.clock.time())
        return Done()

    def stop_all(self) -> None:
        for name in list(self.running):
            self._stop(name)

    def _build(self, obj: Obj, name: str) -> InstanceT:
        """The instance, or the error to raise (recorded in `failed` and on the Ready condition)."""
        problem: ReconcileError
        try:
            return self.new_instance(obj)
        except self.invalid as err:
            cause, problem = err, InvalidSpec(f"Cannot create new controller: {err}")
        except self.unavailable as err:
            cause, problem = err, CreateError(f"Cannot create new controller: {err}")
        self.failed[name] = str(cause)
        readiness.record(self.manager.cluster, obj, problem, now=self.manager.clock.time())
        raise problem

    def _stop(self, name: str) -> None:
        with self._lock:
            instance = self.running.pop(name, None)
        if instance is None:
            return
        for controller in instance.controllers:  # no new passes...
            controller.queue.shutdown()
        instance.close()  # ...then a pass waiting on a hook gives up at once...
        for controller in instance.controllers:
            self.manager.remove(controller)  # ...the passes in flight are waited for, and informers released
        log.info("%s %s stopped", self.kind.kind, name)
