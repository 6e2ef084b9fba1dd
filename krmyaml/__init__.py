"""krmyaml: the one place porchkit reads YAML, as Kubernetes tooling reads it.

    from krmyaml import YamlError, load_all, dump_all, read_documents, manifest_texts

`schema` reads and writes YAML streams with go-yaml's rules (YAML 1.2 scalars, duplicate keys
refused) and bounded cost (aliases, depth); `manifests` reads manifests from files, directories
and stdin, and never skips anything silently. Every problem is one `YamlError` naming the file and,
for YAML, the line. Depends on PyYAML (libyaml) and the standard library only.
"""

from krmyaml.errors import YamlError
from krmyaml.manifests import MANIFEST_SUFFIXES, Document, manifest_texts, read_documents
from krmyaml.schema import TOO_DEEP, Dumper, Loader, dump_all, load_all

__all__ = ["MANIFEST_SUFFIXES", "TOO_DEEP", "Document", "Dumper", "Loader", "YamlError", "dump_all", "load_all",
           "manifest_texts", "read_documents"]
