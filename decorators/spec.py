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
label syntax. `resyncPeriodSeconds` below 1, even 0 or negative, means 1 second, as in
Metacontroller. `hooks` absent or null is "no hooks defined". Departure: hooks with neither `sync`
nor `finalize` (such as `hooks: {}`) are refused at `spec.hooks`; Metacontroller starts such a
controller and then fails every sync, so nothing it could do would ever work.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from reconcile.cluster import Kind, ResourceInfo
from reconcile.errors import BadRequest
from reconcile.fields import (
    FieldError,
    describe,
    hook_spec,
    mapping,
    required_string,
    resync_period,
    update_method,
)
from reconcile.patching import clone
from reconcile.selectors import LabelSelector, check_label_key, check_label_value, parse_labels

DECORATOR_CONTROLLER = Kind("metacontroller.k8s.io/v1alpha1", "DecoratorController")
FINALIZER_PREFIX = "metacontroller.io/decoratorcontroller-"
DECORATOR_ANNOTATION = "metacontroller.k8s.io/decorator-controller"
UPDATE_METHODS = ("OnDelete", "Recreate", "InPlace")  # the Rolling* methods behave as these (spec Appendix A)

_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


class SpecError(FieldError):
    """A DecoratorController that cannot run as written; str() is `"{field}: {problem}"`."""


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
    name = required_string(mapping(obj.get("metadata"), "metadata", error=SpecError), "name", "metadata", SpecError)
    spec = mapping(obj.get("spec"), "spec", required=True, error=SpecError)
    resources = _list(spec.get("resources"), "spec.resources")
    if not resources:
        raise SpecError("spec.resources", "at least one resource rule is required")
    hooks = spec.get("hooks")
    if hooks is None:
        raise SpecError("spec.hooks", "no hooks defined")
    hooks = mapping(hooks, "spec.hooks", error=SpecError)
    sync = hook_spec(hooks, "sync", SpecError)
    finalize = hook_spec(hooks, "finalize", SpecError)
    customize = hook_spec(hooks, "customize", SpecError)
    if sync is None and finalize is None:
        raise SpecError("spec.hooks", "needs a sync or a finalize hook; with neither, no target can ever be synced")
    return DecoratorSpec(
        name=name,
        resources=tuple(_resource_rule(item, f"spec.resources[{i}]") for i, item in enumerate(resources)),
        attachments=tuple(_attachment_rule(item, f"spec.attachments[{i}]")
                          for i, item in enumerate(_list(spec.get("attachments"), "spec.attachments"))),
        sync=sync,
        finalize=finalize,
        customize=customize,
        resync_period=resync_period(spec.get("resyncPeriodSeconds"), SpecError),
        endpoint_configs=tuple(clone(mapping(item, f"spec.endpointConfigs[{i}]", error=SpecError)) for i, item in
                               enumerate(_list(spec.get("endpointConfigs"), "spec.endpointConfigs"))),
    )


def resolve_rule(api_version: str, resource: str, served: Iterable[ResourceInfo]) -> ResourceInfo | None:
    """The served resource with this apiVersion and plural name; None when the server has none."""
    for info in served:
        if info.plural == resource and info.kind.api_version == api_version:
            return info
    return None



def compile_selector(raw: Any, field: str, *, match_key: str = "matchLabels") -> LabelSelector:
    """A `metav1.LabelSelector`-shaped map compiled; `match_key` names its equality map
    (`matchAnnotations` for an annotationSelector). None and {} select everything. Raises
    SpecError naming the exact field, such as `...matchExpressions[1].values[0]`."""
    if raw is None:
        return parse_labels(None)
    raw = mapping(raw, field, error=SpecError)
    syntax = "" if match_key == "matchLabels" else " (annotation selectors take label syntax)"
    match = mapping(raw.get(match_key), f"{field}.{match_key}", error=SpecError)
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



def _resource_rule(raw: Any, field: str) -> ResourceRule:
    item = mapping(raw, field, error=SpecError)
    ignore = item.get("ignoreStatusChanges")
    if ignore is not None and not isinstance(ignore, bool):
        raise SpecError(f"{field}.ignoreStatusChanges", f"must be a boolean, not {describe(ignore)}")
    return ResourceRule(
        api_version=required_string(item, "apiVersion", field, SpecError),
        resource=required_string(item, "resource", field, SpecError),
        labels=compile_selector(item.get("labelSelector"), f"{field}.labelSelector"),
        annotations=compile_selector(item.get("annotationSelector"), f"{field}.annotationSelector",
                                     match_key="matchAnnotations"),
        ignore_status_changes=bool(ignore),
    )


def _attachment_rule(raw: Any, field: str) -> AttachmentRule:
    item = mapping(raw, field, error=SpecError)
    api_version = required_string(item, "apiVersion", field, SpecError)
    resource = required_string(item, "resource", field, SpecError)
    strategy = mapping(item.get("updateStrategy"), f"{field}.updateStrategy", error=SpecError)
    return AttachmentRule(api_version=api_version, resource=resource,
                          method=update_method(strategy, f"{field}.updateStrategy", SpecError))




def _check_expression(raw: Any, field: str, syntax: str) -> None:
    expression = mapping(raw, field, error=SpecError)
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




def _list(value: Any, field: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise SpecError(field, f"must be a list, not {describe(value)}")
    return value
