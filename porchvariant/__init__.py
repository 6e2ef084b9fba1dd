"""porchvariant: PackageVariant and PackageVariantSet.

To come: API models and validation, the package mutations (package context, Kptfile pipeline
editing, config injection), PackageVariantSet expansion with CEL templates, a Porch API client,
an embedded Porch over plain git repositories, and the two controllers.
"""
