"""Properties of the expression language over random documents and random expression trees.

Random trees are built from every registered operator (`deltapipe.operators.names()`) with random
arguments, paths (well-formed and arbitrary), setter keys and literals. Numbers include the edges
(int64 bounds, the largest and smallest floats, numeric strings beyond the float range); only
`@range` is kept to small literal or path bounds, so that no example builds a huge list.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deltapipe import DeltapipeError, Expression, compile_expression
from deltapipe.operators import names
from deltapipe.values import go_json, strict_equal

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def clock() -> float:
    return 0.0


# ---------------------------------------------------------------------------------------------
# Documents

TEXTS = ["", "a", "x", "web", "1", "-3", "2.5", "1e3", "true", "null", "$.a", "$$", "@now", "a b", "<&>",
         "1e400", "-1e400", "9223372036854775807", "9223372036854775808", "1e-400"]
KEYS = ["a", "b", "x", "name", "items", "spec", "metadata", "labels", "app", "$.a", "@now", "@eq"]

ints = st.integers(-1000, 1000) | st.sampled_from([2**63 - 1, -(2**63), 2**62, 2**32])
floats = st.floats(allow_nan=False, allow_infinity=False)
texts = st.sampled_from(TEXTS) | st.text(max_size=5)
scalars = st.none() | st.booleans() | ints | floats | texts

documents = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.sampled_from(KEYS), children, max_size=4)
    ),
    max_leaves=12,
)
subjects = st.dictionaries(st.sampled_from(KEYS), documents, max_size=5)

# ---------------------------------------------------------------------------------------------
# Expressions

PATHS = [
    "$", "$.", "$$", "$$.", "$.a", "$.a.b", "$.spec.items", "$.items[0]", "$.items[-1]", "$.items[1:3]",
    "$.items[*]", "$.*", "$..name", "$.items[0,1]", "$['a']", '$["metadata"]["labels"]["app"]',
    "$.items[?(@.name == 'x')]", "$.items[?(@.a > 1 && @.b)]", "$.items[?(@.name in ['a','b'])]",
    "$.items[?(@.name =~ /^w/)]", "$$.a", "$$.name", "$$[0]", "$$.items[*].a", "$.missing.deeper",
]
SETTER_KEYS = [
    "a", "b.c", "x[0]", "$.", "$.a", "$.a.b", "$.a[2]", "$.items[0].name", "$.items[*].x", "$.a.*",
    "$['k.j']", "$.items[-1]", "$.a[0,1]", "$.items[?(@.x == 1)].y", "$$.a", "$", "@eq", "",
]

paths = st.sampled_from(PATHS) | st.text(alphabet="$.[]()*?@'=<>!&|ab01-,: ~", max_size=12).map("$".__add__)
literals = st.none() | st.booleans() | ints | floats | st.sampled_from(TEXTS)
leaves = literals | paths
setter_keys = st.sampled_from(SETTER_KEYS) | st.sampled_from(KEYS) | paths


def expressions(operators: list[str]) -> st.SearchStrategy[Any]:
    """Random expression trees over `operators` (plus an unknown one), nested list and map literals."""
    bounded = st.integers(-20, 20) | st.sampled_from(["5", "-2", "1.5", "x", None])

    def extend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        arguments = children | st.lists(children, max_size=4)
        operator = st.builds(lambda op, arg: {op: arg}, st.sampled_from([*operators, "@bogus"]), arguments)
        ranges = st.builds(lambda lo, hi: {"@range": [lo, hi]}, bounded, bounded)
        switch = st.builds(
            lambda cases: {"@switch": cases},
            st.lists(st.lists(children, min_size=2, max_size=2), min_size=1, max_size=3),
        )
        maps = st.dictionaries(setter_keys, children, max_size=3)
        return operator | ranges | switch | maps | st.lists(children, max_size=4)

    return st.recursive(leaves, extend, max_leaves=12)


USABLE = [op for op in names() if op != "@range"]  # @range only with small bounds (see `ranges`)
DETERMINISTIC = [op for op in USABLE if op != "@rnd"]


def run(expr: Any, subject: Any) -> tuple[str, Any]:
    """('ok', value) or ('error', exception type name); anything but a DeltapipeError escapes."""
    try:
        compiled = compile_expression(expr, clock=clock)
    except DeltapipeError as err:
        return "compile-error", type(err).__name__
    try:
        return "ok", compiled.evaluate(subject)
    except DeltapipeError as err:
        return "error", type(err).__name__


# ---------------------------------------------------------------------------------------------
# Properties


@SETTINGS
@given(expressions(USABLE), subjects | documents)
def test_random_expressions_raise_only_deltapipe_errors_and_give_json_values(expr: Any, subject: Any) -> None:
    outcome, value = run(expr, subject)  # any other exception fails the test
    if outcome == "ok":
        go_json(value)  # raises for anything but JSON: NaN, infinities, tuples, objects


@SETTINGS
@given(expressions(USABLE), subjects)
def test_evaluation_never_mutates_the_subject(expr: Any, subject: Any) -> None:
    before = copy.deepcopy(subject)
    run(expr, subject)
    assert strict_equal(subject, before)


@SETTINGS
@given(expressions(DETERMINISTIC), subjects)
def test_compiling_once_and_evaluating_twice_gives_equal_results(expr: Any, subject: Any) -> None:
    try:
        compiled = compile_expression(expr, clock=clock)
    except DeltapipeError:
        return
    first = outcome(compiled, subject)
    kept = copy.deepcopy(first)
    second = outcome(compiled, subject)
    assert first[0] == second[0]
    assert strict_equal(first[1], second[1])
    assert strict_equal(first[1], kept[1])  # the second evaluation did not change the first result


def outcome(compiled: Expression, subject: Any) -> tuple[str, Any]:
    try:
        return "ok", compiled.evaluate(subject)
    except DeltapipeError as err:
        return "error", str(err)
