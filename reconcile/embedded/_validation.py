"""What the API server checks in every object's metadata, whatever its kind.

Names (per kind, under the rules of reconcile.names), labels, annotations, finalizers and owner
references, with the server's own wording. The checks return the list of field causes (empty
when the object is fine); the caller turns them into one Invalid. Also here: `request_body`,
which copies what a client sent and refuses anything that is not JSON, as decoding would.

Kind-specific schemas (a Deployment's selector, a Service's ports) are not validated; see
docs/embedded-cluster.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from reconcile.embedded import _errors
from reconcile.embedded._errors import Cause
from reconcile.errors import BadRequest
from reconcile.names import NameRule, name_problem
from reconcile.selectors import check_label_key, check_label_value

_ANNOTATIONS_MAX = 256 * 1024


def generated_prefix_problem(prefix: str, rule: NameRule) -> str | None:
    """Why `generateName` cannot start a valid name (the server checks the prefix with a
    trailing character appended, since a suffix follows), or None."""
    return name_problem(prefix + "a", rule) if rule != "segment" else name_problem(prefix, rule)


def check_metadata(meta: Mapping[str, Any], *, rule: NameRule, check_name: bool = True) -> list[Cause]:
    """Field causes for everything wrong in `meta`; empty when it is fine."""
    causes: list[Cause] = []
    name = meta.get("name")
    if check_name and isinstance(name, str) and (problem := name_problem(name, rule)):
        causes.append(_errors.invalid_value("metadata.name", name, problem))
    causes += _check_labels(meta.get("labels"))
    causes += _check_annotations(meta.get("annotations"))
    causes += _check_finalizers(meta.get("finalizers"))
    causes += _check_owner_references(meta.get("ownerReferences"))
    return causes


def request_body(obj: Any, what: str = "object") -> dict[str, Any]:
    """A private copy of a request body; BadRequest unless it is a JSON object with a metadata map."""
    if not isinstance(obj, Mapping):
        raise BadRequest(f"the {what} must be a JSON object, not {type(obj).__name__}")
    try:
        body: dict[str, Any] = _json(obj)
    except _NotJson:
        raise BadRequest(f"the request is not valid JSON: {_locate(obj, '')}") from None
    meta = body.setdefault("metadata", {})
    if not isinstance(meta, dict):
        raise BadRequest(f"metadata of the {what} must be an object")
    return body


class _NotJson(Exception):
    pass


def _json(value: Any) -> Any:
    """A copy of a JSON value; raises _NotJson for anything JSON cannot hold (fast path)."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is dict or (kind is not list and isinstance(value, Mapping)):
        out = {}
        for key, item in value.items():
            if type(key) is not str:
                raise _NotJson
            out[key] = item if type(item) is str else _json(item)
        return out
    if kind is list or kind is tuple:
        return [_json(item) for item in value]
    if kind is float and not (math.isnan(value) or math.isinf(value)):
        return value
    raise _NotJson


def _locate(value: Any, where: str) -> str:
    """Where in `value` the first thing JSON cannot hold is, and what it is (slow path)."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"key {key!r} at {where or '/'} is not a string"
            if found := _locate(item, f"{where}/{key}"):
                return found
        return ""
    if isinstance(value, list | tuple):
        return next((found for i, item in enumerate(value) if (found := _locate(item, f"{where}/{i}"))), "")
    try:
        _json(value)
    except _NotJson:
        return f"{value!r} at {where or '/'}"
    return ""


def _check_labels(labels: Any) -> list[Cause]:
    if labels is None:
        return []
    if not isinstance(labels, Mapping):
        return [_errors.invalid_value("metadata.labels", labels, "must be a map of strings")]
    causes = []
    for key, value in labels.items():
        if problem := check_label_key(key):
            causes.append(_errors.invalid_value("metadata.labels", key, problem))
        if not isinstance(value, str):
            causes.append(_errors.invalid_value("metadata.labels", value, "a label value must be a string"))
        elif problem := check_label_value(value):
            causes.append(_errors.invalid_value("metadata.labels", value, problem))
    return causes


def _check_annotations(annotations: Any) -> list[Cause]:
    if annotations is None:
        return []
    if not isinstance(annotations, Mapping):
        return [_errors.invalid_value("metadata.annotations", annotations, "must be a map of strings")]
    causes, total = [], 0
    for key, value in annotations.items():
        if problem := check_label_key(key.lower()):
            causes.append(_errors.invalid_value("metadata.annotations", key, problem))
        if not isinstance(value, str):
            causes.append(_errors.invalid_value(f"metadata.annotations[{key}]", value, "must be a string"))
        else:
            total += len(key) + len(value)
    if total > _ANNOTATIONS_MAX:
        causes.append({"reason": "FieldValueTooLong", "field": "metadata.annotations",
                       "message": f"Too long: must have at most {_ANNOTATIONS_MAX} bytes"})
    return causes


def _check_finalizers(finalizers: Any) -> list[Cause]:
    if finalizers is None:
        return []
    if not isinstance(finalizers, list):
        return [_errors.invalid_value("metadata.finalizers", finalizers, "must be a list of strings")]
    causes = []
    for index, finalizer in enumerate(finalizers):
        field = f"metadata.finalizers[{index}]"
        if not isinstance(finalizer, str):
            causes.append(_errors.invalid_value(field, finalizer, "must be a string"))
        elif problem := check_label_key(finalizer):
            causes.append(_errors.invalid_value(field, finalizer, problem))
    if {"orphan", "foregroundDeletion"} <= set(f for f in finalizers if isinstance(f, str)):
        causes.append(_errors.invalid_value("metadata.finalizers", "foregroundDeletion",
                                            "finalizer foregroundDeletion and orphan cannot be both set"))
    return causes


def _check_owner_references(refs: Any) -> list[Cause]:
    if refs is None:
        return []
    if not isinstance(refs, list):
        return [_errors.invalid_value("metadata.ownerReferences", refs, "must be a list")]
    causes, controllers = [], 0
    for index, ref in enumerate(refs):
        field = f"metadata.ownerReferences[{index}]"
        if not isinstance(ref, Mapping):
            causes.append(_errors.invalid_value(field, ref, "must be an object"))
            continue
        for member in ("apiVersion", "kind", "name", "uid"):
            if not isinstance(ref.get(member), str) or not ref.get(member):
                causes.append(_errors.required(f"{field}.{member}", f"{member} must not be empty"))
        controllers += ref.get("controller") is True
    if controllers > 1:
        causes.append(_errors.invalid_value("metadata.ownerReferences", refs,
                                            "Only one reference can have Controller set to true"))
    return causes
