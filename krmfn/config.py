"""Typed functionConfig: a ConfigMap's `data`, or a custom resource, validated by a model.

A function declares what it accepts as a pydantic model (or a dataclass or TypedDict, which
pydantic validates just as well) and calls `load_config(function_config, Model, kind="X")`,
usually as `rl.config(Model, kind="X")`. What the user may pass, after the conventions of the Go
SDK (krm-functions spec §3):

* nothing: no `functionConfig` at all (render with neither `configMap` nor `configPath`), or
  kpt's empty placeholder, the ConfigMap `function-input` with no data (eval without `--`
  arguments). Both mean "no config": the model is built from no fields, so its defaults apply,
  and a required field makes it a `ConfigError`;
* a ConfigMap (`kpt fn eval ... -- key=value`, or Kptfile `configMap:`): its `data`, all
  strings, which pydantic converts as the model's fields ask (`"3"` to 3, `"true"` to True);
* a custom resource of kind `kind` (default: the model's class name), any apiVersion unless
  `api_version` is given: its top-level fields except apiVersion, kind and metadata (so
  `spec:` is a field of the model if the resource has one).

Anything else, and any validation failure, is a `ConfigError` with a one-line message naming
the fields at fault. pydantic is imported only when a config is loaded; `config_fields` gives
the same fields without validation, for functions that check them their own way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from krmfn.errors import ConfigError

PLACEHOLDER_NAME = "function-input"
_OBJECT_FIELDS = ("apiVersion", "kind", "metadata")

ModelT = TypeVar("ModelT")


def is_empty(function_config: Mapping[str, Any] | None) -> bool:
    """True for a missing functionConfig and for kpt's placeholder ConfigMap without data."""
    if function_config is None:
        return True
    metadata = function_config.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    return (
        function_config.get("kind") == "ConfigMap"
        and name == PLACEHOLDER_NAME
        and not function_config.get("data")
        and not function_config.get("binaryData")
    )


def load_config(
    function_config: Mapping[str, Any] | None,
    model: type[ModelT],
    *,
    kind: str | None = None,
    api_version: str | None = None,
) -> ModelT:
    """The functionConfig validated as `model` (see the module docstring for what is accepted).

    Raises ConfigError for an unsupported kind or apiVersion, or when validation fails.
    """
    kind = kind or model.__name__
    fields, where = _fields(function_config, kind, api_version)
    return _validate(model, fields, where)


def config_fields(
    function_config: Mapping[str, Any] | None, *, kind: str, api_version: str | None = None
) -> dict[str, Any]:
    """The fields `load_config` would validate, unvalidated: `{}` for no config, a ConfigMap's
    `data`, or a `kind` resource's top-level fields but apiVersion, kind and metadata.

    For functions that validate their config themselves (and so need not import pydantic,
    which costs about 0.1 s of start-up). Raises ConfigError for an unsupported kind.
    """
    return _fields(function_config, kind, api_version)[0]


def _fields(
    function_config: Mapping[str, Any] | None, kind: str, api_version: str | None
) -> tuple[dict[str, Any], str]:
    if function_config is None or is_empty(function_config):
        return {}, "functionConfig (none given)"
    config_kind = function_config.get("kind")
    metadata = function_config.get("metadata")
    name = metadata.get("name", "") if isinstance(metadata, Mapping) else ""
    where = f"functionConfig {config_kind}/{name}" if name else f"functionConfig {config_kind}"
    if config_kind == "ConfigMap" and kind != "ConfigMap":
        data = function_config.get("data") or {}
        if not isinstance(data, Mapping):
            raise ConfigError("data must be a mapping of strings", where=where)
        return dict(data), where
    if config_kind != kind:
        raise ConfigError(f"kind {config_kind!r} is not supported: use a ConfigMap or a {kind}", where="functionConfig")
    if api_version is not None and function_config.get("apiVersion") != api_version:
        raise ConfigError(
            f"apiVersion {function_config.get('apiVersion')!r} is not supported: use {api_version}",
            where=where,
        )
    return {key: value for key, value in function_config.items() if key not in _OBJECT_FIELDS}, where


def _validate(model: type[ModelT], fields: dict[str, Any], where: str) -> ModelT:
    import pydantic

    try:
        if isinstance(model, type) and issubclass(model, pydantic.BaseModel):
            return model.model_validate(fields)
        return pydantic.TypeAdapter(model).validate_python(fields)
    except pydantic.ValidationError as err:
        raise ConfigError(_describe(err), where=where) from None


def _describe(err: Any) -> str:
    problems = []
    for problem in err.errors():
        location = ".".join(str(part) for part in problem.get("loc", ()))
        message = problem.get("msg", "invalid")
        problems.append(f"{location}: {message}" if location else message)
    return "; ".join(problems) or "invalid"
