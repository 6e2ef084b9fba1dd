"""The `@` operators of the expression language, each compiled once into a closure.

Two families, as in Δ-controller:
  * list-form operators (`@and @or @cond @switch @definedOr @filter @map @any @all @none`) look at
    their argument's *syntax*: a list literal's elements are the sub-expressions (so untaken
    branches are never evaluated), and any other expression counts as a one-element list;
  * every other operator evaluates its argument, then checks and converts the value.
Two-argument operators (`@eq`, `@lt`, `@add`, `@in`, ...) written with a two-element list literal
evaluate the two elements separately, so neither is subject to the list-unwrapping rule.

Errors name the operator and the argument at fault. The behaviour is Δ-controller's except where
docs/deltapipe.md ("Differences from Δ-controller") says otherwise.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from deltapipe import labels
from deltapipe.errors import ExpressionError
from deltapipe.values import (
    as_bool,
    as_float,
    as_int,
    as_list,
    as_number,
    as_numbers,
    as_string,
    describe,
    finite,
    go_json,
    int64,
    strict_equal,
)

if TYPE_CHECKING:
    from deltapipe.expression import Compiler, Fn

OpCompiler = Callable[[Any, "Compiler"], "Fn"]
_REGISTRY: dict[str, OpCompiler] = {}


def compile_operator(name: str, arg: Any, compiler: Compiler) -> Fn:
    try:
        op = _REGISTRY[name]
    except KeyError:
        raise ExpressionError(f"unknown operator {name}") from None
    return op(arg, compiler)


def names() -> list[str]:
    return sorted(_REGISTRY)


def _op(*names: str) -> Callable[[OpCompiler], OpCompiler]:
    def register(fn: OpCompiler) -> OpCompiler:
        for name in names:
            _REGISTRY[name] = fn
        return fn

    return register


def _unary(name: str, convert: Callable[[Any], Any]) -> None:
    """An operator that evaluates its argument and converts the value."""

    def compile_unary(arg: Any, c: Compiler) -> Fn:
        fn = c.compile(arg)
        return lambda obj, local: convert(fn(obj, local))

    _REGISTRY[name] = compile_unary


def _pair(name: str, combine: Callable[[Any, Any], Any]) -> None:
    """An operator over exactly two evaluated arguments."""

    def compile_pair(arg: Any, c: Compiler) -> Fn:
        if type(arg) is list and len(arg) == 2:
            left, right = c.compile(arg[0]), c.compile(arg[1])
            return lambda obj, local: combine(left(obj, local), right(obj, local))
        if type(arg) is list and len(arg) > 2:
            raise ExpressionError(f"{name}: expected 2 arguments, got {len(arg)}")
        whole = c.compile(arg)

        def from_list(obj: Any, local: Any) -> Any:
            value = whole(obj, local)
            if type(value) is not list or len(value) != 2:
                raise ExpressionError(f"{name}: expected a list of 2 arguments, got {describe(value)}")
            return combine(value[0], value[1])

        return from_list

    _REGISTRY[name] = compile_pair


def _args(name: str, arg: Any, c: Compiler, counts: tuple[int, ...]) -> list[Fn]:
    fns = c.compile_args(arg)
    if len(fns) not in counts:
        wanted = " or ".join(map(str, counts))
        raise ExpressionError(f"{name}: expected {wanted} arguments, got {len(fns)}")
    return fns


# ---------------------------------------------------------------------------------------------
# Conversions and constructors

_unary("@bool", lambda v: as_bool(v, "@bool"))
_unary("@int", lambda v: as_int(v, "@int"))
_unary("@float", lambda v: as_float(v, "@float"))
_unary("@string", lambda v: as_string(v, "@string"))
_unary("@isnil", lambda v: v is None)
_unary("@exists", lambda v: v is not None)
_unary("@has", lambda v: v is not None)
_unary("@not", lambda v: not as_bool(v, "@not"))
_unary("@len", lambda v: len(as_list(v, "@len")))
_unary("@hash", lambda v: _hash(v))


def _as_list_value(v: Any) -> list[Any]:
    items = as_list(v, "@list")
    return items[0] if items and type(items[0]) is list else items


def _as_dict_value(v: Any) -> dict[str, Any]:
    if type(v) is not dict:
        raise ExpressionError(f"@dict: expected a map, got {describe(v)}")
    return v


_unary("@list", _as_list_value)
_unary("@dict", _as_dict_value)


@_op("@noop")
def _noop(arg: Any, c: Compiler) -> Fn:
    c.compile(arg)  # never evaluated, but a malformed argument is still an error in the spec
    return lambda obj, local: None


# ---------------------------------------------------------------------------------------------
# Logic and control flow (list-form: only what is needed is evaluated)


@_op("@and")
def _and(arg: Any, c: Compiler) -> Fn:
    fns = c.compile_args(arg)

    return lambda obj, local: all(as_bool(fn(obj, local), "@and") for fn in fns)


@_op("@or")
def _or(arg: Any, c: Compiler) -> Fn:
    fns = c.compile_args(arg)

    return lambda obj, local: any(as_bool(fn(obj, local), "@or") for fn in fns)


@_op("@cond")
def _cond(arg: Any, c: Compiler) -> Fn:
    fns = _args("@cond", arg, c, (2, 3))
    test, then = fns[0], fns[1]
    otherwise = fns[2] if len(fns) == 3 else (lambda obj, local: None)

    def branch(obj: Any, local: Any) -> Any:
        return then(obj, local) if as_bool(test(obj, local), "@cond") else otherwise(obj, local)

    return branch


@_op("@definedOr")
def _defined_or(arg: Any, c: Compiler) -> Fn:
    first, fallback = _args("@definedOr", arg, c, (2,))

    def defined_or(obj: Any, local: Any) -> Any:
        value = first(obj, local)
        return fallback(obj, local) if value is None else value

    return defined_or


@_op("@switch")
def _switch(arg: Any, c: Compiler) -> Fn:
    cases = arg if type(arg) is list else [arg]
    if not cases:
        raise ExpressionError("@switch: expected at least one [case, value] pair")
    compiled = []
    for i, case in enumerate(cases):
        if type(case) is not list or len(case) != 2:
            raise ExpressionError(f"@switch: case {i} must be a [condition, value] pair, got {describe(case)}")
        compiled.append((c.compile(case[0]), c.compile(case[1])))

    def first_match(obj: Any, local: Any) -> Any:
        for test, action in compiled:
            if as_bool(test(obj, local), "@switch"):
                return action(obj, local)
        return None

    return first_match


# ---------------------------------------------------------------------------------------------
# List operators: `$$` is bound to each element in turn


def _over_list(name: str, arg: Any, c: Compiler) -> tuple[Fn, Fn]:
    each, items = _args(name, arg, c, (2,))
    return each, items


def _elements(name: str, items: Fn, obj: Any, local: Any) -> list[Any]:
    return as_list(items(obj, local), name)


@_op("@map")
def _map(arg: Any, c: Compiler) -> Fn:
    each, items = _over_list("@map", arg, c)
    return lambda obj, local: [each(obj, e) for e in _elements("@map", items, obj, local)]


@_op("@filter")
def _filter(arg: Any, c: Compiler) -> Fn:
    test, items = _over_list("@filter", arg, c)
    return lambda obj, local: [
        e for e in _elements("@filter", items, obj, local) if as_bool(test(obj, e), "@filter")
    ]


@_op("@any")
def _any(arg: Any, c: Compiler) -> Fn:
    test, items = _over_list("@any", arg, c)
    return lambda obj, local: any(
        as_bool(test(obj, e), "@any") for e in _elements("@any", items, obj, local)
    )


@_op("@all")
def _all(arg: Any, c: Compiler) -> Fn:
    test, items = _over_list("@all", arg, c)
    return lambda obj, local: all(
        as_bool(test(obj, e), "@all") for e in _elements("@all", items, obj, local)
    )


@_op("@none")
def _none(arg: Any, c: Compiler) -> Fn:
    test, items = _over_list("@none", arg, c)
    return lambda obj, local: not any(
        as_bool(test(obj, e), "@none") for e in _elements("@none", items, obj, local)
    )


# ---------------------------------------------------------------------------------------------
# Comparison and arithmetic


def _eq(a: Any, b: Any) -> bool:
    return a is not None and b is not None and strict_equal(a, b)


def _compare(name: str, holds: Callable[[Any, Any], bool]) -> None:
    def compare(a: Any, b: Any) -> bool:
        x, y = as_numbers([a, b], name)
        return holds(x, y)

    _pair(name, compare)


def _checked(result: int | float, op: str) -> int | float:
    return int64(result, op) if type(result) is int else finite(result, op)


def _arith(name: str, combine: Callable[[Any, Any], Any]) -> None:
    def arith(a: Any, b: Any) -> Any:
        x, y = as_numbers([a, b], name)
        return _checked(combine(x, y), name)

    _pair(name, arith)


def _div(a: Any, b: Any) -> float:
    x, y = as_number(a, "@div"), as_number(b, "@div")
    if y == 0:
        raise ExpressionError(f"@div: division of {describe(a)} by zero")
    try:
        return finite(x / y, "@div")
    except OverflowError:  # int / int beyond the float range
        raise ExpressionError("@div: the result does not fit in a float") from None


def _in(element: Any, items: Any) -> bool:
    return any(strict_equal(element, item) for item in as_list(items, "@in"))


MAX_RANGE = 1_000_000


def _range(start: Any, end: Any) -> list[int]:
    low, high = as_int(start, "@range"), as_int(end, "@range")
    if high - low > MAX_RANGE:
        raise ExpressionError(f"@range: {high - low} elements is more than the limit of {MAX_RANGE}")
    return list(range(low, high))


def _rnd(low: Any, high: Any) -> int:
    lo, hi = as_int(low, "@rnd"), as_int(high, "@rnd")
    if hi <= lo:
        raise ExpressionError(f"@rnd: the upper bound {hi} must be greater than the lower bound {lo}")
    return random.randrange(lo, hi)


def _selector(selector: Any, labels_value: Any) -> bool:
    if selector is None or labels_value is None:
        return False
    if type(selector) is not dict:
        raise ExpressionError(f"@selector: the selector must be a map, got {describe(selector)}")
    if type(labels_value) is not dict:
        raise ExpressionError(f"@selector: the labels must be a map, got {describe(labels_value)}")
    return labels.matches(selector, labels_value)


_pair("@eq", _eq)
_compare("@lt", lambda x, y: x < y)
_compare("@lte", lambda x, y: x <= y)
_compare("@gt", lambda x, y: x > y)
_compare("@gte", lambda x, y: x >= y)
_arith("@add", lambda x, y: x + y)
_arith("@sub", lambda x, y: x - y)
_arith("@mul", lambda x, y: x * y)
_pair("@div", _div)
_pair("@in", _in)
_pair("@range", _range)
_pair("@rnd", _rnd)
_pair("@selector", _selector)

_unary("@abs", lambda v: abs(as_float(v, "@abs")))
_unary("@ceil", lambda v: float(math.ceil(as_float(v, "@ceil"))))
_unary("@floor", lambda v: float(math.floor(as_float(v, "@floor"))))


def _sum(v: Any) -> int | float:
    numbers = as_numbers(as_list(v, "@sum"), "@sum")
    return _checked(sum(numbers), "@sum") if numbers else 0


def _extreme(name: str, pick: Callable[[list[Any]], Any]) -> Callable[[Any], Any]:
    def extreme(v: Any) -> Any:
        numbers = as_numbers(as_list(v, name), name)
        return pick(numbers) if numbers else None

    return extreme


_unary("@sum", _sum)
_unary("@min", _extreme("@min", min))
_unary("@max", _extreme("@max", max))


def _concat(v: Any) -> str:
    return "".join(as_string(part, "@concat") for part in as_list(v, "@concat"))


_unary("@concat", _concat)


# ---------------------------------------------------------------------------------------------
# @hash: base-36 MD5 of the value's Go JSON text, first 6 characters

_BASE36 = "0123456789abcdefghijklmnopqrstuvwxyz"


def _hash(value: Any) -> str:
    number = int.from_bytes(hashlib.md5(go_json(value).encode()).digest(), "big")
    digits = []
    while number:
        number, rest = divmod(number, 36)
        digits.append(_BASE36[rest])
    return "".join(reversed(digits)).rjust(25, "0")[:6]

