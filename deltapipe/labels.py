"""Kubernetes label selectors, as the `@selector` operator evaluates them.

A selector is `{matchLabels: {...}, matchExpressions: [{key, operator, values}]}`; a map with
neither key is read as a plain matchLabels map. Semantics are Kubernetes': every requirement must
hold, `In`/`NotIn` need values, `Exists`/`DoesNotExist` take none, `NotIn` matches an absent key,
and an empty selector matches everything. Keys and values are checked against Kubernetes' syntax.
"""

from __future__ import annotations

import re
from typing import Any

from deltapipe.errors import ExpressionError
from deltapipe.values import as_string, describe, format_go_v

_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?\Z")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
_OP = "@selector"


def check_key(key: str) -> str:
    prefix, slash, name = key.rpartition("/")
    if not _NAME.match(name) or (slash and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix))):
        raise ExpressionError(f"{_OP}: invalid label key {key!r}")
    return key


def label_value(value: Any) -> str:
    """A label value as text (numbers and bools print as Go's %v would), checked for syntax."""
    if type(value) is bool:
        text = "true" if value else "false"
    elif type(value) is float:
        text = format_go_v(value)
    elif type(value) in (str, int):
        text = as_string(value, _OP)
    else:
        raise ExpressionError(f"{_OP}: a label value must be a scalar, got {describe(value)}")
    if text and not _NAME.match(text):
        raise ExpressionError(f"{_OP}: invalid label value {text!r}")
    return text


def matches(selector: dict[str, Any], labels: dict[str, Any]) -> bool:
    """Whether `labels` satisfy `selector`; raises ExpressionError for a malformed selector."""
    if "matchLabels" not in selector and "matchExpressions" not in selector:
        selector = {"matchLabels": selector}
    have = {check_key(str(k)): label_value(v) for k, v in labels.items()}
    match_labels = selector.get("matchLabels") or {}
    if type(match_labels) is not dict:
        raise ExpressionError(f"{_OP}: matchLabels must be a map, got {describe(match_labels)}")
    for key, want in match_labels.items():
        if have.get(check_key(str(key))) != label_value(want):
            return False
    expressions = selector.get("matchExpressions") or []
    if type(expressions) is not list:
        raise ExpressionError(f"{_OP}: matchExpressions must be a list, got {describe(expressions)}")
    return all(_requirement_holds(req, have) for req in expressions)


def _requirement_holds(req: Any, have: dict[str, str]) -> bool:
    if type(req) is not dict:
        raise ExpressionError(f"{_OP}: a matchExpressions entry must be a map, got {describe(req)}")
    key = check_key(str(req.get("key", "")))
    operator = req.get("operator")
    values = req.get("values") or []
    if operator not in _OPERATORS:
        raise ExpressionError(f"{_OP}: unknown operator {operator!r} (expected one of {', '.join(_OPERATORS)})")
    if type(values) is not list:
        raise ExpressionError(f"{_OP}: values of {key!r} must be a list, got {describe(values)}")
    if operator in ("In", "NotIn") and not values:
        raise ExpressionError(f"{_OP}: operator {operator} on {key!r} needs at least one value")
    if operator in ("Exists", "DoesNotExist") and values:
        raise ExpressionError(f"{_OP}: operator {operator} on {key!r} takes no values")
    allowed = {label_value(v) for v in values}
    if operator == "In":
        return key in have and have[key] in allowed
    if operator == "NotIn":
        return key not in have or have[key] not in allowed
    if operator == "Exists":
        return key in have
    return key not in have
