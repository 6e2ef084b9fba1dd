"""The controller of DecoratorControllers: starts, restarts and stops one DecoratorInstance per object.

`Decorators(manager).controller()` is a reconcile.Controller over DecoratorController objects (the
shape every hook controller shares: reconcile.supervisor). A DecoratorController's instance
(decorators.instance) has one controller per target kind, which starts on every cached target at
once. An invalid spec, or one asking for what the manager's HookPolicy refuses, is not retried; a
resource not served yet or a missing Secret is.

Beyond that shape: a DecoratorController with a finalize hook carries the finalizer
`porchkit.dev/decoratorcontroller-cleanup` so that, when it is deleted, its finalizer
`metacontroller.io/decoratorcontroller-<name>` is first released from every target that holds it
(Metacontroller leaves them all stuck terminating, metacontroller #1062). Finalize hooks are not
called then: the decorator is going away, not the targets.
"""

from __future__ import annotations

import contextlib
import logging

from decorators.instance import DecoratorInstance, Options, fingerprint
from decorators.spec import DECORATOR_CONTROLLER, FINALIZER_PREFIX, SpecError, resolve_rule
from reconcile import finalizers, objects
from reconcile.cluster import Kind, Obj
from reconcile.errors import NotFound
from reconcile.hooks import HookConfigError, HookRefused
from reconcile.manager import Manager
from reconcile.supervisor import Supervisor, UnknownResource

log = logging.getLogger("porchkit.decorators")

CLEANUP_FINALIZER = "porchkit.dev/decoratorcontroller-cleanup"
CONTROLLER_NAME = "decoratorcontroller"


class Decorators(Supervisor[DecoratorInstance]):
    """Runs the DecoratorControllers of one manager (see the module docstring)."""

    invalid = (SpecError, HookRefused)
    unavailable = (UnknownResource, HookConfigError)

    def __init__(self, manager: Manager, options: Options | None = None) -> None:
        super().__init__(manager, DECORATOR_CONTROLLER, CONTROLLER_NAME)
        self.options = options or Options()
        # name -> the target kinds whose objects may hold its finalizer (kept across failed rebuilds)
        self.holding: dict[str, list[Kind]] = {}

    def new_instance(self, obj: Obj) -> DecoratorInstance:
        return DecoratorInstance(obj, cluster=self.manager.cluster, cache=self.manager.cache,
                                 clock=self.manager.clock, metrics=self.manager.metrics, options=self.options)

    def fingerprint(self, obj: Obj) -> str:
        return fingerprint(obj)

    def before_start(self, obj: Obj, instance: DecoratorInstance) -> None:
        """Release the finalizer from target kinds it no longer decorates; hold the object for
        clean-up exactly when it has a finalize hook."""
        name = str(objects.metadata(obj).get("name"))
        holding = instance.target_kinds() if instance.hooks.finalize is not None else []
        self._release(obj, [kind for kind in self.holding.get(name, ()) if not _among(kind, holding)])
        self.holding[name] = holding
        self._hold_for_cleanup(obj, bool(holding))

    def deleting(self, obj: Obj) -> None:
        self._clean_up(obj)

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
