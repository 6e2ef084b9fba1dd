"""CEL for PackageVariantSet templates: compile once, evaluate to a string, on one of two engines.

Porch evaluates template expressions with cel-go in an environment of five variables
(`repoDefault` and `packageDefault`, strings; `upstream`, `target` and `repository`, dyn) and the
standard library only. This module offers the same environment on two Python engines:

    cel-expr-python   the CEL project's C++ engine (module `cel_expr_python.cel`); type-checks
                      at compile time like cel-go, and is fast enough for 10,000 targets
    cel-python        `celpy`, pure Python; the fallback where the C++ wheel is missing.
                      It has no checker, so undeclared names are found here by walking its
                      parse tree, and type errors only show at evaluation

The first importable engine is used unless `PORCHKIT_CEL_ENGINE` names one. Both report errors
as `CelError` with one line of text, in cel-go's words for the usual cases (`undeclared reference
to 'x'`, `Syntax error: ...`, `no such key: x`, `no such attribute(s): repository`), so that a
message reads the same whichever engine produced it and whatever Porch would have said.

cel-python is brought in line with cel-go where a template could otherwise work on one engine
and not the other, or give another result: `string()` writes booleans and doubles as cel-go does
(`true`, `5`, `1e+06`) and refuses lists, maps, types and null; a list is not indexed from its
end nor a string by position; has() of anything but a field, and a macro whose variable is not
a name, are compile errors; and any failure inside celpy is a CelError.

Known differences from cel-go that remain, rare in templates: list and map literals may mix
element types (Porch sets HomogeneousAggregateLiterals); cel-python finds type errors only when
evaluating (`no such overload`), where cel-go and cel-expr-python refuse to compile, and it has
no cross-type numeric equality (`dyn(1) == 1.0`), no timestamp(int) and no map() with a filter
(a compile error); cel-expr-python accepts backquoted field names (a.`b-c`), which cel-go
does not enable; the engines write timestamps and durations with fractional seconds, inf and NaN
each their own way, and `int(' 42')` or `int('0x10')` may convert where cel-go refuses.

Promises: `compile_expression` returns an Expression whose `evaluate` returns a `str` or raises
`CelError`, never another result type or exception; `bind` raises CelError for a value CEL cannot
hold. State: one environment per engine and a bounded cache of compiled expressions (the same
text gives the same Expression while it stays cached), process-wide; both are pure functions of
their inputs and safe to share between threads, so sharing them changes nothing but speed.
Does not: know about templates, fields or targets (see render.py, which names them in errors).
"""

from __future__ import annotations

import abc
import datetime
import decimal
import functools
import json
import math
import os
import re
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from porchvariant.errors import PorchVariantError

ENGINE_ENV = "PORCHKIT_CEL_ENGINE"
CEL_EXPR_PYTHON = "cel-expr-python"
CEL_PYTHON = "cel-python"
ENGINES = (CEL_EXPR_PYTHON, CEL_PYTHON)

STRING_VARIABLES = ("repoDefault", "packageDefault")
DYN_VARIABLES = ("upstream", "target", "repository")
VARIABLES = STRING_VARIABLES + DYN_VARIABLES


class CelError(PorchVariantError):
    """A CEL expression did not compile, failed to evaluate, or did not return a string."""


@dataclass(frozen=True, slots=True)
class Bindings:
    """Variable values converted once for one engine, for evaluating many expressions."""

    engine: str
    native: Any


class Expression(abc.ABC):
    """A compiled expression; `evaluate` may be called any number of times."""

    engine: str
    text: str

    @abc.abstractmethod
    def evaluate(self, variables: Mapping[str, Any] | Bindings) -> str:
        """The string the expression yields for these variables (plain values or `bind()`'s result).

        A declared variable left out reads as `no such attribute(s): <name>` when it is used.
        Raises CelError on an evaluation error or a result that is not a string."""

    def __repr__(self) -> str:
        return f"<Expression {self.engine} {self.text!r}>"


def available_engines() -> tuple[str, ...]:
    """The engines that can be imported here, in order of preference."""
    return tuple(name for name in ENGINES if _importable(name))


def engine_name(name: str | None = None) -> str:
    """The engine to use: `name` if given, else `$PORCHKIT_CEL_ENGINE`, else the first importable.

    Raises CelError for an unknown name or a named engine that is not installed."""
    source = "requested"
    if not name:
        name, source = os.environ.get(ENGINE_ENV, ""), f"${ENGINE_ENV}"
    if not name:
        found = available_engines()
        if not found:
            raise CelError(f"no CEL engine is installed: pip install {CEL_EXPR_PYTHON} or {CEL_PYTHON}")
        return found[0]
    if name not in ENGINES:
        raise CelError(f"unknown CEL engine {name!r} ({source}): choose {CEL_EXPR_PYTHON} or {CEL_PYTHON}")
    if not _importable(name):
        raise CelError(f"CEL engine {name} ({source}) is not installed: pip install {name}")
    return name


def compile_expression(text: str, *, engine: str | None = None) -> Expression:
    """The compiled expression for `text` on `engine` (see engine_name), compiled once and cached.

    Raises CelError with the compiler's message, on one line, for a syntax error or an
    undeclared name (and, with cel-expr-python, a type error the checker can prove)."""
    return _compile(engine_name(engine), text)


def bind(variables: Mapping[str, Any], *, engine: str | None = None) -> Bindings:
    """The variables converted for `engine` once, to evaluate several expressions against.

    Raises CelError for a value CEL cannot hold (a YAML date, a set, an integer past 64 bits)."""
    name = engine_name(engine)
    return Bindings(name, _backend(name).bind(variables))


# --- the two engines -----------------------------------------------------------------------


class _Backend(abc.ABC):
    @abc.abstractmethod
    def compile(self, text: str) -> Expression: ...

    @abc.abstractmethod
    def bind(self, variables: Mapping[str, Any]) -> Any: ...


@functools.cache
def _importable(name: str) -> bool:
    try:
        _backend(name)
    except ImportError:
        return False
    return True


@functools.cache
def _backend(name: str) -> _Backend:
    # One environment per engine for the life of the process: building it is the slow part.
    return _CelExprPython() if name == CEL_EXPR_PYTHON else _CelPython()


@functools.lru_cache(maxsize=8192)
def _compile(engine: str, text: str) -> Expression:
    return _backend(engine).compile(text)


def _wrong_engine(bindings: Bindings, engine: str) -> ValueError:
    return ValueError(f"bindings for {bindings.engine} used with a {engine} expression")


class _CelExprPython(_Backend):
    def __init__(self) -> None:
        from cel_expr_python import cel

        types = {name: cel.Type.STRING for name in STRING_VARIABLES}
        types.update({name: cel.Type.DYN for name in DYN_VARIABLES})
        self.env = cel.NewEnv(variables=types)
        self.string_type = cel.Type.STRING
        self.error_type = cel.Type.ERROR

    def compile(self, text: str) -> Expression:
        try:
            program = self.env.compile(text)
        except RuntimeError as err:
            raise CelError(_compile_message(str(err))) from None
        return _CelExprPythonExpression(self, text, program)

    def bind(self, variables: Mapping[str, Any]) -> Any:
        try:
            return self.env.Activation(variables)
        except (RuntimeError, TypeError, ValueError) as err:
            raise CelError(f"the variables cannot be given to CEL: {_first_line(str(err))}") from None


class _CelExprPythonExpression(Expression):
    def __init__(self, backend: _CelExprPython, text: str, program: Any) -> None:
        self.engine, self.text, self.program = CEL_EXPR_PYTHON, text, program
        self.string_type, self.error_type = backend.string_type, backend.error_type

    def evaluate(self, variables: Mapping[str, Any] | Bindings) -> str:
        if isinstance(variables, Bindings):
            if variables.engine != CEL_EXPR_PYTHON:
                raise _wrong_engine(variables, self.engine)
            activation, data = variables.native, None
        else:
            activation, data = None, variables
        try:
            value = self.program.eval(activation) if data is None else self.program.eval(data=data)
        except (RuntimeError, TypeError, ValueError) as err:
            raise CelError(_runtime_message(str(err))) from None
        kind = value.type()
        if kind == self.string_type:
            return value.value()
        name = kind.name()
        if kind == self.error_type or name == "UNKNOWN":
            raise CelError(_runtime_message(str(value.value())))
        type_name = name.split("<", 1)[0].lower()
        if type_name == "type":
            raise CelError(_non_string(_TypeName(value.plain_value().name().lower()), "type"))
        raise CelError(_non_string(value.plain_value(), "null_type" if type_name == "null" else type_name))


class _CelPython(_Backend):
    def __init__(self) -> None:
        import celpy
        from celpy import celparser, evaluation

        self.celpy, self.parse_error, self.eval_errors = celpy, celparser.CELParseError, (
            evaluation.CELEvalError, evaluation.CELUnsupportedError)
        # InterpretedRunner, not CompiledRunner: the transpiler (0.5) gets has() wrong and
        # prints "Internal error" for every failed evaluation.
        limit = sys.getrecursionlimit()
        self.env = celpy.Environment()
        sys.setrecursionlimit(max(limit, sys.getrecursionlimit()))  # celpy sets 2500, even if lower
        self.lock = threading.Lock()  # celpy's parser keeps the text being parsed on itself
        self.string = _CelPythonString()

    def compile(self, text: str) -> Expression:
        with self.lock:
            try:
                tree = self.env.compile(text)
            except self.parse_error as err:
                raise CelError(_celpy_syntax_message(text, err)) from None
        problems = _undeclared(tree)
        if problems:
            raise CelError("; ".join(problems))
        functions: dict[str, Any] = {"_[_]": self.index, "string": self.string}
        return _CelPythonExpression(self, text, self.env.program(tree, functions=functions))

    def index(self, container: Any, key: Any) -> Any:
        # celpy (0.5) indexes into an error value instead of passing the error on, which turns
        # `target.labels['x']` on a target without labels into "no such overload".
        if isinstance(container, self.eval_errors):
            return container
        if isinstance(key, self.eval_errors):
            return key
        # It also indexes as Python does: from the end of a list, and into a string. CEL does neither.
        if isinstance(container, str):
            raise TypeError("no such overload")
        if isinstance(container, list) and isinstance(key, int) and key < 0:
            raise IndexError(f"index out of range: {key}")
        return container[key]

    def bind(self, variables: Mapping[str, Any]) -> Any:
        to_cel = self.celpy.json_to_cel
        try:
            return {name: to_cel(value) for name, value in variables.items()}
        except (TypeError, ValueError, OverflowError) as err:
            raise CelError(f"the variables cannot be given to CEL: {_first_line(str(err))}") from None


class _CelPythonExpression(Expression):
    def __init__(self, backend: _CelPython, text: str, program: Any) -> None:
        self.backend, self.engine, self.text, self.program = backend, CEL_PYTHON, text, program

    def evaluate(self, variables: Mapping[str, Any] | Bindings) -> str:
        if isinstance(variables, Bindings):
            if variables.engine != CEL_PYTHON:
                raise _wrong_engine(variables, self.engine)
            native = variables.native
        else:
            native = self.backend.bind(variables)
        try:
            value = self.program.evaluate(native)
        except self.backend.eval_errors as err:
            raise CelError(_celpy_runtime_message(err)) from None
        except Exception as err:  # noqa: BLE001 - celpy's own bugs (a 3-argument map(), dyn()) surface as any type
            raise CelError(f"cel-python cannot evaluate this expression: {_first_line(str(err)) or type(err).__name__}"
                           ) from err
        if isinstance(value, self.backend.eval_errors):
            raise CelError(_celpy_runtime_message(value))
        if isinstance(value, str):
            return str(value)
        raise CelError(_non_string(*_celpy_plain(value)))


class _CelPythonString:
    """cel-python's `string`, converting as cel-go does.

    celpy converts with Python's str(): `True`, `5.0`, and a list or a map as its Python repr.
    cel-go writes `true`, `5` (doubles in strconv's shortest 'g' form) and has no conversion from
    a list, a map, a type or null. As a value, `string` must still equal celpy's string type
    (`type(x) == string`), hence a callable that compares equal to it."""

    def __init__(self) -> None:
        from celpy import celtypes

        self.types = celtypes

    def __call__(self, value: Any) -> Any:
        types = self.types
        # Some celpy operators give plain Python bools and floats rather than its own types.
        if isinstance(value, bool | types.BoolType):
            return types.StringType("true" if value else "false")
        if isinstance(value, float):
            return types.StringType(_go_float(float(value)))
        if isinstance(value, types.BytesType):
            try:
                return types.StringType(bytes(value).decode("utf-8"))
            except UnicodeDecodeError:
                raise ValueError("invalid UTF-8 in bytes, cannot convert to string") from None
        if value is None or isinstance(value, type | types.ListType | types.MapType):
            raise TypeError("no such overload")
        return types.StringType(value)

    def __eq__(self, other: object) -> bool:
        return other is self or other is self.types.StringType

    def __hash__(self) -> int:
        return hash(self.types.StringType)


def _go_float(value: float) -> str:
    """A double as Go's strconv.FormatFloat(value, 'g', -1, 64) writes it, which cel-go's string() uses."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    if value == 0:
        return sign + "0"
    # repr() gives the shortest digits that read back as the same double, as Go's -1 precision does.
    _, digit_tuple, exponent = decimal.Decimal(repr(abs(value))).as_tuple()
    digits = "".join(map(str, digit_tuple)).rstrip("0")
    point = len(digit_tuple) + int(exponent)  # the decimal point's place after the first digit
    if point - 1 < -4 or point - 1 >= 6:  # Go's %e threshold for the shortest form
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{mantissa}e{'-' if point - 1 < 0 else '+'}{abs(point - 1):02d}"
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return sign + digits + "0" * (point - len(digits))
    return f"{sign}{digits[:point]}.{digits[point:]}"


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


# --- messages in cel-go's words ---------------------------------------------------------------

_STATUS_PREFIX = re.compile(r"^[A-Z_]+: ")
_STATUS_SUFFIX = re.compile(r" \[[A-Z_]+\]$")
_KEY_NOT_FOUND = re.compile(r'^Key not found in map ?: "?(.*?)"?$')
_NO_VALUE = re.compile(r'^No value with name "(.*)" found in Activation$')
_OVERLOAD = re.compile(r"^No matching overloads? found ?: ?(.*)$")
_UNDECLARED = re.compile(r"undeclared reference to '([^']*)'")
_INDEX = re.compile(r"^Index error: index=(-?\d+) size=(\d+)$")
_CELPY_MEMBER = re.compile(r"^no such member in mapping: (.*)$")
_CELPY_TYPE_REPR = re.compile(r"\b[A-Z][a-z]+Type\((.*?)\)")


def _compile_message(text: str) -> str:
    """cel-go's multi-line report (`ERROR: <input>:1:1: ...` then the source and a caret) as one line."""
    text = _STATUS_SUFFIX.sub("", _STATUS_PREFIX.sub("", text.strip()))
    errors = [line for line in text.splitlines() if line.startswith("ERROR: ")]
    return "; ".join(errors) if errors else text.splitlines()[0] if text else "invalid expression"


def _runtime_message(text: str) -> str:
    text = _STATUS_PREFIX.sub("", text.strip()).splitlines()[0] if text.strip() else "evaluation error"
    if match := _KEY_NOT_FOUND.match(text):
        return f"no such key: {match.group(1)}"
    if match := _NO_VALUE.match(text):
        return f"no such attribute(s): {match.group(1)}"
    if match := _OVERLOAD.match(text):
        return f"no such overload: {match.group(1)}" if match.group(1) else "no such overload"
    if text == "divide by zero":
        return "division by zero"
    if match := _INDEX.match(text):
        return f"index '{match.group(1)}' out of range in list size '{match.group(2)}'"
    return text


def _celpy_syntax_message(text: str, err: Exception) -> str:
    cause = err.__context__
    line, column = getattr(err, "line", None) or 1, getattr(err, "column", None) or 1
    token = getattr(cause, "token", None)
    if token is not None and getattr(token, "type", "") == "$END":
        lines = text.splitlines() or [""]
        line, column = len(lines), len(lines[-1]) + 1
        what = "mismatched input '<EOF>'"
    elif token is not None:
        what = f"mismatched input '{token}'"
    elif getattr(cause, "char", None) is not None:
        what = f"token recognition error at: '{cause.char}'"  # type: ignore[union-attr]
    else:
        what = str(err).splitlines()[0] if str(err) else "invalid expression"
    return f"ERROR: <input>:{line}:{column}: Syntax error: {what}"


def _celpy_runtime_message(err: BaseException) -> str:
    args = err.args
    while args and isinstance(args[0], str) and args[0] == "evaluation error" and len(args) > 2:
        args = args[2] if isinstance(args[2], tuple) else ()
    message = str(args[0]) if args else str(err)
    details = args[2] if len(args) > 2 and isinstance(args[2], tuple) else ()
    if message == "no such key" and details:
        return f"no such key: {details[0]}"
    if match := _CELPY_MEMBER.match(message):
        return f"no such key: {match.group(1).strip(chr(39))}"
    if match := _UNDECLARED.search(message):
        name = match.group(1)
        return f"no such attribute(s): {name}" if name in VARIABLES else f"undeclared reference to '{name}'"
    if message.startswith("found no matching overload") or message == "no such overload":
        return "no such overload"
    if message == "invalid_argument" and details and "index out of range" in str(details[0]):
        return "index out of range"
    if message == "return error for overflow":  # celpy's words for any ValueError in a function
        cause = str(details[0]) if details else "overflow"
        return "integer overflow" if cause == "overflow" else _CELPY_TYPE_REPR.sub(r"\1", cause)
    if message == "modulus or divide by zero":
        return "modulus by zero" if details and "division" not in str(details[0]) else "division by zero"
    return message.splitlines()[0] if message else "evaluation error"


def _celpy_plain(value: Any) -> tuple[Any, str]:
    """A celpy result as a plain Python value, with its CEL type name."""
    from celpy import celtypes

    if value is None:
        return None, "null_type"
    if isinstance(value, bool | celtypes.BoolType):
        return bool(value), "bool"
    if isinstance(value, type):
        return _TypeName(value.__name__.removesuffix("Type").lower()), "type"
    if isinstance(value, celtypes.ListType):
        return [_celpy_plain(item)[0] for item in value], "list"
    if isinstance(value, celtypes.MapType):
        return {_celpy_plain(k)[0]: _celpy_plain(v)[0] for k, v in value.items()}, "map"
    if isinstance(value, celtypes.UintType):
        return int(value), "uint"
    if isinstance(value, celtypes.IntType):
        return int(value), "int"
    if isinstance(value, float):  # celtypes.DoubleType, or a plain float from some celpy operators
        return float(value), "double"
    if isinstance(value, celtypes.BytesType):
        return bytes(value), "bytes"
    if isinstance(value, celtypes.TimestampType):
        return value, "timestamp"
    if isinstance(value, celtypes.DurationType):
        return value, "duration"
    return value, type(value).__name__


class _TypeName(str):
    """A CEL type as a value (`int`), shown bare rather than quoted."""


def _non_string(value: Any, type_name: str) -> str:
    # Porch's own wording for a result that is not a string, with the CEL type added.
    return f"expression returned non-string value: {_literal(value)} ({type_name})"


def _literal(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, _TypeName):
        return str(value)
    if isinstance(value, datetime.datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, datetime.timedelta):
        return f"{value.total_seconds():g}s"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(str(value))
    if isinstance(value, bytes | bytearray):
        return "b" + json.dumps(bytes(value).decode("utf-8", "replace"))
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_literal(item) for item in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_literal(k)}: {_literal(v)}" for k, v in value.items()) + "}"
    return str(value)


# --- undeclared names for cel-python, which has no checker ----------------------------------

_MACROS = {"all": (2,), "exists": (2,), "exists_one": (2,), "filter": (2,), "map": (2, 3)}  # their arities
_TYPE_NAMES = frozenset({"bool", "bytes", "double", "int", "list", "map", "null_type", "string", "type",
                         "uint", "google"})
_GLOBAL_FUNCTIONS = frozenset({"bool", "bytes", "double", "duration", "dyn", "has", "int", "matches", "size",
                               "string", "timestamp", "type", "uint"})
_MEMBER_FUNCTIONS = frozenset({"contains", "endsWith", "matches", "size", "startsWith", "getDate",
                               "getDayOfMonth", "getDayOfWeek", "getDayOfYear", "getFullYear", "getHours",
                               "getMilliseconds", "getMinutes", "getMonth", "getSeconds"})


def _undeclared(tree: Any) -> list[str]:
    """The compile errors cel-go's parser and checker would report and celpy does not.

    `undeclared reference` for names outside Porch's environment: variables are the five declared
    ones (plus macro variables in scope), functions cel-go's standard library, which is all Porch
    offers. And malformed macros, which celpy either accepts or fails on with a Python error:
    has() of anything but a field, a macro variable that is not a name, a call with a macro's
    name but not its number of arguments (then an undeclared function, as in cel-go)."""
    problems: list[str] = []

    def error(token: Any, column: int, what: str) -> None:
        problems.append(f"ERROR: <input>:{token.line}:{column}: {what}")

    def report(token: Any, column: int) -> None:
        error(token, column, f"undeclared reference to '{token.value}' (in container '')")

    def walk(node: Any, scope: frozenset[str]) -> None:
        kind = getattr(node, "data", None)
        if kind is None:
            return
        children = node.children
        if kind in ("ident", "dot_ident"):
            token = children[0]
            if token.value not in scope and token.value not in VARIABLES and token.value not in _TYPE_NAMES:
                report(token, token.column)
            return
        if kind in ("ident_arg", "dot_ident_arg"):
            token = children[0]
            args = list(children[1].children) if len(children) > 1 else []
            if token.value not in _GLOBAL_FUNCTIONS or (token.value == "has" and len(args) != 1):
                report(token, token.end_column)  # cel-go points at the call's "("
            elif token.value == "has" and getattr(_unwrapped(args[0]), "data", None) != "member_dot":
                first = _first_token(args[0])
                error(first, first.column, "invalid argument to has() macro")
            for arg in args:
                walk(arg, scope)
            return
        if kind == "member_dot_arg":
            member, token, *rest = children
            args = list(rest[0].children) if rest else []
            walk(member, scope)
            if len(args) in _MACROS.get(token.value, ()):
                variable = _simple_ident(args[0])
                if variable is None:
                    first = _first_token(args[0])
                    error(first, first.column, "argument must be a simple name")
                elif len(args) == 3:
                    error(token, token.column, "cel-python cannot evaluate map() with a filter: "
                                               "use filter() and then map()")
                for arg in args[1:]:
                    walk(arg, scope | {variable or ""})
                return
            if token.value not in _MEMBER_FUNCTIONS:
                report(token, token.end_column)
            for arg in args:
                walk(arg, scope)
            return
        if kind == "member_dot":
            walk(children[0], scope)
            return
        for child in children:
            walk(child, scope)

    walk(tree, frozenset())
    return problems


def _unwrapped(node: Any) -> Any:
    """The node under a chain of single-child nodes (expr > conditionalor > ... > member)."""
    while getattr(node, "data", None) is not None and len(node.children) == 1 \
            and getattr(node.children[0], "data", None) is not None:
        node = node.children[0]
    return node


def _first_token(node: Any) -> Any:
    while getattr(node, "data", None) is not None:
        node = node.children[0]
    return node


def _simple_ident(node: Any) -> str | None:
    while getattr(node, "data", None) not in (None, "ident"):
        trees = [child for child in node.children if getattr(child, "data", None) is not None]
        if len(trees) != 1 or len(node.children) != 1:
            return None
        node = trees[0]
    return str(node.children[0].value) if getattr(node, "data", None) == "ident" else None
