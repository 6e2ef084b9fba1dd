"""The Kptfile's part of an upgrade, as kpt's `kptfileutil.UpdateKptfile` merges it.

kpt merges five parts of the Kptfile 3-way and takes everything else from local:
`metadata.annotations`, `metadata.labels`, `info`, `pipeline` and `inventory`. Lists are keyed
by inference (`inferred_list_keys`); in particular pipeline functions are matched by `name`.
When no function in any of the three Kptfiles has a name and, in each Kptfile, no two
functions of a list (mutators, validators) share an image (without its tag) or exec, kpt gives
each a temporary name made from its image or exec, so functions are matched by image across
versions ("pipeline merge", kpt docs/design-docs/03-pipeline-merge.md); local's own functions
stay in place and upstream's new ones follow them. Otherwise the pipeline lists are merged as
the data allows, which for unnamed functions means upstream's list wins if upstream changed it.

`upstream` and `upstreamLock` are left as local has them (so is everything outside the five
parts, such as metadata.name): setting them to the new upstream is the caller's job.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from porchvariant.embedded.merge.schema import inferred_list_keys
from porchvariant.embedded.merge.three_way import MISSING, merge

__all__ = ["merge_kptfile"]

SECTIONS = (("metadata", "annotations"), ("metadata", "labels"), ("info",), ("pipeline",), ("inventory",))
FUNCTION_LISTS = ("mutators", "validators")
KPTFILE_ORDER = ("apiVersion", "kind", "metadata", "upstream", "upstreamLock", "info", "pipeline", "inventory",
                 "status")
_SYNTHETIC = "_kpt-merge_"


def merge_kptfile(original: Mapping[str, Any], upstream: Mapping[str, Any], local: Mapping[str, Any]) -> dict[str, Any]:
    """Local's Kptfile data with the five merged parts (absent Kptfiles are given as {})."""
    parts = [_parts(kptfile) for kptfile in (original, upstream, local)]
    synthetic = all(_may_name_by_image(p.get("pipeline")) for p in parts)
    if synthetic:
        parts = [_with_names(p) for p in parts]
    merged = merge(parts[0], parts[1], parts[2], inferred_list_keys)
    if synthetic:
        merged = _without_names(merged)
    result = dict(local)
    for section in SECTIONS:
        _put(result, section, _get(merged, section))
    return _in_kpt_order(result, local)


def _in_kpt_order(result: dict[str, Any], local: Mapping[str, Any]) -> dict[str, Any]:
    """Local's keys where they were; a new part before the part that follows it in a Kptfile kpt writes."""
    order = [key for key in result if key in local]
    for key in (k for k in result if k not in local):
        later = KPTFILE_ORDER[KPTFILE_ORDER.index(key) + 1:] if key in KPTFILE_ORDER else ()
        anchor = next((k for k in later if k in order), None)
        order.insert(order.index(anchor) if anchor is not None else len(order), key)
    return {key: result[key] for key in order}


def _get(data: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(data, Mapping) or key not in data:
            return MISSING
        data = data[key]
    return data


def _put(data: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    """Set (or, for MISSING, delete) data[path]; dicts on the way are copied, never changed in place."""
    head, rest = path[0], path[1:]
    if rest:
        inner = data.get(head)
        if not isinstance(inner, Mapping):
            if value is MISSING:
                return
            inner = {}
        data[head] = dict(inner)
        _put(data[head], rest, value)
    elif value is MISSING:
        data.pop(head, None)
    else:
        data[head] = value


def _parts(kptfile: Mapping[str, Any]) -> dict[str, Any]:
    parts: dict[str, Any] = {}
    for section in SECTIONS:
        value = _get(kptfile, section)
        if value is not MISSING:
            _put(parts, section, value)
    return parts


def _function_key(function: Any) -> Any:
    if not isinstance(function, Mapping):
        return None
    if function.get("exec"):
        return str(function["exec"])
    return str(function.get("image") or "").split(":")[0]


def _may_name_by_image(pipeline: Any) -> bool:
    """kpt's shouldAddFnKey for one Kptfile: no function has a name, no two share an image or exec."""
    if not isinstance(pipeline, Mapping):
        return True
    for name in FUNCTION_LISTS:
        functions = pipeline.get(name) or []
        if not isinstance(functions, list):
            return False
        keys = [_function_key(function) for function in functions]
        if None in keys or len(set(keys)) != len(keys) or any(f.get("name") for f in functions):
            return False
    return True


def _with_names(parts: dict[str, Any]) -> dict[str, Any]:
    pipeline = parts.get("pipeline")
    if not isinstance(pipeline, Mapping):
        return parts
    named = dict(pipeline)
    for name in FUNCTION_LISTS:
        if isinstance(named.get(name), list):
            named[name] = [{**f, "name": _SYNTHETIC + _function_key(f)} for f in named[name]]
    return {**parts, "pipeline": named}


def _without_names(merged: Any) -> Any:
    pipeline = _get(merged, ("pipeline",))
    if not isinstance(pipeline, Mapping):
        return merged
    plain = dict(pipeline)
    for name in FUNCTION_LISTS:
        if isinstance(plain.get(name), list):
            plain[name] = [_unnamed(f) for f in plain[name]]
    return {**merged, "pipeline": plain}


def _unnamed(function: Any) -> Any:
    if isinstance(function, Mapping) and str(function.get("name", "")).startswith(_SYNTHETIC):
        return {k: v for k, v in function.items() if k != "name"}
    return function
