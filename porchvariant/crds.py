"""The CustomResourceDefinitions the local runs install on the embedded API server.

PackageVariant and PackageVariantSet carry the structural schema of their models (api.py), the
same as deploy/crds (tests hold the two together), so the embedded server prunes and type-checks
them as a real one would. Repository is Porch's kind; porchkit only reads it, so its schema keeps
every field.
"""

from __future__ import annotations

from typing import Any

from porchvariant.api import GROUP, PackageVariant, PackageVariantSet, structural_schema

__all__ = ["crds"]


def crds() -> list[dict[str, Any]]:
    """The three CRDs, as new dicts."""
    return [
        _crd("PackageVariant", "packagevariants", "v1alpha1", structural_schema(PackageVariant)),
        _crd("PackageVariantSet", "packagevariantsets", "v1alpha2", structural_schema(PackageVariantSet)),
        _crd("Repository", "repositories", "v1alpha1",
             {"type": "object", "x-kubernetes-preserve-unknown-fields": True}),
    ]


def _crd(kind: str, plural: str, version: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{GROUP}"},
            "spec": {"group": GROUP, "scope": "Namespaced",
                     "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural,
                               "singular": kind.lower()},
                     "versions": [{"name": version, "served": True, "storage": True,
                                   "subresources": {"status": {}}, "schema": {"openAPIV3Schema": schema}}]}}
