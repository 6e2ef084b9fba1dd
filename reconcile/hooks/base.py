"""What every hook kind shares: the `Hook` protocol, its errors, response checking, durations.

A hook takes a request (a JSON-shaped mapping) and answers a JSON object. Three kinds implement
`Hook`: webhook.py (Metacontroller's HTTP protocol), python.py (a function called in-process) and
pipeline.py (a Δ pipeline evaluated in-process); build.py chooses one from a spec.

The errors, all `ReconcileError`s:

    HookError          a call failed (transport, timeout, status, bad JSON, wrong shape, raising
                       function); str() is one line that reads well after "Sync error: ". An answer
                       that cannot be used (bad JSON, wrong shape) is `deterministic`
                       (reconcile.errors): the same request gets it again
    HookRetryAfter     the hook asked to be called again later (HTTP 429); `seconds` says when
    HookConfigError    a hook spec is invalid; `field` is the dotted path at fault
      HookRefused      the spec asks for what the process's HookPolicy does not allow

Response checking (`check_response`) follows Metacontroller's decoding: a field named in the
shape must hold one of its types in both modes; strict mode also refuses unknown top-level fields
and duplicated keys (at any depth); field names are case-sensitive; malformed JSON is always an
error. Unlike Python, JSON has no bool-is-int: `true` is never a number here.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Hashable, Mapping
from typing import Any, Protocol

from reconcile.errors import ReconcileError

ResponseShape = Mapping[str, tuple[type, ...]]

VERSIONS = ("v1", "v2")
DEFAULT_TIMEOUT = 10.0  # seconds, Metacontroller's default for a webhook

_JSON_TYPE_NAMES: dict[type, str] = {dict: "object", list: "array", str: "string", int: "number",
                                     float: "number", bool: "boolean", type(None): "null"}


class HookError(ReconcileError):
    """A hook call failed; str() is one line naming the hook's target and what went wrong."""


class HookRetryAfter(ReconcileError):
    """The hook asked to be called again after `seconds` (HTTP 429 with Retry-After). Not a
    failure: the caller requeues the object after `seconds` without recording an error."""

    def __init__(self, message: str, *, seconds: float) -> None:
        super().__init__(message)
        self.seconds = seconds


class HookConfigError(ReconcileError):
    """A hook spec is invalid; `field` is the dotted path at fault, str() is "<field>: <message>"."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class HookRefused(HookConfigError):
    """The spec asks for what the process's HookPolicy (policy.py) does not allow: code from a
    module outside the allowed prefixes, or that is not a plain function named "module:function";
    a credential from another namespace, or over plain http. Nothing was imported, read or sent;
    only an edit of the spec (or a restart of the process with other flags) changes the answer."""


class HookMetrics(Protocol):
    """What a hook reports each call to (reconcile.metrics.Metrics implements it)."""

    def hook_started(self, controller: str, hook: str) -> None:
        """A call began."""

    def hook_finished(self, controller: str, hook: str, code: str, seconds: float) -> None:
        """A call ended: `code` is the HTTP status ("200", "429", "500"), or "timeout", or "error"
        (no response); in-process hooks report "ok", "error" or "timeout"."""


class Hook(Protocol):
    """One hook, ready to call from any number of threads at once."""

    kind: str  # "webhook" | "python" | "pipeline"
    target: str  # the URL, "pkg.mod:function" or "pipeline <name>", for messages
    version: str  # "v1" | "v2"
    strict: bool

    def call(self, request: Mapping[str, Any], *, cache_key: Hashable | None = None) -> dict[str, Any]:
        """The hook's answer to `request`, decoded and shape-checked, the caller's own to change.
        `cache_key` names the target object for ETag caching (webhooks only). Raises HookError,
        HookRetryAfter; never changes `request`."""

    def close(self) -> None:
        """Fail calls in flight (HookError "... cancelled") and refuse new ones; idempotent."""


class Instruments:
    """The metrics of one hook, or nothing when no `HookMetrics` was given."""

    __slots__ = ("metrics", "controller", "hook")

    def __init__(self, metrics: HookMetrics | None, controller: str, hook: str) -> None:
        self.metrics, self.controller, self.hook = metrics, controller, hook

    def started(self) -> None:
        if self.metrics is not None:
            self.metrics.hook_started(self.controller, self.hook)

    def finished(self, code: str, seconds: float) -> None:
        if self.metrics is not None:
            self.metrics.hook_finished(self.controller, self.hook, code, seconds)


# ---------------------------------------------------------------------------------------------
# Responses


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return obj


def _refuse_constant(name: str) -> Any:
    # Python's json reads NaN and Infinity; JSON (and Metacontroller's Go decoder) does not.
    raise ValueError(f"{name} is not JSON")


def decode_response(body: bytes, shape: ResponseShape, *, strict: bool, source: str) -> dict[str, Any]:
    """The JSON object in `body`, checked against `shape`; HookError names `source` and the fault."""
    try:
        if strict:
            value = json.loads(body, object_pairs_hook=_unique_keys, parse_constant=_refuse_constant)
        else:
            value = json.loads(body, parse_constant=_refuse_constant)
    except _DuplicateKey as dup:
        raise _bad_response(source, f"duplicate key {dup.key!r} (strict mode)") from None
    except ValueError as err:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise _bad_response(source, f"invalid JSON: {err}") from None
    return check_response(value, shape, strict=strict, source=source)


def check_response(value: Any, shape: ResponseShape, *, strict: bool, source: str) -> dict[str, Any]:
    """`value` itself when it is an object whose fields fit `shape` (and, in strict mode, has no
    field outside it); HookError naming `source`, the field and the type found otherwise."""
    if not isinstance(value, dict):
        raise _bad_response(source, f"expected a JSON object, got {json_type(value)}")
    for key, item in value.items():
        accepted = shape.get(key)
        if accepted is None:
            if strict:
                raise _bad_response(source, f"unknown field {key!r} (strict mode; expected "
                                            f"{', '.join(shape) or 'no fields'})")
        elif not is_json_type(item, accepted):
            raise _bad_response(source, f"field {key!r} must be {describe_types(accepted)}, got {json_type(item)}")
    return value


def _bad_response(source: str, problem: str) -> HookError:
    """The (deterministic) HookError for an answer from `source` that cannot be used."""
    return HookError(f"bad response from {source}: {problem}", deterministic=True)


def is_json_type(value: Any, accepted: tuple[type, ...]) -> bool:
    """isinstance, except that a bool is only a bool (never an int or a float)."""
    if isinstance(value, bool):
        return bool in accepted
    return isinstance(value, accepted)


def json_type(value: Any) -> str:
    """The JSON name of a value's type: object, array, string, number, boolean or null."""
    for kind, name in _JSON_TYPE_NAMES.items():
        if isinstance(value, kind) and (kind is not int or not isinstance(value, bool)):
            return name
    return type(value).__name__


def describe_types(accepted: tuple[type, ...]) -> str:
    names = list(dict.fromkeys(_JSON_TYPE_NAMES.get(t, t.__name__) for t in accepted))
    return " or ".join(names)


# ---------------------------------------------------------------------------------------------
# Spec values

_DURATION = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|µs|μs|ms|s|m|h)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: Any, field: str) -> float:
    """Seconds in a Go duration string ("10s", "1m30s", "500ms", "1.5h", "-2s", "0");
    HookConfigError naming `field` for anything else."""
    if not isinstance(text, str):
        raise HookConfigError(field, f"{json.dumps(text)} is not a duration (write it as a string like \"10s\")")
    body = text[1:] if text[:1] in ("+", "-") else text
    sign = -1.0 if text.startswith("-") else 1.0
    if body == "0":
        return 0.0
    total, position = 0.0, 0
    while position < len(body):
        match = _DURATION.match(body, position)
        if match is None or match.group(1) in ("", "."):
            raise HookConfigError(field, f"{json.dumps(text)} is not a duration (like \"10s\", \"1m30s\", \"500ms\")")
        total += float(match.group(1)) * _UNITS[match.group(2)]
        position = match.end()
    if not body or math.isinf(total):
        raise HookConfigError(field, f"{json.dumps(text)} is not a duration (like \"10s\", \"1m30s\", \"500ms\")")
    return sign * total


def timeout_of(spec: Mapping[str, Any], field: str) -> float:
    """`spec.timeout` in seconds: DEFAULT_TIMEOUT when absent, zero or negative (as Metacontroller)."""
    raw = spec.get("timeout")
    if raw is None:
        return DEFAULT_TIMEOUT
    seconds = parse_duration(raw, f"{field}.timeout")
    return seconds if seconds > 0 else DEFAULT_TIMEOUT


def format_seconds(seconds: float) -> str:
    """10.0 -> "10s", 0.25 -> "0.25s": for messages."""
    return f"{seconds:g}s"


def mapping_at(spec: Mapping[str, Any], key: str, field: str) -> Mapping[str, Any] | None:
    """spec[key] when it is a map, None when absent or null; HookConfigError for anything else."""
    value = spec.get(key)
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise HookConfigError(f"{field}.{key}", f"expected a map, got {json_type(value)}")
    return value


def string_at(spec: Mapping[str, Any], key: str, field: str, *, default: str | None = None) -> str | None:
    """spec[key] when it is a string (`default` when absent or null); HookConfigError otherwise."""
    value = spec.get(key)
    if value is None:
        return default
    if not isinstance(value, str):
        raise HookConfigError(f"{field}.{key}", f"expected a string, got {json_type(value)}")
    return value
