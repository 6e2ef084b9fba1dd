"""The refusals of the embedded API server, worded and shaped as kube-apiserver's.

Every function returns (never raises) one of `reconcile.errors`' classes carrying the `Status`
payload a real server would send: the message text, `reason`, `code` and `details` (`name`,
`group`, `kind`, and for Invalid the field `causes`). A caller that matches on the message or
the details sees the same thing against either backend.

Naming follows the server: NotFound, AlreadyExists and Conflict name the *resource*
(`configmaps "a"`, `deployments.apps "web"`); Invalid names the *kind* (`ConfigMap "a"`).
"""

from __future__ import annotations

import json
from typing import Any

from reconcile.cluster import Kind, ResourceInfo
from reconcile.errors import (
    AlreadyExists,
    BadRequest,
    Conflict,
    Forbidden,
    Invalid,
    MethodNotAllowed,
    NotFound,
    ServerError,
    make_status,
)

Cause = dict[str, str]


def resource_name(info: ResourceInfo) -> str:
    """`configmaps`, `deployments.apps`: how the server names a resource in messages."""
    group = info.kind.group
    return f"{info.plural}.{group}" if group else info.plural


def kind_name(kind: Kind) -> str:
    """`ConfigMap`, `Deployment.apps`: how the server names a kind in Invalid messages."""
    return f"{kind.kind}.{kind.group}" if kind.group else kind.kind


def unknown_kind(kind: Kind) -> NotFound:
    return NotFound(f"the server could not find the requested resource ({kind.kind} in {kind.api_version or '?'} "
                    f"is not served)")


def unknown_subresource(info: ResourceInfo, subresource: str) -> NotFound:
    return NotFound(f"the server could not find the requested resource ({resource_name(info)}/{subresource})")


def not_found(info: ResourceInfo, name: str) -> NotFound:
    message = f'{resource_name(info)} "{name}" not found'
    return NotFound(message, status=make_status(404, "NotFound", message, _details(info, name)))


def already_exists(info: ResourceInfo, name: str) -> AlreadyExists:
    message = f'{resource_name(info)} "{name}" already exists'
    return AlreadyExists(message, status=make_status(409, "AlreadyExists", message, _details(info, name)))


def conflict(info: ResourceInfo, name: str, why: str) -> Conflict:
    message = f'Operation cannot be fulfilled on {resource_name(info)} "{name}": {why}'
    return Conflict(message, status=make_status(409, "Conflict", message, _details(info, name)))


def stale(info: ResourceInfo, name: str) -> Conflict:
    """The answer to an update carrying an outdated resourceVersion."""
    return conflict(info, name, "the object has been modified; please apply your changes to the latest version "
                                "and try again")


def forbidden(info: ResourceInfo, name: str, why: str, *, causes: list[Cause] | None = None) -> Forbidden:
    message = f'{resource_name(info)} "{name}" is forbidden: {why}'
    details = {**_details(info, name), **({"causes": causes} if causes else {})}
    return Forbidden(message, status=make_status(403, "Forbidden", message, details))


def method_not_allowed(info: ResourceInfo, why: str) -> MethodNotAllowed:
    message = f"{why}"
    details = {"group": info.kind.group, "kind": info.plural}
    return MethodNotAllowed(message, status=make_status(405, "MethodNotAllowed", message, details))


def invalid(kind: Kind, name: str, causes: list[Cause]) -> Invalid:
    """`Kind "name" is invalid: field: detail` (several causes are listed in brackets)."""
    texts = [f"{c['field']}: {c['message']}" if c.get("field") else c["message"] for c in causes]
    summary = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    message = f'{kind_name(kind)} "{name}" is invalid: {summary}'
    details: dict[str, Any] = {"name": name, "group": kind.group, "kind": kind.kind, "causes": causes}
    return Invalid(message, status=make_status(422, "Invalid", message, details))


def version_on_create() -> ServerError:
    """The storage layer's refusal of a create carrying a resourceVersion: a plain error there,
    so the client sees 500 InternalError."""
    message = "resourceVersion should not be set on objects to be created"
    return ServerError(message, status=make_status(500, "InternalError", message))


def unsupported_field_label(field: str) -> BadRequest:
    """A field selector naming a field the kind does not index."""
    return BadRequest(f"field label not supported: {field}")


def invalid_value(field: str, value: Any, detail: str) -> Cause:
    return {"reason": "FieldValueInvalid", "message": f"Invalid value: {_go_value(value)}: {detail}", "field": field}


def required(field: str, detail: str = "") -> Cause:
    return {"reason": "FieldValueRequired", "message": "Required value" + (f": {detail}" if detail else ""),
            "field": field}


def forbidden_field(field: str, detail: str) -> Cause:
    return {"reason": "FieldValueForbidden", "message": f"Forbidden: {detail}", "field": field}


def unsupported(field: str, value: Any, allowed: list[str]) -> Cause:
    options = ", ".join(f'"{a}"' for a in allowed)
    return {"reason": "FieldValueNotSupported",
            "message": f"Unsupported value: {_go_value(value)}: supported values: {options}", "field": field}


def _details(info: ResourceInfo, name: str) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name, "kind": info.plural}
    if info.kind.group:
        details["group"] = info.kind.group
    return details


def _go_value(value: Any) -> str:
    return json.dumps(value) if isinstance(value, str | int | float | bool) or value is None else repr(value)
