"""The errors porchvariant raises on purpose.

    PorchVariantError        base; str() is one line for a person
    ├── MutationError        a package could not be mutated (package context, Kptfile, injection)
    └── TemplateError        a PackageVariantSet template could not be rendered for a target
                             (a CEL syntax, type or evaluation error, a missing Repository)

Validation problems are not exceptions: `validate_package_variant` and
`validate_package_variant_set` return them as a list of messages, as Porch reports them in a
condition. The message texts are Porch's wherever Porch has one, so that an operator searching
for an error from either implementation finds the same words.
"""

from __future__ import annotations


class PorchVariantError(Exception):
    """Base of every error porchvariant raises on purpose."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class MutationError(PorchVariantError):
    """A mutation could not be applied to a package; the package is left as it was."""


class TemplateError(PorchVariantError):
    """A PackageVariantSet template failed for one target.

    `field` is the template field (`template.downstream.repoExpr`, ...), `target` a readable
    name for the target (`repository prod-east`, `Team/alpha`), `pvs` the set's name; the
    message reads `PackageVariantSet <pvs>, target <target>: <field>: <cause>`.
    """

    def __init__(self, cause: str, *, field: str = "", target: str = "", pvs: str = "") -> None:
        self.cause, self.field, self.target, self.pvs = cause, field, target, pvs
        where = ", ".join(part for part in (f"PackageVariantSet {pvs}" if pvs else "",
                                             f"target {target}" if target else "") if part)
        text = f"{field}: {cause}" if field else cause
        super().__init__(f"{where}: {text}" if where else text)
