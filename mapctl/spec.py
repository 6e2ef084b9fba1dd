"""The MapController object, parsed and checked once into a frozen `MapSpec`.

Owns: reading a `porchkit.dev/v1alpha1` MapController (cluster-scoped; a plain dict as the API
server or a manifest gives it) into the parent resource, the input and output resources (outputs
with a normalised update method), the raw `map` and `tombstone` hook specs and the resync period.
Every problem is a `SpecError` whose one-line text names the field at fault
(`spec.outputResources[1].updateStrategy.method: "Rolling" is not an update method (...)`).

Leaves to others: discovery (the controller resolves apiVersion + plural), the webhook fields of a
hook (`reconcile.hooks` checks url, timeout, TLS...), and the parent's selector (selection.py,
since it lives on each parent, not here). Unknown fields are ignored, as the API server prunes them.

`spec.parallelism` (porchkit's; the proposal has no such field) bounds how many hook calls for
different inputs run at once: an integer from 1 to MAX_PARALLELISM, DEFAULT_PARALLELISM when
absent.

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
from reconcile.fields import (
    FieldError,
    describe,
    hook_spec,
    mapping,
    required_string,
    resync_period,
    update_method,
)
from reconcile.selectors import check_label_value

MAP_CONTROLLER = Kind("porchkit.dev/v1alpha1", "MapController")
DEFAULT_PARALLELISM = 8
MAX_PARALLELISM = 256


class SpecError(FieldError):
    """A MapController that cannot run as written; str() is `"{field}: {problem}"`."""


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
    parallelism: int = DEFAULT_PARALLELISM


def parse_map_controller(obj: Mapping[str, Any]) -> MapSpec:
    """The MapController `obj` checked; `obj` is not changed (it may be a cache entry) and shares
    nothing with the result. Raises SpecError naming the field at fault."""
    if not isinstance(obj, Mapping):
        raise SpecError("<object>", f"must be a map, not {describe(obj)}")
    name = required_string(mapping(obj.get("metadata"), "metadata", error=SpecError), "name", "metadata", SpecError)
    if problem := check_label_value(name):
        raise SpecError("metadata.name", f"{json.dumps(name)} cannot label outputs: {problem}")
    spec = mapping(obj.get("spec"), "spec", required=True, error=SpecError)
    parent = _resource_ref(mapping(spec.get("parentResource"), "spec.parentResource", required=True,
                                   error=SpecError),
                           "spec.parentResource")
    inputs = tuple(_resource_ref(item, f"spec.inputResources[{i}]")
                   for i, item in enumerate(_nonempty_list(spec.get("inputResources"), "spec.inputResources")))
    outputs = tuple(_output_rule(item, f"spec.outputResources[{i}]")
                    for i, item in enumerate(_nonempty_list(spec.get("outputResources"), "spec.outputResources")))
    _check_unique([ref.resource for ref in inputs], "spec.inputResources")
    _check_unique([rule.resource for rule in outputs], "spec.outputResources")
    hooks = mapping(spec.get("hooks"), "spec.hooks", required=True, error=SpecError)
    map_hook = hook_spec(hooks, "map", SpecError)
    if map_hook is None:
        raise SpecError("spec.hooks.map", "required")
    return MapSpec(
        name=name,
        parent=parent,
        inputs=inputs,
        outputs=outputs,
        map_hook=map_hook,
        tombstone_hook=hook_spec(hooks, "tombstone", SpecError),
        resync_period=resync_period(spec.get("resyncPeriodSeconds"), SpecError),
        parallelism=_parallelism(spec.get("parallelism")),
    )


def _parallelism(raw: Any) -> int:
    if raw is None:
        return DEFAULT_PARALLELISM
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise SpecError("spec.parallelism", f"must be an integer, not {describe(raw)}")
    if not 1 <= raw <= MAX_PARALLELISM:
        raise SpecError("spec.parallelism", f"{raw} is out of range (1 to {MAX_PARALLELISM})")
    return raw


def _resource_ref(raw: Any, field: str) -> ResourceRef:
    item = mapping(raw, field, error=SpecError)
    return ResourceRef(required_string(item, "apiVersion", field, SpecError),
                       required_string(item, "resource", field, SpecError))


def _output_rule(raw: Any, field: str) -> OutputRule:
    ref = _resource_ref(raw, field)
    strategy = mapping(mapping(raw, field, error=SpecError).get("updateStrategy"), f"{field}.updateStrategy",
                       error=SpecError)
    return OutputRule(ref.api_version, ref.resource, update_method(strategy, f"{field}.updateStrategy", SpecError))


def _check_unique(resources: Sequence[str], field: str) -> None:
    seen: dict[str, int] = {}
    for i, resource in enumerate(resources):
        if resource in seen:
            raise SpecError(f"{field}[{i}].resource", f"{json.dumps(resource)} is already named by "
                            f"{field}[{seen[resource]}] (status counts are keyed by resource)")
        seen[resource] = i


def _nonempty_list(value: Any, field: str) -> list[Any]:
    if value is None:
        raise SpecError(field, "at least one resource is required")
    if not isinstance(value, list):
        raise SpecError(field, f"must be a list, not {describe(value)}")
    if not value:
        raise SpecError(field, "at least one resource is required")
    return value
