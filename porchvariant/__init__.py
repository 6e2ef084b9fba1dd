"""porchvariant: PackageVariant and PackageVariantSet, Porch's package automation.

The pure parts, plain dicts in and out (docs/porchvariant.md is the guide):

* the API: pydantic models of PackageVariant (`config.porch.kpt.dev/v1alpha1`) and
  PackageVariantSet (`v1alpha2`) in api.py, the CRDs they match in deploy/crds/, and
  `validate_package_variant` / `validate_package_variant_set` with Porch's messages (validation.py);
* the mutations a PackageVariant makes to a package given as `{path: text}`:
  `apply_package_context` (package_context.py), `edit_kptfile_pipeline` (kptfile_pipeline.py),
  `inject` (injection.py), and `apply_mutations`, all three in Porch's order (mutations.py), on
  comment-preserving YAML text editing (textedit.py);
* PackageVariantSet rendering: `render_package_variants` (render.py) over CEL templates
  compiled once (cel.py, on cel-expr-python or, where it has no wheel, cel-python).

Names are loaded on first use: krmfn's functions import the mutations and must not pay for
pydantic, CEL or the runtime at start-up.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from porchvariant import cel as cel
    from porchvariant.errors import MutationError as MutationError
    from porchvariant.errors import PorchVariantError as PorchVariantError
    from porchvariant.errors import TemplateError as TemplateError
    from porchvariant.injection import inject as inject
    from porchvariant.kptfile_pipeline import edit_kptfile_pipeline as edit_kptfile_pipeline
    from porchvariant.mutations import MutationResult as MutationResult
    from porchvariant.mutations import apply_mutations as apply_mutations
    from porchvariant.mutations import resources_changed as resources_changed
    from porchvariant.package_context import apply_package_context as apply_package_context
    from porchvariant.render import find_set_upstream as find_set_upstream
    from porchvariant.render import package_variant_name as package_variant_name
    from porchvariant.render import render_package_variants as render_package_variants
    from porchvariant.validation import validate_package_variant as validate_package_variant
    from porchvariant.validation import validate_package_variant_set as validate_package_variant_set

_EXPORTS = {
    "PorchVariantError": "porchvariant.errors", "MutationError": "porchvariant.errors",
    "TemplateError": "porchvariant.errors",
    "validate_package_variant": "porchvariant.validation", "validate_package_variant_set": "porchvariant.validation",
    "apply_package_context": "porchvariant.package_context",
    "edit_kptfile_pipeline": "porchvariant.kptfile_pipeline",
    "inject": "porchvariant.injection",
    "apply_mutations": "porchvariant.mutations", "resources_changed": "porchvariant.mutations",
    "MutationResult": "porchvariant.mutations",
    "render_package_variants": "porchvariant.render", "find_set_upstream": "porchvariant.render",
    "package_variant_name": "porchvariant.render",
}
_SUBMODULES = ("api", "cel")

__all__ = sorted([*_EXPORTS, *_SUBMODULES])


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"porchvariant.{name}")
    if name not in _EXPORTS:
        raise AttributeError(f"module 'porchvariant' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
