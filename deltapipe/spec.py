"""The pipeline file: a Δ-controller controller spec (`sources`, `pipeline`, `target`).

    name: service-summary          # optional
    sources:                       # order matters: it is the order of @join's compound keys
      - kind: Deployment
        apiGroup: apps             # optional; when given, only objects of that group match
        namespace: default         # optional filter
        labelSelector: {matchLabels: {tier: web}}   # optional filter
    pipeline: [...]                # one op map or a list of them
    target:
      apiGroup: example.com        # or apiVersion: example.com/v1
      version: v1
      kind: ServiceSummary
      type: Updater                # or Patcher (used by whoever writes the outputs)

`sources` may be omitted for a pipeline without @join: every object goes to its one source.
The same shape is the functionConfig of `porchkit fn deltapipe`, so a controller spec can be pasted
in. Validation errors name the field.
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple

from deltapipe import labels
from deltapipe.errors import ExpressionError, PipelineError
from deltapipe.expression import Clock
from deltapipe.pipeline import Pipeline
from deltapipe.values import describe

TARGET_TYPES = ("Updater", "Patcher")


class Source(NamedTuple):
    kind: str
    api_group: str | None = None
    namespace: str | None = None
    label_selector: dict[str, Any] | None = None

    def accepts(self, obj: dict[str, Any]) -> bool:
        """Whether an object belongs to this source (kind, group, namespace and labels)."""
        if obj.get("kind") != self.kind:
            return False
        if self.api_group is not None and _group_of(obj.get("apiVersion")) != self.api_group:
            return False
        meta: dict[str, Any] = obj["metadata"] if type(obj.get("metadata")) is dict else {}
        if self.namespace is not None and meta.get("namespace", "") != self.namespace:
            return False
        if self.label_selector is not None:
            found: dict[str, Any] = meta["labels"] if type(meta.get("labels")) is dict else {}
            return labels.matches(self.label_selector, found)
        return True


class Target(NamedTuple):
    api_version: str
    kind: str
    type: str = "Updater"


class PipelineSpec(NamedTuple):
    name: str
    sources: tuple[Source, ...]
    pipeline: Any
    target: Target | None

    @classmethod
    def from_dict(cls, raw: Any) -> PipelineSpec:
        """Validate a spec read from YAML; raises PipelineError naming the field at fault."""
        if type(raw) is not dict:
            raise PipelineError(f"expected a map with sources, pipeline and target, got {describe(raw)}")
        unknown = set(raw) - {"name", "sources", "pipeline", "target", "apiVersion", "kind", "metadata"}
        if unknown:
            raise PipelineError(f"unknown field {sorted(unknown)[0]!r} (expected name, sources, pipeline, target)")
        if "pipeline" not in raw:
            raise PipelineError("the field 'pipeline' is required")
        meta = raw.get("metadata")
        name = raw.get("name") or (meta.get("name") if type(meta) is dict else None) or ""
        sources = tuple(_source(i, s) for i, s in enumerate(_list_of(raw.get("sources"), "sources")))
        kinds = [s.kind for s in sources]
        if len(set(kinds)) != len(kinds):
            raise PipelineError(f"sources: each kind may appear once, got {kinds}")
        target = _target(raw["target"]) if raw.get("target") is not None else None
        return cls(str(name), sources, raw["pipeline"], target)

    def build(self, *, clock: Clock = time.time) -> Pipeline:
        target = {"apiVersion": self.target.api_version, "kind": self.target.kind} if self.target else None
        return Pipeline(self.pipeline, [s.kind for s in self.sources] or None, target, clock=clock)

    def route(self, objects: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
        """Objects grouped by the source they belong to; objects no source wants are left out."""
        routed: dict[str, list[dict[str, Any]]] = {s.kind: [] for s in self.sources}
        for obj in objects:
            if not self.sources:
                routed.setdefault(str(obj.get("kind") or "object"), []).append(obj)
                continue
            for source in self.sources:
                try:
                    wanted = source.accepts(obj)
                except ExpressionError as err:
                    raise PipelineError(f"sources[{source.kind}].labelSelector: {err.message}") from err
                if wanted:
                    routed[source.kind].append(obj)
                    break
        return routed


def _list_of(value: Any, field: str) -> list[Any]:
    if value is None:
        return []
    if type(value) is not list:
        raise PipelineError(f"{field}: expected a list, got {describe(value)}")
    return value


def _source(index: int, raw: Any) -> Source:
    field = f"sources[{index}]"
    if type(raw) is not dict:
        raise PipelineError(f"{field}: expected a map with kind, got {describe(raw)}")
    kind = raw.get("kind")
    if type(kind) is not str or not kind:
        raise PipelineError(f"{field}.kind: expected a kind name, got {describe(kind)}")
    selector = raw.get("labelSelector")
    if selector is not None and type(selector) is not dict:
        raise PipelineError(f"{field}.labelSelector: expected a map, got {describe(selector)}")
    group = raw.get("apiGroup")
    namespace = raw.get("namespace")
    for key, value in (("apiGroup", group), ("namespace", namespace)):
        if value is not None and type(value) is not str:
            raise PipelineError(f"{field}.{key}: expected a string, got {describe(value)}")
    return Source(kind, group, namespace, selector)


def _target(raw: Any) -> Target:
    if type(raw) is not dict:
        raise PipelineError(f"target: expected a map with kind, got {describe(raw)}")
    kind = raw.get("kind")
    if type(kind) is not str or not kind:
        raise PipelineError(f"target.kind: expected a kind name, got {describe(kind)}")
    target_type = raw.get("type", "Updater")
    if target_type not in TARGET_TYPES:
        raise PipelineError(f"target.type: expected Updater or Patcher, got {describe(target_type)}")
    api_version = raw.get("apiVersion")
    if api_version is None:
        group, version = raw.get("apiGroup") or "", raw.get("version") or "v1"
        api_version = f"{group}/{version}" if group else version
    if type(api_version) is not str or not api_version:
        raise PipelineError(f"target.apiVersion: expected a string, got {describe(api_version)}")
    return Target(api_version, kind, target_type)


def _group_of(api_version: Any) -> str:
    text = api_version if type(api_version) is str else ""
    return text.rpartition("/")[0]
