"""The MapController CustomResourceDefinition: porchkit's own group, names and schema.

`porchkit.dev/v1alpha1` `MapController`, cluster-scoped, short name `mapc`, with a status
subresource. Metacontroller never built this kind, so the group is porchkit's. The schema covers
every field spec.py reads (a real API server prunes the rest): the parent, input and output
resources (outputs with an updateStrategy), resyncPeriodSeconds, parallelism (how many map hook
calls for different inputs may run at once; its bounds and default are spec.py's) and the `map`
and `tombstone` hooks. Its `required`, `enum`, `minItems` and bounds refuse at admission what
spec.py would refuse later. deploy/crds/porchkit.dev_mapcontrollers.yaml is this, written out (a
test holds the two together).

Each hook's schema is reconcile.hooks.schema's, as the DecoratorController's CRD has it:
Metacontroller's webhook with its TLS and authorization settings, plus porchkit's `python` and
`pipeline` hooks.

Not here: `spec.endpointConfigs`, which spec.py does not read; webhooks carry their own TLS
settings.
"""

from __future__ import annotations

import json
from typing import Any

from mapctl.spec import DEFAULT_PARALLELISM, MAX_PARALLELISM
from reconcile.hooks.schema import hook_schema

GROUP = "porchkit.dev"
VERSION = "v1alpha1"

__all__ = ["GROUP", "VERSION", "map_controller_crd"]

Schema = dict[str, Any]


def _object(properties: Schema, required: tuple[str, ...] = (), description: str = "") -> Schema:
    schema: Schema = {"description": description} if description else {}
    schema.update(type="object", properties=properties)
    if required:
        schema["required"] = list(required)
    return schema


def _described(schema: Schema, description: str) -> Schema:
    return {"description": description, **schema}


_STRING: Schema = {"type": "string"}
_INT: Schema = {"type": "integer", "format": "int32"}


def _resources(description: str, item_properties: Schema | None = None) -> Schema:
    item = _object({"apiVersion": _STRING, "resource": _STRING, **(item_properties or {})},
                   ("apiVersion", "resource"))
    return {"description": description, "type": "array", "minItems": 1, "items": item}


_UPDATE_METHODS = ["OnDelete", "Recreate", "InPlace", "RollingRecreate", "RollingInPlace"]

_SPEC = _object({
    "parentResource": _object(
        {"apiVersion": _STRING, "resource": _STRING}, ("apiVersion", "resource"),
        "The kind whose objects own the outputs; each one's spec.selector picks its inputs."),
    "inputResources": _resources("The kinds the map hook is called for, once per matching object."),
    "outputResources": _resources(
        "The kinds the map hook may return; each output is owned by the parent and tagged with its input.",
        {"updateStrategy": _object({"method": {"type": "string", "enum": _UPDATE_METHODS}})}),
    "resyncPeriodSeconds": _described(
        _INT, "Ask the hooks again about every input (and kept detached outputs) after this many seconds "
              "(at least 1), even if nothing changed."),
    "parallelism": _described(
        {**_INT, "minimum": 1, "maximum": MAX_PARALLELISM, "default": DEFAULT_PARALLELISM},
        "How many map (or tombstone) hook calls, for different inputs, may run at once."),
    "hooks": _object(
        {"map": _described(hook_schema(), "Called per input: the outputs it should have."),
         "tombstone": _described(hook_schema(), "Called when an input is gone: which of its outputs to keep. "
                                          "Without it, they are deleted.")},
        ("map",)),
}, ("parentResource", "inputResources", "outputResources", "hooks"))

_PRINTER_COLUMNS = [
    {"name": "Parent", "type": "string", "jsonPath": ".spec.parentResource.resource"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


def map_controller_crd() -> dict[str, Any]:
    """The CRD, as a new dict."""
    schema = _object({"apiVersion": _STRING, "kind": _STRING, "metadata": {"type": "object"}, "spec": _SPEC,
                      "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                     ("metadata", "spec"))
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"mapcontrollers.{GROUP}"},
        "spec": {"group": GROUP, "scope": "Cluster",
                 "names": {"kind": "MapController", "listKind": "MapControllerList",
                           "plural": "mapcontrollers", "singular": "mapcontroller", "shortNames": ["mapc"]},
                 "versions": [{"name": VERSION, "served": True, "storage": True, "subresources": {"status": {}},
                               "additionalPrinterColumns": _PRINTER_COLUMNS,
                               "schema": {"openAPIV3Schema": schema}}]}}
    return json.loads(json.dumps(crd))  # no shared parts: YAML would write them as anchors
