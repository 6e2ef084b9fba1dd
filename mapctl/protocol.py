"""The map and tombstone hooks' protocol: the requests a MapController sends, the answers it reads.

Requests (the MapController proposal):
- map: `{"controller", "parent", "mapKey", "input", "outputs"}`, one call per input object;
- tombstone: the same without `input` (the input is gone), for one map key's detached outputs.
`outputs` maps a group key (`"<Kind>.<apiVersion>"`: `ConfigMap.v1`, `VolumeSnapshot.snapshot.storage.k8s.io/v1`)
to that group's observed outputs keyed by name: every output lives in the parent's namespace, so a
name is enough, in hook versions v1 and v2 alike. Every group the caller passes is sent, empty or
not; the caller passes one per output rule. `controller` is sent as apiVersion, kind, metadata,
spec and an empty status, as Metacontroller sends its controllers.

The requests hold the objects they are given, not copies: they are either serialised at once or
handed to an in-process hook, which must treat them as read-only (they may be shared cache entries).

Answers: `MAP_SHAPE` and `TOMBSTONE_SHAPE` are what the hook client checks after json.loads;
`parse_map_response` and `parse_tombstone_response` check the rest and return the outputs (for a
tombstone, the detached outputs to keep). Errors are `ResponseError`, one line naming the field:
`outputs[2].metadata.namespace: "other" is not the parent's namespace "default"`.

Differences (choices where the proposal is silent):
- The parsers take the parent's namespace (a keyword argument): an output naming another namespace
  is refused rather than created outside the parent's bucket.
- Two outputs of one kind and name in one answer are refused; Metacontroller's children maps keep
  the last one silently.

Does not: call hooks (reconcile.hooks), tag outputs (keys.py), or write anything (the controller).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mapctl.spec import MAP_CONTROLLER
from reconcile.cluster import Kind, Obj
from reconcile.fields import FieldError, answer_object, answer_shape, resync_after
from reconcile.hooks import ResponseShape

_NONE = type(None)
MAP_SHAPE: ResponseShape = {"outputs": (list, _NONE), "resyncAfterSeconds": (int, float, _NONE)}
TOMBSTONE_SHAPE: ResponseShape = {"outputs": (list, _NONE)}


class ResponseError(FieldError):
    """A hook answer that cannot be used; str() is `"{field}: {problem}"`."""


@dataclass(frozen=True, slots=True)
class MapResponse:
    """A map hook's answer, checked. Outputs are the hook's own dicts: copy one before changing it."""

    outputs: tuple[Obj, ...]  # every desired output of this input; the rest are deleted
    resync_after: float | None  # seconds, > 0; None for no one-shot resync


def group_key(kind: Kind) -> str:
    """The key of a kind's group in `outputs`: `"ConfigMap.v1"`, `"Deployment.apps/v1"`."""
    return f"{kind.kind}.{kind.api_version}"


def controller_object(controller: Mapping[str, Any]) -> dict[str, Any]:
    """The MapController as hooks receive it: apiVersion, kind, metadata, spec, `status: {}`."""
    return {"apiVersion": MAP_CONTROLLER.api_version, "kind": MAP_CONTROLLER.kind,
            "metadata": controller.get("metadata") or {}, "spec": controller.get("spec") or {}, "status": {}}


def map_request(controller: Mapping[str, Any], parent: Mapping[str, Any], key: str, input: Mapping[str, Any],
                outputs: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, Any]:
    """The map request for one input and its observed outputs (group key -> objects). Nothing is
    copied and nothing is changed."""
    return {"controller": controller_object(controller), "parent": parent, "mapKey": key, "input": input,
            "outputs": _by_name(outputs)}


def tombstone_request(controller: Mapping[str, Any], parent: Mapping[str, Any], key: str,
                      outputs: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, Any]:
    """The tombstone request for one vanished input's detached outputs (group key -> objects).
    Nothing is copied and nothing is changed."""
    return {"controller": controller_object(controller), "parent": parent, "mapKey": key,
            "outputs": _by_name(outputs)}


def parse_map_response(raw: Mapping[str, Any], *, namespace: str) -> MapResponse:
    """The checked answer of a map hook for a parent in `namespace` ("" when cluster-scoped).
    `outputs: null` means none; `resyncAfterSeconds` of 0 or less means no resync. Raises
    ResponseError naming the field at fault."""
    answer_shape(raw, MAP_SHAPE, ResponseError)
    return MapResponse(outputs=_outputs(raw.get("outputs"), namespace),
                       resync_after=resync_after(raw.get("resyncAfterSeconds"), ResponseError))


def parse_tombstone_response(raw: Mapping[str, Any], *, namespace: str) -> tuple[Obj, ...]:
    """The detached outputs a tombstone hook keeps (every other one is deleted), checked as map
    outputs are. Raises ResponseError naming the field at fault."""
    answer_shape(raw, TOMBSTONE_SHAPE, ResponseError)
    return _outputs(raw.get("outputs"), namespace)


def _by_name(groups: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, dict[str, Any]]:
    return {key: {_name(obj): obj for obj in objs} for key, objs in groups.items()}


def _name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    return str(meta.get("name") or "") if isinstance(meta, Mapping) else ""



def _outputs(items: list[Any] | None, namespace: str) -> tuple[Obj, ...]:
    seen: dict[tuple[str, str, str], int] = {}
    outputs = []
    for i, item in enumerate(items or []):
        field = f"outputs[{i}]"
        output = _output(item, field, namespace)
        kind = Kind.of(output)
        identity = (kind.group, kind.kind, _name(output))  # two versions of one object are one object
        if identity in seen:
            raise ResponseError(field, f"{identity[1]} {json.dumps(identity[2])} is already "
                                       f"outputs[{seen[identity]}]")
        seen[identity] = i
        outputs.append(output)
    return tuple(outputs)


def _output(item: Any, field: str, namespace: str) -> Obj:
    output = answer_object(item, field, ResponseError)
    written = output["metadata"].get("namespace")
    if written and written != namespace:
        raise ResponseError(f"{field}.metadata.namespace",
                            f"{json.dumps(written)} is not the parent's namespace {json.dumps(namespace)}")
    return output



