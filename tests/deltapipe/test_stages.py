"""Stages on their own: parsing and validation, @project merging, @unwind, @gather, @join indexing."""

from __future__ import annotations

from typing import Any

import pytest

from deltapipe import Pipeline, PipelineError
from deltapipe.stages import Join, merge_steps


def run(spec: Any, *objects: dict[str, Any], sources: list[str] | None = None) -> list[dict[str, Any]]:
    kind = sources[0] if sources else "A"
    return Pipeline(spec, sources).evaluate({kind: list(objects)})


def obj(name: str, **fields: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, **fields}


# --- parsing ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("spec", "message"), [
    ([], "the pipeline is empty"),
    ([{"@select": True, "@project": {}}], "stage 1: expected a map with one operation"),
    (["@select"], "stage 1: expected a map with one operation"),
    ([{"@aggregate": 1}], "unknown pipeline operation '@aggregate'"),
    ([{"@select": True}, {"@join": True}], "stage 2: @join is only allowed as the first stage"),
    ([{"@unwind": {"@concat": ["$.a"]}}], "stage 1 (@unwind): expected a JSONPath string"),
    ([{"@unwind": "$"}], "stage 1 (@unwind): expected a JSONPath string such as $.spec.ports below the root"),
    ([{"@gather": ["$.a"]}], "stage 1 (@gather): expected [key expression, value path]"),
    ([{"@gather": ["$.a", {"@len": ["$.b"]}]}], "stage 1 (@gather): expected the value path"),
    ([{"@project": {"@eq": [1, 2, 3]}}], "stage 1 (@project): @eq: expected 2 arguments, got 3"),
    ([{"@select": "$.a["}], "stage 1 (@select)"),
])
def test_invalid_specs_are_refused_at_construction(spec: Any, message: str) -> None:
    with pytest.raises(PipelineError) as caught:
        Pipeline(spec)
    assert message in str(caught.value)


def test_a_single_op_map_is_a_one_stage_pipeline() -> None:
    assert run({"@project": {"metadata": {"name": "x"}}}, obj("a")) == [{"metadata": {"name": "x"}}]


def test_demux_and_mux_are_aliases() -> None:
    spec = [{"@demux": "$.l"}, {"@mux": ["$.k", "$.l"]}]
    assert run(spec, obj("a", k=1, l=[2, 1])) == [{"metadata": {"name": "a-0"}, "k": 1, "l": [1, 2]}]


def test_join_finds_index_keys_among_top_level_equalities() -> None:
    predicate = {"@and": [{"@eq": ["$.A.x", "$.B.y"]}, {"@eq": ["$.A.z", "const"]},
                          {"@or": [{"@eq": ["$.A.q", "$.B.q"]}]}, {"@eq": ['$["B"]["w"]', "$.A.w"]}]}
    stage = Pipeline([{"@join": predicate}], ["A", "B"]).stages[0]
    assert isinstance(stage, Join)
    assert [(e.left_kind, e.right_kind) for e in stage.equalities] == [("A", "B"), ("B", "A")]


def test_a_join_over_one_source_wraps_each_object_by_kind() -> None:
    out = run([{"@join": {"@eq": ["$.A.v", 1]}}, {"@project": {"metadata": "$.A.metadata"}}],
              obj("a", v=1), obj("b", v=2), sources=["A"])
    assert out == [{"metadata": {"name": "a"}}]


def test_join_equalities_are_type_strict_even_when_indexed() -> None:
    spec = [{"@join": {"@eq": ["$.A.v", "$.B.v"]}},
            {"@project": {"metadata": {"name": {"@concat": ["$.A.metadata.name", "$.B.metadata.name"]}}}}]
    pipeline = Pipeline(spec, ["A", "B"])
    out = pipeline.evaluate({"A": [obj("a1", v=1), obj("a2", v=True), obj("a3", v=[1]), obj("a4")],
                             "B": [obj("b1", v=1), obj("b2", v=1.0), obj("b3", v=[1]), obj("b4")]})
    assert [o["metadata"]["name"] for o in out] == ["a1b1", "a3b3"]


# --- @select and @project --------------------------------------------------------------------

def test_select_keeps_only_documents_whose_condition_is_true() -> None:
    out = run({"@select": {"@eq": ["$.v", 1]}}, obj("a", v=1), obj("b", v=2), obj("c"))
    assert [o["metadata"]["name"] for o in out] == ["a"]


def test_project_list_steps_each_read_the_input_and_are_merged() -> None:
    spec = {"@project": [{"metadata": "$.metadata"}, {"$.spec.replicas": 3},
                         {"$.metadata.annotations.new": "yes"}, {"spec": {"seen": "$.spec"}}]}
    out = run(spec, obj("a", spec={"old": 1}))
    assert out == [{"metadata": {"name": "a", "annotations": {"new": "yes"}},
                    "spec": {"replicas": 3, "seen": {"old": 1}}}]


def test_project_merge_rules() -> None:
    assert merge_steps({"a": [1], "b": {"c": 1}, "d": 1}, {"a": [2], "b": {"e": 2}, "d": {"x": 1}}) == \
        {"a": [1, 2], "b": {"c": 1, "e": 2}, "d": {"x": 1}}
    assert merge_steps({"a": 1}, {"a": "s"}) == {"a": "s"}
    assert merge_steps({"a": {"b": 1}}, {"a": [1]}) == {"a": [1]}
    assert merge_steps({"a": None}, {"a": 1}) == {"a": 1}
    assert merge_steps({}, {"a": None}) == {"a": None}


def test_project_merging_null_onto_a_value_is_an_error() -> None:
    with pytest.raises(PipelineError, match=r"stage 1 \(@project\) on A a: could not merge null into int 1"):
        run({"@project": [{"metadata": "$.metadata", "x": 1}, {"x": None}]}, obj("a"))


def test_project_must_give_a_map_or_list_of_maps() -> None:
    with pytest.raises(PipelineError, match="must give a map or a list of maps, got int 3"):
        run({"@project": {"@len": [[1, 2, 3]]}}, obj("a"))


# --- @unwind ---------------------------------------------------------------------------------

def test_unwind_makes_one_document_per_element_named_by_index() -> None:
    out = run({"@unwind": "$.spec.ports"}, obj("svc", spec={"ports": [{"p": 80}, {"p": 443}]}))
    assert out == [{"metadata": {"name": "svc-0"}, "spec": {"ports": {"p": 80}}},
                   {"metadata": {"name": "svc-1"}, "spec": {"ports": {"p": 443}}}]


def test_nested_unwinds_compose_names() -> None:
    out = run([{"@unwind": "$.a"}, {"@unwind": "$.a"}], obj("x", a=[[1, 2]]))
    assert [o["metadata"]["name"] for o in out] == ["x-0-0", "x-0-1"]


def test_unwind_drops_documents_with_a_missing_or_empty_list() -> None:
    assert run({"@unwind": "$.l"}, obj("a"), obj("b", l=[])) == []


def test_unwind_of_a_non_list_is_an_error() -> None:
    with pytest.raises(PipelineError, match=r"\$\.l must be a list to unwind, got string"):
        run({"@unwind": "$.l"}, obj("a", l="x"))


def test_unwind_keeps_string_elements_as_they_are() -> None:
    out = run({"@unwind": "$.l"}, obj("a", l=["$.metadata", "@now"]))
    assert [o["l"] for o in out] == ["$.metadata", "@now"]


# --- @gather ---------------------------------------------------------------------------------

def test_gather_groups_by_key_and_sorts_the_values() -> None:
    spec = {"@gather": ["$.spec.port", "$.spec.address"]}
    out = run(spec, obj("ep0", spec={"port": 80, "address": "10.1.1.3"}),
              obj("ep1", spec={"port": 443, "address": "10.1.1.2"}),
              obj("ep2", spec={"port": 80, "address": "10.1.1.1"}))
    assert out == [{"metadata": {"name": "ep0"}, "spec": {"port": 80, "address": ["10.1.1.1", "10.1.1.3"]}},
                   {"metadata": {"name": "ep1"}, "spec": {"port": 443, "address": ["10.1.1.2"]}}]


def test_gather_ignores_documents_whose_key_or_value_is_null() -> None:
    out = run({"@gather": ["$.k", "$.v"]}, obj("a", k=1, v=1), obj("b", v=2), obj("c", k=1))
    assert out == [{"metadata": {"name": "a"}, "k": 1, "v": [1]}]


def test_gather_values_follow_a_total_order_across_types() -> None:
    values = ["b", 2.5, {"m": 1}, True, 1, "a", [0], 3]
    out = run({"@gather": ["$.k", "$.v"]}, *(obj(f"o{i}", k="g", v=v) for i, v in enumerate(values)))
    assert out[0]["v"] == [True, 1, 2.5, 3, "a", "b", [0], {"m": 1}]


def test_gather_keeps_repeated_values_once_per_member() -> None:
    out = run({"@gather": ["$.k", "$.v"]}, obj("a", k=1, v="x"), obj("b", k=1, v="x"))
    assert out[0]["v"] == ["x", "x"]


def test_gather_template_is_the_member_with_the_smallest_provenance() -> None:
    out = run({"@gather": ["$.k", "$.v"]}, obj("zeta", k=1, v=1, extra="z"), obj("alpha", k=1, v=2, extra="a"))
    assert out == [{"metadata": {"name": "alpha"}, "k": 1, "v": [1, 2], "extra": "a"}]


def test_an_expression_nested_deeper_than_the_compiler_recurses_is_a_pipeline_error() -> None:
    expression: Any = True
    for _ in range(2_000):
        expression = {"@and": [expression]}
    with pytest.raises(PipelineError, match=r"^an expression is nested too deeply to compile$"):
        Pipeline([{"@select": expression}])
