"""The DecoratorController CustomResourceDefinition: Metacontroller's group, names and schema, plus porchkit's hooks.

`metacontroller.k8s.io/v1alpha1` `DecoratorController`, cluster-scoped, short names `dec` and
`decorators`, with a status subresource: manifests written for Metacontroller apply unchanged.
The schema has every field of Metacontroller's (resources, attachments, hooks with webhooks,
TLS and authorization, endpointConfigs, resyncPeriodSeconds) and two more hook kinds,
`python: {function, timeout}` and `pipeline: {...}` (a Δ pipeline, kept whole), which a
Metacontroller schema would prune. deploy/crds/decoratorcontrollers.yaml is this, written out
(a test holds the two together). A cluster with Metacontroller's own CRD installed serves the
same objects; only the python and pipeline hooks need this one.
"""

from __future__ import annotations

import json
from typing import Any

from reconcile.hooks.schema import hook_schema, tls_and_auth_schema

GROUP = "metacontroller.k8s.io"
VERSION = "v1alpha1"

__all__ = ["GROUP", "VERSION", "decorator_controller_crd"]


def _object(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    return schema


_STRING: dict[str, Any] = {"type": "string"}
_INT: dict[str, Any] = {"type": "integer", "format": "int32"}
_BOOL: dict[str, Any] = {"type": "boolean"}
_STRINGS: dict[str, Any] = {"type": "array", "items": _STRING}
_STRING_MAP: dict[str, Any] = {"type": "object", "additionalProperties": _STRING}

_EXPRESSIONS = {"type": "array", "items": _object({"key": _STRING, "operator": _STRING, "values": _STRINGS},
                                                  ("key", "operator"))}
_LABEL_SELECTOR = _object({"matchLabels": _STRING_MAP, "matchExpressions": _EXPRESSIONS})
_ANNOTATION_SELECTOR = _object({"matchAnnotations": _STRING_MAP, "matchExpressions": _EXPRESSIONS})
_HOOK = hook_schema()

_UPDATE_METHODS = ["OnDelete", "Recreate", "InPlace", "RollingRecreate", "RollingInPlace"]

_SPEC = _object({
    "resources": {"type": "array", "items": _object({
        "apiVersion": _STRING, "resource": _STRING, "labelSelector": _LABEL_SELECTOR,
        "annotationSelector": _ANNOTATION_SELECTOR, "ignoreStatusChanges": _BOOL}, ("apiVersion", "resource"))},
    "attachments": {"type": "array", "items": _object({
        "apiVersion": _STRING, "resource": _STRING,
        "updateStrategy": _object({"method": {"type": "string", "enum": _UPDATE_METHODS}})},
        ("apiVersion", "resource"))},
    "hooks": _object({"sync": _HOOK, "finalize": _HOOK, "customize": _HOOK}),
    "resyncPeriodSeconds": _INT,
    "endpointConfigs": {"type": "array", "items": _object({"host": _STRING, **tls_and_auth_schema()}, ("host",))},
}, ("resources",))


def decorator_controller_crd() -> dict[str, Any]:
    """The CRD, as a new dict."""
    schema = _object({"apiVersion": _STRING, "kind": _STRING, "metadata": {"type": "object"}, "spec": _SPEC,
                      "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                     ("metadata", "spec"))
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        # *.k8s.io is a protected group: the API server refuses a CRD in it without this annotation
        "metadata": {"name": f"decoratorcontrollers.{GROUP}",
                     "annotations": {"api-approved.kubernetes.io": "unapproved, request not yet submitted"}},
        "spec": {"group": GROUP, "scope": "Cluster",
                 "names": {"kind": "DecoratorController", "listKind": "DecoratorControllerList",
                           "plural": "decoratorcontrollers", "singular": "decoratorcontroller",
                           "shortNames": ["dec", "decorators"]},
                 "versions": [{"name": VERSION, "served": True, "storage": True, "subresources": {"status": {}},
                               "schema": {"openAPIV3Schema": schema}}]}}
    return json.loads(json.dumps(crd))  # no shared parts: YAML would write them as anchors
