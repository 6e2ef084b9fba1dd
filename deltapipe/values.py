"""JSON values as the expression language sees them: types, conversions, equality, encoding.

Documents are plain JSON trees (dict, list, str, int, float, bool, None). Ints and floats are
distinct types, as in Go: `1` and `1.0` are not `@eq`. Python's `bool` is an `int` subclass, so
every check here compares `type(v)` rather than using `isinstance`.

Owns: the As* conversions operators use, strict deep equality, the Go `encoding/json` text used by
`@hash` and canonical keys, a total order for sorting gathered values, and a fast tree copy.
"""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal
from typing import Any

from deltapipe.errors import ExpressionError

_INT_TEXT = re.compile(r"[+-]?[0-9]+\Z")
_FLOAT_TEXT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\Z")
_INT64 = (-(2**63), 2**63 - 1)


def describe(value: Any) -> str:
    """A short, readable description of a value for error messages: `string "abc"`, `list of 3`."""
    t = type(value)
    if value is None:
        return "null"
    if t is bool:
        return f"bool {'true' if value else 'false'}"
    if t is int:
        return f"int {value}" if abs(value) < 10**30 else "int with more than 30 digits"
    if t is float:
        return f"float {format_float(value) if math.isfinite(value) else value}"
    if t is str:
        text = value if len(value) <= 40 else value[:37] + "..."
        return f"string {json.dumps(text, ensure_ascii=False)}"
    if t is list:
        return f"list of {len(value)}"
    if t is dict:
        keys = ", ".join(list(map(str, value))[:4]) + (", ..." if len(value) > 4 else "")
        return f"map {{{keys}}}" if value else "empty map"
    return t.__name__


# ---------------------------------------------------------------------------------------------
# Conversions (Δ-controller's AsBool / AsInt / AsFloat / AsString / AsList)


def as_bool(value: Any, op: str) -> bool:
    if type(value) is bool:
        return value
    raise ExpressionError(f"{op}: expected a bool, got {describe(value)}")


def is_int_like(value: Any) -> bool:
    t = type(value)
    return t is int or (t is str and _INT_TEXT.match(value) is not None and _fits_int64(value))


def as_int(value: Any, op: str) -> int:
    """An int, or a string holding a base-10 int64; floats are refused (no truncation)."""
    if type(value) is int:
        return int64(value, op)
    if is_int_like(value):
        return int(value)
    raise ExpressionError(f"{op}: expected an integer, got {describe(value)}")


def as_float(value: Any, op: str) -> float:
    t = type(value)
    if t is float or t is int or (t is str and _FLOAT_TEXT.match(value)):
        try:
            result = float(value)
        except OverflowError:
            result = math.inf
        return finite(result, op)
    raise ExpressionError(f"{op}: expected a number, got {describe(value)}")


def finite(value: float, op: str) -> float:
    """The value, if JSON can hold it (no inf, no NaN)."""
    if not math.isfinite(value):
        raise ExpressionError(f"{op}: {value} is not a finite number")
    return value


def int64(value: int, op: str) -> int:
    """The value, if it fits a 64-bit integer as in Kubernetes (and Δ-controller's Go)."""
    if not _INT64[0] <= value <= _INT64[1]:
        raise ExpressionError(f"{op}: integer overflow ({describe_int(value)} does not fit in 64 bits)")
    return value


def describe_int(value: int) -> str:
    return f"{len(str(abs(value)))}-digit integer" if abs(value) > 10**30 else str(value)


def as_number(value: Any, op: str) -> int | float:
    """An int when the value is int-like, else a float (the per-value rule of @div)."""
    return as_int(value, op) if is_int_like(value) else as_float(value, op)


def as_string(value: Any, op: str) -> str:
    t = type(value)
    if t is str:
        return value
    if t is int:
        return str(int64(value, op))
    if t is float:
        return format_float(finite(value, op))
    raise ExpressionError(f"{op}: expected a string or a number, got {describe(value)}")


def as_list(value: Any, op: str) -> list[Any]:
    if type(value) is list:
        return value
    raise ExpressionError(f"{op}: expected a list, got {describe(value)}")


def as_numbers(values: list[Any], op: str) -> list[int] | list[float]:
    """All ints when every element is int-like, else all floats; anything else is an error."""
    if all(is_int_like(v) for v in values):
        return [as_int(v, op) for v in values]
    return [as_float(v, op) for v in values]


def _fits_int64(text: str) -> bool:
    return _INT64[0] <= int(text) <= _INT64[1]


# ---------------------------------------------------------------------------------------------
# Equality, copying, ordering


def strict_equal(a: Any, b: Any) -> bool:
    """Deep equality where the JSON type matters: 1 != 1.0 and 1 != true (unlike Python's ==)."""
    ta = type(a)
    if ta is not type(b):
        return False
    if ta is dict:
        return a.keys() == b.keys() and all(strict_equal(v, b[k]) for k, v in a.items())
    if ta is list:
        return len(a) == len(b) and all(strict_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def copy_tree(value: Any) -> Any:
    """A deep copy of a JSON tree; several times faster than copy.deepcopy for plain data."""
    t = type(value)
    if t is dict:
        return {k: copy_tree(v) if type(v) in _CONTAINERS else v for k, v in value.items()}
    if t is list:
        return [copy_tree(v) if type(v) in _CONTAINERS else v for v in value]
    return value


_CONTAINERS = (dict, list)


def sort_key(value: Any) -> tuple[Any, ...]:
    """A total order for gathered values: bools, then numbers (int and float compared by value),
    then strings, then lists and maps by their canonical JSON text."""
    t = type(value)
    if t is bool:
        return (0, value, 0)
    if t is int or t is float:
        return (1, value, t is float)
    if t is str:
        return (2, value, 0)
    return (3, go_json(value), 0)


# ---------------------------------------------------------------------------------------------
# Go encoding/json text (sorted keys, compact, Go's float format and HTML escaping)

_GO_ESCAPES = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026",
                             "\u2028": "\\u2028", "\u2029": "\\u2029"})


def key_text(key: Any) -> str:
    """A map key as JSON text would hold it (YAML allows `80:` or `true:` as keys)."""
    t = type(key)
    if t is str:
        return key
    if t is bool:
        return "true" if key else "false"
    if t is float:
        return format_float(key)
    return str(key)


def format_go_v(value: float) -> str:
    """A float as Go's %v prints it: shortest digits, exponent form below 1e-4 or from 1e6
    (strconv's 'g' with shortest precision decides with precision 6: 1e6 -> "1e+06")."""
    if not math.isfinite(value):
        raise ExpressionError(f"{value} cannot be represented in JSON")
    if value == 0 or 1e-4 <= abs(value) < 1e6:
        return format_float(value)
    mantissa, _, exponent = repr(value).replace("E", "e").partition("e")
    if not exponent:  # repr did not use an exponent; make one
        mantissa, exponent = f"{value:e}".split("e")
        mantissa = mantissa.rstrip("0").rstrip(".")
    if mantissa.endswith(".0"):
        mantissa = mantissa[:-2]
    sign = "-" if exponent.startswith("-") else "+"
    return f"{mantissa}e{sign}{exponent.lstrip('+-').lstrip('0').zfill(2)}"


def format_float(value: float) -> str:
    """A float as Go's encoding/json writes it: 1.0 -> "1", 1e21 -> "1e+21", 1e-7 -> "1e-7"."""
    if not math.isfinite(value):
        raise ExpressionError(f"{value} cannot be represented in JSON")
    magnitude = abs(value)
    if magnitude != 0 and (magnitude < 1e-6 or magnitude >= 1e21):
        mantissa, _, exponent = repr(value).replace("E", "e").partition("e")
        if mantissa.endswith(".0"):
            mantissa = mantissa[:-2]
        sign = "-" if exponent.startswith("-") else "+"
        digits = exponent.lstrip("+-").lstrip("0") or "0"
        return f"{mantissa}e{sign}{digits.zfill(2) if sign == '+' else digits}"
    text = format(Decimal(repr(value)), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def go_json(value: Any) -> str:
    """Canonical JSON text of a value, byte for byte as Go's json.Marshal would produce it."""
    t = type(value)
    if value is None:
        return "null"
    if t is bool:
        return "true" if value else "false"
    if t is int:
        return str(value)
    if t is float:
        return format_float(value)
    if t is str:
        return json.dumps(value, ensure_ascii=False).translate(_GO_ESCAPES)
    if t is list:
        return "[" + ",".join(go_json(v) for v in value) + "]"
    if t is dict:
        # JSON object keys are strings, and Go sorts them as text (so "10" before "9").
        items = sorted((key_text(k), v) for k, v in value.items())
        return "{" + ",".join(f"{go_json(k)}:{go_json(v)}" for k, v in items) + "}"
    raise ExpressionError(f"cannot encode {t.__name__} as JSON")
