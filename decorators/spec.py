"""The DecoratorController object, parsed and checked once into a frozen `DecoratorSpec`.

Owns: reading a `metacontroller.k8s.io/v1alpha1` DecoratorController (a plain dict, as the API
server or a manifest gives it) into resource rules with compiled selectors, attachment rules with
a normalised update method, the raw hook specs, and the resync period; and finding the served
resource a rule names (`resolve_rule`). Every problem is a `SpecError` whose one-line text names
the field at fault (`spec.resources[0].annotationSelector.matchExpressions[1].operator: ...`).

Leaves to others: discovery and informers (the controller), the webhook fields of a hook
(`reconcile.hooks` checks url, timeout, service, TLS and auth), and matching objects
(selection.py). Unknown fields are ignored, as the API server prunes them; a required field that
is missing (a typo such as `resources:` for `resource:`) is an error.

Compatibility: selectors follow `metav1.LabelSelectorAsSelector`; an `annotationSelector` is read
as a label selector (`matchAnnotations` is its `matchLabels`), so its keys and values must have
label syntax. `resyncPeriodSeconds` below 1, even 0, means 1 second. `hooks` absent or null is
"no hooks defined"; `hooks: {}` is accepted, as in Metacontroller (every sync then has no hook to
call, which the controller reports).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from reconcile.cluster import Kind, ResourceInfo
from reconcile.errors import BadRequest, ReconcileError
from reconcile.patching import clone
from reconcile.selectors import LabelSelector, check_label_key, check_label_value, parse_labels

DECORATOR_CONTROLLER = Kind("metacontroller.k8s.io/v1alpha1", "DecoratorController")
FINALIZER_PREFIX = "metacontroller.io/decoratorcontroller-"
DECORATOR_ANNOTATION = "metacontroller.k8s.io/decorator-controller"
UPDATE_METHODS = ("OnDelete", "Recreate", "InPlace")
HOOK_VERSIONS = ("v1", "v2")
HOOK_NAMES = ("sync", "finalize", "customize")

# Decorators have no rolling update: the CRD accepts the Rolling* methods and they behave as
# their plain counterparts (spec (a), Appendix A).
_METHODS = {"": "OnDelete", "OnDelete": "OnDelete", "Recreate": "Recreate", "InPlace": "InPlace",
            "RollingRecreate": "Recreate", "RollingInPlace": "InPlace"}
_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
_INT32_MAX = 2**31 - 1


class SpecError(ReconcileError):
    """A DecoratorController that cannot run as written; str() is `"{field}: {problem}"`."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


@dataclass(frozen=True, slots=True)
class ResourceRule:
    """One `spec.resources[i]`: a kind to decorate and the selectors its objects must match."""

    api_version: str
    resource: str
    labels: LabelSelector
    annotations: LabelSelector
    ignore_status_changes: bool


@dataclass(frozen=True, slots=True)
class AttachmentRule:
    """One `spec.attachments[i]`: a kind the hooks may attach, and how to update it."""

    api_version: str
    resource: str
    method: str


@dataclass(frozen=True, slots=True)
class DecoratorSpec:
    """A checked DecoratorController. Hook specs are copies of the dicts as written."""

    name: str
    resources: tuple[ResourceRule, ...]
    attachments: tuple[AttachmentRule, ...]
    sync: Mapping[str, Any] | None
    finalize: Mapping[str, Any] | None
    customize: Mapping[str, Any] | None
    resync_period: float | None
    endpoint_configs: tuple[Mapping[str, Any], ...]

    @property
    def finalizer(self) -> str:
        """The finalizer this controller puts on its targets while a finalize hook is defined."""
        return FINALIZER_PREFIX + self.name

    @property
    def finalize_enabled(self) -> bool:
        """True when `hooks.finalize` is present, even as `{}`: its presence turns the finalizer on."""
        return self.finalize is not None


def parse_decorator(obj: Mapping[str, Any]) -> DecoratorSpec:
    """The DecoratorController `obj` checked and compiled; `obj` is not changed (it may be a cache
    entry) and shares nothing with the result. Raises SpecError naming the field at fault."""
    if not isinstance(obj, Mapping):
        raise SpecError("<object>", f"must be a map, not {describe(obj)}")
    name = _required_string(_map(obj.get("metadata"), "metadata"), "name", "metadata")
    spec = _map(obj.get("spec"), "spec", required=True)
    resources = _list(spec.get("resources"), "spec.resources")
    if not resources:
        raise SpecError("spec.resources", "at least one resource rule is required")
    hooks = spec.get("hooks")
    if hooks is None:
        raise SpecError("spec.hooks", "no hooks defined")
    hooks = _map(hooks, "spec.hooks")
    return DecoratorSpec(
        name=name,
        resources=tuple(_resource_rule(item, f"spec.resources[{i}]") for i, item in enumerate(resources)),
        attachments=tuple(_attachment_rule(item, f"spec.attachments[{i}]")
                          for i, item in enumerate(_list(spec.get("attachments"), "spec.attachments"))),
        sync=_hook(hooks, "sync"),
        finalize=_hook(hooks, "finalize"),
        customize=_hook(hooks, "customize"),
        resync_period=_resync_period(spec.get("resyncPeriodSeconds")),
        endpoint_configs=tuple(clone(_map(item, f"spec.endpointConfigs[{i}]")) for i, item in
                               enumerate(_list(spec.get("endpointConfigs"), "spec.endpointConfigs"))),
    )


def resolve_rule(api_version: str, resource: str, served: Iterable[ResourceInfo]) -> ResourceInfo | None:
    """The served resource with this apiVersion and plural name; None when the server has none."""
    for info in served:
        if info.plural == resource and info.kind.api_version == api_version:
            return info
    return None


def hook_version(hook: Mapping[str, Any] | None) -> str:
    """The protocol version of a hook spec: its `version`, "v1" when it has none."""
    return str((hook or {}).get("version") or "v1")


def compile_selector(raw: Any, field: str, *, match_key: str = "matchLabels") -> LabelSelector:
    """A `metav1.LabelSelector`-shaped map compiled; `match_key` names its equality map
    (`matchAnnotations` for an annotationSelector). None and {} select everything. Raises
    SpecError naming the exact field, such as `...matchExpressions[1].values[0]`."""
    if raw is None:
        return parse_labels(None)
    raw = _map(raw, field)
    syntax = "" if match_key == "matchLabels" else " (annotation selectors take label syntax)"
    match = _map(raw.get(match_key), f"{field}.{match_key}")
    for key, value in match.items():
        where = f"{field}.{match_key}[{json.dumps(key)}]"
        _check_key(key, where, syntax)
        if not isinstance(value, str):
            raise SpecError(where, f"must be a string, not {describe(value)}")
        _check_value(value, where, syntax)
    expressions = _list(raw.get("matchExpressions"), f"{field}.matchExpressions")
    for i, expression in enumerate(expressions):
        _check_expression(expression, f"{field}.matchExpressions[{i}]", syntax)
    try:
        return parse_labels({"matchLabels": dict(match), "matchExpressions": list(expressions)})
    except BadRequest as err:  # pragma: no cover - every case parse_labels refuses is checked above
        raise SpecError(field, err.message) from err


def describe(value: Any) -> str:
    """A JSON value's type as a person says it: "a map", "a string", "null"."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "a map"
    if isinstance(value, list | tuple):
        return "a list"
    return type(value).__name__


def _resource_rule(raw: Any, field: str) -> ResourceRule:
    item = _map(raw, field)
    ignore = item.get("ignoreStatusChanges")
    if ignore is not None and not isinstance(ignore, bool):
        raise SpecError(f"{field}.ignoreStatusChanges", f"must be a boolean, not {describe(ignore)}")
    return ResourceRule(
        api_version=_required_string(item, "apiVersion", field),
        resource=_required_string(item, "resource", field),
        labels=compile_selector(item.get("labelSelector"), f"{field}.labelSelector"),
        annotations=compile_selector(item.get("annotationSelector"), f"{field}.annotationSelector",
                                     match_key="matchAnnotations"),
        ignore_status_changes=bool(ignore),
    )


def _attachment_rule(raw: Any, field: str) -> AttachmentRule:
    item = _map(raw, field)
    api_version = _required_string(item, "apiVersion", field)
    resource = _required_string(item, "resource", field)
    strategy = _map(item.get("updateStrategy"), f"{field}.updateStrategy")
    method = strategy.get("method")
    if method is None:
        method = ""
    if not isinstance(method, str) or method not in _METHODS:
        shown = json.dumps(method) if isinstance(method, str) else describe(method)
        raise SpecError(f"{field}.updateStrategy.method", f"{shown} is not an update method "
                        f"(OnDelete, Recreate, InPlace, RollingRecreate, RollingInPlace)")
    return AttachmentRule(api_version=api_version, resource=resource, method=_METHODS[method])


def _hook(hooks: Mapping[str, Any], name: str) -> dict[str, Any] | None:
    raw = hooks.get(name)
    if raw is None:  # `finalize:` with nothing after it is null in YAML: no hook, as in Go
        return None
    hook = _map(raw, f"spec.hooks.{name}")
    version = hook.get("version")
    if version is not None and version not in HOOK_VERSIONS:
        shown = json.dumps(version) if isinstance(version, str) else describe(version)
        raise SpecError(f"spec.hooks.{name}.version", f"{shown} is not a hook version (v1, v2)")
    result: dict[str, Any] = clone(hook)
    return result


def _resync_period(raw: Any) -> float | None:
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise SpecError("spec.resyncPeriodSeconds", f"must be an integer, not {describe(raw)}")
    if raw > _INT32_MAX:
        raise SpecError("spec.resyncPeriodSeconds", f"{raw} is too large (at most {_INT32_MAX})")
    return float(max(raw, 1))  # below 1, even 0, means every second (Metacontroller)


def _check_expression(raw: Any, field: str, syntax: str) -> None:
    expression = _map(raw, field)
    key = expression.get("key")
    if key is None or key == "":
        raise SpecError(f"{field}.key", "required")
    if not isinstance(key, str):
        raise SpecError(f"{field}.key", f"must be a string, not {describe(key)}")
    _check_key(key, f"{field}.key", syntax)
    operator = expression.get("operator")
    if operator is None or operator == "":
        raise SpecError(f"{field}.operator", "required")
    if operator not in _OPERATORS:
        shown = json.dumps(operator) if isinstance(operator, str) else describe(operator)
        raise SpecError(f"{field}.operator", f"{shown} is not a selector operator (In, NotIn, Exists, DoesNotExist)")
    values = _list(expression.get("values"), f"{field}.values")
    if operator in ("In", "NotIn") and not values:
        raise SpecError(f"{field}.values", f"must not be empty for {operator}")
    if operator in ("Exists", "DoesNotExist") and values:
        raise SpecError(f"{field}.values", f"must be empty for {operator}")
    for i, value in enumerate(values):
        if not isinstance(value, str):
            raise SpecError(f"{field}.values[{i}]", f"must be a string, not {describe(value)}")
        _check_value(value, f"{field}.values[{i}]", syntax)


def _check_key(key: str, field: str, syntax: str) -> None:
    if problem := check_label_key(key):
        raise SpecError(field, f"{json.dumps(key)} is not a valid key{syntax}: {problem}")


def _check_value(value: str, field: str, syntax: str) -> None:
    if problem := check_label_value(value):
        raise SpecError(field, f"{json.dumps(value)} is not a valid value{syntax}: {problem}")


def _required_string(item: Mapping[str, Any], key: str, field: str) -> str:
    value = item.get(key)
    if value is None or value == "":
        raise SpecError(f"{field}.{key}", "required")
    if not isinstance(value, str):
        raise SpecError(f"{field}.{key}", f"must be a string, not {describe(value)}")
    return value


def _map(value: Any, field: str, *, required: bool = False) -> Mapping[str, Any]:
    if value is None:
        if required:
            raise SpecError(field, "required")
        return {}
    if not isinstance(value, Mapping):
        raise SpecError(field, f"must be a map, not {describe(value)}")
    return value


def _list(value: Any, field: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise SpecError(field, f"must be a list, not {describe(value)}")
    return value
