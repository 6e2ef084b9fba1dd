"""Related objects: what a DecoratorController's customize hook says a target depends on.

`Related.objects(target)` asks the customize hook which objects a target depends on (its answer
is cached per target until the target's generation, labels or annotations change, or 20
minutes pass), starts watching their kinds, and returns them grouped as a sync request's
`related` field. `Related.keys_for(obj)` maps a change of any related object back to the
targets whose rules select it, from the cached answers only: unlike Metacontroller, a change
never makes us call the customize hook for every object of the target kind.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from decorators.customize import (
    CustomizeCache,
    RelatedRule,
    check_rule,
    customize_request,
    parse_customize_response,
    rule_matches,
    select_related,
)
from decorators.protocol import ResponseError
from reconcile import objects
from reconcile.cache import InformerCache
from reconcile.cluster import Kind, Obj, ObjectKey, ResourceInfo
from reconcile.errors import ReconcileError
from reconcile.hooks import Hook, HookError

NAMESPACE = Kind("v1", "Namespace")


class RelatedError(ReconcileError):
    """The customize hook failed or answered something unusable."""

    event_reason = "SyncError"

    def __init__(self, cause: object) -> None:
        super().__init__(f"Sync error: customize: {cause}")


class Related:
    """The related objects of one DecoratorController's targets (see the module docstring).

    `served()` lists what the API server serves (discovery, to resolve a rule's resource);
    `watch(kind)` is called for every related kind in use, so that its changes reach `keys_for`."""

    def __init__(self, hook: Hook, controller: Obj, cache: InformerCache, *, served: Callable[[], list[ResourceInfo]],
                 watch: Callable[[Kind], None], answers: CustomizeCache | None = None) -> None:
        self.hook, self.controller, self.cache = hook, controller, cache
        self.served, self.watch = served, watch
        self.answers = answers or CustomizeCache()
        self._resolved: dict[tuple[str, str], ResourceInfo] = {}
        self._lock = threading.Lock()

    def objects(self, target: Obj, target_namespaced: bool) -> dict[str, list[Obj]]:
        """Group key -> the related objects of `target`; raises RelatedError (HookRetryAfter passes)."""
        rules = self.answers.get(target)
        if rules is None:
            rules = self._ask(target, target_namespaced)
        resolved = [(rule, self._resolve(rule)) for rule in rules]
        for _, info in resolved:
            self.watch(info.kind)
        return select_related(resolved, lambda info: self.cache.list(info.kind), target, target_namespaced,
                              self.hook.version, self._namespace_labels)

    def keys_for(self, obj: Obj, target_kind: Kind, target_namespaced: bool) -> list[ObjectKey]:
        """The targets of `target_kind` whose cached rules select `obj` (a related object that changed)."""
        kind = Kind.of(obj)
        keys = []
        for key, kind_of_target, rules in self.answers.entries():
            if kind_of_target != target_kind:
                continue
            target = self.cache.get(target_kind, key)
            if target is None:
                self.answers.forget_target(key, target_kind)
                continue
            for rule in rules:
                info = self._known(rule)
                if info is not None and info.kind.group == kind.group and info.kind.kind == kind.kind and rule_matches(
                        rule, info, obj, target, target_namespaced, self.hook.version, self._namespace_labels):
                    keys.append(key)
                    break
        return keys

    def forget(self, target: Obj) -> None:
        self.answers.forget(str(objects.metadata(target).get("uid") or ""))

    # --- helpers ------------------------------------------------------------------------------

    def _ask(self, target: Obj, target_namespaced: bool) -> tuple[RelatedRule, ...]:
        try:
            rules = parse_customize_response(self.hook.call(customize_request(self.controller, target)))
            for rule in rules:
                check_rule(rule, self._resolve(rule), target, target_namespaced, self.hook.version)
        except (HookError, ResponseError) as err:
            raise RelatedError(err) from err
        self.answers.put(target, rules)
        return rules

    def _resolve(self, rule: RelatedRule) -> ResourceInfo:
        found = self._known(rule)
        if found is None:
            with self._lock:
                for info in self.served():
                    self._resolved[(info.kind.api_version, info.plural)] = info
            found = self._known(rule)
        if found is None:
            raise RelatedError(f"relatedResources: the API server does not serve {rule.resource!r} "
                               f"in {rule.api_version!r}")
        return found

    def _known(self, rule: RelatedRule) -> ResourceInfo | None:
        with self._lock:
            return self._resolved.get((rule.api_version, rule.resource))

    def _namespace_labels(self, name: str) -> dict[str, Any] | None:
        namespace = self.cache.get(NAMESPACE, ObjectKey("", name))
        return None if namespace is None else objects.labels_of(namespace)
