"""operators.py: every `@` operator of the spec's table (§5), its results, typing and errors."""

from __future__ import annotations

from typing import Any

import pytest

from deltapipe import ExpressionError, compile_expression, evaluate
from deltapipe.operators import names

DOC: dict[str, Any] = {
    "kind": "Pod",
    "n": 3,
    "f": 2.5,
    "s": "7",
    "sf": "2.5",
    "word": "abc",
    "t": True,
    "no": False,
    "null": None,
    "ints": [3, 1, 2],
    "floats": [1.5, -2.0],
    "mixed": [12, 24, -36.1],
    "strs": ["b", "a"],
    "numstrs": ["3", "1", "2"],
    "empty": [],
    "nested": [[1, 2], [3]],
    "objs": [{"name": "a", "v": 1}, {"name": "b", "v": 2}, {"name": "c", "v": 3}],
    "map": {"x": [1]},
    "labels": {"app": "web", "tier": "front"},
}

FAILS_WHEN_EVALUATED = {"@not": "$.missing"}  # compiles, raises ExpressionError when evaluated


def ev(expr: Any, doc: Any = None) -> Any:
    return evaluate(expr, DOC if doc is None else doc)


def fails(expr: Any, op: str, doc: Any = None) -> None:
    with pytest.raises(ExpressionError, match=op):
        ev(expr, doc)


def test_the_registry_holds_every_operator_of_the_spec_table() -> None:
    spec = {"@bool", "@int", "@float", "@string", "@list", "@dict", "@noop", "@cond", "@definedOr",
            "@switch", "@and", "@or", "@not", "@isnil", "@exists", "@has", "@eq", "@lt", "@lte", "@gt",
            "@gte", "@add", "@sub", "@mul", "@div", "@abs", "@ceil", "@floor", "@sum", "@min", "@max",
            "@rnd", "@len", "@in", "@range", "@concat", "@map", "@filter", "@any", "@all", "@none",
            "@hash", "@selector"}
    assert spec <= set(names())


def test_an_operation_that_fails_when_evaluated_compiles() -> None:
    compiled = compile_expression(FAILS_WHEN_EVALUATED)
    with pytest.raises(ExpressionError, match="@not"):
        compiled.evaluate(DOC)


# ---------------------------------------------------------------------------------------------
# @bool @int @float @string


@pytest.mark.parametrize("value", [True, False])
def test_bool_returns_a_boolean_unchanged(value: bool) -> None:
    assert ev({"@bool": value}) is value


@pytest.mark.parametrize("arg", ["true", 1, 0, None, [], {}, "$.null", 1.0])
def test_bool_refuses_anything_but_a_boolean(arg: Any) -> None:
    fails({"@bool": arg}, "@bool")


def test_bool_of_a_path_to_a_boolean_is_that_boolean() -> None:
    assert ev({"@bool": "$.t"}) is True


@pytest.mark.parametrize(
    ("arg", "expected"), [(5, 5), (-3, -3), ("12", 12), ("+12", 12), ("-4", -4), ("$.s", 7)],
)
def test_int_accepts_ints_and_base_10_integer_strings(arg: Any, expected: int) -> None:
    result = ev({"@int": arg})
    assert result == expected
    assert type(result) is int


@pytest.mark.parametrize("arg", [1.5, 2.0, "1.5", "1e3", " 12", "0x10", "1_000", "abc", True, None, [1], {}])
def test_int_refuses_floats_non_integer_strings_and_non_numbers(arg: Any) -> None:
    fails({"@int": arg}, "@int")


def test_int_refuses_a_string_outside_the_int64_range() -> None:
    assert ev({"@int": "9223372036854775807"}) == 2**63 - 1
    fails({"@int": "9223372036854775808"}, "@int")


@pytest.mark.parametrize(
    ("arg", "expected"),
    [(1, 1.0), (2.5, 2.5), ("2.5", 2.5), ("3", 3.0), ("1e3", 1000.0), ("-.5", -0.5), ("$.n", 3.0)],
)
def test_float_converts_numbers_and_numeric_strings_to_a_float(arg: Any, expected: float) -> None:
    result = ev({"@float": arg})
    assert result == expected
    assert type(result) is float


@pytest.mark.parametrize("arg", [True, None, "abc", "nan", "inf", "", [1.0], {"a": 1}])
def test_float_refuses_bools_null_text_and_containers(arg: Any) -> None:
    fails({"@float": arg}, "@float")


@pytest.mark.parametrize("op", ["@float", "@abs"])
@pytest.mark.parametrize("arg", ["1e400", "-1e400"])
def test_numeric_strings_beyond_the_float_range_are_refused(op: str, arg: str) -> None:
    fails({op: arg}, op)


@pytest.mark.parametrize(
    ("arg", "expected"),
    [("abc", "abc"), (12, "12"), (-3, "-3"), (1.5, "1.5"), (2.0, "2"), (1e21, "1e+21"), (1e-7, "1e-7"),
     ("$.n", "3"), ("$.f", "2.5")],
)
def test_string_formats_numbers_as_go_json_does(arg: Any, expected: str) -> None:
    assert ev({"@string": arg}) == expected


@pytest.mark.parametrize("arg", [True, None, "$.null", [1], {"a": 1}, "$.map"])
def test_string_refuses_bools_null_and_containers(arg: Any) -> None:
    fails({"@string": arg}, "@string")


def test_string_of_the_now_literal_is_the_current_time() -> None:
    assert evaluate({"@string": "@now"}, {}, clock=lambda: 0.0) == "1970-01-01T00:00:00Z"


# ---------------------------------------------------------------------------------------------
# @list @dict @noop


def test_list_of_a_path_to_a_list_is_that_list() -> None:
    assert ev({"@list": "$.ints"}) == [3, 1, 2]


def test_list_applies_the_first_element_unwrapping_rule() -> None:
    assert ev({"@list": "$.nested"}) == [1, 2]


def test_list_of_a_list_literal_is_that_list() -> None:
    assert ev({"@list": [1, "$.n"]}) == [1, 3]


@pytest.mark.parametrize("arg", ["$.map", "$.null", 5, "text"])
def test_list_refuses_values_that_are_not_lists(arg: Any) -> None:
    fails({"@list": arg}, "@list")


def test_dict_of_a_path_to_a_map_is_that_map() -> None:
    assert ev({"@dict": "$.labels"}) == {"app": "web", "tier": "front"}


def test_dict_of_a_map_literal_is_that_map() -> None:
    assert ev({"@dict": {"a": "$.n"}}) == {"a": 3}


@pytest.mark.parametrize("arg", ["$.ints", "$.null", 5, "text"])
def test_dict_refuses_values_that_are_not_maps(arg: Any) -> None:
    fails({"@dict": arg}, "@dict")


@pytest.mark.parametrize("arg", [None, 1, "$.n", [1, 2], {"a": 1}, FAILS_WHEN_EVALUATED])
def test_noop_is_null_whatever_its_argument(arg: Any) -> None:
    assert ev({"@noop": arg}) is None


# ---------------------------------------------------------------------------------------------
# @cond @definedOr @switch


def test_cond_with_a_true_condition_is_the_then_branch() -> None:
    assert ev({"@cond": [True, "yes", "no"]}) == "yes"


def test_cond_with_a_false_condition_is_the_else_branch() -> None:
    assert ev({"@cond": [{"@eq": ["$.kind", "Svc"]}, "yes", "no"]}) == "no"


def test_cond_with_a_false_condition_and_no_else_is_null() -> None:
    assert ev({"@cond": [False, "yes"]}) is None


def test_cond_evaluates_only_the_taken_branch() -> None:
    assert ev({"@cond": [True, 1, FAILS_WHEN_EVALUATED]}) == 1
    assert ev({"@cond": [False, FAILS_WHEN_EVALUATED, 2]}) == 2


@pytest.mark.parametrize("condition", [None, "$.null", 1, "true", []])
def test_cond_requires_a_boolean_condition(condition: Any) -> None:
    fails({"@cond": [condition, 1, 2]}, "@cond")


@pytest.mark.parametrize("arg", [[True], [True, 1, 2, 3], True, []])
def test_cond_with_fewer_than_two_or_more_than_three_arguments_fails_at_compile_time(arg: Any) -> None:
    with pytest.raises(ExpressionError, match="@cond"):
        compile_expression({"@cond": arg})


def test_defined_or_is_the_first_argument_when_it_is_not_null() -> None:
    assert ev({"@definedOr": ["$.n", 9]}) == 3


@pytest.mark.parametrize("first", [False, 0, "", [], {}])
def test_defined_or_keeps_falsy_values_that_are_not_null(first: Any) -> None:
    assert ev({"@definedOr": [{"@dict": {"v": first}}, 9]}) == {"v": first}
    assert ev({"@definedOr": ["$.no", 9]}) is False


def test_defined_or_is_the_second_argument_when_the_first_is_null() -> None:
    assert ev({"@definedOr": ["$.missing", "$.kind"]}) == "Pod"
    assert ev({"@definedOr": ["$.null", 9]}) == 9


def test_defined_or_evaluates_the_second_argument_only_when_needed() -> None:
    assert ev({"@definedOr": ["$.n", FAILS_WHEN_EVALUATED]}) == 3


@pytest.mark.parametrize("arg", [["$.n"], ["$.n", 1, 2], "$.n"])
def test_defined_or_needs_exactly_two_arguments(arg: Any) -> None:
    with pytest.raises(ExpressionError, match="@definedOr"):
        compile_expression({"@definedOr": arg})


def test_switch_is_the_action_of_the_first_true_case() -> None:
    expr = {"@switch": [[{"@gt": ["$.n", 5]}, "big"], [{"@gt": ["$.n", 1]}, "medium"], [True, "small"]]}
    assert ev(expr) == "medium"


def test_switch_without_a_true_case_is_null() -> None:
    assert ev({"@switch": [[False, 1], [{"@eq": [1, 2]}, 2]]}) is None


def test_switch_stops_at_the_first_true_case() -> None:
    expr = {"@switch": [[True, 1], [FAILS_WHEN_EVALUATED, 2], ["not a bool", 3]]}
    assert ev(expr) == 1


def test_switch_evaluates_only_the_taken_action() -> None:
    assert ev({"@switch": [[False, FAILS_WHEN_EVALUATED], [True, 2]]}) == 2


@pytest.mark.parametrize("case", [1, None, "$.null", "yes"])
def test_switch_requires_boolean_cases(case: Any) -> None:
    fails({"@switch": [[False, 0], [case, 1]]}, "@switch")


@pytest.mark.parametrize("arg", [[], [[True]], [[True, 1, 2]], [True, 1], 5, [[True, 1], "x"]])
def test_switch_needs_at_least_one_pair_of_exactly_two_elements(arg: Any) -> None:
    with pytest.raises(ExpressionError, match="@switch"):
        compile_expression({"@switch": arg})


# ---------------------------------------------------------------------------------------------
# @and @or @not


@pytest.mark.parametrize(
    ("args", "expected"),
    [([True, True], True), ([True, False], False), ([False, True], False), ([True, True, True], True),
     ([], True), ([True], True), ([False], False)],
)
def test_and_is_true_when_every_argument_is_true(args: list[bool], expected: bool) -> None:
    assert ev({"@and": args}) is expected


@pytest.mark.parametrize(
    ("args", "expected"),
    [([False, False], False), ([True, False], True), ([False, True], True), ([False, False, True], True),
     ([], False), ([True], True), ([False], False)],
)
def test_or_is_true_when_some_argument_is_true(args: list[bool], expected: bool) -> None:
    assert ev({"@or": args}) is expected


def test_and_and_or_accept_a_bare_expression_as_one_argument() -> None:
    assert ev({"@and": "$.t"}) is True
    assert ev({"@or": {"@eq": ["$.kind", "Svc"]}}) is False


def test_and_stops_at_the_first_false_argument() -> None:
    assert ev({"@and": [False, FAILS_WHEN_EVALUATED]}) is False
    assert ev({"@and": [True, False, "not a bool"]}) is False


def test_or_stops_at_the_first_true_argument() -> None:
    assert ev({"@or": [True, FAILS_WHEN_EVALUATED]}) is True
    assert ev({"@or": [False, True, "not a bool"]}) is True


@pytest.mark.parametrize("bad", [1, None, "$.null", "true", [True]])
def test_and_requires_boolean_arguments(bad: Any) -> None:
    fails({"@and": [True, bad]}, "@and")


@pytest.mark.parametrize("bad", [0, None, "$.null", "false", []])
def test_or_requires_boolean_arguments(bad: Any) -> None:
    fails({"@or": [False, bad]}, "@or")


def test_and_evaluates_a_failing_argument_that_is_reached() -> None:
    fails({"@and": [True, FAILS_WHEN_EVALUATED]}, "@not")


def test_not_negates_a_boolean() -> None:
    assert ev({"@not": True}) is False
    assert ev({"@not": "$.no"}) is True


@pytest.mark.parametrize("arg", [None, "$.missing", 0, "false", []])
def test_not_requires_a_boolean(arg: Any) -> None:
    fails({"@not": arg}, "@not")


# ---------------------------------------------------------------------------------------------
# @isnil @exists @has


@pytest.mark.parametrize("op", ["@exists", "@has"])
@pytest.mark.parametrize(
    ("arg", "expected"),
    [("$.n", True), ("$.no", True), ("$.empty", True), ("$.word", True), ("$.missing", False),
     ("$.null", False), ("$.kind.deeper", False), (None, False), (0, True), ({"@noop": 1}, False)],
)
def test_exists_and_has_are_true_for_any_value_but_null(op: str, arg: Any, expected: bool) -> None:
    assert ev({op: arg}) is expected


@pytest.mark.parametrize(
    ("arg", "expected"),
    [("$.null", True), ("$.missing", True), (None, True), ("$.no", False), ("$.empty", False), (0, False)],
)
def test_isnil_is_true_only_for_null(arg: Any, expected: bool) -> None:
    assert ev({"@isnil": arg}) is expected


# ---------------------------------------------------------------------------------------------
# @eq


@pytest.mark.parametrize(
    ("a", "b"),
    [(1, 1), ("$.kind", "Pod"), (2.5, "$.f"), (True, True), ("", ""), ({"x": [1]}, "$.map"),
     ({"a": 1, "b": 2}, {"b": 2, "a": 1}), ({"@list": "$.ints"}, {"@list": [3, 1, 2]})],
)
def test_eq_is_true_for_deeply_equal_values_of_the_same_types(a: Any, b: Any) -> None:
    assert ev({"@eq": [a, b]}) is True


@pytest.mark.parametrize(
    ("a", "b"),
    [(1, 1.0), (1, "1"), (1, True), (0, False), ("$.n", 3.0), ("$.s", 7), ({"x": [1]}, {"x": [1.0]}),
     ({"a": 1}, {"a": 1, "b": 2}), (1, 2), ("a", "b")],
)
def test_eq_is_false_for_values_that_differ_in_type_or_content(a: Any, b: Any) -> None:
    assert ev({"@eq": [a, b]}) is False


@pytest.mark.parametrize(
    ("a", "b"), [(None, None), (None, 1), (1, None), ("$.null", "$.missing"), ("$.x", None)],
)
def test_eq_is_false_when_either_side_is_null(a: Any, b: Any) -> None:
    assert ev({"@eq": [a, b]}) is False


def test_eq_of_two_list_literals_compares_the_lists_without_unwrapping() -> None:
    assert ev({"@eq": [[1, 2], [1, 2]]}) is True
    assert ev({"@eq": [[1, 2], [2, 1]]}) is False


def test_eq_of_two_paths_to_lists_compares_the_lists() -> None:
    assert ev({"@eq": ["$.ints", [3, 1, 2]]}) is True


def test_eq_of_an_expression_giving_a_two_element_list_compares_its_elements() -> None:
    assert ev({"@eq": "$.pair"}, {"pair": [4, 4]}) is True
    assert ev({"@eq": "$.pair"}, {"pair": [4, 5]}) is False


def test_eq_of_a_one_element_list_holding_a_list_compares_that_lists_two_elements() -> None:
    assert ev({"@eq": [[7, 7]]}) is True


@pytest.mark.parametrize("arg", [10, "$.n", [1], [], "$.ints", "$.missing", {"a": 1}])
def test_eq_needs_exactly_two_arguments_after_evaluation(arg: Any) -> None:
    fails({"@eq": arg}, "@eq")


def test_eq_with_three_list_elements_fails_at_compile_time() -> None:
    with pytest.raises(ExpressionError, match="@eq"):
        compile_expression({"@eq": [1, 2, 3]})


# ---------------------------------------------------------------------------------------------
# @lt @lte @gt @gte


@pytest.mark.parametrize(
    ("op", "a", "b", "expected"),
    [("@lt", 1, 2, True), ("@lt", 2, 2, False), ("@lt", 3, 2, False),
     ("@lte", 1, 2, True), ("@lte", 2, 2, True), ("@lte", 3, 2, False),
     ("@gt", 1, 2, False), ("@gt", 2, 2, False), ("@gt", 3, 2, True),
     ("@gte", 1, 2, False), ("@gte", 2, 2, True), ("@gte", 3, 2, True)],
)
def test_comparisons_order_ints(op: str, a: int, b: int, expected: bool) -> None:
    assert ev({op: [a, b]}) is expected


@pytest.mark.parametrize(
    ("op", "a", "b", "expected"),
    [("@lt", 1, 1.5, True), ("@lt", 2.5, 2, False), ("@lte", 2, 2.0, True), ("@gt", -0.5, -1, True),
     ("@gte", 1.0, 1, True), ("@lt", "$.f", "$.n", True)],
)
def test_comparisons_compare_an_int_and_a_float_as_floats(op: str, a: Any, b: Any, expected: bool) -> None:
    assert ev({op: [a, b]}) is expected


def test_comparisons_treat_numeric_strings_as_numbers_not_text() -> None:
    assert ev({"@lt": ["10", 9]}) is False  # as text "10" < "9"
    assert ev({"@gt": ["10", "9"]}) is True
    assert ev({"@gte": ["2.5", 2]}) is True
    assert ev({"@lt": ["$.s", 8]}) is True


@pytest.mark.parametrize("op", ["@lt", "@lte", "@gt", "@gte"])
@pytest.mark.parametrize(("a", "b"), [("a", "b"), (None, 1), (1, "$.missing"), (True, 1), ([1], 2), ({}, 1)])
def test_comparisons_refuse_text_null_bools_and_containers(op: str, a: Any, b: Any) -> None:
    fails({op: [a, b]}, op)


@pytest.mark.parametrize("op", ["@lt", "@lte", "@gt", "@gte"])
def test_comparisons_need_exactly_two_arguments(op: str) -> None:
    fails({op: [1]}, op)
    fails({op: 1}, op)
    with pytest.raises(ExpressionError, match=op):
        compile_expression({op: [1, 2, 3]})


def test_comparison_of_a_path_to_a_pair_compares_its_elements() -> None:
    assert ev({"@lt": "$.pair"}, {"pair": [1, 2]}) is True


# ---------------------------------------------------------------------------------------------
# @add @sub @mul @div


@pytest.mark.parametrize(
    ("op", "a", "b", "expected"),
    [("@add", 1, 2, 3), ("@sub", 1, 2, -1), ("@mul", 3, 4, 12), ("@add", "1", 2, 3), ("@mul", "2", "3", 6),
     ("@sub", "$.n", "$.s", -4), ("@add", -5, 5, 0)],
)
def test_arithmetic_on_two_int_like_values_is_an_int(op: str, a: Any, b: Any, expected: int) -> None:
    result = ev({op: [a, b]})
    assert result == expected
    assert type(result) is int


@pytest.mark.parametrize(
    ("op", "a", "b", "expected"),
    [("@add", 1, 2.5, 3.5), ("@sub", 1, 2.5, -1.5), ("@mul", "2", "3.5", 7.0), ("@add", 1.0, 1.0, 2.0),
     ("@mul", "$.f", 2, 5.0), ("@add", "1", "2.5", 3.5), ("@sub", 2.5, 0.5, 2.0)],
)
def test_arithmetic_with_a_float_like_value_is_a_float(op: str, a: Any, b: Any, expected: float) -> None:
    result = ev({op: [a, b]})
    assert result == expected
    assert type(result) is float


@pytest.mark.parametrize("op", ["@add", "@sub", "@mul"])
@pytest.mark.parametrize(("a", "b"), [(1, True), (None, 1), (1, "$.missing"), ("x", 1), ([1], 1), ({}, 2)])
def test_arithmetic_refuses_values_that_are_not_numbers(op: str, a: Any, b: Any) -> None:
    fails({op: [a, b]}, op)


@pytest.mark.parametrize("op", ["@add", "@sub", "@mul", "@div"])
def test_arithmetic_needs_exactly_two_arguments(op: str) -> None:
    fails({op: [1]}, op)
    fails({op: 5}, op)
    fails({op: "$.ints"}, op)
    with pytest.raises(ExpressionError, match=op):
        compile_expression({op: [1, 2, 3]})


INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)


@pytest.mark.parametrize(
    "expr",
    [{"@add": [INT64_MAX, 1]}, {"@sub": [INT64_MIN, 1]}, {"@mul": [INT64_MAX, 2]}, {"@mul": [INT64_MIN, -1]},
     {"@sum": [INT64_MAX, 1]}, {"@add": ["9223372036854775807", "1"]}],
)
def test_int_arithmetic_that_leaves_the_int64_range_is_an_error(expr: dict[str, Any]) -> None:
    op = next(iter(expr))
    fails(expr, op)


def test_int_arithmetic_up_to_the_int64_bounds_is_exact() -> None:
    assert ev({"@add": [INT64_MAX - 1, 1]}) == INT64_MAX
    assert ev({"@sub": [INT64_MIN + 1, 1]}) == INT64_MIN
    assert ev({"@sum": [INT64_MAX, 1, -1]}) == INT64_MAX


def test_arithmetic_on_a_path_to_a_pair_combines_its_elements() -> None:
    assert ev({"@add": "$.pair"}, {"pair": [1, 2]}) == 3


def test_float_overflow_in_add_sub_or_mul_is_an_error() -> None:
    fails({"@add": [1e308, 1e308]}, "@add")
    fails({"@sub": [-1e308, 1e308]}, "@sub")
    fails({"@mul": [1e200, 1e200]}, "@mul")


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [(4, 2, 2.0), (7, 2, 3.5), (1, 3, 1 / 3), ("7", "2", 3.5), (2.5, 0.5, 5.0), (-3, 2, -1.5),
     ("$.n", "$.f", 1.2)],
)
def test_div_is_always_a_float(a: Any, b: Any, expected: float) -> None:
    result = ev({"@div": [a, b]})
    assert result == pytest.approx(expected)
    assert type(result) is float


@pytest.mark.parametrize("zero", [0, 0.0, "0", "0.0", -0.0])
def test_div_by_zero_is_an_expression_error(zero: Any) -> None:
    fails({"@div": [1, zero]}, "@div")
    fails({"@div": [0, zero]}, "@div")


@pytest.mark.parametrize(("a", "b"), [(True, 2), (1, None), ("x", 1), (1, [2]), ("$.missing", 1)])
def test_div_refuses_values_that_are_not_numbers(a: Any, b: Any) -> None:
    fails({"@div": [a, b]}, "@div")


def test_div_overflowing_the_float_range_is_an_error() -> None:
    fails({"@div": [1e308, 1e-308]}, "@div")


# ---------------------------------------------------------------------------------------------
# @abs @ceil @floor


@pytest.mark.parametrize(
    ("op", "arg", "expected"),
    [("@abs", -3, 3.0), ("@abs", 2.5, 2.5), ("@abs", "-2.5", 2.5), ("@abs", 0, 0.0),
     ("@ceil", 1.2, 2.0), ("@ceil", -1.2, -1.0), ("@ceil", 3, 3.0), ("@ceil", "0.1", 1.0),
     ("@floor", 1.8, 1.0), ("@floor", -1.2, -2.0), ("@floor", 3, 3.0), ("@floor", "$.f", 2.0)],
)
def test_abs_ceil_and_floor_always_give_a_float(op: str, arg: Any, expected: float) -> None:
    result = ev({op: arg})
    assert result == expected
    assert type(result) is float


@pytest.mark.parametrize("op", ["@abs", "@ceil", "@floor"])
@pytest.mark.parametrize("arg", [True, None, "$.missing", "abc", [1], {"a": 1}])
def test_abs_ceil_and_floor_refuse_values_that_are_not_numbers(op: str, arg: Any) -> None:
    fails({op: arg}, op)


@pytest.mark.parametrize("op", ["@ceil", "@floor"])
@pytest.mark.parametrize(
    ("arg", "doc"),
    [("1e400", {}), ("$.x", {"x": float("inf")}), ("$.x", {"x": float("-inf")}),
     ("$.x", {"x": float("nan")})],
    ids=["numeric-string-1e400", "yaml-inf", "yaml-minus-inf", "yaml-nan"],
)
def test_ceil_and_floor_of_a_non_finite_number_are_expression_errors(op: str, arg: str, doc: Any) -> None:
    fails({op: arg}, op, doc)


def test_ceil_of_a_division_that_gives_nan_is_an_expression_error() -> None:
    with pytest.raises(ExpressionError):
        ev({"@ceil": {"@div": ["1e400", "1e400"]}})


# ---------------------------------------------------------------------------------------------
# @sum @min @max


@pytest.mark.parametrize(
    ("arg", "expected"),
    [("$.ints", 6), ("$.numstrs", 6), ([1, "2", 3], 6), (["$.ints"], 6), ([], 0), ("$.empty", 0), ([5], 5)],
)
def test_sum_of_int_like_values_is_an_int(arg: Any, expected: int) -> None:
    result = ev({"@sum": arg})
    assert result == expected
    assert type(result) is int


@pytest.mark.parametrize(
    ("arg", "expected"), [([1, 2.5], 3.5), ("$.floats", -0.5), (["1.5", 1], 2.5), ([1.0], 1.0)],
)
def test_sum_with_a_float_like_value_is_a_float(arg: Any, expected: float) -> None:
    result = ev({"@sum": arg})
    assert result == expected
    assert type(result) is float


@pytest.mark.parametrize("op", ["@sum", "@min", "@max"])
@pytest.mark.parametrize("arg", [5, "$.map", "$.missing", [1, None], [1, "x"], [True], "$.nested", "$.strs"])
def test_sum_min_and_max_refuse_anything_but_a_list_of_numbers(op: str, arg: Any) -> None:
    fails({op: arg}, op)


def test_max_of_a_mixed_int_and_float_list_is_a_float() -> None:
    result = ev({"@max": [12, 24, -36.1]})
    assert result == 24.0
    assert type(result) is float


def test_min_of_a_mixed_int_and_float_list_is_a_float() -> None:
    result = ev({"@min": "$.mixed"})
    assert result == -36.1
    result = ev({"@min": [1, 2.0]})
    assert result == 1.0
    assert type(result) is float


@pytest.mark.parametrize(("op", "expected"), [("@min", 1), ("@max", 3)])
def test_min_and_max_of_ints_are_ints(op: str, expected: int) -> None:
    for arg in ("$.ints", "$.numstrs", ["3", 2, "1", 1]):
        result = ev({op: arg})
        assert result == expected
        assert type(result) is int


@pytest.mark.parametrize("op", ["@min", "@max"])
def test_min_and_max_of_an_empty_list_are_null(op: str) -> None:
    assert ev({op: []}) is None
    assert ev({op: "$.empty"}) is None


def test_sum_overflowing_the_float_range_is_an_error() -> None:
    fails({"@sum": [1e308, 1e308]}, "@sum")


# ---------------------------------------------------------------------------------------------
# @rnd


def test_rnd_gives_ints_from_min_up_to_but_excluding_max() -> None:
    compiled = compile_expression({"@rnd": [0, 3]})
    seen = {compiled.evaluate({}) for _ in range(300)}
    assert seen == {0, 1, 2}
    assert all(type(v) is int for v in seen)


def test_rnd_with_a_range_of_one_always_gives_min() -> None:
    assert {ev({"@rnd": [5, 6]}) for _ in range(20)} == {5}


def test_rnd_accepts_negative_bounds_and_numeric_strings() -> None:
    compiled = compile_expression({"@rnd": ["-3", "$.top"]})
    assert {compiled.evaluate({"top": -1}) for _ in range(200)} <= {-3, -2}


@pytest.mark.parametrize("bounds", [[3, 3], [5, 2], ["4", "4"]])
def test_rnd_with_max_not_above_min_is_an_error(bounds: list[Any]) -> None:
    fails({"@rnd": bounds}, "@rnd")


@pytest.mark.parametrize("arg", [[0, 2.5], [0.0, 3], [None, 3], ["a", 3], [1], 5])
def test_rnd_needs_two_integers(arg: Any) -> None:
    fails({"@rnd": arg}, "@rnd")


# ---------------------------------------------------------------------------------------------
# @len


@pytest.mark.parametrize(
    ("arg", "expected"), [("$.ints", 3), ("$.empty", 0), ([], 0), ([1, 2], 2), (["$.objs"], 3)],
)
def test_len_counts_the_elements_of_a_list(arg: Any, expected: int) -> None:
    assert ev({"@len": arg}) == expected


@pytest.mark.parametrize("arg", ["$.map", "$.word", "$.missing", None, 3, "abc"])
def test_len_refuses_maps_strings_null_and_scalars(arg: Any) -> None:
    fails({"@len": arg}, "@len")


def test_len_of_a_nested_list_literal_counts_its_first_element() -> None:
    assert ev({"@len": [[1, 2, 3], [4]]}) == 3


# ---------------------------------------------------------------------------------------------
# @in


@pytest.mark.parametrize(
    ("elem", "items", "expected"),
    [(1, "$.ints", True), (4, "$.ints", False), ("a", "$.strs", True), (1, [1.0, 2.0], False),
     ("1", [1], False), (True, [1], False), ({"name": "a", "v": 1}, "$.objs", True),
     ({"name": "a"}, "$.objs", False), ([1, 2], "$.nested", True), (1, [], False), (1, "$.empty", False)],
)
def test_in_tests_membership_with_strict_deep_equality(elem: Any, items: Any, expected: bool) -> None:
    assert ev({"@in": [elem, items]}) is expected


def test_in_matches_a_null_element_in_a_list_holding_null() -> None:
    assert ev({"@in": [None, [None]]}) is True
    assert ev({"@in": ["$.missing", [1, None]]}) is True


def test_in_does_not_match_null_in_a_list_without_null() -> None:
    assert ev({"@in": [None, [1, 2]]}) is False


def test_in_does_not_match_a_value_against_a_null_element() -> None:
    assert ev({"@in": [0, [None]]}) is False
    assert ev({"@in": [False, [None]]}) is False


def test_in_with_a_list_literal_as_the_list_applies_unwrapping_to_that_list() -> None:
    assert ev({"@in": [1, [[1, 2], [3]]]}) is True
    assert ev({"@in": [3, [[1, 2], [3]]]}) is False


@pytest.mark.parametrize("items", ["$.map", "$.word", None, "$.missing", 5])
def test_in_refuses_a_second_argument_that_is_not_a_list(items: Any) -> None:
    fails({"@in": [1, items]}, "@in")


def test_in_needs_exactly_two_arguments() -> None:
    fails({"@in": [1]}, "@in")
    with pytest.raises(ExpressionError, match="@in"):
        compile_expression({"@in": [1, [1], 2]})


# ---------------------------------------------------------------------------------------------
# @range


@pytest.mark.parametrize(
    ("args", "expected"),
    [([0, 3], [0, 1, 2]), ([2, 5], [2, 3, 4]), (["1", "4"], [1, 2, 3]), ([-2, 1], [-2, -1, 0]),
     ([3, 3], []), ([4, 1], []), (["$.n", 5], [3, 4])],
)
def test_range_lists_the_ints_from_start_up_to_but_excluding_end(args: list[Any], expected: Any) -> None:
    assert ev({"@range": args}) == expected


@pytest.mark.parametrize("args", [[1.0, 3], [0, 2.5], [None, 3], ["a", 2], [0, "1.5"], [True, 2]])
def test_range_needs_integer_bounds(args: list[Any]) -> None:
    fails({"@range": args}, "@range")


def test_range_of_an_enormous_span_is_an_error_instead_of_exhausting_memory() -> None:
    fails({"@range": [0, 10**12]}, "@range")


def test_range_needs_exactly_two_arguments() -> None:
    fails({"@range": 3}, "@range")
    fails({"@range": [3]}, "@range")


# ---------------------------------------------------------------------------------------------
# @concat


@pytest.mark.parametrize(
    ("arg", "expected"),
    [(["a", "b", "c"], "abc"), (["$.kind", "-", "$.n"], "Pod-3"), ([2.0], "2"), ([1.5, "x"], "1.5x"),
     ([1e21], "1e+21"), ([], ""), ("$.strs", "ba"), (["$.strs"], "ba"), (["", "a", ""], "a"),
     ([-7, 0], "-70")],
)
def test_concat_joins_strings_and_formatted_numbers(arg: Any, expected: str) -> None:
    assert ev({"@concat": arg}) == expected


@pytest.mark.parametrize("arg", [[True], ["a", None], ["a", "$.missing"], [{"a": 1}], ["x", [1]]])
def test_concat_refuses_bools_null_and_containers(arg: Any) -> None:
    fails({"@concat": arg}, "@concat")


@pytest.mark.parametrize("arg", ["abc", "$.map", None, 5])
def test_concat_needs_a_list(arg: Any) -> None:
    fails({"@concat": arg}, "@concat")


# ---------------------------------------------------------------------------------------------
# @map @filter @any @all @none


def test_map_applies_the_expression_to_each_element() -> None:
    assert ev({"@map": [{"@mul": ["$$", 2]}, "$.ints"]}) == [6, 2, 4]


def test_map_over_an_empty_list_is_empty() -> None:
    assert ev({"@map": [FAILS_WHEN_EVALUATED, "$.empty"]}) == []


def test_map_over_a_nested_list_literal_iterates_over_its_first_element() -> None:
    assert ev({"@map": ["$$", [[1, 2], [3]]]}) == [1, 2]


def test_map_errors_in_the_expression_propagate() -> None:
    fails({"@map": [{"@not": "$$"}, [True, 1]]}, "@not")


@pytest.mark.parametrize("op", ["@map", "@filter", "@any", "@all", "@none"])
@pytest.mark.parametrize("items", ["$.map", "$.word", "$.missing", 5])
def test_list_operators_refuse_a_second_argument_that_is_not_a_list(op: str, items: Any) -> None:
    fails({op: [True, items]}, op)


@pytest.mark.parametrize("op", ["@map", "@filter", "@any", "@all", "@none"])
@pytest.mark.parametrize("arg", [["$$"], ["$$", [1], [2]], "$$", []])
def test_list_operators_need_exactly_two_arguments_at_compile_time(op: str, arg: Any) -> None:
    with pytest.raises(ExpressionError, match=op):
        compile_expression({op: arg})


def test_filter_keeps_the_elements_whose_predicate_is_true() -> None:
    assert ev({"@filter": [{"@gt": ["$$.v", 1]}, "$.objs"]}) == DOC["objs"][1:]


def test_filter_keeps_the_order_and_can_keep_nothing_or_everything() -> None:
    assert ev({"@filter": [True, "$.ints"]}) == [3, 1, 2]
    assert ev({"@filter": [False, "$.ints"]}) == []


@pytest.mark.parametrize("op", ["@filter", "@any", "@all", "@none"])
@pytest.mark.parametrize("predicate", ["$$", 1, None, "yes"])
def test_predicates_of_list_operators_must_be_booleans(op: str, predicate: Any) -> None:
    fails({op: [predicate, [1, 2]]}, op)


@pytest.mark.parametrize(
    ("items", "expected"), [([1, 2, 3], True), ([1, 1], False), ([], False)],
)
def test_any_is_true_when_some_element_satisfies_the_predicate(items: list[int], expected: bool) -> None:
    assert ev({"@any": [{"@gt": ["$$", 1]}, "$.items"]}, {"items": items}) is expected


@pytest.mark.parametrize(
    ("items", "expected"), [([2, 3], True), ([2, 1], False), ([], True)],
)
def test_all_is_true_when_every_element_satisfies_the_predicate(items: list[int], expected: bool) -> None:
    assert ev({"@all": [{"@gt": ["$$", 1]}, "$.items"]}, {"items": items}) is expected


@pytest.mark.parametrize(
    ("items", "expected"), [([0, 1], True), ([0, 2], False), ([5, 6], False), ([], True)],
)
def test_none_is_true_when_no_element_satisfies_the_predicate(items: list[int], expected: bool) -> None:
    assert ev({"@none": [{"@gt": ["$$", 1]}, "$.items"]}, {"items": items}) is expected


def test_any_stops_at_the_first_element_that_satisfies_the_predicate() -> None:
    assert ev({"@any": ["$$", [True, "not a bool"]]}) is True


def test_all_stops_at_the_first_element_that_fails_the_predicate() -> None:
    assert ev({"@all": ["$$", [False, "not a bool"]]}) is False


def test_none_stops_at_the_first_element_that_satisfies_the_predicate() -> None:
    assert ev({"@none": ["$$", [True, "not a bool"]]}) is False


# ---------------------------------------------------------------------------------------------
# @hash


@pytest.mark.parametrize(
    ("arg", "expected"),
    [({"a": 1, "b": {"c": 2}, "x": [1, 2, 3, 4, 5]}, "dorzm8"), ("abc", "dyo0h5"), (None, "3alqt8")],
)
def test_hash_matches_the_go_figures(arg: Any, expected: str) -> None:
    assert ev({"@hash": arg}) == expected


def test_hash_of_a_path_hashes_the_value_at_the_path() -> None:
    doc = {"v": {"a": 1, "b": {"c": 2}, "x": [1, 2, 3, 4, 5]}}
    assert ev({"@hash": "$.v"}, doc) == "dorzm8"
    assert ev({"@hash": "$.missing"}, doc) == "3alqt8"


def test_hash_does_not_depend_on_key_order() -> None:
    assert ev({"@hash": {"x": [1, 2, 3, 4, 5], "b": {"c": 2}, "a": 1}}) == "dorzm8"


def test_hash_of_an_integral_float_equals_hash_of_the_int() -> None:
    assert ev({"@hash": 1.0}) == ev({"@hash": 1})


def test_hash_is_six_lowercase_base36_characters() -> None:
    for value in (0, 1.5, "", "<>&", [], {}, True, {"a": [None, {"b": "é"}]}):
        digest = ev({"@hash": {"@dict": {"v": value}}})
        assert len(digest) == 6
        assert set(digest) <= set("0123456789abcdefghijklmnopqrstuvwxyz")


def test_hash_tells_different_values_apart() -> None:
    assert len({ev({"@hash": v}) for v in ("abc", "abd", 1, "1", True, [1], {"a": 1})}) == 7


def test_hash_of_html_characters_uses_go_escaped_json() -> None:
    # md5('"\u003c\u003e\u0026"') in base 36, not md5('"<>&"')
    assert ev({"@hash": "<>&"}) == "b1eypt"


# ---------------------------------------------------------------------------------------------
# @selector


LABELS = {"app": "web", "tier": "front", "kubernetes.io/name": "x"}


def sel(selector: Any, labels: Any = None) -> Any:
    return ev({"@selector": [selector, "$.labels"]}, {"labels": LABELS if labels is None else labels})


@pytest.mark.parametrize(
    ("selector", "expected"),
    [({"matchLabels": {"app": "web"}}, True), ({"matchLabels": {"app": "web", "tier": "front"}}, True),
     ({"matchLabels": {"app": "db"}}, False), ({"matchLabels": {"missing": "web"}}, False),
     ({"matchLabels": {"kubernetes.io/name": "x"}}, True)],
)
def test_selector_match_labels_requires_every_label(selector: Any, expected: bool) -> None:
    assert sel(selector) is expected


@pytest.mark.parametrize(
    ("selector", "expected"),
    [({"app": "web"}, True), ({"app": "web", "tier": "back"}, False), ({"other": "x"}, False)],
)
def test_selector_without_match_keys_is_a_plain_match_labels_map(selector: Any, expected: bool) -> None:
    assert sel(selector) is expected


@pytest.mark.parametrize("selector", [{}, {"matchLabels": {}}, {"matchExpressions": []},
                                      {"matchLabels": None, "matchExpressions": None}])
def test_selector_that_is_empty_matches_everything(selector: Any) -> None:
    assert sel(selector) is True
    assert sel(selector, {}) is True


@pytest.mark.parametrize(
    ("operator", "values", "expected"),
    [("In", ["web", "db"], True), ("In", ["db"], False), ("NotIn", ["db"], True), ("NotIn", ["web"], False),
     ("Exists", None, True), ("DoesNotExist", None, False)],
)
def test_selector_match_expressions_on_a_present_key(
    operator: str, values: list[str] | None, expected: bool
) -> None:
    req: dict[str, Any] = {"key": "app", "operator": operator}
    if values is not None:
        req["values"] = values
    assert sel({"matchExpressions": [req]}) is expected


@pytest.mark.parametrize(
    ("operator", "values", "expected"),
    [("In", ["web"], False), ("NotIn", ["web"], True), ("Exists", None, False), ("DoesNotExist", None, True)],
)
def test_selector_match_expressions_on_an_absent_key(
    operator: str, values: list[str] | None, expected: bool
) -> None:
    req: dict[str, Any] = {"key": "zone", "operator": operator}
    if values is not None:
        req["values"] = values
    assert sel({"matchExpressions": [req]}) is expected


def test_selector_exists_accepts_an_empty_values_list() -> None:
    assert sel({"matchExpressions": [{"key": "app", "operator": "Exists", "values": []}]}) is True


def test_selector_needs_match_labels_and_every_expression_to_hold() -> None:
    selector = {"matchLabels": {"app": "web"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["front"]},
                                     {"key": "zone", "operator": "DoesNotExist"}]}
    assert sel(selector) is True
    assert sel({**selector, "matchLabels": {"app": "db"}}) is False
    assert sel(selector, {**LABELS, "zone": "a"}) is False


@pytest.mark.parametrize(("selector", "labels"), [(None, LABELS), ({"app": "web"}, None), (None, None)])
def test_selector_with_a_null_side_is_false(selector: Any, labels: Any) -> None:
    doc = {"s": selector, "l": labels}
    assert ev({"@selector": ["$.s", "$.l"]}, doc) is False


def test_selector_with_a_missing_side_is_false() -> None:
    assert ev({"@selector": ["$.nope", "$.labels"]}) is False


def test_selector_stringifies_label_values() -> None:
    assert sel({"n": 1}, {"n": "1"}) is True
    assert sel({"n": "1"}, {"n": 1}) is True
    assert sel({"b": True}, {"b": "true"}) is True
    assert sel({"f": 1.5}, {"f": "1.5"}) is True
    assert sel({"matchExpressions": [{"key": "n", "operator": "In", "values": [1, 2]}]}, {"n": "2"}) is True


def test_selector_accepts_the_empty_string_as_a_label_value() -> None:
    assert sel({"a": ""}, {"a": ""}) is True
    assert sel({"a": ""}, {"a": "x"}) is False


@pytest.mark.parametrize(
    "selector",
    [{"matchExpressions": [{"key": "app", "operator": "Bogus", "values": ["web"]}]},
     {"matchExpressions": [{"key": "app", "values": ["web"]}]},
     {"matchExpressions": [{"key": "app", "operator": "in", "values": ["web"]}]}],
)
def test_selector_with_an_unknown_operator_is_an_error(selector: Any) -> None:
    fails({"@selector": [selector, {"app": "web"}]}, "@selector")


@pytest.mark.parametrize(
    "req",
    [{"key": "app", "operator": "In"}, {"key": "app", "operator": "In", "values": []},
     {"key": "app", "operator": "NotIn"}, {"key": "app", "operator": "Exists", "values": ["web"]},
     {"key": "app", "operator": "DoesNotExist", "values": ["web"]},
     {"key": "app", "operator": "In", "values": "web"}],
)
def test_selector_with_values_that_do_not_fit_the_operator_is_an_error(req: Any) -> None:
    fails({"@selector": [{"matchExpressions": [req]}, {"app": "web"}]}, "@selector")


@pytest.mark.parametrize(
    "key", ["a b", "", "-a", "a-", "a" * 64, "UPPER.example.com/x", "a/b/c", "example.com/", "ex mple.io/a"],
)
def test_selector_with_an_invalid_label_key_is_an_error(key: str) -> None:
    fails({"@selector": [{key: "x"}, {"app": "web"}]}, "@selector")
    fails({"@selector": [{}, {key: "x"}]}, "@selector")
    fails({"@selector": [{"matchExpressions": [{"key": key, "operator": "Exists"}]}, {}]}, "@selector")


@pytest.mark.parametrize("key", ["a", "a.b_c-d", "A9", "example.com/name", "a" * 63, "k8s.io/a.b"])
def test_selector_accepts_valid_label_keys(key: str) -> None:
    assert sel({key: "v"}, {key: "v"}) is True


@pytest.mark.parametrize("value", ["a b", "-a", "a-", "x" * 64, "a/b", "é"])
def test_selector_with_an_invalid_label_value_is_an_error(value: str) -> None:
    fails({"@selector": [{"app": value}, {"app": "web"}]}, "@selector")
    fails({"@selector": [{}, {"app": value}]}, "@selector")
    fails({"@selector": [{"matchExpressions": [{"key": "app", "operator": "In", "values": [value]}]},
                         {"app": "web"}]}, "@selector")


@pytest.mark.parametrize("value", [[1], {"a": 1}, None])
def test_selector_with_a_label_value_that_is_not_a_scalar_is_an_error(value: Any) -> None:
    fails({"@selector": [{}, {"$.app": value}]}, "@selector")


@pytest.mark.parametrize(("selector", "labels"), [("app=web", {"app": "web"}), ({"app": "web"}, ["app"]),
                                                  (5, {}), ({}, "x")])
def test_selector_sides_must_be_maps(selector: Any, labels: Any) -> None:
    fails({"@selector": ["$.s", "$.l"]}, "@selector", {"s": selector, "l": labels})


@pytest.mark.parametrize(
    "selector",
    [{"matchLabels": ["app"]}, {"matchExpressions": {"key": "app"}}, {"matchExpressions": ["app"]}],
)
def test_selector_with_malformed_match_fields_is_an_error(selector: Any) -> None:
    fails({"@selector": [selector, {"app": "web"}]}, "@selector")


def test_selector_needs_exactly_two_arguments() -> None:
    fails({"@selector": [{"app": "web"}]}, "@selector")


def test_selector_with_a_label_key_that_has_an_empty_prefix_is_an_error() -> None:
    fails({"@selector": [{"/a": "x"}, {"/a": "x"}]}, "@selector")


def test_selector_stringifies_float_label_values_as_go_percent_v() -> None:
    assert sel({"v": "1e-05"}, {"v": 0.00001}) is True


def test_selector_float_label_value_of_a_million_is_invalid_as_go_prints_it_1e_plus_06() -> None:
    # Go's %v is strconv 'g' with shortest digits: exponent form from 1e6 on, and '+' is not valid in a label
    fails({"@selector": [{"v": 1000000.0}, {"v": "1000000"}]}, "@selector")


# ---------------------------------------------------------------------------------------------
# Errors that are not ExpressionErrors must not escape


def _huge_product(levels: int) -> Any:
    expr: Any = 2**63 - 1
    for _ in range(levels):
        expr = {"@mul": [expr, expr]}
    return expr


def test_float_of_an_int_product_beyond_the_float_range_is_an_expression_error() -> None:
    with pytest.raises(ExpressionError):
        ev({"@float": _huge_product(5)})


def test_string_of_an_enormous_int_product_is_an_expression_error() -> None:
    with pytest.raises(ExpressionError):
        ev({"@string": _huge_product(8)})
