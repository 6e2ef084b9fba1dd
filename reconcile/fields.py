"""Checking the fields of a spec or of a hook's answer, with errors that name the field.

The DecoratorController and the MapController both read a spec written by a person and answers
written by a hook; each problem must be one line naming the field at fault
(`spec.resources[0].resource: required`). `FieldError` is that line; each part subclasses it for
its own errors (a spec's, an answer's) and passes its class as `error` to the checks here, which
raise it.

Pure: no I/O; values are only read.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from reconcile.errors import ReconcileError
from reconcile.patching import clone

INT32_MAX = 2**31 - 1
HOOK_VERSIONS = ("v1", "v2")
UPDATE_METHODS = {"OnDelete": "OnDelete", "Recreate": "Recreate", "InPlace": "InPlace",
                  "RollingRecreate": "Recreate", "RollingInPlace": "InPlace"}
"""updateStrategy.method as written -> what it does (the Rolling* methods roll nothing outside a
CompositeController)."""

Obj = dict[str, Any]


class FieldError(ReconcileError):
    """A value that cannot be used; str() is `"{field}: {problem}"`. Deterministic (reconcile.errors):
    the checks are pure, so the same value fails the same way."""

    deterministic = True

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


def describe(value: Any) -> str:
    """A JSON value's type as a person says it: "a map", "a string", "null"."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "a map"
    if isinstance(value, list | tuple):
        return "a list"
    return type(value).__name__


def describe_json(value: Any) -> str:
    """A JSON value's type in an error about a hook's answer: "an object", "a list", "a string"."""
    return "an object" if isinstance(value, Mapping) else describe(value)


def required_string(item: Mapping[str, Any], key: str, field: str, error: type[FieldError] = FieldError) -> str:
    """item[key], a non-empty string; `error` naming `field.key` otherwise."""
    value = item.get(key)
    if value is None or value == "":
        raise error(f"{field}.{key}", "required")
    if not isinstance(value, str):
        raise error(f"{field}.{key}", f"must be a string, not {describe(value)}")
    return value


def mapping(value: Any, field: str, *, required: bool = False,
            error: type[FieldError] = FieldError) -> Mapping[str, Any]:
    """`value` when it is a map; {} when it is null (or `error` "required")."""
    if value is None:
        if required:
            raise error(field, "required")
        return {}
    if not isinstance(value, Mapping):
        raise error(field, f"must be a map, not {describe(value)}")
    return value


def hook_spec(hooks: Mapping[str, Any], name: str, error: type[FieldError] = FieldError) -> dict[str, Any] | None:
    """A copy of `hooks[name]` (a hook as written: version, webhook, python or pipeline), its
    version checked; None when absent or null (`finalize:` with nothing after it, in YAML)."""
    raw = hooks.get(name)
    if raw is None:
        return None
    hook = mapping(raw, f"spec.hooks.{name}", error=error)
    version = hook.get("version")
    if version is not None and version not in HOOK_VERSIONS:
        shown = json.dumps(version) if isinstance(version, str) else describe(version)
        raise error(f"spec.hooks.{name}.version", f"{shown} is not a hook version (v1, v2)")
    result: dict[str, Any] = clone(hook)
    return result


def hook_version(hook: Mapping[str, Any] | None) -> str:
    """The protocol version of a hook spec: its `version`, "v1" when it has none."""
    return str((hook or {}).get("version") or "v1")


def update_method(strategy: Mapping[str, Any], field: str, error: type[FieldError] = FieldError) -> str:
    """What `updateStrategy` (`field`) asks for: OnDelete (also when it names no method), Recreate
    or InPlace."""
    method = strategy.get("method")
    if method is None or method == "":
        return "OnDelete"
    if not isinstance(method, str) or method not in UPDATE_METHODS:
        shown = json.dumps(method) if isinstance(method, str) else describe(method)
        raise error(f"{field}.method", f"{shown} is not an update method "
                    f"(OnDelete, Recreate, InPlace, RollingRecreate, RollingInPlace)")
    return UPDATE_METHODS[method]


def resync_period(raw: Any, error: type[FieldError] = FieldError) -> float | None:
    """spec.resyncPeriodSeconds in seconds; below 1, even 0, means every second (Metacontroller)."""
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise error("spec.resyncPeriodSeconds", f"must be an integer, not {describe(raw)}")
    if raw > INT32_MAX:
        raise error("spec.resyncPeriodSeconds", f"{raw} is too large (at most {INT32_MAX})")
    return float(max(raw, 1))


def answer_shape(raw: Any, shape: Mapping[str, tuple[type, ...]], error: type[FieldError] = FieldError) -> None:
    """Check a hook's answer against its shape (top-level field -> accepted JSON types, as
    reconcile.hooks.ResponseShape): an object whose fields have those types (a boolean is not
    a number). Unknown fields are the hook client's business (strict or loose decoding)."""
    if not isinstance(raw, Mapping):
        raise error("<response>", f"must be a JSON object, not {describe_json(raw)}")
    for field, types in shape.items():
        value = raw.get(field)
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            raise error(field, f"must be {_expected(types)}, not {describe_json(value)}")


def answer_object(item: Any, field: str, error: type[FieldError] = FieldError) -> Obj:
    """An object a hook answered (an attachment, an output): a map with string apiVersion, kind
    and metadata.name, and a string namespace if any. The hook's own dict is returned as is."""
    if not isinstance(item, Mapping):
        raise error(field, f"must be an object, not {describe_json(item)}")
    for key in ("apiVersion", "kind"):
        _answered_string(item.get(key), f"{field}.{key}", error)
    meta = item.get("metadata")
    if meta is None:
        raise error(f"{field}.metadata.name", "required")
    if not isinstance(meta, Mapping):
        raise error(f"{field}.metadata", f"must be an object, not {describe_json(meta)}")
    _answered_string(meta.get("name"), f"{field}.metadata.name", error)
    namespace = meta.get("namespace")
    if namespace is not None and not isinstance(namespace, str):
        raise error(f"{field}.metadata.namespace", f"must be a string, not {describe_json(namespace)}")
    if type(item) is dict:
        return item
    converted: Obj = clone(item)
    return converted


def resync_after(value: Any, error: type[FieldError] = FieldError) -> float | None:
    """resyncAfterSeconds of an answer: seconds > 0, or None for no one-shot resync."""
    if value is None:
        return None
    if not math.isfinite(value):
        raise error("resyncAfterSeconds", f"must be a finite number, not {value}")
    return float(value) if value > 0 else None


def _expected(types: tuple[type, ...]) -> str:
    names = {dict: "an object", list: "a list", int: "a number", float: "a number", bool: "a boolean",
             type(None): "null"}
    return " or ".join(dict.fromkeys(names[t] for t in types))


def _answered_string(value: Any, field: str, error: type[FieldError]) -> None:
    if value is None or value == "":
        raise error(field, "required")
    if not isinstance(value, str):
        raise error(field, f"must be a string, not {describe_json(value)}")
