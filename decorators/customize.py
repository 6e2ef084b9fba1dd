"""The customize hook: which related objects a target's sync and finalize hooks are sent.

Request `{"controller", "parent"}` (the target is `parent` here, even for decorators); answer
`{"relatedResources": [rule, ...]}`, each rule `{apiVersion, resource, labelSelector,
namespaceSelector, namespace, names}` (spec b.7, c.4). A rule selects the objects of its kind that
pass every part it states: `names`, `namespace`, `labelSelector` (absent: every object),
`namespaceSelector` (the labels of the object's namespace). `names` with a selector, and
`namespace` with `namespaceSelector`, are invalid (Metacontroller's determineSelectionType).
Without `namespace`, a rule looks in every namespace, except as below.

Hook version v1 and a namespaced target: only objects of the target's namespace are related (a
label rule is silently scoped to it, cluster-scoped objects are left out); a rule naming another
namespace, or having a namespaceSelector, is an error. v2 lifts all of this.

`CustomizeCache` keeps each target's rules for up to 20 minutes, while its generation, labels and
annotations stay as they were.

Differences from Metacontroller:
- the cache is keyed by target UID and also checks labels and annotations; Metacontroller keys by
  name and generation, so targets of one name in two namespaces share an entry, and a hook that
  reads labels or annotations is never asked again after they change (they don't bump generation);
- a namespaceSelector on a cluster-scoped kind is an error rather than selecting nothing.

Pure except for the cache's lock and clock: no cluster, no hook calls (the controller does those).
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from decorators.protocol import ResponseError, ResponseShape, controller_object, describe_json, group_key
from decorators.spec import SpecError, compile_selector
from reconcile.clock import SYSTEM_CLOCK, Clock
from reconcile.cluster import Kind, Obj, ObjectKey, ResourceInfo
from reconcile.selectors import LabelSelector

CUSTOMIZE_SHAPE: ResponseShape = {"relatedResources": (list, type(None))}
CACHE_TTL = 1200.0
"""Seconds a customize answer is trusted at most (Metacontroller's 20 minutes)."""


@dataclass(frozen=True, slots=True)
class RelatedRule:
    """One checked `relatedResources[i]`. `origin` is where it was in the answer, for error messages."""

    api_version: str
    resource: str
    labels: LabelSelector | None
    namespace_selector: LabelSelector | None
    namespace: str | None
    names: tuple[str, ...]
    origin: str = field(default="relatedResources", compare=False)


def customize_request(controller: Mapping[str, Any], target: Mapping[str, Any]) -> dict[str, Any]:
    """The customize request for `target`; as in protocol.py, nothing is copied."""
    return {"controller": controller_object(controller), "parent": target}


def parse_customize_response(raw: Mapping[str, Any]) -> tuple[RelatedRule, ...]:
    """The rules of a customize answer, in order. Raises ResponseError naming the field at fault
    (`relatedResources[1].labelSelector.matchExpressions[0].operator: ...`)."""
    if not isinstance(raw, Mapping):
        raise ResponseError("<response>", f"must be a JSON object, not {describe_json(raw)}")
    items = raw.get("relatedResources")
    if items is None:
        return ()
    if not isinstance(items, list):
        raise ResponseError("relatedResources", f"must be a list, not {describe_json(items)}")
    return tuple(_related_rule(item, f"relatedResources[{i}]") for i, item in enumerate(items))


def check_rule(rule: RelatedRule, info: ResourceInfo, target: Mapping[str, Any], target_namespaced: bool,
               version: str) -> None:
    """Raise ResponseError when `rule` may not be used for this target: under hook version v1, a
    namespaced target may not relate objects of another namespace or use a namespaceSelector; and
    a namespaceSelector needs a namespaced kind."""
    if rule.namespace_selector is not None and not info.namespaced:
        raise ResponseError(f"{rule.origin}.namespaceSelector",
                            f"{rule.resource} are cluster-scoped; a namespaceSelector selects namespaced objects")
    if version != "v1" or not target_namespaced:
        return
    target_namespace = _namespace(target)
    if rule.namespace is not None and rule.namespace != target_namespace:
        raise ResponseError(f"{rule.origin}.namespace",
                            f"{json.dumps(rule.namespace)} is not the target's namespace "
                            f"{json.dumps(target_namespace)}; with hook version v1 a namespaced target relates "
                            f"objects of its own namespace only (use v2)")
    if rule.namespace_selector is not None:
        raise ResponseError(f"{rule.origin}.namespaceSelector",
                            "needs hook version v2 when the target is namespaced")


def rule_matches(rule: RelatedRule, info: ResourceInfo, obj: Mapping[str, Any], target: Mapping[str, Any],
                 target_namespaced: bool, version: str,
                 namespace_labels: Callable[[str], Mapping[str, str] | None]) -> bool:
    """True when `obj`, an object of the rule's kind, is selected by `rule` for `target`.

    `namespace_labels(name)` gives a namespace's labels, or None when it is unknown (then a
    namespaceSelector does not match). `version` is the hook version whose limits apply. Never
    raises, so it can sort watch events: a rule check_rule refuses still matches only what v1 allows."""
    namespace = _namespace(obj)
    if version == "v1" and target_namespaced and (not namespace or namespace != _namespace(target)):
        return False
    if rule.names and _name(obj) not in rule.names:
        return False
    if rule.namespace is not None and namespace != rule.namespace:
        return False
    if rule.namespace_selector is not None:
        found = namespace_labels(namespace) if namespace and info.namespaced else None
        if found is None or not rule.namespace_selector.matches(found):
            return False
    return rule.labels is None or rule.labels.matches(_labels(obj))


def select_related(rules: Sequence[tuple[RelatedRule, ResourceInfo]],
                   candidates: Callable[[ResourceInfo], Sequence[Obj]], target: Mapping[str, Any],
                   target_namespaced: bool, version: str,
                   namespace_labels: Callable[[str], Mapping[str, str] | None]) -> dict[str, list[Obj]]:
    """The related objects of `target`: group key -> the candidates some rule of that kind selects.

    Every rule's group is present, even empty; rules of one kind share a group and an object is in
    it once. `candidates(info)` gives the objects of a kind (an informer cache's list). Raises
    ResponseError when check_rule refuses a rule. Objects are not copied."""
    for rule, info in rules:
        check_rule(rule, info, target, target_namespaced, version)
    related: dict[str, list[Obj]] = {}
    seen: set[tuple[str, ObjectKey]] = set()
    listed: dict[ResourceInfo, Sequence[Obj]] = {}
    for rule, info in rules:
        key = group_key(info.kind)
        group = related.setdefault(key, [])
        if info not in listed:
            listed[info] = candidates(info)
        for obj in listed[info]:
            where = (key, ObjectKey.of(obj))
            if where not in seen and rule_matches(rule, info, obj, target, target_namespaced, version,
                                                  namespace_labels):
                seen.add(where)
                group.append(obj)
    return related


@dataclass(slots=True)
class _Entry:
    key: ObjectKey
    kind: Kind
    generation: Any
    labels: dict[str, str]
    annotations: dict[str, str]
    expires: float
    rules: tuple[RelatedRule, ...]


class CustomizeCache:
    """Customize answers per target UID, trusted while the target's generation, labels and
    annotations are unchanged and for at most `ttl` seconds of `clock.monotonic()`. Thread-safe."""

    def __init__(self, clock: Clock = SYSTEM_CLOCK, ttl: float = CACHE_TTL) -> None:
        self._clock = clock
        self._ttl = ttl
        self._entries: dict[str, _Entry] = {}
        self._lock = threading.Lock()

    def get(self, target: Mapping[str, Any]) -> tuple[RelatedRule, ...] | None:
        """The rules cached for `target`, or None when there are none still valid for it."""
        uid = _uid(target)
        with self._lock:
            entry = self._entries.get(uid) if uid else None
            if entry is None:
                return None
            if entry.expires <= self._clock.monotonic() or entry.generation != _generation(target) \
                    or entry.labels != _labels(target) or entry.annotations != _annotations(target):
                # out of date for a pass (never trusted again), but kept for `entries` until `put`
                self._entries[uid] = dataclasses.replace(entry, expires=float("-inf"))
                return None
            return entry.rules

    def put(self, target: Mapping[str, Any], rules: tuple[RelatedRule, ...]) -> None:
        """Remember the customize answer for `target` as it is now; a target without a UID (never
        stored by an API server) is not cached."""
        uid = _uid(target)
        if not uid:
            return
        entry = _Entry(key=ObjectKey.of(target), kind=Kind.of(target), generation=_generation(target),
                       labels=dict(_labels(target)), annotations=dict(_annotations(target)),
                       expires=self._clock.monotonic() + self._ttl, rules=rules)
        with self._lock:
            self._entries[uid] = entry

    def forget(self, uid: str) -> None:
        """Drop the entry of a target (deleted, say); no error when there is none."""
        with self._lock:
            self._entries.pop(uid, None)

    def forget_target(self, key: ObjectKey, kind: Kind) -> None:
        """Drop the entries of the target at `key` (found gone, its uid no longer known)."""
        with self._lock:
            for uid in [uid for uid, entry in self._entries.items() if entry.key == key and entry.kind == kind]:
                del self._entries[uid]

    def entries(self) -> list[tuple[ObjectKey, Kind, tuple[RelatedRule, ...]]]:
        """(target key, target kind, rules) for every entry, expired or out of date ones included:
        to find the targets a change to a related object concerns. The last answer is the best
        guess there is (a target left alone for longer than the ttl must still hear of its related
        objects); syncing the target then asks the hook again."""
        with self._lock:
            return [(entry.key, entry.kind, entry.rules) for entry in self._entries.values()]


def _related_rule(raw: Any, where: str) -> RelatedRule:
    if not isinstance(raw, Mapping):
        raise ResponseError(where, f"must be an object, not {describe_json(raw)}")
    api_version = _required_string(raw, "apiVersion", where)
    resource = _required_string(raw, "resource", where)
    try:
        labels = None if raw.get("labelSelector") is None else \
            compile_selector(raw["labelSelector"], f"{where}.labelSelector")
        namespace_selector = None if raw.get("namespaceSelector") is None else \
            compile_selector(raw["namespaceSelector"], f"{where}.namespaceSelector")
    except SpecError as err:
        raise ResponseError(err.field, err.problem) from err
    namespace = raw.get("namespace")
    if namespace is not None and not isinstance(namespace, str):
        raise ResponseError(f"{where}.namespace", f"must be a string, not {describe_json(namespace)}")
    names = raw.get("names")
    if names is None:
        names = []
    if not isinstance(names, list):
        raise ResponseError(f"{where}.names", f"must be a list, not {describe_json(names)}")
    for i, name in enumerate(names):
        if not isinstance(name, str):
            raise ResponseError(f"{where}.names[{i}]", f"must be a string, not {describe_json(name)}")
    if names and (labels is not None or namespace_selector is not None):
        raise ResponseError(where, "names cannot be combined with labelSelector or namespaceSelector")
    if namespace and namespace_selector is not None:
        raise ResponseError(where, "namespace cannot be combined with namespaceSelector")
    return RelatedRule(api_version=api_version, resource=resource, labels=labels,
                       namespace_selector=namespace_selector, namespace=namespace or None,
                       names=tuple(names), origin=where)


def _required_string(raw: Mapping[str, Any], key: str, where: str) -> str:
    value = raw.get(key)
    if value is None or value == "":
        raise ResponseError(f"{where}.{key}", "required")
    if not isinstance(value, str):
        raise ResponseError(f"{where}.{key}", f"must be a string, not {describe_json(value)}")
    return value


def _metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _namespace(obj: Mapping[str, Any]) -> str:
    return str(_metadata(obj).get("namespace") or "")


def _name(obj: Mapping[str, Any]) -> str:
    return str(_metadata(obj).get("name") or "")


def _uid(obj: Mapping[str, Any]) -> str:
    return str(_metadata(obj).get("uid") or "")


def _generation(obj: Mapping[str, Any]) -> Any:
    return _metadata(obj).get("generation")


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    found = _metadata(obj).get("labels")
    return found if isinstance(found, Mapping) else {}


def _annotations(obj: Mapping[str, Any]) -> Mapping[str, str]:
    found = _metadata(obj).get("annotations")
    return found if isinstance(found, Mapping) else {}
