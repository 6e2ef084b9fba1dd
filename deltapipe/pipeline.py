"""`Pipeline`: a compiled Δ pipeline you can evaluate over a world of objects or feed deltas.

    pipeline = Pipeline(spec, sources=["Deployment", "Service"], target={"apiVersion": "v1", "kind": "X"})
    pipeline.evaluate({"Deployment": [...], "Service": [...]})   # -> output objects
    pipeline.apply([{"op": "upsert", "kind": "Service", "object": {...}}])
        # -> [{"op": "delete" | "upsert", "object": {...}}], deletes first

`evaluate` is stateless; `apply` advances the pipeline's own state. Feeding a world as deltas, in
any order and with any history of updates and deletes, leaves the same outputs as `evaluate` of
the resulting world. Objects passed in are kept by reference and must not be changed afterwards;
objects handed out are the caller's own copies.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from deltapipe import stages
from deltapipe.engine import Engine, Message
from deltapipe.errors import DeltapipeError, PipelineError
from deltapipe.expression import Clock, Compiler
from deltapipe.values import copy_tree, describe

Objects = Mapping[str, Iterable[dict[str, Any]]]


class Pipeline:
    """A validated, compiled pipeline; construction raises PipelineError for an invalid spec."""

    def __init__(self, spec: Any, sources: Sequence[str] | None = None,
                 target: Mapping[str, str] | None = None, *, clock: Clock = time.time) -> None:
        self.sources = _check_sources(sources)
        self.target = _check_target(target)
        try:
            self.stages = stages.parse(spec, self.sources, Compiler(clock))
        except DeltapipeError as err:
            raise (err if isinstance(err, PipelineError) else PipelineError(str(err))) from err
        except RecursionError:  # the compiler recurses per level of an expression
            raise PipelineError("an expression is nested too deeply to compile") from None
        self._engine = self._new_engine()

    def evaluate(self, objects: Objects) -> list[dict[str, Any]]:
        """The output objects for this world, ordered by (namespace, name); no state is kept."""
        engine = self._new_engine(atomic=False)
        try:
            return [delta["object"] for delta in engine.apply(_as_upserts(objects))]
        except RecursionError:  # a value built or read deeper than evaluation recurses (the engine is ours alone)
            raise DeltapipeError("a value is nested too deeply to evaluate") from None

    def apply(self, deltas: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        """Feed input deltas; returns the output deltas. A failing apply changes no state."""
        return self._engine.apply(deltas)

    def trace(self, objects: Objects) -> list[tuple[str, list[dict[str, Any]]]]:
        """What each stage produced when evaluating this world: [(label, documents)], in order."""
        steps: list[tuple[str, list[dict[str, Any]]]] = []

        def record(label: str, messages: list[Message]) -> None:
            steps.append((label, [copy_tree(doc) for _, _, doc in messages if doc is not None]))

        outputs = self._new_engine(record, atomic=False).apply(_as_upserts(objects))
        steps.append(("output", [delta["object"] for delta in outputs]))
        return steps

    def _new_engine(self, tracer: Any = None, *, atomic: bool = True) -> Engine:
        return Engine(self.stages, self.sources, self.target, tracer, atomic=atomic)


def _as_upserts(objects: Objects) -> list[dict[str, Any]]:
    if not isinstance(objects, Mapping):
        raise PipelineError(f"expected a map of kind to objects, got {describe(objects)}")
    return [{"op": "upsert", "kind": kind, "object": obj} for kind, objs in objects.items() for obj in objs]


def _check_sources(sources: Sequence[str] | None) -> list[str] | None:
    if sources is None:
        return None
    kinds = list(sources)
    if not kinds or not all(type(k) is str and k for k in kinds):
        raise PipelineError(f"sources must be a non-empty list of kinds, got {kinds!r}")
    if len(set(kinds)) != len(kinds):
        raise PipelineError(f"sources name a kind twice: {kinds!r}")
    return kinds


def _check_target(target: Mapping[str, str] | None) -> dict[str, str] | None:
    if target is None:
        return None
    api_version, kind = target.get("apiVersion"), target.get("kind")
    if type(api_version) is not str or not api_version or type(kind) is not str or not kind:
        raise PipelineError(f"target needs apiVersion and kind, got {dict(target)!r}")
    return {"apiVersion": api_version, "kind": kind}
