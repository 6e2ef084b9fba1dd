"""A deliberately naive, non-incremental evaluator of pipelines, used as the test oracle.

It follows the semantics the docs state, with none of the engine's machinery: the join is a full
Cartesian product filtered by the predicate, the gather regroups everything, and each output
name goes to the document with the smallest provenance. Only the per-document stage functions
(select/project/unwind `run`) are shared with the engine; they have their own tests.
"""

from __future__ import annotations

import itertools
from typing import Any

from deltapipe.expression import NO_LOCAL
from deltapipe.pipeline import Pipeline
from deltapipe.stages import Gather, Join, Unwind, set_path
from deltapipe.values import go_json, sort_key


def reference_outputs(pipeline: Pipeline, world: dict[str, list[dict[str, Any]]]) -> dict[tuple[str, str], dict]:
    stream = [((kind, _ns(o), o["metadata"]["name"]), (), o) for kind, objs in world.items() for o in objs]
    for stage in pipeline.stages:
        if isinstance(stage, Join):
            stream = _join(stage, world)
        elif isinstance(stage, Gather):
            stream = _gather(stage, stream)
        else:
            numbered = isinstance(stage, Unwind)
            stream = [(root, (*sub, i) if numbered else sub, out)
                      for root, sub, doc in stream for i, out in enumerate(stage.run(doc))]
    outputs: dict[tuple[str, str], tuple[Any, dict]] = {}
    for root, sub, doc in stream:
        meta = doc["metadata"]
        name = (meta.get("namespace") or "", meta["name"])
        if name not in outputs or (root, sub) < outputs[name][0]:
            outputs[name] = ((root, sub), doc)
    result = {}
    for name, (_, doc) in outputs.items():
        obj = dict(doc)
        if pipeline.target:
            obj = {**pipeline.target, **{k: v for k, v in doc.items() if k not in ("apiVersion", "kind")}}
        if doc["metadata"].get("namespace") == "":
            obj["metadata"] = {k: v for k, v in doc["metadata"].items() if k != "namespace"}
        result[name] = obj
    return result


def _ns(obj: dict) -> str:
    return obj["metadata"].get("namespace") or ""


def _join(stage: Join, world: dict[str, list[dict]]) -> list:
    per_kind = [[((kind, _ns(o), o["metadata"]["name"]), o) for o in world.get(kind, [])] for kind in stage.kinds]
    out = []
    for combo in itertools.product(*per_kind):
        compound = {kind: doc for kind, (_, doc) in zip(stage.kinds, combo, strict=True)}
        if stage.predicate(compound, NO_LOCAL) is True:
            out.append((tuple(root for root, _ in combo), (), compound))
    return out


def _gather(stage: Gather, stream: list) -> list:
    groups: dict[str, list] = {}
    for root, sub, doc in stream:
        key, value = stage.key(doc, NO_LOCAL), stage.value_path.get(doc)
        if key is not None and value is not None:
            groups.setdefault(go_json(key), []).append(((root, sub), doc, value))
    out = []
    for group_key, members in groups.items():
        template = min(members, key=lambda m: m[0])[1]
        values = [v for _, _, v in sorted(members, key=lambda m: (sort_key(m[2]), m[0]))]
        out.append((("@gather", stage.index, group_key), (), set_path(template, stage.value_path, values)))
    return out
