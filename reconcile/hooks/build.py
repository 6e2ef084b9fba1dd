"""`build_hook`: one hook spec, as written in a DecoratorController (or a MapController), to a Hook.

    {version?: v1|v2, webhook?: {...}, python?: {...}, pipeline?: {...}, responseUnMarshallMode?: ...}

At most one of `webhook`, `python` and `pipeline` may be given; with none (`finalize: {}`, say)
the hook is disabled and `build_hook` returns None, as Metacontroller treats a hook without a
webhook. Everything that can be checked is checked here, once: the version, durations, URLs, the
TLS material and credentials (read from the cluster's Secrets and ConfigMaps), the imported
function, the compiled pipeline. Errors are HookConfigErrors naming the field at fault.

`policy` (a HookPolicy, policy.py) is the process's answer to what a spec may ask for: which
modules a python hook may come from, which namespaces credentials may be read from, whether
credentials may go over plain http to loopback. What it does not allow is a HookRefused (a
HookConfigError) raised before any import, read or call.

Strictness of response decoding: `responseUnMarshallMode` (loose or strict) inside `webhook`
decides for a webhook; otherwise v1 hooks are loose and v2 hooks strict. Python and pipeline
hooks follow the version only.

Differences from Metacontroller:
- `python` and `pipeline` hooks are porchkit's own.
- An unknown field beside them (a misspelt `webhok`, say) is an error rather than a silently
  disabled hook.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from reconcile.clock import SYSTEM_CLOCK, Clock
from reconcile.cluster import Cluster
from reconcile.hooks.base import (
    VERSIONS,
    Hook,
    HookConfigError,
    HookMetrics,
    Instruments,
    ResponseShape,
    json_type,
    mapping_at,
    string_at,
)
from reconcile.hooks.policy import HookPolicy
from reconcile.hooks.python import build_python
from reconcile.hooks.webhook import build_webhook

KINDS = ("webhook", "python", "pipeline")
FIELDS = ("version", "responseUnMarshallMode", *KINDS)
MODES = ("loose", "strict")


def build_hook(spec: Mapping[str, Any] | None, *, field: str, controller: str, hook: str, shape: ResponseShape,
               output_field: str, policy: HookPolicy, cluster: Cluster | None = None,
               endpoint_configs: Sequence[Mapping[str, Any]] = (), resolve: Mapping[str, str] | None = None,
               metrics: HookMetrics | None = None, clock: Clock = SYSTEM_CLOCK) -> Hook | None:
    """The hook `spec` (at `field`, e.g. "spec.hooks.sync") describes, or None when it is
    disabled. `controller` and `hook` label its metrics; `output_field` is where a pipeline puts
    its outputs; `policy` says what the spec may ask for; `cluster` serves the Secrets and
    ConfigMaps a webhook's TLS and credentials name (read now, once); `resolve` maps a URL's
    "host:port" or "host" to an address to connect to instead; `clock` times ETag expiry and
    Retry-After dates. Raises HookConfigError (HookRefused for what `policy` does not allow)."""
    if spec is None:
        return None
    if not isinstance(spec, Mapping):
        raise HookConfigError(field, f"expected a map with webhook, python or pipeline, got {json_type(spec)}")
    for key in spec:
        if key not in FIELDS:
            raise HookConfigError(f"{field}.{key}", f"unknown field (expected {', '.join(FIELDS)})")
    given = [kind for kind in KINDS if spec.get(kind) is not None]
    if not given:
        return None
    if len(given) > 1:
        raise HookConfigError(field, f"set only one of webhook, python or pipeline, not {' and '.join(given)}")
    version = _version(spec, field)
    instruments = Instruments(metrics, controller, hook)
    kind, where = given[0], f"{field}.{given[0]}"
    if kind == "webhook":
        webhook = mapping_at(spec, "webhook", field) or {}
        return build_webhook(webhook, field=where, version=version, strict=_strict(webhook, version, where),
                             shape=shape, instruments=instruments, policy=policy, cluster=cluster,
                             endpoint_configs=endpoint_configs, resolve=resolve, clock=clock)
    if kind == "python":
        python = mapping_at(spec, "python", field) or {}
        return build_python(python, field=where, version=version, strict=version == "v2", shape=shape,
                            instruments=instruments, policy=policy)
    # Imported only when used: deltapipe takes a noticeable time to import.
    from reconcile.hooks.pipeline import build_pipeline

    return build_pipeline(spec["pipeline"], field=where, version=version, strict=version == "v2", shape=shape,
                          output_field=output_field, instruments=instruments)


def parse_resolve(entries: Sequence[str]) -> dict[str, str]:
    """`--resolve HOST=ADDR` flags as the `resolve` map of build_hook; HookConfigError naming the
    flag for an entry without both parts."""
    resolve = {}
    for entry in entries:
        host, sep, address = entry.partition("=")
        if not sep or not host or not address:
            raise HookConfigError(f"--resolve {entry!r}", "expected HOST=ADDR, e.g. my-hook.default=127.0.0.1:8080")
        resolve[host] = address
    return resolve


def _version(spec: Mapping[str, Any], field: str) -> str:
    version = spec.get("version")
    if version is None:
        return "v1"
    if version not in VERSIONS:
        shown = repr(version) if isinstance(version, str) else json_type(version)
        raise HookConfigError(f"{field}.version", f"expected v1 or v2, got {shown}")
    return str(version)


def _strict(webhook: Mapping[str, Any], version: str, field: str) -> bool:
    mode = string_at(webhook, "responseUnMarshallMode", field)
    if not mode:
        return version == "v2"
    if mode not in MODES:
        raise HookConfigError(f"{field}.responseUnMarshallMode", f"expected loose or strict, got {mode!r}")
    return mode == "strict"
