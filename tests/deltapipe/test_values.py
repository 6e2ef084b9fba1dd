"""values.py: strict equality, Go's float and JSON text, the total order for gathered values, tree copies."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deltapipe import ExpressionError
from deltapipe.values import copy_tree, format_float, go_json, sort_key, strict_equal

# ---------------------------------------------------------------------------------------------
# strict_equal


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (1, 1),
        (1.5, 1.5),
        ("a", "a"),
        (True, True),
        (None, None),
        ([], []),
        ({}, {}),
        ({"x": [1]}, {"x": [1]}),
        ({"a": 1, "b": 2}, {"b": 2, "a": 1}),
        ([{"a": [None, "s"]}], [{"a": [None, "s"]}]),
    ],
)
def test_strict_equal_holds_for_values_of_the_same_type_and_content(a: Any, b: Any) -> None:
    assert strict_equal(a, b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (1, 1.0),
        (1, True),
        (0, False),
        (1.0, True),
        ("1", 1),
        (None, False),
        ([1], [1.0]),
        ({"x": [1]}, {"x": [1.0]}),
        ({"a": 1}, {"a": 1, "b": 2}),
        ({"a": 1}, {"b": 1}),
        ([1, 2], [2, 1]),
        ([1], [1, 1]),
        ({"a": True}, {"a": 1}),
    ],
)
def test_strict_equal_tells_apart_values_python_would_call_equal_or_that_differ(a: Any, b: Any) -> None:
    assert not strict_equal(a, b)
    assert not strict_equal(b, a)


# ---------------------------------------------------------------------------------------------
# format_float (Go encoding/json float text)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.0, "1"),
        (100.0, "100"),
        (0.0, "0"),
        (-0.0, "-0"),
        (1.5, "1.5"),
        (0.1, "0.1"),
        (-2.25, "-2.25"),
        (1e16, "10000000000000000"),
        (1e20, "100000000000000000000"),
        (123456789012345680000.0, "123456789012345680000"),
        (1e21, "1e+21"),
        (1.5e300, "1.5e+300"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (1e-6, "0.000001"),
        (1.5e-6, "0.0000015"),
        (1e-7, "1e-7"),
        (-2.5e-9, "-2.5e-9"),
        (5e-324, "5e-324"),
    ],
)
def test_format_float_writes_floats_as_go_encoding_json_does(value: float, text: str) -> None:
    assert format_float(value) == text


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
def test_format_float_refuses_values_json_cannot_represent(value: float) -> None:
    with pytest.raises(ExpressionError):
        format_float(value)


@settings(max_examples=300, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_format_float_text_reads_back_as_the_same_float(value: float) -> None:
    assert float(format_float(value)) == value


# ---------------------------------------------------------------------------------------------
# go_json (canonical text: sorted keys, compact, Go's escaping)


def test_go_json_sorts_keys_at_every_level_and_writes_compactly() -> None:
    value = {"b": {"z": 1, "a": [1, {"d": None, "c": True}]}, "a": "x"}
    assert go_json(value) == '{"a":"x","b":{"a":[1,{"c":true,"d":null}],"z":1}}'


def test_go_json_escapes_html_characters_like_go() -> None:
    assert go_json("<a & b>") == '"\\u003ca \\u0026 b\\u003e"'


def test_go_json_escapes_line_and_paragraph_separators_like_go() -> None:
    assert go_json("\u2028\u2029") == '"\\u2028\\u2029"'


def test_go_json_keeps_non_ascii_text_unescaped() -> None:
    assert go_json("é☃") == '"é☃"'


def test_go_json_escapes_control_characters_and_quotes() -> None:
    assert go_json('a"b\\c\n\t\x01') == '"a\\"b\\\\c\\n\\t\\u0001"'


def test_go_json_escapes_html_characters_in_map_keys_too() -> None:
    assert go_json({"<k>": 1}) == '{"\\u003ck\\u003e":1}'


def test_go_json_writes_integral_floats_without_a_fraction() -> None:
    assert go_json([1, 1.0, 2.5, 1e21]) == "[1,1,2.5,1e+21]"


def test_go_json_writes_scalars_as_json_literals() -> None:
    assert [go_json(v) for v in (None, True, False, 0, -7, "")] == ["null", "true", "false", "0", "-7", '""']


def test_go_json_refuses_values_that_are_not_json() -> None:
    with pytest.raises(ExpressionError):
        go_json({1, 2})
    with pytest.raises(ExpressionError):
        go_json(math.inf)


def test_go_json_sorts_non_string_keys_by_their_text_as_go_does() -> None:
    assert go_json({10: "a", 9: "b"}) == '{"10":"a","9":"b"}'


def test_go_json_encodes_a_map_whose_keys_mix_ints_and_strings() -> None:
    assert go_json({1: "a", "b": 2}) == '{"1":"a","b":2}'


def test_go_json_writes_bool_map_keys_as_true_and_false() -> None:
    assert go_json({True: 1, "a": 2}) == '{"a":2,"true":1}'


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=4), children, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(json_values)
def test_go_json_is_valid_json_that_decodes_to_the_same_value(value: Any) -> None:
    text = go_json(value)
    assert _loose(json.loads(text)) == _loose(value)


def _loose(value: Any) -> Any:
    """value with every number as a float (go_json writes 1.0 as 1, which decodes as an int)."""
    if type(value) is dict:
        return {k: _loose(v) for k, v in value.items()}
    if type(value) is list:
        return [_loose(v) for v in value]
    if type(value) in (int, float):
        return float(value)
    return value


# ---------------------------------------------------------------------------------------------
# sort_key


def test_sort_key_orders_bools_then_numbers_then_strings_then_containers() -> None:
    values = [{"a": 1}, "b", [1], 2, True, "a", 1.5, False, 1]
    assert sorted(values, key=sort_key) == [False, True, 1, 1.5, 2, "a", "b", [1], {"a": 1}]


def test_sort_key_compares_ints_and_floats_by_value_with_the_int_first_on_a_tie() -> None:
    ordered = sorted([2.5, 1.0, 3, 1, -1.5], key=sort_key)
    assert ordered == [-1.5, 1, 1.0, 2.5, 3]
    assert [type(v) for v in ordered[1:3]] == [int, float]


def test_sort_key_orders_containers_by_their_canonical_json_text() -> None:
    values = [{"b": 1}, {"a": 2}, [2], [1, 5]]
    assert sorted(values, key=sort_key) == [[1, 5], [2], {"a": 2}, {"b": 1}]


def test_sort_key_gives_maps_equal_keys_regardless_of_key_order() -> None:
    assert sort_key({"a": 1, "b": 2}) == sort_key({"b": 2, "a": 1})


@settings(max_examples=150, deadline=None)
@given(st.lists(json_values, max_size=8))
def test_sort_key_is_a_total_order_over_any_json_values(values: list[Any]) -> None:
    keys = [sort_key(v) for v in values]  # sorting raises TypeError if two keys are not comparable
    once = sorted(keys)
    assert once == sorted(reversed(keys))
    assert all(a <= b for a, b in zip(once, once[1:], strict=False))


# ---------------------------------------------------------------------------------------------
# copy_tree


def test_copy_tree_gives_an_equal_tree() -> None:
    tree = {"a": [1, {"b": [2.5, None, "s"]}], "c": {"d": True}}
    assert strict_equal(copy_tree(tree), tree)


def test_copy_tree_copies_are_independent_of_the_original_at_every_depth() -> None:
    tree = {"a": [1, {"b": [2]}], "c": {"d": {"e": 1}}}
    copy = copy_tree(tree)
    copy["a"][1]["b"].append(3)
    copy["a"].append("x")
    copy["c"]["d"]["e"] = 2
    copy["new"] = 1
    assert tree == {"a": [1, {"b": [2]}], "c": {"d": {"e": 1}}}


def test_copy_tree_changes_to_the_original_do_not_reach_the_copy() -> None:
    tree = {"a": [{"b": 1}]}
    copy = copy_tree(tree)
    tree["a"][0]["b"] = 2
    assert copy == {"a": [{"b": 1}]}


def test_copy_tree_returns_scalars_as_they_are() -> None:
    for value in (None, True, 3, 2.5, "s"):
        assert copy_tree(value) is value


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_copy_tree_shares_no_container_with_the_original(value: Any) -> None:
    copy = copy_tree(value)
    assert go_json(copy) == go_json(value)
    assert not _containers(value) & _containers(copy)


def _containers(value: Any) -> set[int]:
    found: set[int] = set()
    stack = [value]
    while stack:
        v = stack.pop()
        if type(v) in (dict, list):
            found.add(id(v))
            stack.extend(v.values() if type(v) is dict else v)
    return found
