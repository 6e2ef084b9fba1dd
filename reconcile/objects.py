"""Reading Kubernetes objects (plain dicts) without tripping over missing or odd fields.

Accessors never raise on a malformed object and never return the object's own nested dicts for
the caller to change: `labels_of(obj)` is a copy. Writers return changed copies (`with_label`);
objects read from a cache are shared and must not be changed in place.
"""

from __future__ import annotations

import copy
import time as _time
from collections.abc import Mapping
from typing import Any

Obj = dict[str, Any]


def rfc3339(seconds: float) -> str:
    """A timestamp as Kubernetes writes it: `2024-01-01T00:00:00Z` (whole seconds, UTC)."""
    return _time.strftime("%Y-%m-%dT%H:%M:%SZ", _time.gmtime(seconds))


def metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def labels_of(obj: Mapping[str, Any]) -> dict[str, str]:
    found = metadata(obj).get("labels")
    return dict(found) if isinstance(found, Mapping) else {}


def annotations_of(obj: Mapping[str, Any]) -> dict[str, str]:
    found = metadata(obj).get("annotations")
    return dict(found) if isinstance(found, Mapping) else {}


def finalizers_of(obj: Mapping[str, Any]) -> list[str]:
    found = metadata(obj).get("finalizers")
    return [str(f) for f in found] if isinstance(found, list) else []


def is_deleting(obj: Mapping[str, Any]) -> bool:
    """True once the object has a deletionTimestamp (it waits for its finalizers)."""
    return bool(metadata(obj).get("deletionTimestamp"))


def controller_of(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The ownerReference marked `controller: true`, if any."""
    refs = metadata(obj).get("ownerReferences")
    for ref in refs if isinstance(refs, list) else []:
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            return ref
    return None


def owner_reference(owner: Mapping[str, Any], *, controller: bool = True,
                    block_owner_deletion: bool = True) -> dict[str, Any]:
    """An ownerReference pointing at `owner` (which must have been read from the server: uid)."""
    meta = metadata(owner)
    return {"apiVersion": owner.get("apiVersion"), "kind": owner.get("kind"), "name": meta.get("name"),
            "uid": meta.get("uid"), "controller": controller, "blockOwnerDeletion": block_owner_deletion}


def with_label(obj: Obj, name: str, value: str) -> Obj:
    """A copy of obj carrying the label; obj itself (perhaps a cache entry) is untouched."""
    out = copy.deepcopy(obj)
    meta = out.setdefault("metadata", {})
    meta["labels"] = {**(meta.get("labels") or {}), name: value}
    return out
