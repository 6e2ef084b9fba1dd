"""Choosing the items a function acts on, with the semantics of kpt's own selectors.

`Selector` is the `selectors:`/`exclude:` entry of a Kptfile pipeline (and of `kpt fn eval
--match-*`/`--exclude-*`), and `select` applies lists of them as kpt does (kpt's
`fnruntime.SelectInput`, spec §10.3): an empty field matches anything; within one selector every
given field must match (labels and annotations: every listed pair); across selectors any one
may match; an item matching any non-empty exclusion is dropped. Comparison is exact and
case-sensitive, and the namespace is the literal `metadata.namespace` (no "default" for
objects without one). Unlike kpt beta.56, an item matching two selectors is selected once.

`is_local_config` and `is_meta_resource` follow the Go SDK (`KubeObject.IsLocalConfig`,
`IsMetaResource`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from krmfn import annotations as kpt_annotations


class Selector(NamedTuple):
    """One selector: every non-empty field must match."""

    api_version: str = ""
    kind: str = ""
    name: str = ""
    namespace: str = ""
    labels: Mapping[str, str] = MappingProxyType({})
    annotations: Mapping[str, str] = MappingProxyType({})

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Selector:
        """A selector as written in a Kptfile (`apiVersion`, `kind`, `name`, `namespace`,
        `labels`, `annotations`)."""
        return cls(
            api_version=str(data.get("apiVersion") or ""),
            kind=str(data.get("kind") or ""),
            name=str(data.get("name") or ""),
            namespace=str(data.get("namespace") or ""),
            labels={str(k): _text(v) for k, v in (data.get("labels") or {}).items()},
            annotations={str(k): _text(v) for k, v in (data.get("annotations") or {}).items()},
        )

    def is_empty(self) -> bool:
        return not (self.api_version or self.kind or self.name or self.namespace or self.labels or self.annotations)

    def matches(self, obj: Mapping[str, Any]) -> bool:
        metadata = obj.get("metadata")
        metadata = metadata if isinstance(metadata, Mapping) else {}
        return (
            (not self.name or self.name == _text(metadata.get("name")))
            and (not self.namespace or self.namespace == _text(metadata.get("namespace")))
            and (not self.kind or self.kind == _text(obj.get("kind")))
            and (not self.api_version or self.api_version == _text(obj.get("apiVersion")))
            and _has_all(metadata.get("labels"), self.labels)
            and _has_all(metadata.get("annotations"), self.annotations)
        )


def select(
    items: Iterable[dict[str, Any]],
    selectors: Iterable[Selector] = (),
    exclude: Iterable[Selector] = (),
) -> list[dict[str, Any]]:
    """The items that match any of `selectors` (all items if there are none) and none of the
    non-empty `exclude` selectors, in their original order. The dicts themselves, not copies."""
    selectors, exclusions = list(selectors), [e for e in exclude if not e.is_empty()]
    return [
        item
        for item in items
        if (not selectors or any(s.matches(item) for s in selectors)) and not any(e.matches(item) for e in exclusions)
    ]


def is_local_config(obj: Mapping[str, Any]) -> bool:
    """True if `config.kubernetes.io/local-config` is set to anything but `false`."""
    value = kpt_annotations.annotations_of(obj).get(kpt_annotations.LOCAL_CONFIG)
    return value is not None and _text(value) not in ("", "false")


def is_meta_resource(obj: Mapping[str, Any]) -> bool:
    """True for a Kptfile (`kpt.dev/v1`), the only meta resource kpt sends today."""
    return obj.get("apiVersion") == "kpt.dev/v1" and obj.get("kind") == "Kptfile"


def _has_all(actual: Any, wanted: Mapping[str, str]) -> bool:
    if not wanted:
        return True
    if not isinstance(actual, Mapping):
        return False
    return all(key in actual and _text(actual[key]) == value for key, value in wanted.items())


def _text(value: Any) -> str:
    """A scalar as kyaml reads it into a string (None is empty, booleans are lowercase)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
