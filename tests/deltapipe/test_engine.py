"""The incremental engine: apply() must always agree with evaluate() and with a naive oracle."""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest

import deltapipe
from deltapipe import Pipeline, PipelineError
from tests.deltapipe.reference import reference_outputs

TARGET = {"apiVersion": "example.com/v1", "kind": "Out"}

PIPELINES: dict[str, tuple[Any, list[str] | None]] = {
    "select-project": ([
        {"@select": {"@gt": ["$.spec.size", 2]}},
        {"@project": {"metadata": {"name": "$.metadata.name", "namespace": "$.metadata.namespace"},
                      "spec": {"double": {"@mul": ["$.spec.size", 2]}, "color": "$.spec.color"}}},
    ], None),
    "indexed-join": ([
        {"@join": {"@and": [{"@eq": ["$.A.metadata.namespace", "$.B.metadata.namespace"]},
                            {"@eq": ["$.A.spec.color", "$.B.spec.color"]},
                            {"@lte": ["$.A.spec.size", "$.B.spec.size"]}]}},
        {"@project": {"metadata": {"name": {"@concat": ["$.A.metadata.name", "-", "$.B.metadata.name"]},
                                   "namespace": "$.A.metadata.namespace"},
                      "spec": {"sizes": ["$.A.spec.size", "$.B.spec.size"]}}},
    ], ["A", "B"]),
    "scan-join": ([
        {"@join": {"@lt": ["$.A.spec.size", "$.B.spec.size"]}},
        {"@project": {"metadata": {"name": {"@concat": ["$.A.metadata.name", "-", "$.B.metadata.name"]}}}},
    ], ["A", "B"]),
    "three-way-join": ([
        {"@join": {"@and": [{"@eq": ["$.A.spec.color", "$.B.spec.color"]},
                            {"@eq": ["$.C.spec.size", "$.B.spec.size"]}]}},
        {"@project": {"metadata": {"name": {"@concat": ["$.A.metadata.name", ".", "$.B.metadata.name", ".",
                                                        "$.C.metadata.name"]}}}},
    ], ["A", "B", "C"]),
    "unwind-gather": ([
        {"@unwind": "$.spec.tags"},
        {"@gather": ["$.spec.tags", "$.metadata.name"]},
        {"@project": {"metadata": {"name": {"@concat": ["tag-", "$.spec.tags"]}},
                      "spec": {"owners": "$.metadata.name"}}},
    ], None),
    "gather-by-color": ([
        {"@gather": ["$.spec.color", "$.spec.size"]},
        {"@project": {"metadata": {"name": "$.spec.color"}, "spec": {"sizes": "$.spec.size",
                                                                     "from": "$.metadata.name"}}},
    ], None),
    "name-collisions": ([
        {"@project": {"metadata": {"name": "$.spec.color"}, "spec": {"size": "$.spec.size"}}},
    ], None),
}

COLORS = ["red", "green", "blue"]
TAGS = ["a", "b", "c", "d"]


def random_object(rng: random.Random, name: str) -> dict[str, Any]:
    namespace = "n1" if sum(map(ord, name)) % 2 else "n2"  # fixed per name: identity is (namespace, name)
    return {"metadata": {"name": name, "namespace": namespace},
            "spec": {"size": rng.randint(0, 5), "color": rng.choice(COLORS),
                     "tags": rng.sample(TAGS, rng.randint(0, 3))}}


def replay(pipeline: Pipeline, kinds: list[str], seed: int, steps: int = 60) -> None:
    """Random upserts, updates and deletes in random batches; after each batch the outputs
    accumulated from apply() must equal evaluate() and the reference on the current world."""
    rng = random.Random(seed)
    world: dict[str, dict[str, dict]] = {k: {} for k in kinds}
    seen: dict[tuple[str, str], dict] = {}
    for _ in range(steps):
        batch = []
        for _ in range(rng.randint(1, 4)):
            kind = rng.choice(kinds)
            name = f"{kind.lower()}{rng.randint(0, 7)}"
            if rng.random() < 0.3:
                obj = world[kind].pop(name, None) or random_object(rng, name)
                batch.append({"op": "delete", "kind": kind, "object": obj})
            else:
                obj = random_object(rng, name)
                world[kind][name] = obj
                batch.append({"op": "upsert", "kind": kind, "object": obj})
        for delta in pipeline.apply(batch):
            meta = delta["object"]["metadata"]
            key = (meta.get("namespace", ""), meta["name"])
            if delta["op"] == "upsert":
                seen[key] = delta["object"]
            else:
                assert key in seen, f"delete of {key} that was never emitted"
                del seen[key]
        current = {k: list(v.values()) for k, v in world.items()}
        expected = reference_outputs(pipeline, current)
        assert seen == expected
        assert {(o["metadata"].get("namespace", ""), o["metadata"]["name"]): o
                for o in pipeline.evaluate(current)} == expected


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("name", PIPELINES)
def test_apply_agrees_with_evaluate_and_the_reference_after_random_deltas(name: str, seed: int) -> None:
    spec, sources = PIPELINES[name]
    kinds = sources or ["A"]
    replay(Pipeline(spec, sources, TARGET), kinds, seed)


def test_outputs_do_not_depend_on_the_order_objects_arrive_in() -> None:
    spec, sources = PIPELINES["gather-by-color"]
    rng = random.Random(7)
    objects = [random_object(rng, f"o{i}") for i in range(30)]
    first = Pipeline(spec, sources, TARGET).evaluate({"A": objects})
    shuffled = objects[:]
    rng.shuffle(shuffled)
    assert Pipeline(spec, sources, TARGET).evaluate({"A": shuffled}) == first


def test_an_unchanged_upsert_emits_nothing() -> None:
    pipeline = Pipeline(*PIPELINES["select-project"], TARGET)
    obj = {"metadata": {"name": "x", "namespace": "n1"}, "spec": {"size": 3, "color": "red"}}
    assert len(pipeline.apply([{"op": "upsert", "kind": "A", "object": obj}])) == 1
    assert pipeline.apply([{"op": "upsert", "kind": "A", "object": copy.deepcopy(obj)}]) == []


def test_an_update_that_leaves_the_output_unchanged_emits_nothing() -> None:
    pipeline = Pipeline(*PIPELINES["select-project"], TARGET)
    obj = {"metadata": {"name": "x", "namespace": "n1"}, "spec": {"size": 3, "color": "red"}}
    pipeline.apply([{"op": "upsert", "kind": "A", "object": obj}])
    changed = {**obj, "status": {"seen": True}}  # status is not projected
    assert pipeline.apply([{"op": "upsert", "kind": "A", "object": changed}]) == []


def test_deletes_come_before_upserts() -> None:
    pipeline = Pipeline(*PIPELINES["name-collisions"], TARGET)
    red = {"metadata": {"name": "a"}, "spec": {"color": "red", "size": 1}}
    pipeline.apply([{"op": "upsert", "kind": "A", "object": red}])
    blue = {"metadata": {"name": "a"}, "spec": {"color": "blue", "size": 1}}
    ops = [d["op"] for d in pipeline.apply([{"op": "upsert", "kind": "A", "object": blue}])]
    assert ops == ["delete", "upsert"]


def test_retracting_one_of_two_same_named_outputs_re_emits_the_other() -> None:
    pipeline = Pipeline(*PIPELINES["name-collisions"], TARGET)
    a = {"metadata": {"name": "a"}, "spec": {"color": "red", "size": 1}}
    b = {"metadata": {"name": "b"}, "spec": {"color": "red", "size": 2}}
    pipeline.apply([{"op": "upsert", "kind": "A", "object": b}, {"op": "upsert", "kind": "A", "object": a}])
    out = pipeline.apply([{"op": "delete", "kind": "A", "object": a}])
    assert out == [{"op": "upsert", "object": {**TARGET, "metadata": {"name": "red"}, "spec": {"size": 2}}}]


def test_deleting_an_unknown_object_is_a_no_op() -> None:
    pipeline = Pipeline(*PIPELINES["select-project"], TARGET)
    assert pipeline.apply([{"op": "delete", "kind": "A", "object": {"metadata": {"name": "ghost"}}}]) == []


def test_a_failing_apply_changes_no_state() -> None:
    pipeline = Pipeline([{"@select": "$.spec.ok"}, {"@project": {"metadata": "$.metadata"}}], None, TARGET)
    good = {"metadata": {"name": "good"}, "spec": {"ok": True}}
    bad = {"metadata": {"name": "bad"}, "spec": {"ok": "yes"}}
    with pytest.raises(PipelineError, match=r"stage 1 \(@select\) on A bad: .*got string \"yes\""):
        pipeline.apply([{"op": "upsert", "kind": "A", "object": good}, {"op": "upsert", "kind": "A", "object": bad}])
    # `good` was not taken in: offering it again produces it now
    assert [d["object"]["metadata"]["name"] for d in
            pipeline.apply([{"op": "upsert", "kind": "A", "object": good}])] == ["good"]


def test_a_failing_apply_leaves_join_and_gather_state_intact() -> None:
    spec = [{"@join": {"@eq": ["$.A.spec.color", "$.B.spec.color"]}},
            {"@gather": ["$.A.spec.color", "$.B.spec.size"]},
            {"@project": {"metadata": {"name": "$.A.spec.color"}, "spec": {"n": {"@len": ["$.B.spec.size"]}}}}]
    pipeline = Pipeline(spec, ["A", "B"], TARGET)
    rng = random.Random(3)
    world = {"A": [random_object(rng, f"a{i}") for i in range(4)], "B": [random_object(rng, f"b{i}") for i in range(6)]}
    pipeline.apply([{"op": "upsert", "kind": k, "object": o} for k, objs in world.items() for o in objs])
    before = pipeline.evaluate(world)
    broken = {"metadata": {"name": "b9"}, "spec": {"color": "red", "size": 1}}
    with pytest.raises(PipelineError):
        pipeline.apply([{"op": "delete", "kind": "B", "object": world["B"][0]},
                        {"op": "upsert", "kind": "B", "object": broken},
                        {"op": "upsert", "kind": "Nope", "object": broken}])
    # the state is as before the failed batch: removing everything retracts exactly `before`
    removed = pipeline.apply([{"op": "delete", "kind": k, "object": o} for k, objs in world.items() for o in objs])
    assert sorted(d["object"]["metadata"]["name"] for d in removed) == sorted(o["metadata"]["name"] for o in before)
    assert all(d["op"] == "delete" for d in removed)


def test_outputs_are_copies_the_caller_may_change() -> None:
    pipeline = Pipeline([{"@project": {"metadata": "$.metadata", "spec": "$.spec"}}], None, TARGET)
    obj = {"metadata": {"name": "x"}, "spec": {"l": [1]}}
    out = pipeline.apply([{"op": "upsert", "kind": "A", "object": obj}])[0]["object"]
    out["spec"]["l"].append(2)
    out["metadata"]["name"] = "changed"
    assert obj == {"metadata": {"name": "x"}, "spec": {"l": [1]}}
    assert pipeline.evaluate({"A": [obj]})[0]["spec"] == {"l": [1]}


def test_inputs_are_never_modified_by_unwind_gather_or_setters() -> None:
    spec = [{"@project": [{"$.": "$."}, {"$.metadata.labels.x": "y"}]},
            {"@unwind": "$.spec.tags"}, {"@gather": ["$.metadata.namespace", "$.spec.tags"]}]
    obj = {"metadata": {"name": "x", "namespace": "n", "labels": {"a": "b"}}, "spec": {"tags": ["t2", "t1"]}}
    snapshot = copy.deepcopy(obj)
    out = Pipeline(spec, None, TARGET).evaluate({"A": [obj]})
    assert obj == snapshot
    assert out[0]["spec"]["tags"] == ["t1", "t2"] and out[0]["metadata"]["labels"] == {"a": "b", "x": "y"}


def test_join_results_are_retracted_when_either_side_goes() -> None:
    spec, sources = PIPELINES["indexed-join"]
    pipeline = Pipeline(spec, sources, TARGET)
    a = {"metadata": {"name": "a", "namespace": "n1"}, "spec": {"size": 1, "color": "red"}}
    b = {"metadata": {"name": "b", "namespace": "n1"}, "spec": {"size": 2, "color": "red"}}
    assert pipeline.apply([{"op": "upsert", "kind": "A", "object": a}]) == []
    assert [d["op"] for d in pipeline.apply([{"op": "upsert", "kind": "B", "object": b}])] == ["upsert"]
    b_blue = {**b, "spec": {"size": 2, "color": "blue"}}
    out = pipeline.apply([{"op": "upsert", "kind": "B", "object": b_blue}])
    assert [(d["op"], d["object"]["metadata"]["name"]) for d in out] == [("delete", "a-b")]


def test_a_join_predicate_that_is_not_boolean_names_the_stage_and_objects() -> None:
    pipeline = Pipeline([{"@join": "$.A.spec.color"}, {"@project": {"metadata": "$.A.metadata"}}], ["A", "B"])
    a = {"metadata": {"name": "a"}, "spec": {"color": "red"}}
    b = {"metadata": {"name": "b"}}
    pipeline.apply([{"op": "upsert", "kind": "B", "object": b}])
    with pytest.raises(PipelineError, match=r"stage 1 \(@join\) on A a \+ B b: .*true or false"):
        pipeline.apply([{"op": "upsert", "kind": "A", "object": a}])


def test_a_kind_that_is_not_a_source_is_refused() -> None:
    pipeline = Pipeline(*PIPELINES["indexed-join"], TARGET)
    with pytest.raises(PipelineError, match="kind Pod is not a source of this pipeline"):
        pipeline.apply([{"op": "upsert", "kind": "Pod", "object": {"metadata": {"name": "p"}}}])


@pytest.mark.parametrize(("delta", "message"), [
    ("nope", "expected {op, kind, object}"),
    ({"op": "patch", "kind": "A", "object": {}}, "op must be upsert or delete"),
    ({"op": "upsert", "kind": "", "object": {}}, "kind must be a non-empty string"),
    ({"op": "upsert", "kind": "A", "object": []}, "object must be a map"),
    ({"op": "upsert", "kind": "A", "object": {"metadata": {}}}, "has no metadata.name"),
    ({"op": "upsert", "kind": "A", "object": {"metadata": {"name": "x", "namespace": 3}}},
     "namespace must be a string"),
])
def test_malformed_deltas_are_refused_with_a_clear_message(delta: Any, message: str) -> None:
    pipeline = Pipeline([{"@project": {"metadata": "$.metadata"}}])
    with pytest.raises(PipelineError, match="delta 1") as caught:
        pipeline.apply([delta])
    assert message in str(caught.value)


@pytest.mark.parametrize(("doc", "message"), [
    ({"x": 1}, "no metadata map"),
    ({"metadata": {"namespace": "n"}}, "needs a non-empty string metadata.name, got null"),
    ({"metadata": {"name": ""}}, 'got string ""'),
    ({"metadata": {"name": "a", "namespace": 1}}, "metadata.namespace must be a string"),
])
def test_outputs_without_a_usable_name_are_errors(doc: dict, message: str) -> None:
    pipeline = Pipeline([{"@project": {"$.": "$.spec"}}])
    with pytest.raises(PipelineError, match="output of A src") as caught:
        pipeline.evaluate({"A": [{"metadata": {"name": "src"}, "spec": doc}]})
    assert message in str(caught.value)


def test_an_empty_namespace_is_dropped_and_the_target_is_stamped() -> None:
    pipeline = Pipeline([{"@project": {"apiVersion": "old/v1", "kind": "Old",
                                       "metadata": {"name": "x", "namespace": ""}}}], None, TARGET)
    assert pipeline.evaluate({"A": [{"metadata": {"name": "a"}}]}) == [{**TARGET, "metadata": {"name": "x"}}]


def test_without_a_target_outputs_keep_their_own_kind() -> None:
    pipeline = Pipeline([{"@project": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": "$.metadata"}}])
    assert pipeline.evaluate({"A": [{"metadata": {"name": "a"}}]})[0]["kind"] == "ConfigMap"


def test_at_now_outputs_are_retracted_even_though_they_cannot_be_recomputed() -> None:
    ticks = iter(range(1_000_000, 2_000_000, 3600))
    pipeline = Pipeline([{"@project": {"metadata": "$.metadata", "seen": "@now"}}], clock=lambda: next(ticks))
    obj = {"metadata": {"name": "a"}, "v": 1}
    first = pipeline.apply([{"op": "upsert", "kind": "A", "object": obj}])
    assert first[0]["object"]["seen"] == "1970-01-12T13:46:40Z"
    gone = pipeline.apply([{"op": "delete", "kind": "A", "object": obj}])
    assert gone == [{"op": "delete", "object": first[0]["object"]}]


def test_evaluate_does_not_touch_the_state_apply_keeps() -> None:
    pipeline = Pipeline(*PIPELINES["select-project"], TARGET)
    obj = {"metadata": {"name": "x", "namespace": "n1"}, "spec": {"size": 3, "color": "red"}}
    pipeline.evaluate({"A": [obj]})
    assert len(pipeline.apply([{"op": "upsert", "kind": "A", "object": obj}])) == 1


def test_trace_shows_every_stage_in_order() -> None:
    spec, sources = PIPELINES["unwind-gather"]
    obj = {"metadata": {"name": "x"}, "spec": {"tags": ["b", "a"]}}
    steps = Pipeline(spec, sources, TARGET).trace({"A": [obj]})
    assert [label for label, _ in steps] == ["sources", "stage 1 (@unwind)", "stage 2 (@gather)",
                                             "stage 3 (@project)", "output"]
    assert [d["metadata"]["name"] for d in steps[1][1]] == ["x-0", "x-1"]
    assert sorted(d["metadata"]["name"] for d in steps[-1][1]) == ["tag-a", "tag-b"]


def test_public_names_are_exported() -> None:
    assert set(deltapipe.__all__) >= {"evaluate", "Pipeline", "ExpressionError", "PipelineError"}
