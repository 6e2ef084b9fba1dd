"""The pipeline hook: a Δ pipeline that computes a hook's answer in-process, with no server.

    hooks:
      sync:
        pipeline:                      # the shape of `porchkit fn deltapipe`'s functionConfig
          name: configmap-per-target
          pipeline:
            - "@project": {metadata: {name: {"@concat": [$.metadata.name, "-info"]}}, data: {...}}
          target: {apiVersion: v1, kind: ConfigMap}

The spec is validated and compiled once, when the hook is built. A call evaluates it over the
objects of the request: every top-level value that is a Kubernetes object (a map with apiVersion,
kind and metadata: the decorator's `object`, a map controller's `parent` and `input`) except
`controller`, and, when the spec lists `sources`, also every object of the top-level maps of maps
(the `attachments` and `related` groups, {group: {key: object}}), each given to the first source
that accepts it. Without `sources`, only the top-level objects feed the pipeline. The outputs are
the answer's `output_field` (`{"attachments": [...]}` for a decorator).

Evaluation is pure computation, run on the caller's thread (it cannot hang, so it has no
timeout). A DeltapipeError while evaluating is a HookError naming the pipeline, deterministic
(reconcile.errors): the same request fails the same way.
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Mapping
from typing import Any

from deltapipe import DeltapipeError
from deltapipe.spec import PipelineSpec
from reconcile.hooks.base import HookConfigError, HookError, Instruments, ResponseShape, check_response


def build_pipeline(pipeline: Any, *, field: str, version: str, strict: bool, shape: ResponseShape,
                   output_field: str, instruments: Instruments) -> PipelineHook:
    """A PipelineHook from a `pipeline:` spec at `field`; HookConfigError naming the field when
    the spec or one of its stages is invalid."""
    try:
        spec = PipelineSpec.from_dict(dict(pipeline) if isinstance(pipeline, Mapping) else pipeline)
        hook = PipelineHook(spec, target=f"pipeline {spec.name or field}", output_field=output_field,
                            shape=shape, version=version, strict=strict, instruments=instruments)
    except DeltapipeError as err:
        raise HookConfigError(field, str(err)) from None
    return hook


class PipelineHook:
    """A Δ pipeline as a hook; see the module docstring. Thread-safe: each call evaluates on
    state of its own."""

    kind = "pipeline"

    def __init__(self, spec: PipelineSpec, *, target: str, output_field: str, shape: ResponseShape,
                 version: str = "v1", strict: bool = False, instruments: Instruments | None = None) -> None:
        self.target, self.version, self.strict = target, version, strict
        self.shape, self.output_field = shape, output_field
        self._spec = spec
        self._pipeline = spec.build()  # raises PipelineError for an invalid stage
        self._instruments = instruments or Instruments(None, "", "")
        self._closed = False

    def call(self, request: Mapping[str, Any], *, cache_key: Hashable | None = None) -> dict[str, Any]:
        if self._closed:
            raise HookError(f"{self.target} cancelled: the hook was closed")
        self._instruments.started()
        started, code = time.perf_counter(), "error"
        try:
            objects = world(request, groups=bool(self._spec.sources))
            try:
                outputs = self._pipeline.evaluate(self._spec.route(objects))
            except DeltapipeError as err:
                raise HookError(f"{self.target}: {err}", deterministic=True) from None
            answer = check_response({self.output_field: outputs}, self.shape, strict=self.strict,
                                    source=self.target)
            code = "ok"
            return answer
        finally:
            self._instruments.finished(code, time.perf_counter() - started)

    def close(self) -> None:
        self._closed = True


def world(request: Mapping[str, Any], *, groups: bool) -> list[dict[str, Any]]:
    """The objects a pipeline sees in a request: top-level objects but `controller`, and with
    `groups`, the objects of every top-level {group: {key: object}} map."""
    objects: list[dict[str, Any]] = []
    for key, value in request.items():
        if key == "controller":
            continue
        if is_object(value):
            objects.append(value)
        elif groups and isinstance(value, Mapping):
            for group in value.values():
                if isinstance(group, Mapping) and not is_object(group):
                    objects.extend(obj for obj in group.values() if is_object(obj))
    return objects


def is_object(value: Any) -> bool:
    """Whether a value looks like a Kubernetes object: a map with apiVersion, kind and metadata."""
    return (isinstance(value, dict) and isinstance(value.get("apiVersion"), str)
            and isinstance(value.get("kind"), str) and isinstance(value.get("metadata"), dict))
