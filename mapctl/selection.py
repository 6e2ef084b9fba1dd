"""Which objects are inputs of a parent: its duck-typed `spec.selector`, its namespace, and the
recursion guard.

Promises (the MapController proposal): a parent's `spec.selector` is read as a
`metav1.LabelSelector` (`matchLabels`, `matchExpressions`); absent, null or `{}` selects every
object. An object is an input of a parent when it lives in the parent's namespace (a cluster-scoped
parent, namespace "", takes only cluster-scoped inputs), its labels match, and its controller
ownerReference is not the parent: an output that is also of an input kind (ConfigMaps made from
ConfigMaps) never feeds back into its own parent, however loose the selector.

Difference from the proposal: given the MapController's name, an object that MapController
stamped (an output of any parent) is no input either. The proposal's guard alone lets two
parents of one namespace feed each other's outputs back in, each generation making the next,
until names grow too long.

Selector semantics are the API server's (reconcile.selectors): `NotIn` matches an absent key,
`In` never does. A selector that cannot be compiled is a `SelectorError` naming the field
(`spec.selector.matchExpressions[0].operator: ...`); fields other than `matchLabels` and
`matchExpressions` are ignored, as the parent's kind is not ours to validate.

The API server applies a parent's selector for us (server_selector): inputs are listed and
watched per distinct (input kind, namespace, selector), so memory follows what parents select.

Pure and read-only: objects are never changed or copied.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mapctl.keys import CONTROLLER_LABEL
from reconcile.errors import ReconcileError
from reconcile.fields import describe
from reconcile.objects import controller_of
from reconcile.selectors import EVERYTHING, LabelSelector, check_label_key, check_label_value, parse_labels

_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


class SelectorError(ReconcileError):
    """A parent whose selector cannot be used; str() is `"{field}: {problem}"`."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


def parent_selector(parent: Mapping[str, Any]) -> LabelSelector:
    """The compiled `spec.selector` of `parent`; everything when it is absent, null or empty.
    Raises SelectorError naming the exact field at fault."""
    spec = parent.get("spec")
    if spec is None:
        return EVERYTHING
    if not isinstance(spec, Mapping):
        raise SelectorError("spec", f"must be a map, not {describe(spec)}")
    raw = spec.get("selector")
    if raw is None:
        return EVERYTHING
    field = "spec.selector"
    if not isinstance(raw, Mapping):
        raise SelectorError(field, f"must be a map, not {describe(raw)}")
    match = raw.get("matchLabels")
    if match is None:
        match = {}
    if not isinstance(match, Mapping):
        raise SelectorError(f"{field}.matchLabels", f"must be a map, not {describe(match)}")
    for key, value in match.items():
        where = f"{field}.matchLabels[{json.dumps(key)}]"
        _check(check_label_key(key), key, where, "key")
        if not isinstance(value, str):
            raise SelectorError(where, f"must be a string, not {describe(value)}")
        _check(check_label_value(value), value, where, "value")
    expressions = raw.get("matchExpressions")
    if expressions is None:
        expressions = []
    if not isinstance(expressions, list):
        raise SelectorError(f"{field}.matchExpressions", f"must be a list, not {describe(expressions)}")
    for i, expression in enumerate(expressions):
        _check_expression(expression, f"{field}.matchExpressions[{i}]")
    return parse_labels({"matchLabels": dict(match), "matchExpressions": list(expressions)})


STAMPED = CONTROLLER_LABEL
"""The label selector of every output some MapController stamped (the key exists): what output
informers list and watch, so that the other objects of an output kind stay on the server."""


def server_selector(selector: LabelSelector) -> str | None:
    """The label selector to send to the API server for the inputs of a parent whose compiled
    `spec.selector` is `selector`; None for everything (the parent's whole namespace). The
    server applies it with the same semantics (reconcile.selectors), and is_input still decides."""
    return None if selector.empty else str(selector)


def is_input(obj: Mapping[str, Any], parent: Mapping[str, Any], selector: LabelSelector, *,
             controller: str = "") -> bool:
    """True when `obj` is an input of `parent`: same namespace, labels matching `selector` (from
    `parent_selector(parent)`), not controlled by `parent` itself (compared by uid), and, when
    `controller` is given, not an output of that MapController for any parent.

    Plain dict reads, no copies: a parent's pass asks this of every object of its input kinds."""
    meta, parent_meta = obj.get("metadata") or {}, parent.get("metadata") or {}
    if (meta.get("namespace") or "") != (parent_meta.get("namespace") or ""):
        return False
    labels = meta.get("labels")
    if not selector.matches(labels if isinstance(labels, dict) else None):
        return False
    if controller and isinstance(labels, dict) and labels.get(CONTROLLER_LABEL) == controller:
        return False
    if not meta.get("ownerReferences"):
        return True
    owner = controller_of(obj)
    parent_uid = parent_meta.get("uid")
    return not (owner is not None and parent_uid and owner.get("uid") == parent_uid)


def _check_expression(raw: Any, field: str) -> None:
    if not isinstance(raw, Mapping):
        raise SelectorError(field, f"must be a map, not {describe(raw)}")
    key = raw.get("key")
    if key is None or key == "":
        raise SelectorError(f"{field}.key", "required")
    if not isinstance(key, str):
        raise SelectorError(f"{field}.key", f"must be a string, not {describe(key)}")
    _check(check_label_key(key), key, f"{field}.key", "key")
    operator = raw.get("operator")
    if operator is None or operator == "":
        raise SelectorError(f"{field}.operator", "required")
    if operator not in _OPERATORS:
        shown = json.dumps(operator) if isinstance(operator, str) else describe(operator)
        raise SelectorError(f"{field}.operator",
                            f"{shown} is not a selector operator (In, NotIn, Exists, DoesNotExist)")
    values = raw.get("values")
    if values is None:
        values = []
    if not isinstance(values, list):
        raise SelectorError(f"{field}.values", f"must be a list, not {describe(values)}")
    if operator in ("In", "NotIn") and not values:
        raise SelectorError(f"{field}.values", f"must not be empty for {operator}")
    if operator in ("Exists", "DoesNotExist") and values:
        raise SelectorError(f"{field}.values", f"must be empty for {operator}")
    for i, value in enumerate(values):
        if not isinstance(value, str):
            raise SelectorError(f"{field}.values[{i}]", f"must be a string, not {describe(value)}")
        _check(check_label_value(value), value, f"{field}.values[{i}]", "value")


def _check(problem: str | None, text: str, field: str, what: str) -> None:
    if problem:
        raise SelectorError(field, f"{json.dumps(text)} is not a valid label {what}: {problem}")
