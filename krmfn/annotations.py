"""The annotations kpt owns, and read-only accessors for them.

kpt stamps every item it sends with where it came from (path, index, sequence indent), an id to
copy comments back by, and during render the package it belongs to (krm-functions spec §5). A
function must carry all of them through unchanged; krmfn does so for every item it writes, and
restores the opaque ones (ids, package path, upstream identifier, ...) if a function dropped or
changed them by accident. The path and index pair is the exception: a function may move a
resource, which `set_path` does properly (both the internal and the legacy key).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PATH = "internal.config.kubernetes.io/path"
INDEX = "internal.config.kubernetes.io/index"
LEGACY_PATH = "config.kubernetes.io/path"
LEGACY_INDEX = "config.kubernetes.io/index"
ID = "internal.config.kubernetes.io/id"
LEGACY_ID = "config.k8s.io/id"
PACKAGE_PATH = "internal.config.kubernetes.io/package-path"
UPSTREAM_IDENTIFIER = "internal.kpt.dev/upstream-identifier"
LOCAL_CONFIG = "config.kubernetes.io/local-config"

# Everything under these prefixes belongs to kpt (spec §5, §14 item 3).
KPT_PREFIXES = (
    "config.kubernetes.io/",
    "internal.config.kubernetes.io/",
    "config.k8s.io/",
    "internal.config.k8s.io/",
    "internal.kpt.dev/",
)
# ... and of those, everything except the user-facing `config.kubernetes.io/*` keys and the
# path/index pair is opaque: a function never has a reason to change it.
_OPAQUE_PREFIXES = KPT_PREFIXES[1:]
_MOVABLE = frozenset({PATH, INDEX, LEGACY_PATH, LEGACY_INDEX})


def annotations_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """The object's annotations, or an empty mapping; never raises on odd shapes."""
    metadata = obj.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    return annotations if isinstance(annotations, Mapping) else {}


def is_kpt_owned(key: str) -> bool:
    """True for any annotation under one of kpt's prefixes (`config.kubernetes.io/` included)."""
    return key.startswith(KPT_PREFIXES)


def path(obj: Mapping[str, Any]) -> str | None:
    """The file the object lives in, relative to its package (internal key, else legacy)."""
    annotations = annotations_of(obj)
    value = annotations.get(PATH, annotations.get(LEGACY_PATH))
    return None if value is None else str(value)


def index(obj: Mapping[str, Any]) -> int | None:
    """The object's document index within its file, or None when absent or not a number."""
    annotations = annotations_of(obj)
    value = annotations.get(INDEX, annotations.get(LEGACY_INDEX))
    try:
        return None if value is None else int(value)
    except (TypeError, ValueError):
        return None


def package_path(obj: Mapping[str, Any]) -> str | None:
    """During `kpt fn render`: the absolute path of the package the object belongs to."""
    value = annotations_of(obj).get(PACKAGE_PATH)
    return None if value is None else str(value)


def origin_id(obj: Mapping[str, Any]) -> str | None:
    """`group|Kind|namespace|name` recorded by `kpt pkg get` for 3-way merges, if any."""
    value = annotations_of(obj).get(UPSTREAM_IDENTIFIER)
    return None if value is None else str(value)


def set_path(obj: dict[str, Any], file_path: str, file_index: int | None = None) -> None:
    """Move (or place) the object in `file_path`, at `file_index` if given.

    Writes the internal key and its legacy twin together, so kpt's reconciliation of the pair
    (spec §5) has nothing to decide. Mutates `obj`.
    """
    metadata = obj.setdefault("metadata", {})
    annotations = metadata.get("annotations")
    if not isinstance(annotations, dict):
        annotations = metadata["annotations"] = {}
    annotations[PATH] = annotations[LEGACY_PATH] = file_path
    if file_index is not None:
        annotations[INDEX] = annotations[LEGACY_INDEX] = str(file_index)


def restore_kpt_annotations(obj: dict[str, Any], original: Mapping[str, Any]) -> dict[str, Any]:
    """`obj`, with kpt's opaque annotations put back as they were on `original`.

    Opaque keys the function removed or changed get their original values back. The path and
    index keys are restored only when the function removed all four of them (a function that
    replaced the whole `annotations` map, say). Returns `obj` itself when nothing needs doing,
    else a copy: `obj` is never mutated.
    """
    before = annotations_of(original)
    if not before:
        return obj
    after = annotations_of(obj)
    if isinstance(after, dict) and isinstance(before, dict) and before.items() <= after.items():
        return obj  # the usual case: everything still there, unchanged
    missing = {
        key: value
        for key, value in before.items()
        if key.startswith(_OPAQUE_PREFIXES) and key not in _MOVABLE and after.get(key, _ABSENT) != value
    }
    if not any(key in after for key in _MOVABLE):
        missing.update((key, value) for key, value in before.items() if key in _MOVABLE)
    if not missing:
        return obj
    metadata = obj.get("metadata")
    metadata = dict(metadata) if isinstance(metadata, Mapping) else {}
    metadata["annotations"] = {**after, **missing}
    return {**obj, "metadata": metadata}


_ABSENT = object()
