"""What a YAML scalar means, and how to write one so that it keeps that meaning.

kpt reads and writes YAML with go-yaml v3, so a plain (unquoted) scalar means what go-yaml's
resolver says (its `resolve.go`; krm-functions spec §2.3):

* booleans are only `true`/`True`/`TRUE` and `false`/`False`/`FALSE`, and nulls are `~`,
  `null`/`Null`/`NULL` and the empty scalar: `yes`, `on`, `y` and `NO` are strings;
* integers are whatever Go's `strconv.ParseInt(s, 0, 64)` accepts after removing `_`: decimal,
  `0x1F`, `0o17`, `0b101`, and the YAML 1.1 octal `0755` (= 493), which go-yaml v3 still reads;
  too large for int64 but fitting uint64 is still an integer;
* floats match `[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?` (so `1e3` and `08` are
  floats), plus `.inf`/`.nan` spellings; a float that overflows is a string;
* timestamps (`2024-01-01`) are tagged `!!timestamp` by go-yaml, but decode as strings into an
  untyped value, which is what Kubernetes objects are: here they are strings too.

Writing goes the other way: a new string is written plain only if *every* reader would take it
for a string, YAML 1.2 (go-yaml, us) and YAML 1.1 (PyYAML, older tools) alike, and if its
characters allow a plain scalar at all. Everything else is quoted. Over-quoting is harmless;
under-quoting corrupts data, so every test here errs towards quoting.
"""

from __future__ import annotations

import math
import re
from typing import Any

# ---------------------------------------------------------------------------------------------
# Reading: go-yaml v3's resolver for plain scalars.

_INF = math.inf
_FIXED: dict[str, Any] = {
    "": None, "~": None, "null": None, "Null": None, "NULL": None,
    "true": True, "True": True, "TRUE": True,
    "false": False, "False": False, "FALSE": False,
    ".nan": math.nan, ".NaN": math.nan, ".NAN": math.nan,
    ".inf": _INF, ".Inf": _INF, ".INF": _INF,
    "+.inf": _INF, "+.Inf": _INF, "+.INF": _INF,
    "-.inf": -_INF, "-.Inf": -_INF, "-.INF": -_INF,
}  # fmt: skip
_NUMERIC_START = frozenset("+-0123456789")
_LOOKUP_START = frozenset("yYnNtTfFoO~")  # go-yaml's 'M' hint: only the table can match
_INT = re.compile(r"([-+]?)(?:0[xX]([0-9a-fA-F]+)|0[oO]([0-7]+)|0[bB]([01]+)|(0[0-7]*)|([1-9][0-9]*))")
_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?")
_DOT_FLOAT = re.compile(r"\.[0-9]+(?:[eE][-+]?[0-9]+)?")
_INT64_MIN, _INT64_MAX, _UINT64_MAX = -(2**63), 2**63 - 1, 2**64 - 1


def resolve_plain(text: str) -> Any:
    """The value of a plain (unquoted, untagged) scalar, as go-yaml v3 decodes it.

    Returns None, a bool, an int, a float or the text itself. Never raises.
    """
    first = text[:1]
    if first in _LOOKUP_START or not first:
        return _FIXED.get(text, text)
    if first == ".":
        value = _FIXED.get(text, text)
        if value is text and _DOT_FLOAT.fullmatch(text):
            number = float(text)
            return text if math.isinf(number) else number
        return value
    if first in _NUMERIC_START:
        value = _FIXED.get(text, text)
        return _resolve_number(text) if value is text else value
    return text


def _resolve_number(text: str) -> Any:
    plain = text.replace("_", "")
    match = _INT.fullmatch(plain)
    if match:
        sign, hexa, octal, binary, zero_octal, decimal = match.groups()
        if hexa is not None:
            number = int(hexa, 16)
        elif octal is not None:
            number = int(octal, 8)
        elif binary is not None:
            number = int(binary, 2)
        elif zero_octal is not None:
            number = int(zero_octal, 8)
        elif len(decimal) <= 20:
            number = int(decimal)
        else:  # out of uint64's range, and int() refuses more than 4,300 digits: not an integer
            number = _UINT64_MAX + 1
        if sign == "-":
            number = -number
        if _INT64_MIN <= number <= _INT64_MAX or (not sign and number <= _UINT64_MAX):
            return number
    if _FLOAT.fullmatch(plain):
        real = float(plain)
        if not math.isinf(real):  # Go's ParseFloat fails on overflow: the scalar stays a string
            return real
    return text


# ---------------------------------------------------------------------------------------------
# Writing: when may a string be plain, and how is every other scalar spelled.

# Strings made of these characters, starting with a letter or `/`, are plain-safe unless they
# are one of the words below (checked case-insensitively: over-quoting is harmless).
_SIMPLE = re.compile(r"[A-Za-z/][-A-Za-z0-9_./]*")
_WORDS_11 = frozenset({"y", "n", "yes", "no", "on", "off", "true", "false", "null"})
# Anything that starts like a number, a date or a YAML 1.1 sexagesimal is quoted; so is `._`
# or `_1`, which some readers take for numbers with digit separators.
_NUMBERISH = re.compile(r"[-+]?[0-9._]")
_INDICATORS = frozenset("-?:,[]{}#&*!|>'\"%@`")
_FLOW_INDICATORS = frozenset(",[]{}")
# Characters a plain or single-quoted scalar cannot carry: everything outside YAML's printable
# set, plus the ones YAML 1.1 treats as line breaks (NEL, LS, PS) and the byte-order mark. Written
# as the (quick to compile) complement of the printable ranges.
_NEEDS_ESCAPE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff\ufeff\ufffe\uffff]")
_PRINTABLE_MULTILINE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff\ufeff\ufffe\uffff]")
_ESCAPES = {
    "\0": "\\0", "\x07": "\\a", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\x0b": "\\v",
    "\x0c": "\\f", "\r": "\\r", "\x1b": "\\e", '"': '\\"', "\\": "\\\\", "\x85": "\\N",
    "\xa0": "\\_", "\u2028": "\\L", "\u2029": "\\P",
}  # fmt: skip


def plain_safe(text: str, *, flow: bool = False, exact: bool = False) -> bool:
    """True if `text` can be written as a plain scalar and every YAML reader reads it back as
    this very string: no bool, null, number, timestamp, merge key or syntax of YAML 1.1 or 1.2.

    `flow=True` asks the stricter question for a scalar inside `[...]` or `{...}`. `exact=True`
    quotes only what YAML 1.1's or 1.2's resolver would really read otherwise (`8Gi` stays plain,
    as go-yaml writes it) instead of everything that starts like a number.
    """
    if _SIMPLE.fullmatch(text):
        return text.lower() not in _WORDS_11
    if not text or text[0] in " \t" or text[-1] in " \t:" or _NEEDS_ESCAPE.search(text):
        return False
    first = text[0]
    if first in _INDICATORS:
        # `-x`, `?x` and `:x` may start a plain scalar, but gain nothing over quoting.
        return False
    if ": " in text or " #" in text or "\t" in text or text.lower() in _WORDS_11:
        return False
    if flow and (":" in text or any(c in _FLOW_INDICATORS for c in text)):
        return False
    if exact and _YAML11_NOT_STRING.fullmatch(text) or not exact and _NUMBERISH.match(text) or text in ("<<", "="):
        return False
    return resolve_plain(text) is text


# What PyYAML's (YAML 1.1) resolver reads as an int, a float or a timestamp (its resolver.py).
_YAML11_NOT_STRING = re.compile(
    r"[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+"
    r"|[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?"
    r"|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)"
    r"|[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}(?:(?:[Tt]|[ \t]+).*)?"
)


def scalar_text(value: Any, *, flow: bool = False) -> str:
    """A single-line YAML scalar for None, a bool, an int, a float or a str.

    Strings come out plain when `plain_safe`, single-quoted when they need no escapes, and
    double-quoted otherwise. Raises TypeError for any other type, ValueError for an integer
    outside the 64-bit range go-yaml reads as an integer.
    """
    if isinstance(value, str):
        if plain_safe(value, flow=flow):
            return value
        return quoted(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        number = int(value)  # an IntEnum or other subclass writes as its number
        if not _INT64_MIN <= number <= _UINT64_MAX:
            # go-yaml would read it back as a float: refuse rather than change its meaning.
            raise ValueError(f"the integer {number} is out of YAML's (Go's 64-bit) range")
        return str(number)
    if isinstance(value, float):
        return float_text(value)
    raise TypeError(f"cannot write a value of type {type(value).__name__} as YAML")


def quoted(text: str) -> str:
    """`text` as a quoted scalar: single quotes if nothing needs escaping, else double quotes."""
    if not _NEEDS_ESCAPE.search(text):
        return "'" + text.replace("'", "''") + "'"
    return double_quoted(text)


def double_quoted(text: str) -> str:
    """`text` as a double-quoted scalar, escaping everything that is not plainly printable."""
    return '"' + _ESCAPE_ALL.sub(_escape_one, text) + '"'


_ESCAPE_ALL = re.compile('["\\\\]|' + _NEEDS_ESCAPE.pattern)


def _escape_one(match: re.Match[str]) -> str:
    char = match.group()
    known = _ESCAPES.get(char)
    if known is not None:
        return known
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02X}"
    if code <= 0xFFFF:
        return f"\\u{code:04X}"
    return f"\\U{code:08X}"


def float_text(value: float) -> str:
    """A float spelled so that YAML 1.1 and 1.2 both read a float: `1.0e+20`, never `1e+20`."""
    if math.isnan(value):
        return ".nan"
    if math.isinf(value):
        return ".inf" if value > 0 else "-.inf"
    text = repr(value)
    if "." not in text:
        mantissa, _, exponent = text.partition("e")
        text = f"{mantissa}.0e{exponent}" if exponent else f"{mantissa}.0"
    return text


def literal_ok(text: str) -> bool:
    """True if a multi-line string can be written as a `|` block scalar and read back exactly.

    Refuses what block scalars cannot carry or what readers disagree on: carriage returns and
    other non-printable characters, trailing spaces before a line break, whitespace-only lines,
    leading blank lines or indentation, and strings that are only line breaks.
    """
    if "\n" not in text or text[0] in " \t\n" or not text.strip():
        return False
    if _PRINTABLE_MULTILINE.search(text) or " \n" in text or "\t\n" in text:
        return False
    body = text.rstrip("\n")
    if body != body.rstrip(" \t"):
        return False
    return all(line.strip(" \t") or not line for line in body.split("\n"))


def same_value(a: Any, b: Any) -> bool:
    """Equality that also requires the same type all the way down (`1`, `1.0` and `True` differ)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        if len(a) != len(b) or list(a) != list(b):
            return False
        return all(same_value(value, b[key]) for key, value in a.items())
    if isinstance(a, list):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b) or (a != a and b != b)
    return bool(a == b)
