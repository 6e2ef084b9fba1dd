"""Reading the manifests a local `porchkit variants` run is given: files, directories, or `-`.

Every object keeps where it came from (`Manifest.source`: `path` or `path (document N)`), so that
a problem with it can be reported as one line naming the file and the object. YAML is read with
the YAML 1.2 core schema, as kpt and the API server read it (`on: yes` stays two strings).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from deltapipe.errors import DeltapipeError
from deltapipe.manifests import manifest_texts
from porchvariant import yamltext
from porchvariant.errors import PorchVariantError


class ManifestError(PorchVariantError):
    """A manifest file could not be read: missing, malformed YAML, or a document that is not an object."""


@dataclass(frozen=True, slots=True)
class Manifest:
    """One object and the place it was read from."""

    obj: dict[str, Any]
    source: str

    @property
    def kind(self) -> str:
        return str(self.obj.get("kind", ""))

    def describe(self) -> str:
        """`file: Kind namespace/name`, how messages name this object."""
        metadata = self.obj.get("metadata")
        metadata = metadata if isinstance(metadata, dict) else {}
        name = "/".join(part for part in (metadata.get("namespace"), metadata.get("name")) if part)
        return f"{self.source}: {self.kind or 'object'} {name or '(unnamed)'}"


def read_manifests(paths: Iterable[str | Path], stdin: IO[str] | None = None) -> list[Manifest]:
    """Every object in the given files, directories (recursively, in name order) or `-` (stdin).

    `kind: List` documents are expanded into their items. Raises ManifestError naming the file.
    """
    manifests: list[Manifest] = []
    for source, text in _texts(paths, stdin or sys.stdin):
        try:
            documents = yamltext.load_fast(text)
        except yamltext.YamlTextError as err:
            raise ManifestError(f"{source}: {err}") from None
        for number, document in enumerate(documents, start=1):
            if document is None:
                continue
            where = source if len(documents) == 1 else f"{source} (document {number})"
            items = document.get("items") if isinstance(document, dict) and document.get("kind") == "List" else None
            for item in items if isinstance(items, list) else [document]:
                if not isinstance(item, dict):
                    raise ManifestError(f"{where}: expected an object (a mapping), got {type(item).__name__}")
                manifests.append(Manifest(item, where))
    return manifests


def _texts(paths: Iterable[str | Path], stdin: IO[str]) -> Iterator[tuple[str, str]]:
    try:
        yield from manifest_texts(paths, stdin)
    except DeltapipeError as err:
        raise ManifestError(str(err)) from None
