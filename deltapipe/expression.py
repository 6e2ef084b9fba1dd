"""Compiling expressions: decoding a YAML/JSON value into a tree of Python callables.

An expression is any JSON value. It is decoded once (`compile_expression`) into an `Expression`
whose evaluation runs closures only: JSONPaths are compiled up front, operators are looked up once.

Decoding, first match wins:
  * null, bools and numbers are literals; a string is a *string expression* (a JSONPath when it
    starts with `$`, the literal `@now` for the current time, any other text as itself);
  * a list is a list literal (with Δ-controller's first-element unwrapping, see `_list`);
  * a map with exactly one key starting with `@` is an operator (see operators.py); any other map
    is a map literal whose keys are setters (plain key, `$.` merge, or a JSONPath).

Evaluation context: `$` is the document, `$$` is the element of the innermost list operator
(`@map`, `@filter`, `@any`, `@all`, `@none`); outside those `$$` falls back to the document.
Owns: decoding, strings, literals and setters. Operators live in operators.py, JSONPath in
jsonpath.py, value conversions in values.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from deltapipe import operators
from deltapipe.errors import ExpressionError, PathError
from deltapipe.jsonpath import MAX_LIST_GROWTH, JSONPath, compile_path
from deltapipe.values import copy_tree, describe

Fn = Callable[[Any, Any], Any]
"""A compiled expression: fn(document, local) -> value; `local` is NO_LOCAL outside list ops."""

Clock = Callable[[], float]
"""Seconds since the epoch, UTC; injected so that `@now` can be tested."""


class _NoLocal:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NO_LOCAL"


NO_LOCAL: Any = _NoLocal()


class Expression:
    """A compiled expression; `evaluate(subject)` runs it with `$` bound to subject."""

    __slots__ = ("source", "fn")

    def __init__(self, source: Any, fn: Fn) -> None:
        self.source = source
        self.fn = fn

    def evaluate(self, subject: Any, local: Any = NO_LOCAL) -> Any:
        return self.fn(subject, local)

    def __repr__(self) -> str:
        return f"Expression({self.source!r})"


def compile_expression(raw: Any, *, clock: Clock = time.time) -> Expression:
    """Decode `raw` into an Expression; raises ExpressionError for a malformed one."""
    return Expression(raw, Compiler(clock).compile(raw))


def evaluate(expr: Any, subject: Any, *, clock: Clock = time.time) -> Any:
    """Compile and evaluate in one go; raises ExpressionError naming the operator at fault."""
    return compile_expression(expr, clock=clock).evaluate(subject)


class Compiler:
    """Turns raw expressions into closures; one per pipeline, carrying its clock."""

    def __init__(self, clock: Clock = time.time) -> None:
        self.clock = clock

    def compile(self, raw: Any) -> Fn:
        t = type(raw)
        if raw is None or t is bool or t is int or t is float:
            return lambda obj, local: raw
        if t is str:
            return self.string(raw)
        if t is list:
            return _list([self.compile(item) for item in raw])
        if t is dict:
            if len(raw) == 1:
                key = next(iter(raw))
                if type(key) is str and key.startswith("@"):
                    return operators.compile_operator(key, raw[key], self)
            return self.map_literal(raw)
        raise ExpressionError(f"unsupported value in expression: {describe(raw)}")

    def compile_args(self, raw: Any) -> list[Fn]:
        """Arguments of a list-form operator: a list literal's elements, or one expression."""
        return [self.compile(item) for item in raw] if type(raw) is list else [self.compile(raw)]

    def now(self) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.clock()))

    def string(self, text: str) -> Fn:
        if text == "@now":
            return lambda obj, local: self.now()
        if not text.startswith("$"):
            return lambda obj, local: text
        if text.startswith("$$"):
            path = compile_path(text[1:])
            get = path.get

            def local_or_document(obj: Any, local: Any) -> Any:
                return get(obj if local is NO_LOCAL else local)

            return local_or_document
        get = compile_path(text).get
        return lambda obj, local: get(obj)

    def map_literal(self, raw: dict[Any, Any]) -> Fn:
        entries = [(setter(_key_text(key)), self.compile(value)) for key, value in raw.items()]

        def build(obj: Any, local: Any) -> dict[str, Any]:
            out: dict[str, Any] = {}
            for put, fn in entries:
                put(out, fn(obj, local))
            return out

        return build


def _list(items: list[Fn]) -> Fn:
    def build(obj: Any, local: Any) -> list[Any]:
        out = [fn(obj, local) for fn in items]
        # Δ-controller's rule: a list whose first element is a list *is* that element, which is
        # what makes `{"@len": ["$.spec.items"]}` measure the list at that path.
        if out and type(out[0]) is list:
            return out[0]
        return out

    return build


def _key_text(key: Any) -> str:
    if type(key) is str:
        return key
    if type(key) is bool:
        return "true" if key else "false"
    return str(key)


# ---------------------------------------------------------------------------------------------
# Setters: how a map literal (and @unwind, @gather) writes a value under a key

Setter = Callable[[dict[str, Any], Any], None]


def setter(key: str) -> Setter:
    """The writer for one map-literal key; raises ExpressionError for an unwritable key.

    `$.` merges a map's keys into the result; a key not starting with `$` is stored as it is
    (`a.b` is one key); any other key is a JSONPath and intermediate maps/lists are created.
    Writes never change structure they did not create: containers on the way are copied first,
    because values read from the input document are shared, not copied.
    """
    if key == "$.":
        return _merge_into
    if not key.startswith("$"):
        def put_key(out: dict[str, Any], value: Any) -> None:
            out[key] = value

        return put_key
    if key.startswith("$$"):
        raise ExpressionError(f"cannot write to {key!r}: `$$` paths are read-only")
    path = compile_path(key)
    if path.steps == ():
        raise ExpressionError(f"cannot write to {key!r}: the whole document cannot be replaced")
    if path.steps is not None:
        steps = path.steps
        return lambda out, value: write_steps(out, steps, value, key)
    return lambda out, value: _write_general(out, path, value)


def _merge_into(out: dict[str, Any], value: Any) -> None:
    if type(value) is not dict:
        raise ExpressionError(f"'$.': expected a map to merge, got {describe(value)}")
    out.update(value)


def write_steps(target: Any, steps: tuple[str | int, ...], value: Any, text: str) -> None:
    """Set `value` at `steps` under target, copying each container on the way (copy-on-write)."""
    cur = target
    for step, following in zip(steps, steps[1:], strict=False):
        child = _child(cur, step)
        if type(child) is dict:
            child = dict(child)
        elif type(child) is list:
            child = list(child)
        elif child is None:
            child = [] if type(following) is int else {}
        else:
            raise PathError(f"cannot write {text}: {step!r} holds {describe(child)}, not a map or list")
        _put(cur, step, child, text)
        cur = child
    _put(cur, steps[-1], value, text)


def _child(container: Any, step: str | int) -> Any:
    if type(step) is int:
        return container[step] if type(container) is list and step < len(container) else None
    return container.get(step) if type(container) is dict else None


def _put(container: Any, step: str | int, value: Any, text: str) -> None:
    if type(step) is int:
        if type(container) is not list:
            raise PathError(f"cannot write {text}: index [{step}] applied to {describe(container)}")
        if step >= len(container):
            if step - len(container) >= MAX_LIST_GROWTH:
                raise PathError(f"cannot write {text}: [{step}] would pad the list of {len(container)} with too "
                                f"many nulls (at most {MAX_LIST_GROWTH:,})")
            container.extend([None] * (step + 1 - len(container)))
        container[step] = value
    elif type(container) is dict:
        container[step] = value
    else:
        raise PathError(f"cannot write {text}: key {step!r} applied to {describe(container)}")


def _write_general(out: dict[str, Any], path: JSONPath, value: Any) -> None:
    # Wildcards, unions and filters write into existing structure that may be shared with the
    # input document: work on a private copy of the result first.
    private = copy_tree(out)
    path.set(private, value)
    out.clear()
    out.update(private)
