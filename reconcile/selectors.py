"""Label and field selectors: parsed once, matched many times.

A label selector arrives in either of Kubernetes' two spellings: the string syntax of
`?labelSelector=` (`app=web,tier in (a,b),!legacy,version>2`) or the `metav1.LabelSelector` map
(`{"matchLabels": {...}, "matchExpressions": [{"key", "operator", "values"}]}`). Both compile to
one `LabelSelector`: a tuple of `Requirement`s that must all hold. Semantics are the API
server's: `!=` and `notin` match an object without the key, `in` needs it, `>`/`<` compare
integers, and an empty selector matches everything. `str()` gives the canonical string form,
which is what a real API server is sent.

A field selector is `metadata.name=x,status.phase!=Running` (`=`, `==`, `!=`, with `\\,`, `\\=`
and `\\\\` escapes). The real API server supports only a few fields per kind
(`metadata.name`, `metadata.namespace`, and e.g. `spec.nodeName` and `status.phase` for pods);
this module matches any dotted path on any kind, and EmbeddedCluster refuses the fields a real
server would not support before it asks this module to match. A missing field reads as "" (so
`spec.nodeName=` matches unscheduled pods), booleans as `true`/`false`, numbers as written, and
a map or list never equals a value.

Pure: no state, no I/O. Syntax errors raise `BadRequest`, as the API server answers them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Literal, NamedTuple

from reconcile.errors import BadRequest

Operator = Literal["=", "!=", "in", "notin", "exists", "!", ">", "<"]
FieldOperator = Literal["=", "!="]

_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]\Z")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
_TOKEN = re.compile(r"\s*(?:(==|!=|=|!|\(|\)|,|<|>)|([^\s!=(),<>]+))")
_EXPRESSION_OPERATORS: dict[str, Operator] = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}


class Requirement(NamedTuple):
    """One condition on labels: `key`, an operator, and the values it compares with."""

    key: str
    operator: Operator
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        op, present = self.operator, self.key in labels
        if op == "exists":
            return present
        if op == "!":
            return not present
        if op in ("!=", "notin"):
            return not present or labels[self.key] not in self.values
        if not present:
            return False
        if op in ("=", "in"):
            return labels[self.key] in self.values
        try:
            found, bound = int(labels[self.key]), int(self.values[0])
        except ValueError:
            return False
        return found > bound if op == ">" else found < bound

    def __str__(self) -> str:
        if self.operator == "exists":
            return self.key
        if self.operator == "!":
            return f"!{self.key}"
        if self.operator in ("in", "notin"):
            return f"{self.key} {self.operator} ({','.join(sorted(self.values))})"
        return f"{self.key}{self.operator}{self.values[0]}"


class LabelSelector:
    """A compiled label selector; `matches(labels)` is true when every requirement holds."""

    __slots__ = ("requirements",)

    def __init__(self, requirements: tuple[Requirement, ...] = ()) -> None:
        self.requirements = requirements

    @property
    def empty(self) -> bool:
        """True for the selector that matches everything."""
        return not self.requirements

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(requirement.matches(labels) for requirement in self.requirements)

    def __str__(self) -> str:
        return ",".join(str(r) for r in sorted(self.requirements, key=lambda r: r.key))

    def __repr__(self) -> str:
        return f"LabelSelector({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LabelSelector) and str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))


class FieldRequirement(NamedTuple):
    """One condition on a field: its dotted path, `=` or `!=`, and the value as text."""

    field: str
    operator: FieldOperator
    value: str

    def matches(self, obj: Mapping[str, Any]) -> bool:
        found = field_text(obj, self.field)
        return (found == self.value) == (self.operator == "=")

    def __str__(self) -> str:
        escaped = self.value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")
        return f"{self.field}{self.operator}{escaped}"


class FieldSelector:
    """A compiled field selector; `matches(obj)` is true when every requirement holds."""

    __slots__ = ("requirements",)

    def __init__(self, requirements: tuple[FieldRequirement, ...] = ()) -> None:
        self.requirements = requirements

    @property
    def empty(self) -> bool:
        return not self.requirements

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return all(requirement.matches(obj) for requirement in self.requirements)

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)

    def __repr__(self) -> str:
        return f"FieldSelector({str(self)!r})"


EVERYTHING = LabelSelector()
ANY_FIELDS = FieldSelector()


def parse_labels(selector: str | Mapping[str, Any] | LabelSelector | None) -> LabelSelector:
    """A compiled selector from the string syntax or a matchLabels/matchExpressions map.

    None and "" match everything. Raises BadRequest naming the selector and what is wrong."""
    if selector is None:
        return EVERYTHING
    if isinstance(selector, LabelSelector):
        return selector
    if isinstance(selector, str):
        return LabelSelector(_parse_label_string(selector))
    if isinstance(selector, Mapping):
        return LabelSelector(_parse_label_map(selector))
    raise BadRequest(f"a label selector must be a string or a matchLabels/matchExpressions map, "
                     f"not {type(selector).__name__}")


def parse_fields(selector: str | FieldSelector | None) -> FieldSelector:
    """A compiled field selector; None and "" match everything. Raises BadRequest."""
    if selector is None:
        return ANY_FIELDS
    if isinstance(selector, FieldSelector):
        return selector
    if not isinstance(selector, str):
        raise BadRequest(f"a field selector must be a string, not {type(selector).__name__}")
    requirements = []
    for term in _split_unescaped(selector, ","):
        if not term.strip():
            if selector.strip():
                raise BadRequest(f"invalid field selector {selector!r}: empty requirement")
            continue
        requirements.append(_parse_field_term(selector, term))
    return FieldSelector(tuple(requirements))


def field_text(obj: Mapping[str, Any], path: str) -> str | None:
    """The value at a dotted path as a field selector compares it; None for a map or list."""
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
        if value is None:
            return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return json.dumps(value)
    return None


def check_label_key(key: str) -> str | None:
    """Why `key` is not a valid label key (a qualified name), or None when it is."""
    prefix, slash, name = key.rpartition("/")
    if slash and not prefix:
        return "prefix part must be non-empty"
    if slash and (len(prefix) > 253 or not _SUBDOMAIN.match(prefix)):
        return ("prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                "characters, '-' or '.', and must start and end with an alphanumeric character")
    if not name:
        return "name part must be non-empty"
    if len(name) > 63:
        return "name part must be no more than 63 characters"
    if not _NAME.match(name):
        return ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
                "and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', "
                "regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
    return None


def check_label_value(value: str) -> str | None:
    """Why `value` is not a valid label value, or None when it is ("" is valid)."""
    if len(value) > 63:
        return "must be no more than 63 characters"
    if value and not _NAME.match(value):
        return ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
                "or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
                "'my_value',  or '12345', regex used for validation is "
                "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")
    return None


def _parse_label_string(text: str) -> tuple[Requirement, ...]:
    tokens = _tokenize(text)
    requirements: list[Requirement] = []
    pos = 0

    def fail(why: str) -> BadRequest:
        return BadRequest(f"unable to parse label selector {text!r}: {why}")

    def take() -> str | None:
        nonlocal pos
        token = tokens[pos] if pos < len(tokens) else None
        pos += 1
        return token

    def peek() -> str | None:
        return tokens[pos] if pos < len(tokens) else None

    while pos < len(tokens):
        token = take()
        if token == "!":
            key = take()
            if key is None or _is_operator(key):
                raise fail("expected a label key after '!'")
            requirements.append(_requirement(text, key, "!", ()))
        elif token is None or _is_operator(token):
            raise fail(f"found {token!r}, expected a label key")
        else:
            requirements.append(_parse_requirement(text, token, take, peek, fail))
        separator = take()
        if separator is None:
            break
        if separator != ",":
            raise fail(f"found {separator!r}, expected ','")
        if peek() is None:
            raise fail("a ',' must be followed by a requirement")
    return tuple(requirements)


def _parse_requirement(text: str, key: str, take: Any, peek: Any, fail: Any) -> Requirement:
    op = peek()
    if op is None or op == ",":
        return _requirement(text, key, "exists", ())
    take()
    if op in ("=", "==", "!="):
        value = peek()
        if value is None or value == ",":
            return _requirement(text, key, "!=" if op == "!=" else "=", ("",))
        take()
        if _is_operator(value):
            raise fail(f"found {value!r}, expected a value after {op!r}")
        return _requirement(text, key, "!=" if op == "!=" else "=", (value,))
    if op in (">", "<"):
        value = take()
        if value is None or _is_operator(value):
            raise fail(f"expected an integer after {op!r}")
        return _requirement(text, key, ">" if op == ">" else "<", (value,))
    if op in ("in", "notin"):
        if take() != "(":
            raise fail(f"expected '(' after {op!r}")
        values: list[str] = []
        while True:
            token = take()
            if token == ")" and not values:
                raise fail(f"{op!r} needs at least one value")
            if token is None or _is_operator(token):
                raise fail(f"found {token!r}, expected a value in ({op})")
            values.append(token)
            closing = take()
            if closing == ")":
                return _requirement(text, key, "in" if op == "in" else "notin", tuple(values))
            if closing != ",":
                raise fail(f"found {closing!r}, expected ',' or ')'")
    raise fail(f"found {op!r}, expected an operator (=, ==, !=, in, notin, <, >) after {key!r}")


def _parse_label_map(selector: Mapping[str, Any]) -> tuple[Requirement, ...]:
    unknown = set(selector) - {"matchLabels", "matchExpressions"}
    if unknown:
        raise BadRequest(f"a label selector map takes only matchLabels and matchExpressions, "
                         f"not {', '.join(sorted(unknown))}")
    text = json.dumps(selector, sort_keys=True, default=str)
    match_labels = selector.get("matchLabels") or {}
    expressions = selector.get("matchExpressions") or []
    if not isinstance(match_labels, Mapping) or not isinstance(expressions, list):
        raise BadRequest(f"invalid label selector {text}: matchLabels must be a map and matchExpressions a list")
    requirements = [_requirement(text, str(k), "=", (_as_text(text, v),)) for k, v in match_labels.items()]
    for expression in expressions:
        if not isinstance(expression, Mapping):
            raise BadRequest(f"invalid label selector {text}: each matchExpression must be a map")
        operator = _EXPRESSION_OPERATORS.get(str(expression.get("operator")))
        if operator is None:
            raise BadRequest(f"invalid label selector {text}: {expression.get('operator')!r} is not a valid "
                             f"label selector operator (In, NotIn, Exists, DoesNotExist)")
        values = expression.get("values") or []
        if not isinstance(values, list):
            raise BadRequest(f"invalid label selector {text}: values must be a list")
        if operator in ("in", "notin") and not values:
            raise BadRequest(f"invalid label selector {text}: for 'In', 'NotIn' operators, values set can't be empty")
        if operator in ("exists", "!") and values:
            raise BadRequest(f"invalid label selector {text}: values set must be empty for exists and does not exist")
        key = str(expression.get("key") or "")
        requirements.append(_requirement(text, key, operator, tuple(_as_text(text, v) for v in values)))
    return tuple(requirements)


def _requirement(text: str, key: str, operator: Operator, values: tuple[str, ...]) -> Requirement:
    problem = check_label_key(key)
    if problem:
        raise BadRequest(f"unable to parse label selector {text!r}: invalid label key {key!r}: {problem}")
    for value in values:
        if operator in (">", "<"):
            if not re.fullmatch(r"-?[0-9]+", value):
                raise BadRequest(f"unable to parse label selector {text!r}: for {operator!r}, "
                                 f"{value!r} must be an integer")
        elif problem := check_label_value(value):
            raise BadRequest(f"unable to parse label selector {text!r}: invalid label value {value!r}: {problem}")
    return Requirement(key, operator, values)


def _parse_field_term(selector: str, term: str) -> FieldRequirement:
    index = 0
    while index < len(term):
        if term[index] == "\\":
            index += 2
            continue
        for op in ("!=", "==", "="):
            if term.startswith(op, index):
                field, value = term[:index].strip(), _unescape(selector, term[index + len(op):])
                if not field:
                    raise BadRequest(f"invalid field selector {selector!r}: a requirement needs a field name")
                return FieldRequirement(field, "!=" if op == "!=" else "=", value)
        index += 1
    raise BadRequest(f"invalid field selector {selector!r}: {term!r} is not of the form field=value or field!=value")


def _split_unescaped(text: str, separator: str) -> list[str]:
    parts, current, index = [], [], 0
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text):
            current.append(text[index:index + 2])
            index += 2
            continue
        if char == separator:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
        index += 1
    parts.append("".join(current))
    return parts


def _unescape(selector: str, value: str) -> str:
    out, index = [], 0
    while index < len(value):
        char = value[index]
        if char == "\\":
            if index + 1 >= len(value) or value[index + 1] not in "\\,=":
                raise BadRequest(f"invalid field selector {selector!r}: invalid escape sequence in {value!r}")
            out.append(value[index + 1])
            index += 2
            continue
        if char in ",=":
            raise BadRequest(f"invalid field selector {selector!r}: unescaped {char!r} in value {value!r}")
        out.append(char)
        index += 1
    return "".join(out)


def _tokenize(text: str) -> list[str]:
    tokens, pos = [], 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        match = _TOKEN.match(text, pos)
        if match is None:  # pragma: no cover - the token pattern accepts every non-space character
            raise BadRequest(f"unable to parse label selector {text!r} at position {pos}")
        tokens.append(match.group(1) or match.group(2))
        pos = match.end()
    return tokens


def _is_operator(token: str) -> bool:
    return token in ("==", "!=", "=", "!", "(", ")", ",", "<", ">")


def _as_text(text: str, value: Any) -> str:
    if not isinstance(value, str):
        raise BadRequest(f"invalid label selector {text}: label values must be strings, not {value!r}")
    return value
