"""Reading the manifests a local `porchkit variants` run is given: files, directories, or `-`.

Every object keeps where it came from (`Manifest.source`: `path` or `path (document N)`), so that
a problem with it can be reported as one line naming the file and the object. YAML is read by
krmyaml, as kpt and the API server read it (`on: yes` stays two strings). `check_variants` refuses
the PackageVariants and sets that no run may load, before anything is rendered or written.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from krmyaml import YamlError, read_documents
from reconcile.manifests import ManifestError

VARIANT_KINDS = frozenset({"PackageVariant", "PackageVariantSet"})


@dataclass(frozen=True, slots=True)
class Manifest:
    """One object and the place it was read from."""

    obj: dict[str, Any]
    source: str

    @property
    def kind(self) -> str:
        return str(self.obj.get("kind", ""))

    def describe(self, default_namespace: str = "") -> str:
        """`file: Kind namespace/name`, how messages name this object (`default_namespace` when it
        names none)."""
        metadata = self.obj.get("metadata")
        metadata = metadata if isinstance(metadata, dict) else {}
        namespace = metadata.get("namespace") or default_namespace
        name = "/".join(part for part in (namespace, metadata.get("name")) if part)
        return f"{self.source}: {self.kind or 'object'} {name or '(unnamed)'}"


def read_manifests(paths: Iterable[str | Path], stdin: IO[str] | None = None) -> list[Manifest]:
    """Every object in the given files, directories (recursively, in name order) or `-` (stdin).

    `kind: List` documents are expanded into their items. Raises ManifestError naming the file.
    """
    try:
        return [Manifest(document.obj, document.where) for document in read_documents(paths, stdin or sys.stdin)]
    except YamlError as err:
        raise ManifestError(str(err)) from None


def check_variants(manifests: Iterable[Manifest]) -> None:
    """Raise ManifestError for the first PackageVariant or PackageVariantSet among `manifests` whose
    name is missing or not an object name, or whose upstream revision is not one Porch could have
    (porchvariant.validation.manifest_problems): one line, `file: Kind namespace/name: field: why`,
    with the namespace `default` when the object names none, as both commands place it."""
    from porchvariant.validation import manifest_problems

    for manifest in manifests:
        if manifest.kind in VARIANT_KINDS and (problems := manifest_problems(manifest.obj)):
            raise ManifestError(f"{manifest.describe('default')}: {'; '.join(problems)}")
