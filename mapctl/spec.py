"""The MapController object, parsed and checked once into a frozen `MapSpec`.

Owns: reading a `porchkit.dev/v1alpha1` MapController (cluster-scoped; a plain dict as the API
server or a manifest gives it) into the parent resource, the input and output resources (outputs
with a normalised update method), the raw `map` and `tombstone` hook specs and the resync period.
Every problem is a `SpecError` whose one-line text names the field at fault
(`spec.outputResources[1].updateStrategy.method: "Rolling" is not an update method (...)`).

Leaves to others: discovery (the controller resolves apiVersion + plural), the webhook fields of a
hook (`reconcile.hooks` checks url, timeout, TLS...), and the parent's selector (selection.py,
since it lives on each parent, not here). Unknown fields are ignored, as the API server prunes them.

Follows the DecoratorController where the proposal is silent: `Rolling*` methods act as their
plain counterparts, an absent method is OnDelete, `resyncPeriodSeconds` below 1 means 1 second,
and a hook's `version` is v1 (the default) or v2.

Differences (Metacontroller never built this kind, so these are choices, not departures):
- `metadata.name` must be a valid label value, because it labels every output (keys.py).
- Two input (or two output) rules may not name the same resource plural: the aggregated status is
  keyed by plural (status.py), so they would share one count.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reconcile.cluster import Kind
from reconcile.errors import ReconcileError
from reconcile.patching import clone
from reconcile.selectors import check_label_value

MAP_CONTROLLER = Kind("porchkit.dev/v1alpha1", "MapController")
HOOK_VERSIONS = ("v1", "v2")

# The CRD accepts the Rolling* methods; without a rolling update they behave as their plain
# counterparts (as for DecoratorController attachments).
_METHODS = {"OnDelete": "OnDelete", "Recreate": "Recreate", "InPlace": "InPlace",
            "RollingRecreate": "Recreate", "RollingInPlace": "InPlace"}
_INT32_MAX = 2**31 - 1


class SpecError(ReconcileError):
    """A MapController that cannot run as written; str() is `"{field}: {problem}"`."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


@dataclass(frozen=True, slots=True)
class ResourceRef:
    """A resource named as the spec names it: apiVersion and plural (`v1`, `configmaps`)."""

    api_version: str
    resource: str


@dataclass(frozen=True, slots=True)
class OutputRule:
    """One `spec.outputResources[i]`: a kind the map hook may emit, and how to update it."""

    api_version: str
    resource: str
    method: str  # OnDelete, Recreate or InPlace


@dataclass(frozen=True, slots=True)
class MapSpec:
    """A checked MapController. Hook specs are copies of the dicts as written."""

    name: str
    parent: ResourceRef
    inputs: tuple[ResourceRef, ...]
    outputs: tuple[OutputRule, ...]
    map_hook: Mapping[str, Any]
    tombstone_hook: Mapping[str, Any] | None  # None: detached outputs are deleted
    resync_period: float | None


def parse_map_controller(obj: Mapping[str, Any]) -> MapSpec:
    """The MapController `obj` checked; `obj` is not changed (it may be a cache entry) and shares
    nothing with the result. Raises SpecError naming the field at fault."""
    if not isinstance(obj, Mapping):
        raise SpecError("<object>", f"must be a map, not {describe(obj)}")
    name = _required_string(_map(obj.get("metadata"), "metadata"), "name", "metadata")
    if problem := check_label_value(name):
        raise SpecError("metadata.name", f"{json.dumps(name)} cannot label outputs: {problem}")
    spec = _map(obj.get("spec"), "spec", required=True)
    parent = _resource_ref(_map(spec.get("parentResource"), "spec.parentResource", required=True),
                           "spec.parentResource")
    inputs = tuple(_resource_ref(item, f"spec.inputResources[{i}]")
                   for i, item in enumerate(_nonempty_list(spec.get("inputResources"), "spec.inputResources")))
    outputs = tuple(_output_rule(item, f"spec.outputResources[{i}]")
                    for i, item in enumerate(_nonempty_list(spec.get("outputResources"), "spec.outputResources")))
    _check_unique([ref.resource for ref in inputs], "spec.inputResources")
    _check_unique([rule.resource for rule in outputs], "spec.outputResources")
    hooks = _map(spec.get("hooks"), "spec.hooks", required=True)
    map_hook = _hook(hooks, "map")
    if map_hook is None:
        raise SpecError("spec.hooks.map", "required")
    return MapSpec(
        name=name,
        parent=parent,
        inputs=inputs,
        outputs=outputs,
        map_hook=map_hook,
        tombstone_hook=_hook(hooks, "tombstone"),
        resync_period=_resync_period(spec.get("resyncPeriodSeconds")),
    )


def hook_version(hook: Mapping[str, Any] | None) -> str:
    """The protocol version of a hook spec: its `version`, "v1" when it has none."""
    return str((hook or {}).get("version") or "v1")


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


def _resource_ref(raw: Any, field: str) -> ResourceRef:
    item = _map(raw, field)
    return ResourceRef(_required_string(item, "apiVersion", field), _required_string(item, "resource", field))


def _output_rule(raw: Any, field: str) -> OutputRule:
    ref = _resource_ref(raw, field)
    strategy = _map(_map(raw, field).get("updateStrategy"), f"{field}.updateStrategy")
    method = strategy.get("method")
    if method is None or method == "":
        method = "OnDelete"
    if not isinstance(method, str) or method not in _METHODS:
        shown = json.dumps(method) if isinstance(method, str) else describe(method)
        raise SpecError(f"{field}.updateStrategy.method", f"{shown} is not an update method "
                        f"(OnDelete, Recreate, InPlace, RollingRecreate, RollingInPlace)")
    return OutputRule(ref.api_version, ref.resource, _METHODS[method])


def _check_unique(resources: Sequence[str], field: str) -> None:
    seen: dict[str, int] = {}
    for i, resource in enumerate(resources):
        if resource in seen:
            raise SpecError(f"{field}[{i}].resource", f"{json.dumps(resource)} is already named by "
                            f"{field}[{seen[resource]}] (status counts are keyed by resource)")
        seen[resource] = i


def _hook(hooks: Mapping[str, Any], name: str) -> dict[str, Any] | None:
    raw = hooks.get(name)
    if raw is None:  # `tombstone:` with nothing after it is null in YAML: no hook
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
    return float(max(raw, 1))  # below 1, even 0, means every second, as for decorators


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


def _nonempty_list(value: Any, field: str) -> list[Any]:
    if value is None:
        raise SpecError(field, "at least one resource is required")
    if not isinstance(value, list):
        raise SpecError(field, f"must be a list, not {describe(value)}")
    if not value:
        raise SpecError(field, "at least one resource is required")
    return value
