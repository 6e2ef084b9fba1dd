"""The controller of DecoratorControllers: starts, restarts and stops one DecoratorInstance per object.

`Decorators(manager).controller()` is a reconcile.Controller over DecoratorController objects.
Its reconcile of one DecoratorController:

* new, or its spec (or apply strategy) changed: stops the running instance, if any, and builds a
  new one (decorators.instance), whose per-target-kind controllers join the manager and start on
  every cached target at once. A spec the instance cannot be built from is a Warning Event
  `CreateError` on the DecoratorController: not retried when the spec itself is invalid (the next
  edit is), retried with back-off when a resource is not served yet or a Secret is missing;
* unchanged (labels, annotations, status edits): nothing;
* deleted: stops the instance. A DecoratorController with a finalize hook carries the finalizer
  `porchkit.dev/decoratorcontroller-cleanup` so that, when it is deleted, its finalizer
  `metacontroller.io/decoratorcontroller-<name>` is first released from every target that holds
  it (Metacontroller leaves them all stuck terminating, metacontroller #1062). Finalize hooks are
  not called then: the decorator is going away, not the targets.
"""

from __future__ import annotations

import contextlib
import logging
import threading

from decorators.instance import DecoratorInstance, Options, UnknownResource, fingerprint
from decorators.spec import DECORATOR_CONTROLLER, SpecError, parse_decorator, resolve_rule
from reconcile import finalizers, objects
from reconcile.cluster import Obj, ObjectKey
from reconcile.controller import Controller
from reconcile.errors import NotFound, ReconcileError, Terminal
from reconcile.hooks import HookConfigError
from reconcile.manager import Manager
from reconcile.outcome import Done, Outcome

log = logging.getLogger("porchkit.decorators")

CLEANUP_FINALIZER = "porchkit.dev/decoratorcontroller-cleanup"
CONTROLLER_NAME = "decoratorcontroller"


class CreateError(ReconcileError):
    """The DecoratorController could not be started; retried."""

    event_reason = "CreateError"


class InvalidDecorator(Terminal):
    """The DecoratorController's spec is invalid: nothing to retry until it changes."""

    event_reason = "CreateError"


class Decorators:
    """Runs the DecoratorControllers of one manager (see the module docstring)."""

    def __init__(self, manager: Manager, options: Options | None = None) -> None:
        self.manager, self.options = manager, options or Options()
        self.running: dict[str, DecoratorInstance] = {}
        self.failed: dict[str, str] = {}  # name -> why it could not start, for local previews
        self._lock = threading.Lock()

    def controller(self) -> Controller:
        return Controller(name=CONTROLLER_NAME, kind=DECORATOR_CONTROLLER, reconcile=self.reconcile,
                          clock=self.manager.clock)

    def reconcile(self, key: ObjectKey) -> Outcome:
        obj = self.manager.cache.get(DECORATOR_CONTROLLER, key)
        if obj is None:
            self._stop(key.name)
            return Done()
        if objects.is_deleting(obj):
            self._stop(key.name)
            self._clean_up(obj)
            return Done()
        running = self.running.get(key.name)
        if running is not None and running.fingerprint == fingerprint(obj):
            return Done()
        self._stop(key.name)
        instance = self._build(obj)
        self._hold_for_cleanup(obj, instance.hooks.finalize is not None)
        with self._lock:
            self.running[key.name] = instance
            self.failed.pop(key.name, None)
        for controller in instance.controllers:
            self.manager.add(controller)
        log.info("DecoratorController %s started: %s", key.name, ", ".join(c.name for c in instance.controllers))
        return Done()

    def stop_all(self) -> None:
        for name in list(self.running):
            self._stop(name)

    # --- steps -----------------------------------------------------------------------------------

    def _build(self, obj: Obj) -> DecoratorInstance:
        name = str(objects.metadata(obj).get("name"))
        try:
            return DecoratorInstance(obj, cluster=self.manager.cluster, cache=self.manager.cache,
                                     clock=self.manager.clock, metrics=self.manager.metrics, options=self.options)
        except SpecError as err:
            self.failed[name] = str(err)
            raise InvalidDecorator(f"Cannot create new controller: {err}") from None
        except (UnknownResource, HookConfigError) as err:
            self.failed[name] = str(err)
            raise CreateError(f"Cannot create new controller: {err}") from None

    def _stop(self, name: str) -> None:
        with self._lock:
            instance = self.running.pop(name, None)
        if instance is None:
            return
        instance.close()  # first: a reconcile waiting on a hook gives up at once
        for controller in instance.controllers:
            self.manager.remove(controller)
        log.info("DecoratorController %s stopped", name)

    def _hold_for_cleanup(self, obj: Obj, wanted: bool) -> None:
        held = finalizers.has(obj, CLEANUP_FINALIZER)
        try:
            if wanted and not held:
                finalizers.ensure(self.manager.cluster, DECORATOR_CONTROLLER, obj, CLEANUP_FINALIZER)
            elif held and not wanted:
                finalizers.release(self.manager.cluster, DECORATOR_CONTROLLER, obj, CLEANUP_FINALIZER)
        except NotFound:
            pass

    def _clean_up(self, obj: Obj) -> None:
        """Release the targets' finalizers, then our hold on the DecoratorController."""
        if not finalizers.has(obj, CLEANUP_FINALIZER):
            return
        cluster = self.manager.cluster
        try:
            spec = parse_decorator(obj)
        except SpecError:
            spec = None
        if spec is not None:
            served = cluster.resources()
            for rule in spec.resources:
                info = resolve_rule(rule.api_version, rule.resource, served)
                if info is not None:
                    released = finalizers.release_all(cluster, info.kind, spec.finalizer)
                    if released:
                        log.info("released %s from %d %s", spec.finalizer, released, info.kind)
        with contextlib.suppress(NotFound):
            finalizers.release(cluster, DECORATOR_CONTROLLER, obj, CLEANUP_FINALIZER)
