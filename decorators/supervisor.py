"""The controller of DecoratorControllers: starts, restarts and stops one DecoratorInstance per object.

`Decorators(manager).controller()` is a reconcile.Controller over DecoratorController objects.
Its reconcile of one DecoratorController:

* new, or its spec (or apply strategy) changed: stops the running instance, if any, and builds a
  new one (decorators.instance), whose per-target-kind controllers join the manager and start on
  every cached target at once; its condition `Ready` turns True (reconcile.readiness). A spec the
  instance cannot be built from is a Warning Event `CreateError` on the DecoratorController and
  `Ready=False` with the same message: not retried when the spec itself is invalid or asks for
  what the manager's HookPolicy refuses (the next edit is), retried with back-off when a resource
  is not served yet or a Secret is missing;
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
from decorators.spec import DECORATOR_CONTROLLER, FINALIZER_PREFIX, SpecError, resolve_rule
from reconcile import finalizers, objects, readiness
from reconcile.cluster import Kind, Obj, ObjectKey
from reconcile.controller import Controller
from reconcile.errors import NotFound, ReconcileError, Terminal
from reconcile.hooks import HookConfigError, HookRefused
from reconcile.manager import Manager
from reconcile.outcome import Done, Outcome

log = logging.getLogger("porchkit.decorators")

CLEANUP_FINALIZER = "porchkit.dev/decoratorcontroller-cleanup"
CONTROLLER_NAME = "decoratorcontroller"


class CreateError(ReconcileError):
    """The DecoratorController could not be started with what the cluster holds (a resource not
    served, a Secret missing): retried, since a CRD or Secret may come; deterministic
    (reconcile.errors), so that a one-off run, where none will, reports it at once."""

    event_reason = "CreateError"
    deterministic = True


class InvalidDecorator(Terminal):
    """The DecoratorController's spec is invalid: nothing to retry until it changes."""

    event_reason = "CreateError"


class Decorators:
    """Runs the DecoratorControllers of one manager (see the module docstring)."""

    def __init__(self, manager: Manager, options: Options | None = None) -> None:
        self.manager, self.options = manager, options or Options()
        self.running: dict[str, DecoratorInstance] = {}
        self.failed: dict[str, str] = {}  # name -> why it could not start, for local previews
        # name -> the target kinds whose objects may hold its finalizer (kept across failed rebuilds)
        self.holding: dict[str, list[Kind]] = {}
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
        holding = instance.target_kinds() if instance.hooks.finalize is not None else []
        try:
            self._release(obj, [kind for kind in self.holding.get(key.name, ()) if not _among(kind, holding)])
            self.holding[key.name] = holding
            self._hold_for_cleanup(obj, bool(holding))
        except Exception:
            instance.close()  # never started: its hooks (a python pool, connections) go with it; retried
            raise
        with self._lock:
            self.running[key.name] = instance
            self.failed.pop(key.name, None)
        for controller in instance.controllers:
            self.manager.add(controller)
        log.info("DecoratorController %s started: %s", key.name, ", ".join(c.name for c in instance.controllers))
        readiness.record(self.manager.cluster, obj, None, now=self.manager.clock.time())
        return Done()

    def stop_all(self) -> None:
        for name in list(self.running):
            self._stop(name)

    # --- steps -----------------------------------------------------------------------------------

    def _build(self, obj: Obj) -> DecoratorInstance:
        """The instance, or the error to raise (recorded in `failed` and on the Ready condition)."""
        name = str(objects.metadata(obj).get("name"))
        problem: ReconcileError
        try:
            return DecoratorInstance(obj, cluster=self.manager.cluster, cache=self.manager.cache,
                                     clock=self.manager.clock, metrics=self.manager.metrics, options=self.options)
        except (SpecError, HookRefused) as err:
            self.failed[name] = str(err)
            problem = InvalidDecorator(f"Cannot create new controller: {err}")
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
        for controller in instance.controllers:  # no new passes, on any target kind...
            controller.queue.shutdown()
            controller.unbind()
        instance.close()  # ...then a pass waiting on a hook gives up at once (quietly: see TargetSync)...
        for controller in instance.controllers:
            self.manager.remove(controller)  # ...and the passes in flight are waited for
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
        """Release the targets' finalizers, then our hold on the DecoratorController. The targets are
        those of every kind it may have decorated: the kinds its running instances held, and those
        its spec names now, read leniently (an invalid spec must not leave objects stuck)."""
        if not finalizers.has(obj, CLEANUP_FINALIZER):
            return
        name = str(objects.metadata(obj).get("name"))
        served = self.manager.cluster.resources()
        kinds = list(self.holding.pop(name, []))
        for api_version, resource in _rules_named(obj):
            info = resolve_rule(api_version, resource, served)
            if info is not None and not _among(info.kind, kinds):
                kinds.append(info.kind)
        self._release(obj, kinds)
        with contextlib.suppress(NotFound):
            finalizers.release(self.manager.cluster, DECORATOR_CONTROLLER, obj, CLEANUP_FINALIZER)

    def _release(self, obj: Obj, kinds: list[Kind]) -> None:
        """Remove this DecoratorController's finalizer from every object of `kinds`."""
        finalizer = FINALIZER_PREFIX + str(objects.metadata(obj).get("name"))
        for kind in kinds:
            released = finalizers.release_all(self.manager.cluster, kind, finalizer)
            if released:
                log.info("released %s from %d %s", finalizer, released, kind)


def _among(kind: Kind, kinds: list[Kind]) -> bool:
    """Whether `kinds` has `kind`'s group and kind (a finalizer is on the object, whatever the version)."""
    return any(k.group == kind.group and k.kind == kind.kind for k in kinds)


def _rules_named(obj: Obj) -> list[tuple[str, str]]:
    """(apiVersion, resource) of every spec.resources entry that names both as strings, valid spec or not."""
    spec = obj.get("spec")
    rules = spec.get("resources") if isinstance(spec, dict) else None
    return [(rule["apiVersion"], rule["resource"]) for rule in rules if isinstance(rule, dict)
            and isinstance(rule.get("apiVersion"), str) and isinstance(rule.get("resource"), str)] \
        if isinstance(rules, list) else []
