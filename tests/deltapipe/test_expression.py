"""expression.py: decoding, literals, string expressions, `$`/`$$`, `@now`, map literals and setters."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from deltapipe import DeltapipeError, Expression, ExpressionError, PathError, compile_expression, evaluate
from deltapipe.jsonpath import MAX_LIST_GROWTH

EPOCH = "1970-01-01T00:00:00Z"

POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "web-1", "namespace": "prod", "labels": {"app": "web", "tier": "front"}},
    "spec": {
        "replicas": 3,
        "ratio": 0.5,
        "ports": [80, 443],
        "containers": [{"name": "a", "image": "nginx"}, {"name": "b", "image": "envoy"}],
        "nested": [[1, 2], [3]],
        "empty": [],
        "nothing": None,
        "flag": False,
    },
}


def pod() -> dict[str, Any]:
    return copy.deepcopy(POD)


# ---------------------------------------------------------------------------------------------
# Decoding: literals


@pytest.mark.parametrize("literal", [True, False, 0, -7, 2**62, 1.5, -0.25, 1e21])
def test_bool_and_number_literals_evaluate_to_themselves(literal: Any) -> None:
    result = evaluate(literal, pod())
    assert result == literal
    assert type(result) is type(literal)


def test_int_and_float_literals_keep_their_types() -> None:
    assert type(evaluate(1, {})) is int
    assert type(evaluate(1.0, {})) is float


def test_null_literal_evaluates_to_null_not_false() -> None:
    assert evaluate(None, pod()) is None


def test_null_value_in_a_map_literal_is_written_as_null() -> None:
    assert evaluate({"a": None}, {}) == {"a": None}


def test_null_inside_a_list_literal_stays_null() -> None:
    assert evaluate([1, None, "x"], {}) == [1, None, "x"]


def test_empty_string_is_the_empty_string() -> None:
    assert evaluate("", pod()) == ""


def test_empty_string_can_be_written_as_a_map_value() -> None:
    assert evaluate({"metadata": {"namespace": ""}}, pod()) == {"metadata": {"namespace": ""}}


@pytest.mark.parametrize("value", [(1, 2), {1, 2}, object(), b"bytes"])
def test_values_that_are_not_json_fail_to_compile(value: Any) -> None:
    with pytest.raises(ExpressionError, match="unsupported value"):
        compile_expression(value)


def test_a_value_that_is_not_json_fails_to_compile_even_when_nested() -> None:
    with pytest.raises(ExpressionError):
        compile_expression({"a": [1, {"b": (1,)}]})


def test_compile_expression_returns_an_expression_that_keeps_its_source() -> None:
    raw = {"@eq": ["$.kind", "Pod"]}
    compiled = compile_expression(raw)
    assert isinstance(compiled, Expression)
    assert compiled.source == raw
    assert compiled.evaluate(pod()) is True


# ---------------------------------------------------------------------------------------------
# Decoding: list literals and the first-element unwrapping rule


def test_list_literal_evaluates_each_element() -> None:
    assert evaluate(["$.kind", 1, {"@add": [1, 1]}], pod()) == ["Pod", 1, 2]


def test_empty_list_literal_is_an_empty_list() -> None:
    assert evaluate([], pod()) == []


def test_list_literal_whose_first_element_is_a_list_is_that_first_element() -> None:
    assert evaluate([[1, 2], [3, 4]], {}) == [1, 2]


def test_list_literal_is_unwrapped_even_when_later_elements_are_not_lists() -> None:
    assert evaluate([[1], 2, "x"], {}) == [1]


def test_list_literal_whose_first_element_is_a_path_to_a_list_is_that_list() -> None:
    assert evaluate(["$.spec.ports"], pod()) == [80, 443]


def test_list_literal_is_not_unwrapped_when_only_a_later_element_is_a_list() -> None:
    assert evaluate([1, [2, 3]], {}) == [1, [2, 3]]


def test_list_literal_is_not_unwrapped_when_the_first_element_is_a_map() -> None:
    assert evaluate([{"a": 1}, [2]], {}) == [{"a": 1}, [2]]


def test_len_of_a_one_element_list_holding_a_path_measures_the_list_at_that_path() -> None:
    assert evaluate({"@len": ["$.spec.containers"]}, pod()) == 2


def test_unwrapping_applies_once_so_a_list_of_lists_at_a_path_is_kept() -> None:
    assert evaluate(["$.spec.nested"], pod()) == [[1, 2], [3]]


def test_list_literal_whose_first_element_is_an_empty_list_is_empty() -> None:
    assert evaluate([[], 1], {}) == []


# ---------------------------------------------------------------------------------------------
# Decoding: operators versus map literals


def test_map_with_one_at_key_is_an_operator() -> None:
    assert evaluate({"@eq": [1, 1]}, {}) is True


def test_map_with_an_at_key_and_another_key_is_a_literal_map() -> None:
    assert evaluate({"@eq": [1, 1], "x": 2}, {}) == {"@eq": [1, 1], "x": 2}


def test_literal_map_with_an_at_key_still_evaluates_its_values() -> None:
    result = evaluate({"@eq": ["$.kind", {"@add": [1, 2]}], "x": "$.metadata.name"}, pod())
    assert result == {"@eq": ["Pod", 3], "x": "web-1"}


def test_map_with_one_key_not_starting_with_at_is_a_literal_map() -> None:
    assert evaluate({"eq": [1, 1]}, {}) == {"eq": [1, 1]}


def test_empty_map_is_an_empty_literal_map() -> None:
    assert evaluate({}, pod()) == {}


def test_map_literal_evaluates_nested_operators_and_paths() -> None:
    expr = {"name": {"@concat": ["$.metadata.name", "-svc"]}, "spec": {"n": "$.spec.replicas"}}
    assert evaluate(expr, pod()) == {"name": "web-1-svc", "spec": {"n": 3}}


def test_non_string_map_keys_become_their_text() -> None:
    assert evaluate({1: "a", 2.5: "b"}, {}) == {"1": "a", "2.5": "b"}


def test_bool_map_keys_become_true_and_false() -> None:
    assert evaluate({True: 1, False: 0}, {}) == {"true": 1, "false": 0}


def test_unknown_operator_fails_when_compiled_and_names_the_operator() -> None:
    with pytest.raises(ExpressionError, match="@bogus"):
        compile_expression({"@bogus": 1})


@pytest.mark.parametrize(
    "expr",
    [
        [1, {"@bogus": 1}],
        {"a": {"b": {"@bogus": 1}}},
        {"@cond": [False, {"@bogus": 1}]},
        {"@and": [False, {"@bogus": 1}]},
        {"@map": [{"@bogus": "$$"}, []]},
        {"@eq": [1, {"@bogus": 1}]},
    ],
)
def test_unknown_operator_fails_at_compile_time_wherever_it_is_nested(expr: Any) -> None:
    with pytest.raises(ExpressionError, match="@bogus"):
        compile_expression(expr)


@pytest.mark.parametrize("name", ["@ne", "@mod", "@split", "@lower", "@keys", "@first", "@new", "@aggregate"])
def test_operators_mentioned_in_docs_but_not_implemented_are_unknown(name: str) -> None:
    with pytest.raises(ExpressionError, match=name):
        compile_expression({name: [1, 2]})


def test_operator_names_are_case_sensitive() -> None:
    with pytest.raises(ExpressionError, match="@EQ"):
        compile_expression({"@EQ": [1, 1]})


# ---------------------------------------------------------------------------------------------
# Strings: literals and `$` paths


@pytest.mark.parametrize("text", ["hello", "a$b", " $.kind", "@eq", "@nowish", "x.y.z", "@"])
def test_string_not_starting_with_dollar_is_a_literal(text: str) -> None:
    assert evaluate(text, pod()) == text


def test_dollar_path_reads_from_the_document() -> None:
    assert evaluate("$.metadata.labels.app", pod()) == "web"


def test_dollar_alone_is_the_whole_document() -> None:
    assert evaluate("$", pod()) == POD


def test_dollar_dot_is_the_root_like_dollar() -> None:
    assert evaluate("$.", pod()) == POD


def test_path_to_a_missing_key_is_null() -> None:
    assert evaluate("$.metadata.missing.deeper", pod()) is None


def test_path_through_a_scalar_is_null() -> None:
    assert evaluate("$.kind.name", pod()) is None


def test_path_to_a_key_holding_null_is_null() -> None:
    assert evaluate("$.spec.nothing", pod()) is None


def test_path_to_a_false_value_is_false_not_null() -> None:
    assert evaluate("$.spec.flag", pod()) is False


def test_path_on_a_null_document_is_null() -> None:
    assert evaluate("$.a", None) is None


def test_path_index_reads_a_list_element() -> None:
    assert evaluate("$.spec.ports[1]", pod()) == 443


def test_path_negative_index_counts_from_the_end() -> None:
    assert evaluate("$.spec.containers[-1].name", pod()) == "b"


def test_path_index_out_of_range_is_null() -> None:
    assert evaluate("$.spec.ports[5]", pod()) is None


def test_path_bracket_form_reads_keys_with_dots_and_slashes() -> None:
    doc = {"metadata": {"labels": {"kubernetes.io/service-name": "svc"}}}
    assert evaluate('$["metadata"]["labels"]["kubernetes.io/service-name"]', doc) == "svc"
    assert evaluate("$['metadata']['labels']['kubernetes.io/service-name']", doc) == "svc"


def test_path_with_several_matches_gives_only_the_first() -> None:
    assert evaluate("$.spec.containers[*].name", pod()) == "a"


def test_path_filter_selects_the_first_matching_element() -> None:
    assert evaluate("$.spec.containers[?(@.name == 'b')].image", pod()) == "envoy"


def test_path_filter_without_matches_is_null() -> None:
    assert evaluate("$.spec.containers[?(@.name == 'zzz')].image", pod()) is None


def test_path_that_does_not_parse_fails_at_compile_time_with_a_path_error() -> None:
    with pytest.raises(PathError):
        compile_expression("$.a[")


def test_path_error_is_an_expression_error_and_a_deltapipe_error() -> None:
    with pytest.raises(ExpressionError) as info:
        compile_expression({"@len": "$.spec[?(@.x =="})
    assert isinstance(info.value, DeltapipeError)


def test_path_with_a_function_call_is_an_error() -> None:
    with pytest.raises(PathError):
        compile_expression("$.spec.ports.length()")


def test_evaluating_a_path_returns_the_value_without_copying_it_into_a_new_tree() -> None:
    doc = pod()
    assert evaluate("$.metadata", doc) == doc["metadata"]


# ---------------------------------------------------------------------------------------------
# `$$`: the local subject of list operators


def test_double_dollar_outside_list_operators_is_the_whole_document() -> None:
    assert evaluate("$$", pod()) == POD


def test_double_dollar_path_outside_list_operators_reads_the_document() -> None:
    assert evaluate("$$.metadata.name", pod()) == "web-1"


def test_double_dollar_dot_is_the_local_root() -> None:
    assert evaluate("$$.", pod()) == POD
    assert evaluate({"@map": ["$$.", [1, 2]]}, {}) == [1, 2]


def test_double_dollar_inside_map_is_the_current_element() -> None:
    assert evaluate({"@map": ["$$.name", "$.spec.containers"]}, pod()) == ["a", "b"]


def test_single_dollar_inside_map_is_still_the_document() -> None:
    expr = {"@map": [{"@concat": ["$.metadata.name", "/", "$$.name"]}, "$.spec.containers"]}
    assert evaluate(expr, pod()) == ["web-1/a", "web-1/b"]


def test_nested_list_operators_rebind_double_dollar_to_their_own_element() -> None:
    doc = {"k": 10, "m": [[1, 2], [3]]}
    expr = {"@map": [{"@map": [{"@add": ["$$", "$.k"]}, "$$"]}, "$.m"]}
    assert evaluate(expr, doc) == [[11, 12], [13]]


def test_double_dollar_returns_to_the_outer_element_after_an_inner_list_operator() -> None:
    doc = {"m": [{"xs": [1, 2], "n": "a"}, {"xs": [3], "n": "b"}]}
    expr = {"@map": [{"n": "$$.n", "len": {"@len": {"@map": ["$$", "$$.xs"]}}}, "$.m"]}
    assert evaluate(expr, doc) == [{"n": "a", "len": 2}, {"n": "b", "len": 1}]


def test_double_dollar_bound_to_a_null_element_stays_null_inside_map() -> None:
    assert evaluate({"@map": ["$$", "$.xs"]}, {"xs": [None, 1], "other": "doc"}) == [None, 1]


def test_double_dollar_path_on_a_null_element_is_null_not_the_document() -> None:
    assert evaluate({"@map": ["$$.other", "$.xs"]}, {"xs": [None], "other": "doc"}) == [None]


def test_double_dollar_is_the_element_in_filter_any_all_and_none() -> None:
    doc = {"xs": [1, 5, 10]}
    assert evaluate({"@filter": [{"@gt": ["$$", 3]}, "$.xs"]}, doc) == [5, 10]
    assert evaluate({"@any": [{"@eq": ["$$", 5]}, "$.xs"]}, doc) is True
    assert evaluate({"@all": [{"@gt": ["$$", 0]}, "$.xs"]}, doc) is True
    assert evaluate({"@none": [{"@gt": ["$$", 10]}, "$.xs"]}, doc) is True


def test_double_dollar_inside_a_map_literal_inside_map_builds_one_map_per_element() -> None:
    expr = {"@map": [{"name": "$$.name", "ns": "$.metadata.namespace"}, "$.spec.containers"]}
    assert evaluate(expr, pod()) == [{"name": "a", "ns": "prod"}, {"name": "b", "ns": "prod"}]


def test_expression_evaluate_accepts_an_explicit_local_subject() -> None:
    compiled = compile_expression("$$.x")
    assert compiled.evaluate({"x": "doc"}, {"x": "local"}) == "local"
    assert compiled.evaluate({"x": "doc"}) == "doc"


# ---------------------------------------------------------------------------------------------
# `@now` and the injected clock


def test_now_is_the_injected_clock_time_in_utc_with_seconds_precision() -> None:
    assert compile_expression("@now", clock=lambda: 0.0).evaluate({}) == EPOCH


def test_now_drops_fractions_of_a_second() -> None:
    assert compile_expression("@now", clock=lambda: 1.9).evaluate({}) == "1970-01-01T00:00:01Z"


def test_now_formats_a_later_time_in_utc() -> None:
    assert compile_expression("@now", clock=lambda: 1_700_000_000.0).evaluate({}) == "2023-11-14T22:13:20Z"


def test_evaluate_accepts_a_clock_too() -> None:
    assert evaluate({"at": "@now"}, {}, clock=lambda: 0.0) == {"at": EPOCH}


def test_now_is_substituted_inside_operators_and_map_literals() -> None:
    expr = {"stamp": {"@concat": ["t=", "@now"]}, "list": ["@now"]}
    assert evaluate(expr, {}, clock=lambda: 0.0) == {"stamp": "t=" + EPOCH, "list": [EPOCH]}


def test_now_reads_the_clock_at_each_evaluation() -> None:
    times = iter([0.0, 60.0])
    compiled = compile_expression("@now", clock=lambda: next(times))
    assert compiled.evaluate({}) == EPOCH
    assert compiled.evaluate({}) == "1970-01-01T00:01:00Z"


def test_now_read_from_the_document_is_not_substituted() -> None:
    assert evaluate("$.s", {"s": "@now"}, clock=lambda: 0.0) == "@now"


def test_dollar_string_read_from_the_document_is_not_evaluated_again() -> None:
    doc = {"s": "$.a", "a": 3}
    assert evaluate("$.s", doc) == "$.a"


def test_map_literal_does_not_evaluate_again_a_dollar_string_read_from_the_document() -> None:
    doc = {"s": "$.a", "a": 3, "t": "@now"}
    assert evaluate({"x": "$.s", "y": "$.t"}, doc, clock=lambda: 0.0) == {"x": "$.a", "y": "@now"}


def test_string_operator_does_not_evaluate_again_a_dollar_string_read_from_the_document() -> None:
    assert evaluate({"@string": "$.a"}, {"a": "$.b", "b": 3}) == "$.b"


def test_map_operator_does_not_evaluate_again_dollar_strings_in_elements() -> None:
    assert evaluate({"@map": ["$$", "$.xs"]}, {"xs": ["$.a", "@now"], "a": 1}) == ["$.a", "@now"]


# ---------------------------------------------------------------------------------------------
# Map literals: setters


def test_map_literal_starts_from_an_empty_map_not_from_the_document() -> None:
    assert evaluate({"$.kind": "Service"}, pod()) == {"kind": "Service"}


def test_plain_key_with_dots_is_one_key() -> None:
    assert evaluate({"a.b": 1}, {}) == {"a.b": 1}


def test_plain_key_with_brackets_is_one_key() -> None:
    assert evaluate({"a[0]": 1}, {}) == {"a[0]": 1}


def test_jsonpath_key_creates_intermediate_maps() -> None:
    assert evaluate({"$.a.b.c": 1}, {}) == {"a": {"b": {"c": 1}}}


def test_jsonpath_keys_sharing_a_prefix_write_into_the_same_map() -> None:
    assert evaluate({"$.a.b": 1, "$.a.c": 2, "d": 3}, {}) == {"a": {"b": 1, "c": 2}, "d": 3}


def test_jsonpath_key_with_an_index_pads_a_new_list_with_null() -> None:
    assert evaluate({"$.y[3]": 12}, {}) == {"y": [None, None, None, 12]}


def test_jsonpath_key_with_an_index_pads_at_most_the_documented_number_of_nulls() -> None:
    assert len(evaluate({f"$.y[{MAX_LIST_GROWTH - 1}]": 1}, {})["y"]) == MAX_LIST_GROWTH
    with pytest.raises(PathError, match="too many nulls"):
        evaluate({f"$.y[{MAX_LIST_GROWTH}]": 1}, {})
    with pytest.raises(PathError, match="too many nulls"):
        evaluate({"$.x[100000000]": 1}, {})  # refused at once, without allocating the padding


def test_jsonpath_key_with_an_index_then_a_name_creates_a_list_of_maps() -> None:
    assert evaluate({"$.a[0].b": 1}, {}) == {"a": [{"b": 1}]}


def test_jsonpath_key_with_an_index_extends_an_existing_short_list() -> None:
    assert evaluate({"y": [1], "$.y[2]": 3}, {}) == {"y": [1, None, 3]}


def test_jsonpath_key_with_an_index_overwrites_an_existing_element() -> None:
    assert evaluate({"y": [1, 2], "$.y[0]": 9}, {}) == {"y": [9, 2]}


def test_jsonpath_key_in_bracket_form_can_name_a_key_with_dots() -> None:
    assert evaluate({"$['x.y']": 1}, {}) == {"x.y": 1}


def test_jsonpath_key_value_can_be_any_expression() -> None:
    assert evaluate({"$.meta.n": {"@len": "$.spec.ports"}}, pod()) == {"meta": {"n": 2}}


def test_wildcard_key_writes_into_every_existing_entry() -> None:
    assert evaluate({"a": {"x": 1, "y": 2}, "$.a.*": 0}, {}) == {"a": {"x": 0, "y": 0}}


def test_wildcard_key_cannot_create_structure() -> None:
    with pytest.raises(PathError):
        evaluate({"$.a.*": 1}, {})


def test_negative_index_key_cannot_create_a_list() -> None:
    with pytest.raises(PathError):
        evaluate({"$.a[-1]": 1}, {})


def test_key_ending_in_a_filter_is_an_error() -> None:
    with pytest.raises(PathError):
        evaluate({"$.a[?(@.x == 1)]": 1}, {})


def test_key_writing_through_a_string_is_an_error() -> None:
    with pytest.raises(PathError):
        evaluate({"a": "s", "$.a.b": 1}, {})


def test_key_indexing_into_a_map_is_an_error() -> None:
    with pytest.raises(PathError):
        evaluate({"a": {"k": 1}, "$.a[0]": 1}, {})


def test_bare_dollar_key_cannot_be_written_and_fails_at_compile_time() -> None:
    with pytest.raises(ExpressionError):
        compile_expression({"$": 1})


def test_double_dollar_key_cannot_be_written_and_fails_at_compile_time() -> None:
    with pytest.raises(ExpressionError, match=r"\$\$"):
        compile_expression({"$$.x": 1})


def test_key_that_does_not_parse_fails_at_compile_time() -> None:
    with pytest.raises(PathError):
        compile_expression({"$.a[": 1})


def test_dollar_dot_key_merges_a_map_into_the_result() -> None:
    assert evaluate({"$.": {"a": 1, "b": 2}}, {}) == {"a": 1, "b": 2}


def test_dollar_dot_key_keeps_the_other_keys_of_the_result() -> None:
    assert evaluate({"x": 1, "$.": {"a": 2}}, {}) == {"x": 1, "a": 2}


def test_dollar_dot_key_merges_shallowly_replacing_whole_values() -> None:
    assert evaluate({"a": {"b": 1, "c": 2}, "$.": {"a": {"d": 3}}}, {}) == {"a": {"d": 3}}


def test_dollar_dot_key_can_merge_a_map_read_from_the_document() -> None:
    assert evaluate({"kind": "Copy", "$.": "$.metadata.labels"}, pod()) == {
        "kind": "Copy", "app": "web", "tier": "front"}


@pytest.mark.parametrize("value", [5, "text", [1], None, True])
def test_dollar_dot_key_with_a_value_that_is_not_a_map_is_an_error(value: Any) -> None:
    with pytest.raises(ExpressionError, match=r"\$\."):
        evaluate({"$.": value}, {})


def test_dollar_dot_key_with_a_path_to_a_non_map_is_an_error() -> None:
    with pytest.raises(ExpressionError):
        evaluate({"$.": "$.spec.ports"}, pod())


# ---------------------------------------------------------------------------------------------
# Evaluation never changes the document


def test_setting_a_path_under_a_copied_map_leaves_the_document_unchanged() -> None:
    doc = pod()
    result = evaluate({"metadata": "$.metadata", "$.metadata.name": "x"}, doc)
    assert result["metadata"]["name"] == "x"
    assert result["metadata"]["labels"] == {"app": "web", "tier": "front"}
    assert doc == POD


def test_setting_a_deep_path_under_a_copied_map_leaves_the_document_unchanged() -> None:
    doc = pod()
    result = evaluate({"metadata": "$.metadata", "$.metadata.labels.app": "other"}, doc)
    assert result["metadata"]["labels"] == {"app": "other", "tier": "front"}
    assert doc == POD


def test_setting_a_path_after_a_dollar_dot_merge_leaves_the_document_unchanged() -> None:
    doc = pod()
    result = evaluate({"$.": "$.metadata", "$.labels.extra": "1"}, doc)
    assert result["labels"] == {"app": "web", "tier": "front", "extra": "1"}
    assert doc == POD


def test_merging_the_whole_document_then_setting_keys_leaves_the_document_unchanged() -> None:
    doc = pod()
    result = evaluate({"$.": "$", "$.metadata.name": "copy", "$.spec.ports[3]": 8080, "kind": "X"}, doc)
    assert result["metadata"]["name"] == "copy"
    assert result["spec"]["ports"] == [80, 443, None, 8080]
    assert result["kind"] == "X"
    assert doc == POD


def test_padding_a_copied_list_leaves_the_document_list_unchanged() -> None:
    doc = pod()
    result = evaluate({"ports": "$.spec.ports", "$.ports[4]": 1}, doc)
    assert result == {"ports": [80, 443, None, None, 1]}
    assert doc == POD


def test_overwriting_an_element_of_a_copied_list_leaves_the_document_unchanged() -> None:
    doc = pod()
    result = evaluate({"c": "$.spec.containers", "$.c[0].image": "busybox"}, doc)
    assert result["c"][0] == {"name": "a", "image": "busybox"}
    assert doc == POD


def test_wildcard_write_into_copied_structure_leaves_the_document_unchanged() -> None:
    doc = pod()
    result = evaluate({"spec": "$.spec", "$.spec.containers[*].image": "busybox"}, doc)
    assert [c["image"] for c in result["spec"]["containers"]] == ["busybox", "busybox"]
    assert doc == POD


def test_filter_write_into_copied_structure_leaves_the_document_unchanged() -> None:
    doc = pod()
    result = evaluate({"spec": "$.spec", "$.spec.containers[?(@.name == 'b')].image": "x"}, doc)
    assert [c["image"] for c in result["spec"]["containers"]] == ["nginx", "x"]
    assert doc == POD


def test_list_operators_over_document_lists_leave_the_document_unchanged() -> None:
    doc = pod()
    expr = {
        "mapped": {"@map": [{"$.": "$$", "$.image": "x"}, "$.spec.containers"]},
        "filtered": {"@filter": [{"@eq": ["$$.name", "a"]}, "$.spec.containers"]},
        "first": {"@list": "$.spec.nested"},
    }
    result = evaluate(expr, doc)
    assert result["mapped"] == [{"name": "a", "image": "x"}, {"name": "b", "image": "x"}]
    assert doc == POD


def test_the_same_document_value_written_under_two_keys_can_be_changed_independently() -> None:
    doc = pod()
    result = evaluate({"a": "$.metadata", "b": "$.metadata", "$.a.name": "changed"}, doc)
    assert result["a"]["name"] == "changed"
    assert result["b"]["name"] == "web-1"
    assert doc == POD


# ---------------------------------------------------------------------------------------------
# Compile once, evaluate many times


def test_a_compiled_expression_can_be_evaluated_against_many_documents() -> None:
    compiled = compile_expression({"name": "$.metadata.name", "n": {"@len": "$.spec.ports"}})
    first, second = pod(), pod()
    second["metadata"]["name"] = "web-2"
    second["spec"]["ports"] = [1]
    assert compiled.evaluate(first) == {"name": "web-1", "n": 2}
    assert compiled.evaluate(second) == {"name": "web-2", "n": 1}


def test_results_of_one_evaluation_are_not_changed_by_the_next() -> None:
    compiled = compile_expression({"$.a.b": "$.x", "$.l[1]": "$.x"})
    first = compiled.evaluate({"x": 1})
    second = compiled.evaluate({"x": 2})
    assert first == {"a": {"b": 1}, "l": [None, 1]}
    assert second == {"a": {"b": 2}, "l": [None, 2]}


def test_errors_at_evaluation_time_are_expression_errors_naming_the_operator() -> None:
    compiled = compile_expression({"@len": "$.spec"})
    with pytest.raises(ExpressionError, match="@len"):
        compiled.evaluate(pod())
