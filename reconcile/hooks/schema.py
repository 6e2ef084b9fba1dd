"""The OpenAPI schema of a hook spec, for the CRDs of the controllers that take hooks.

`hook_schema()` is one hook as build.py reads it: a `version` and one of `webhook` (with its
TLS, credentials and ETag settings), `python` or `pipeline` (kept whole: a Δ pipeline is
checked when the hook is built). `tls_and_auth_schema()` is the part of a webhook that
Metacontroller's `endpointConfigs` entries share. Each call returns new dicts.
"""

from __future__ import annotations

from typing import Any

Schema = dict[str, Any]

__all__ = ["hook_schema", "tls_and_auth_schema"]


def _object(properties: Schema, required: tuple[str, ...] = ()) -> Schema:
    schema: Schema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    return schema


def _string() -> Schema:
    return {"type": "string"}


def _int() -> Schema:
    return {"type": "integer", "format": "int32"}


def _ref() -> Schema:
    return _object({"name": _string(), "namespace": _string(), "key": _string()})


def tls_and_auth_schema() -> Schema:
    """caBundle, clientTLS, authorization and basicAuth, as properties."""
    return {
        "caBundle": _object({"inline": _string(), "secretRef": _ref(), "configMapRef": _ref()}),
        "clientTLS": _object({"secretRef": _ref(), "certKey": _string(), "privateKeyKey": _string()}),
        "authorization": _object({"type": _string(), "secretRef": _ref()}),
        "basicAuth": _object({"secretRef": _ref(), "usernameKey": _string(), "passwordKey": _string()}),
    }


def hook_schema() -> Schema:
    """One hook: version, and webhook, python or pipeline."""
    webhook = _object({
        "url": _string(),
        "timeout": _string(),
        "path": _string(),
        "service": _object({"name": _string(), "namespace": _string(), "port": _int(), "protocol": _string()},
                           ("name", "namespace")),
        "etag": _object({"enabled": {"type": "boolean"}, "cacheTimeoutSeconds": _int(),
                         "cacheCleanupSeconds": _int()}),
        "responseUnMarshallMode": {"type": "string", "enum": ["loose", "strict"]},
        **tls_and_auth_schema(),
    })
    return _object({
        "version": {"type": "string", "enum": ["v1", "v2"], "default": "v1"},
        "webhook": webhook,
        "python": _object({"function": _string(), "timeout": _string()}, ("function",)),
        "pipeline": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    })
