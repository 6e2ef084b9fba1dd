"""What a hook's answer changes on its target: labels, annotations, status, and our finalizer.

Promises (spec b.4): in `labels` and `annotations` a string sets a key, null deletes it, and keys
the hook does not name stay as they are; `status` null or absent keeps the target's status, and a
map (even `{}`) replaces it wholesale; our finalizer goes only when the hook says `finalized` and
the target holds it (from whichever hook answered, sync included). Our finalizer, when a pass
is to add it (`add_finalizer`), goes in with the labels and annotations: one metadata write, not
two. When nothing would change, there is nothing to write: `write_back` returns None, so an idle
resync makes no API call.

Pure: the target (perhaps a cache entry) is never changed; the object returned is a copy sharing
nothing with the target or the response. Comparison is JSON equality, so a missing status and
`{}` differ (Metacontroller's TestResyncAfter relies on `status: {}` being written once).

Differences: statuses compare as JSON values, so `1` and `1.0` are equal; Metacontroller's
DeepEqual on decoded maps can tell an int64 from a float64 and write a status that did not change.

Does not: write (the controller does: status through the status subresource when the kind has
one, then the object), or touch `spec`, which a decorator may not change.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from decorators.protocol import SyncResponse
from reconcile.cluster import Obj
from reconcile.patching import clone, json_equal


@dataclass(frozen=True, slots=True)
class WriteBack:
    """The target as the hook wants it, and which of its parts differ from the target as read."""

    object: Obj
    status_changed: bool
    metadata_changed: bool  # labels, annotations or finalizers


def write_back(target: Mapping[str, Any], response: SyncResponse, release_finalizer: str | None,
               add_finalizer: str | None = None) -> WriteBack | None:
    """The target with the response applied, or None when the response changes nothing.

    `release_finalizer` is this controller's finalizer (None when it has none to give up); it is
    removed when the response says `finalized` and the target holds it (or is to hold it).
    `add_finalizer` is this controller's finalizer when the target is to get it (None otherwise)."""
    meta = target.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    labels = _apply(meta.get("labels"), response.labels)
    annotations = _apply(meta.get("annotations"), response.annotations)
    finalizers = meta.get("finalizers")
    finalizers = finalizers if isinstance(finalizers, list) else []
    wanted = finalizers + [add_finalizer] if add_finalizer and add_finalizer not in finalizers else finalizers
    if release_finalizer and response.finalized and release_finalizer in wanted:
        wanted = [f for f in wanted if f != release_finalizer]
    refinalized = wanted != finalizers
    status_changed = response.status is not None and not json_equal(target.get("status"), response.status)
    if labels is None and annotations is None and not refinalized and not status_changed:
        return None

    out: Obj = clone(target)
    out_meta = out.setdefault("metadata", {})
    for key, value in (("labels", labels), ("annotations", annotations)):
        if value is not None:
            _set_or_drop(out_meta, key, value)
    if refinalized:
        _set_or_drop(out_meta, "finalizers", list(wanted))
    if status_changed:
        out["status"] = clone(response.status)
    return WriteBack(object=out, status_changed=status_changed,
                     metadata_changed=labels is not None or annotations is not None or refinalized)


def _apply(current: Any, changes: Mapping[str, str | None] | None) -> dict[str, str] | None:
    """`current` with the changes applied, or None when they change nothing."""
    if not changes:
        return None
    before = dict(current) if isinstance(current, Mapping) else {}
    result = dict(before)
    for key, value in changes.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = value
    return None if result == before else result


def _set_or_drop(meta: dict[str, Any], key: str, value: dict[str, str] | list[str]) -> None:
    if value:
        meta[key] = value
    else:
        meta.pop(key, None)
