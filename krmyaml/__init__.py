"""krmyaml: the one place porchkit reads YAML, as Kubernetes tooling reads it.

    from krmyaml import YamlError, load_all, dump_all, read_documents, manifest_texts

`schema` reads and writes YAML streams with go-yaml's rules (YAML 1.2 scalars, duplicate keys
refused) and bounded cost (aliases, depth); `manifests` reads manifests from files, directories
and stdin, and never skips anything silently. Every problem is one `YamlError` naming the file and,
for YAML, the line. `roundtrip` reads objects so that what a function did not change is written
back verbatim (krmfn's ResourceLists), and `textedit` edits YAML files as text, keeping comments
and layout (porchvariant's package mutations), with the same splicer and writer. Depends on PyYAML
(libyaml) and the standard library.

The names below are loaded on first use: a kpt function imports `krmyaml.roundtrip` and reads
block-style YAML without loading PyYAML at all.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from krmyaml.errors import UnwritableValue, YamlError
    from krmyaml.manifests import MANIFEST_SUFFIXES, Document, manifest_texts, read_documents
    from krmyaml.schema import TOO_DEEP, Dumper, Loader, dump_all, load_all

_HOMES = {"UnwritableValue": "errors", "YamlError": "errors", "MANIFEST_SUFFIXES": "manifests", "Document": "manifests",
          "manifest_texts": "manifests", "read_documents": "manifests", "TOO_DEEP": "schema", "Dumper": "schema",
          "Loader": "schema", "dump_all": "schema", "load_all": "schema"}
__all__ = ["MANIFEST_SUFFIXES", "TOO_DEEP", "Document", "Dumper", "Loader", "UnwritableValue", "YamlError", "dump_all",
           "load_all", "manifest_texts", "read_documents"]


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'krmyaml' has no attribute {name!r}")
    return getattr(importlib.import_module(f"krmyaml.{_HOMES[name]}"), name)
