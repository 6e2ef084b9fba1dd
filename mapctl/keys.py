"""Map keys: the tag that ties each output to the input it was generated from.

An output carries three marks (its `stamp`, set by reconcile.children when it is written):
- label `mapctl.porchkit.dev/map-key`: `mk-` + 32 hex digits of a sha256 over the input's group,
  kind, namespace and name. Selectable (a list can ask for one input's outputs), always a valid
  label value (35 characters), and stable: the same input gives the same key in every process and
  across the input's API versions. It survives the input's deletion, which is what lets a later
  pass find the outputs it left behind (the tombstone hook's "detached" outputs).
- label `mapctl.porchkit.dev/controller`: the MapController's name (spec.py checks it is a valid
  label value), so two MapControllers sharing a parent kind never claim each other's outputs.
- annotation `mapctl.porchkit.dev/input`: `Kind.group/namespace/name` for people, as the hash
  says nothing to a reader.

The proposal leaves the tag's form open; keying on identity (not UID) means an input deleted and
re-created under the same name gets its old outputs back instead of tombstoning them.

Pure: no I/O; never changes an object it is given.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping
from typing import Any

from reconcile.children import Stamp
from reconcile.cluster import Kind

MAP_KEY_LABEL = "mapctl.porchkit.dev/map-key"
CONTROLLER_LABEL = "mapctl.porchkit.dev/controller"
INPUT_ANNOTATION = "mapctl.porchkit.dev/input"
_PREFIX = "mk-"


@functools.lru_cache(maxsize=65536)  # a parent's pass keys every input it has, on every pass
def map_key(kind: Kind, namespace: str, name: str) -> str:
    """The map key of the input `kind` `namespace/name`; the version of `kind` does not count."""
    digest = hashlib.sha256(f"{kind.group}/{kind.kind}/{namespace}/{name}".encode()).hexdigest()
    return _PREFIX + digest[:32]


def input_reference(kind: Kind, namespace: str, name: str) -> str:
    """The input as people read it: `Deployment.apps/ns/web`, or `ConfigMap/ns/cfg` in the core group."""
    return reference(kind.group, kind.kind, namespace, name)


def reference(group: str, kind: str, namespace: str, name: str) -> str:
    """input_reference, from the group and kind (parse_reference reads it back)."""
    qualified = f"{kind}.{group}" if group else kind
    return f"{qualified}/{namespace}/{name}"


def stamp(controller: str, key: str, reference: str) -> Stamp:
    """The marks of the outputs of MapController `controller` for the input with map key `key`
    and readable `reference` (input_reference)."""
    return Stamp(labels={MAP_KEY_LABEL: key, CONTROLLER_LABEL: controller}, annotations={INPUT_ANNOTATION: reference})


def parse_reference(reference: str) -> tuple[str, str, str, str] | None:
    """(group, kind, namespace, name) from an input_reference; None when it is not one."""
    qualified, sep, rest = reference.partition("/")
    namespace, sep2, name = rest.partition("/")
    if not sep or not sep2 or not qualified or not name or "/" in name:
        return None
    kind, _, group = qualified.partition(".")
    return group, kind, namespace, name


def key_of(obj: Mapping[str, Any]) -> str | None:
    """The map key an object is tagged with, or None when it has none (or a non-string one)."""
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    value = labels.get(MAP_KEY_LABEL) if isinstance(labels, Mapping) else None
    return value if isinstance(value, str) and value else None
