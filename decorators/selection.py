"""Which objects a DecoratorController decorates: its resource rules, keyed by group and kind.

Promises (Metacontroller's `selector.go`, spec b.2): an object is a target when a rule exists for
its group+kind (the version is ignored) and it matches both that rule's label selector (against
`metadata.labels`) and its annotation selector (against `metadata.annotations`); an absent or
empty selector matches everything; `NotIn` matches an absent key, `In` never does (not even
`In [""]`). Pure and read-only: objects are never changed or copied.

Differences: when two rules name one group+kind (two versions of it), the last rule counts, as in
Metacontroller, and here that includes which version `kinds()` offers to watch; Metacontroller
also watches the earlier version and so syncs each such object once per version.

Does not: decide about finalizers or deletion (the controller), or compile selectors (spec.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from decorators.spec import ResourceRule
from reconcile.cluster import Kind, ResourceInfo

_GroupKind = tuple[str, str]


class TargetSelector:
    """The target kinds of one DecoratorController and the selectors their objects must match."""

    def __init__(self, rules: Sequence[tuple[ResourceInfo, ResourceRule]]) -> None:
        self._rules: dict[_GroupKind, tuple[ResourceInfo, ResourceRule]] = {}
        for info, rule in rules:
            self._rules[(info.kind.group, info.kind.kind)] = (info, rule)

    def kinds(self) -> list[ResourceInfo]:
        """The resources to watch for targets, one per group+kind."""
        return [info for info, _ in self._rules.values()]

    def resource_for(self, obj: Mapping[str, Any]) -> ResourceInfo | None:
        """How the target kind of `obj` is served; `obj` may also be an ownerReference (it has
        `apiVersion` and `kind` too). None when that group+kind is not a target kind."""
        found = self._rules.get(_group_kind(obj))
        return found[0] if found else None

    def rule_for(self, obj: Mapping[str, Any]) -> ResourceRule | None:
        """The resource rule for the object's group+kind, or None when it is not a target kind."""
        found = self._rules.get(_group_kind(obj))
        return found[1] if found else None

    def matches(self, obj: Mapping[str, Any]) -> bool:
        """True when `obj` is of a target kind and matches its rule's label and annotation selectors."""
        rule = self.rule_for(obj)
        if rule is None:
            return False
        meta = _meta(obj)
        return rule.labels.matches(_string_map(meta.get("labels"))) and \
            rule.annotations.matches(_string_map(meta.get("annotations")))

    def ignores_update(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
        """True for an update event to drop under `ignoreStatusChanges`: the rule asks for it, and
        generation, labels and annotations are unchanged with no deletionTimestamp. A periodic
        resync delivers the same object as old and new, and is never dropped (Metacontroller #1252)."""
        rule = self.rule_for(new)
        if rule is None or not rule.ignore_status_changes or old is new:
            return False
        before, after = _meta(old), _meta(new)
        return (not after.get("deletionTimestamp")
                and before.get("generation") == after.get("generation")
                and _string_map(before.get("labels")) == _string_map(after.get("labels"))
                and _string_map(before.get("annotations")) == _string_map(after.get("annotations")))


def _group_kind(obj: Mapping[str, Any]) -> _GroupKind:
    kind = Kind.of(obj)
    return kind.group, kind.kind


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _string_map(value: Any) -> Mapping[str, str]:
    return value if isinstance(value, Mapping) else {}
