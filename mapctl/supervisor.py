"""The controller of MapControllers: starts, restarts and stops one MapInstance per object.

`MapControllers(manager).controller()` is a reconcile.Controller over MapController objects. Its
reconcile of one MapController:

* new, or its spec (or apply strategy) changed: stops the running instance, if any, and builds a
  new one (mapctl.instance), whose two controllers join the manager and start on every cached
  parent and input at once; its condition `Ready` turns True (reconcile.readiness). A
  MapController the instance cannot be built from is a Warning Event `CreateError` on it and
  `Ready=False` with the same message: not retried when the spec itself is invalid or asks for
  what the manager's HookPolicy refuses (the next edit is), retried with back-off when a resource
  is not served yet or a Secret is missing;
* unchanged (labels, annotations, status edits): nothing;
* deleted: stops the instance. Outputs stay with their parents (they are the parents' children,
  not the MapController's), as a DecoratorController's attachments stay with their targets.
"""

from __future__ import annotations

import logging
import threading

from mapctl.instance import MapInstance, Options, UnknownResource, fingerprint
from mapctl.spec import MAP_CONTROLLER, SpecError
from reconcile import objects, readiness
from reconcile.cluster import Obj, ObjectKey
from reconcile.controller import Controller
from reconcile.errors import ReconcileError, Terminal
from reconcile.hooks import HookConfigError, HookRefused
from reconcile.manager import Manager
from reconcile.outcome import Done, Outcome

log = logging.getLogger("porchkit.mapctl")

CONTROLLER_NAME = "mapcontroller"


class CreateError(ReconcileError):
    """The MapController could not be started with what the cluster holds (a resource not
    served, a Secret missing): retried, since a CRD or Secret may come; deterministic
    (reconcile.errors), so that a one-off run, where none will, reports it at once."""

    event_reason = "CreateError"
    deterministic = True


class InvalidMapController(Terminal):
    """The MapController's spec is invalid: nothing to retry until it changes."""

    event_reason = "CreateError"


class MapControllers:
    """Runs the MapControllers of one manager (see the module docstring)."""

    def __init__(self, manager: Manager, options: Options | None = None) -> None:
        self.manager, self.options = manager, options or Options()
        self.running: dict[str, MapInstance] = {}
        self.failed: dict[str, str] = {}  # name -> why it could not start, for local previews
        self._lock = threading.Lock()

    def controller(self) -> Controller[ObjectKey]:
        return Controller(name=CONTROLLER_NAME, kind=MAP_CONTROLLER, reconcile=self.reconcile,
                          clock=self.manager.clock)

    def reconcile(self, key: ObjectKey) -> Outcome:
        obj = self.manager.cache.get(MAP_CONTROLLER, key)
        if obj is None or objects.is_deleting(obj):
            self._stop(key.name)
            return Done()
        running = self.running.get(key.name)
        if running is not None and running.fingerprint == fingerprint(obj):
            return Done()
        self._stop(key.name)
        instance = self._build(obj, key.name)
        with self._lock:
            self.running[key.name] = instance
            self.failed.pop(key.name, None)
        for controller in instance.controllers:
            self.manager.add(controller)
        log.info("MapController %s started: %s", key.name, ", ".join(c.name for c in instance.controllers))
        readiness.record(self.manager.cluster, obj, None, now=self.manager.clock.time())
        return Done()

    def stop_all(self) -> None:
        for name in list(self.running):
            self._stop(name)

    def _build(self, obj: Obj, name: str) -> MapInstance:
        """The instance, or the error to raise (recorded in `failed` and on the Ready condition)."""
        problem: ReconcileError
        try:
            return MapInstance(obj, cluster=self.manager.cluster, cache=self.manager.cache,
                               clock=self.manager.clock, metrics=self.manager.metrics, options=self.options)
        except (SpecError, HookRefused) as err:
            self.failed[name] = str(err)
            problem = InvalidMapController(f"Cannot create new controller: {err}")
        except (UnknownResource, HookConfigError) as err:
            self.failed[name] = str(err)
            problem = CreateError(f"Cannot create new controller: {err}")
        readiness.record(self.manager.cluster, obj, problem, now=self.manager.clock.time())
        raise problem

    def _stop(self, name: str) -> None:
        with self._lock:
            instance = self.running.pop(name, None)
        if instance is None:
            return
        for controller in instance.controllers:  # no new passes...
            controller.queue.shutdown()
            controller.unbind()
        instance.close()  # ...then a pass waiting on a hook gives up at once (quietly: see InputSync)...
        for controller in instance.controllers:
            self.manager.remove(controller)  # ...and the passes in flight are waited for
        log.info("MapController %s stopped", name)
