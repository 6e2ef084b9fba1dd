"""The sync and finalize hooks' protocol: the request a DecoratorController sends, the answer it reads.

Request (spec c.2): `{"controller", "object", "attachments", "related", "finalizing"}`, the same keys
in v1 and v2. `attachments` and `related` map a group key (`"<Kind>.<apiVersion>"`: `Pod.v1`,
`StatefulSet.apps/v1`) to a map of objects keyed by where each object lives:
- v1 ("relative"): `"name"`, or `"ns/name"` for a namespaced object under a cluster-scoped target;
  under a namespaced target, objects of other namespaces and cluster-scoped objects are left out;
- v2 ("uniform"): `"ns/name"` for every namespaced object, `"name"` for a cluster-scoped one.
`controller` is sent as Metacontroller sends its typed object: apiVersion, kind, metadata, spec and
an empty status.

The request holds the objects it is given, not copies: it is either serialised at once or handed
to an in-process hook, which must treat it as read-only (the objects may be shared cache entries).

Response (spec c.3): `parse_response` checks the nested types that `RESPONSE_SHAPE` (what the hook
client checks after json.loads) cannot, and returns a `SyncResponse`. Errors are `ResponseError`,
one line naming the field: `attachments[2].metadata.name: required`. Unknown fields are the hook
client's business (loose or strict decoding) and are ignored here.

Does not: call hooks (reconcile.hooks), default attachment namespaces or stamp them (the
controller), or write anything back (writeback.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from decorators.spec import DECORATOR_CONTROLLER
from reconcile.cluster import Kind, Obj
from reconcile.fields import HOOK_VERSIONS, FieldError, answer_object, answer_shape, describe_json, resync_after

ResponseShape = Mapping[str, tuple[type, ...]]
"""Top-level field -> the Python types json.loads may give it (as `reconcile.hooks.ResponseShape`)."""

_NONE = type(None)
RESPONSE_SHAPE: ResponseShape = {
    "labels": (dict, _NONE),
    "annotations": (dict, _NONE),
    "status": (dict, _NONE),
    "attachments": (list, _NONE),
    "resyncAfterSeconds": (int, float, _NONE),
    "finalized": (bool, _NONE),
}


class ResponseError(FieldError):
    """A hook answer that cannot be used; str() is `"{field}: {problem}"`."""


@dataclass(frozen=True, slots=True)
class SyncResponse:
    """A sync or finalize hook's answer, checked. Attachments are the hook's own dicts, not
    copies: copy one before changing it."""

    labels: Mapping[str, str | None] | None
    annotations: Mapping[str, str | None] | None
    status: Mapping[str, Any] | None  # None: keep the target's status
    attachments: tuple[Obj, ...]
    resync_after: float | None  # seconds, > 0; None for no one-shot resync
    finalized: bool


def group_key(kind: Kind) -> str:
    """The key of a kind's group in `attachments` and `related`: `"Pod.v1"`, `"StatefulSet.apps/v1"`."""
    return f"{kind.kind}.{kind.api_version}"


def object_key(obj: Mapping[str, Any], target: Mapping[str, Any], target_namespaced: bool, version: str) -> str | None:
    """Where `obj` goes in its group for this hook version (see the module docstring); None when v1
    leaves it out (a namespaced target's request holds only objects of the target's namespace)."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    name, namespace = str(meta.get("name") or ""), str(meta.get("namespace") or "")
    _check_version(version)
    if version == "v2" or not target_namespaced:
        return f"{namespace}/{name}" if namespace else name
    target_meta = target.get("metadata")
    target_namespace = target_meta.get("namespace") if isinstance(target_meta, Mapping) else None
    return name if namespace and namespace == target_namespace else None


def controller_object(controller: Mapping[str, Any]) -> dict[str, Any]:
    """The DecoratorController as hooks receive it: apiVersion, kind, metadata, spec, `status: {}`."""
    return {"apiVersion": DECORATOR_CONTROLLER.api_version, "kind": DECORATOR_CONTROLLER.kind,
            "metadata": controller.get("metadata") or {}, "spec": controller.get("spec") or {}, "status": {}}


def build_request(controller: Mapping[str, Any], target: Mapping[str, Any], target_namespaced: bool,
                  attachments: Mapping[str, Sequence[Mapping[str, Any]]],
                  related: Mapping[str, Sequence[Mapping[str, Any]]],
                  *, finalizing: bool, version: str) -> dict[str, Any]:
    """The sync (or, with `finalizing`, finalize) request for `target`, keyed for hook `version`.

    `attachments` and `related` map group keys to the observed objects; every group given is sent,
    empty or not (Metacontroller sends every attachment rule's group). Nothing is copied and
    nothing is changed. Raises ValueError for a version other than v1 and v2 (spec.py refuses
    those first)."""
    _check_version(version)
    return {
        "controller": controller_object(controller),
        "object": target,
        "attachments": _object_maps(attachments, target, target_namespaced, version),
        "related": _object_maps(related, target, target_namespaced, version),
        "finalizing": finalizing,
    }


def parse_response(raw: Mapping[str, Any]) -> SyncResponse:
    """The checked answer of a sync or finalize hook. `resyncAfterSeconds` of 0 or less means no
    resync, and `finalized: null` means false. Raises ResponseError naming the field at fault."""
    answer_shape(raw, RESPONSE_SHAPE, ResponseError)
    return SyncResponse(
        labels=_string_map(raw.get("labels"), "labels"),
        annotations=_string_map(raw.get("annotations"), "annotations"),
        status=raw.get("status"),
        attachments=tuple(answer_object(item, f"attachments[{i}]", ResponseError)
                          for i, item in enumerate(raw.get("attachments") or [])),
        resync_after=resync_after(raw.get("resyncAfterSeconds"), ResponseError),
        finalized=bool(raw.get("finalized")),
    )



def _object_maps(groups: Mapping[str, Sequence[Mapping[str, Any]]], target: Mapping[str, Any],
                 target_namespaced: bool, version: str) -> dict[str, dict[str, Any]]:
    maps: dict[str, dict[str, Any]] = {}
    for key, objs in groups.items():
        group = maps[key] = {}
        for obj in objs:
            where = object_key(obj, target, target_namespaced, version)
            if where is not None:
                group[where] = obj
    return maps


def _check_version(version: str) -> None:
    if version not in HOOK_VERSIONS:
        raise ValueError(f"unknown hook version {version!r} (expected one of {HOOK_VERSIONS})")


def _string_map(value: Any, field: str) -> Mapping[str, str | None] | None:
    if value is None:
        return None
    for key, item in value.items():
        if item is not None and not isinstance(item, str):
            raise ResponseError(f"{field}[{json.dumps(key)}]", f"must be a string or null, not {describe_json(item)}")
    result: Mapping[str, str | None] = value
    return result



