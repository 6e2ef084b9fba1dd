r"""deltapipe: run a Δ pipeline over a kpt package to generate, reshape or patch its resources.

A KRM function: it reads a ResourceList on stdin and writes one on stdout. With kpt:

  kpt fn eval PKG --image IMAGE --fn-config pipeline.yaml            # the fn-deltapipe image
  kpt fn eval PKG --exec "porchkit fn deltapipe" --fn-config pipeline.yaml
  kpt fn eval PKG --image IMAGE -- 'pipeline=STAGES' 'sources=[{kind: Deployment}]' \
      'target={apiVersion: v1, kind: Service}' name=expose
  kpt fn render PKG    # Kptfile: pipeline: {mutators: [{image: IMAGE, configPath: pipeline.yaml}]}

The functionConfig is a Pipeline, for example (a Service for every annotated Deployment):

  apiVersion: fn.porchkit.dev/v1alpha1
  kind: Pipeline
  metadata:
    name: expose                # names the pipeline; marks what it generates
    annotations:
      config.kubernetes.io/local-config: "true"   # when the file is kept in the package
  sources:                      # optional: without it, every resource but the Kptfile and
    - kind: Deployment          # local-config objects is an input; a source may also give
                                # apiGroup, namespace and labelSelector (matchLabels, ...)
  pipeline:                     # the stages: @join, then @select @project @unwind @gather
    - "@select": {"@exists": '$.metadata.annotations["example.com/port"]'}
    - "@project":
        metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}
        spec:
          selector: "$.spec.selector.matchLabels"
          ports: [{port: {"@int": '$.metadata.annotations["example.com/port"]'}}]
  target:                       # what the outputs are: apiVersion (or apiGroup and version),
    apiVersion: v1              # kind, and type: Updater (the default: creates and updates)
    kind: Service               # or Patcher (merges into resources that exist, creates nothing)

or a ConfigMap, which is what `-- key=value` arguments build: data.pipeline holds the stages (or a
whole spec) as YAML text, data.sources and data.target the same fields as YAML, data.name the name.

Outputs go back into the package by apiVersion, kind, namespace and name: an Updater replaces
what it generated before and adds what is new, each in `<kind>_<name>.yaml` (under
`<namespace>/` when namespaced) unless the output names its own path; a Patcher merges into
resources that exist (a missing one is a warning). Every generated resource carries
`fn.porchkit.dev/generated-by: <pipeline name>`, so that a later run removes what the pipeline no
longer produces, never feeds its own outputs back to itself, and changes nothing when nothing
changed.

Exit codes: 0 done; 1 the config or a stage failed (an error result names the pipeline, the
stage, the object and the operator, and kpt writes nothing); 2 stdin is not a ResourceList.
The expression language: docs/deltapipe.md; this function: docs/krmfn.md, section 7.
"""
# The docstring above is the function's documentation: `porchkit fn deltapipe --help` and
# `kpt fn doc --image IMAGE` print it (krmfn/cli.py), and tests/krmfn/test_function_image.py
# runs its example.

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from deltapipe import DeltapipeError
from deltapipe.patch import merge_patch
from deltapipe.spec import PipelineSpec
from krmfn import annotations as kpt_annotations
from krmfn import results, yamlio
from krmfn.config import PLACEHOLDER_NAME, config_fields
from krmfn.errors import ConfigError, KrmfnError
from krmfn.resourcelist import ResourceList
from krmfn.selection import is_local_config, is_meta_resource

API_VERSION = "fn.porchkit.dev/v1alpha1"
KIND = "Pipeline"
GENERATED_BY = "fn.porchkit.dev/generated-by"
DEFAULT_NAME = "deltapipe"

Identity = tuple[str, str, str, str]  # apiVersion, kind, namespace, name
_NAME_MAX = 253
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_KIND = re.compile(r"^[A-Za-z][A-Za-z0-9]{0,62}$")


def deltapipe(rl: ResourceList) -> None:
    """Run the configured pipeline over the package and write its outputs back into it."""
    spec, name = load_spec(rl.function_config)
    inputs = [item for item in rl.items if _generated_by(item) != name and not _is_pipeline_config(item)]
    if not spec.sources:
        inputs = [item for item in inputs if not is_meta_resource(item) and not is_local_config(item)]
    try:
        outputs = spec.build().evaluate(spec.route(inputs))
    except DeltapipeError as err:
        raise KrmfnError(str(err), where=f"pipeline {name}") from None
    original_count = len(rl.items)
    placed = {_identity(item): position for position, item in enumerate(rl.items)}
    patcher = spec.target is not None and spec.target.type == "Patcher"
    kept: set[int] = set()
    for output in outputs:
        _check_output(output, name)
        position = placed.get(_identity(output))
        if patcher:
            if position is None:
                rl.results.append(results.warning(f"pipeline {name}: no {_describe(output)} to patch; "
                                                  "a Patcher creates nothing", resource=output))
            else:
                rl.items[position] = _patched(rl.items[position], output)
        elif position is None:
            rl.items.append(_generated(output, name))
        else:
            rl.items[position] = _updated(rl.items[position], output, name)
            kept.add(position)
    stale = [i for i, item in enumerate(rl.items[:original_count]) if _generated_by(item) == name and i not in kept]
    for position in reversed(stale):
        del rl.items[position]


def load_spec(function_config: Mapping[str, Any] | None) -> tuple[PipelineSpec, str]:
    """The pipeline spec and its name from a Pipeline resource or a ConfigMap; ConfigError if invalid."""
    fields = config_fields(function_config, kind=KIND, api_version=None)
    metadata = (function_config or {}).get("metadata")
    config_name = metadata.get("name") if isinstance(metadata, Mapping) else None
    where = f"functionConfig {(function_config or {}).get('kind', '')}/{config_name or ''}".rstrip("/")
    if (function_config or {}).get("kind") == "ConfigMap":
        fields = _from_config_map(fields, where)
    elif function_config is not None and function_config.get("apiVersion") not in (API_VERSION, None):
        raise ConfigError(f"apiVersion {function_config.get('apiVersion')!r} is not supported: use {API_VERSION}",
                          where=where)
    if not fields:
        raise ConfigError(f"no pipeline given: pass a {KIND} ({API_VERSION}) with --fn-config, "
                          "or -- pipeline=...", where="functionConfig")
    try:
        spec = PipelineSpec.from_dict(fields)
    except DeltapipeError as err:
        raise ConfigError(str(err), where=where) from None
    name = spec.name or (config_name if config_name and config_name != PLACEHOLDER_NAME else DEFAULT_NAME)
    return spec, name


def _from_config_map(data: dict[str, Any], where: str) -> dict[str, Any]:
    unknown = sorted(set(data) - {"pipeline", "sources", "target", "name"})
    if unknown:
        raise ConfigError(f"unknown key {unknown[0]!r} in data (expected pipeline, sources, target, name)", where=where)
    parsed = {key: _yaml_value(value, f"{where}: data.{key}") if key != "name" else value
              for key, value in data.items()}
    whole = parsed.get("pipeline")
    if isinstance(whole, dict) and "pipeline" in whole and len(parsed) == 1:
        return whole  # the whole spec in data.pipeline
    return parsed


def _yaml_value(text: Any, where: str) -> Any:
    if not isinstance(text, str):
        return text
    try:
        return yamlio.load(text)
    except KrmfnError as err:
        raise ConfigError(err.message, where=where) from None


# ---------------------------------------------------------------------------------------------
# Writing outputs back into the package


def _generated(output: dict[str, Any], name: str) -> dict[str, Any]:
    item = _with_annotation(output, GENERATED_BY, name)
    if kpt_annotations.path(item) is None:
        meta = item["metadata"]
        file_name = f"{item['kind'].lower()}_{meta['name']}.yaml"
        namespace = meta.get("namespace")
        kpt_annotations.set_path(item, f"{namespace}/{file_name}" if namespace else file_name, 0)
    return item


def _updated(existing: dict[str, Any], output: dict[str, Any], name: str) -> dict[str, Any]:
    """Δ-controller's Updater: the output's fields replace the resource's; metadata labels and
    annotations are merged, the rest of its metadata is kept. What this pipeline generated
    stays marked; a resource it did not generate is updated but never claimed."""
    meta = dict(existing.get("metadata") or {})
    out_meta = output.get("metadata") or {}
    for key, value in out_meta.items():
        if key in ("labels", "annotations") and isinstance(value, dict):
            meta[key] = {**(meta.get(key) or {}), **value}
        else:
            meta[key] = value
    updated = {**{k: v for k, v in output.items() if k != "metadata"}, "metadata": meta}
    updated = {k: updated[k] for k in _ordered_keys(existing, updated)}
    if _generated_by(existing) == name:
        return updated
    return updated if _generated_by(updated) != name else _without_annotation(updated, GENERATED_BY)


def _patched(existing: dict[str, Any], output: dict[str, Any]) -> dict[str, Any]:
    patch = {k: v for k, v in output.items() if k not in ("apiVersion", "kind")}
    result: dict[str, Any] = merge_patch(existing, patch)
    return result


def _ordered_keys(existing: dict[str, Any], updated: dict[str, Any]) -> list[str]:
    """The updated object's keys in the existing object's order, new ones last (stable files)."""
    return [k for k in existing if k in updated] + [k for k in updated if k not in existing]


def _with_annotation(obj: dict[str, Any], key: str, value: str) -> dict[str, Any]:
    meta = dict(obj.get("metadata") or {})
    meta["annotations"] = {**(meta.get("annotations") or {}), key: value}
    return {**obj, "metadata": meta}


def _without_annotation(obj: dict[str, Any], key: str) -> dict[str, Any]:
    meta = dict(obj["metadata"])
    meta["annotations"] = {k: v for k, v in meta["annotations"].items() if k != key}
    return {**obj, "metadata": meta}


def _check_output(output: dict[str, Any], name: str) -> None:
    """Refuse an output that could not be an object, or whose file would not be the package's own:
    its name and namespace become a file name, and its own path annotation a path."""
    found = output.get("metadata")
    meta: dict[str, Any] = found if isinstance(found, dict) else {}
    shown = meta.get("name")
    for field in ("apiVersion", "kind"):
        if not isinstance(output.get(field), str) or not output[field]:
            raise KrmfnError(f"output {shown!r} has no {field}: set the pipeline's target, or build {field} "
                             "in a @project stage", where=f"pipeline {name}")
    problem = (_name_problem(shown) or _namespace_problem(meta.get("namespace"))
               or ("" if _KIND.match(output["kind"]) else f"kind {output['kind']!r} is not a kind name")
               or _path_problem(kpt_annotations.path(output)))
    if problem:
        raise KrmfnError(f"output {_describe(output)}: {problem}", where=f"pipeline {name}")


def _name_problem(value: Any) -> str:
    """The rule every object name follows, whatever its kind (the API server's path segment rule)."""
    if not isinstance(value, str) or not value:
        return "metadata.name must be a non-empty string"
    if value in (".", "..") or "/" in value or "%" in value or len(value) > _NAME_MAX:
        return f"metadata.name {value!r} is not a valid object name (no '/', '%', '.' or '..', at most 253 characters)"
    return ""


def _namespace_problem(value: Any) -> str:
    if value is None or value == "":
        return ""
    if not isinstance(value, str) or not _DNS_LABEL.match(value):
        return f"metadata.namespace {value!r} is not a valid namespace name"
    return ""


def _path_problem(value: str | None) -> str:
    """A path the output names for itself must stay inside the package."""
    if value is None:
        return ""
    parts = value.replace("\\", "/").split("/")
    if not value or value.startswith("/") or any(part in ("", ".", "..") for part in parts):
        return f"its path {value!r} must be a relative path inside the package (no '..', '.', or leading '/')"
    return ""


def _generated_by(item: Mapping[str, Any]) -> Any:
    return kpt_annotations.annotations_of(item).get(GENERATED_BY)


def _is_pipeline_config(item: Mapping[str, Any]) -> bool:
    return item.get("kind") == KIND and item.get("apiVersion") == API_VERSION


def _identity(item: Mapping[str, Any]) -> Identity:
    meta = item.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    return (str(item.get("apiVersion", "")), str(item.get("kind", "")), str(meta.get("namespace") or ""),
            str(meta.get("name", "")))


def _describe(item: Mapping[str, Any]) -> str:
    _, kind, namespace, name = _identity(item)
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"
