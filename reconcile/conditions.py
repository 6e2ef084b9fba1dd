"""Status conditions with `metav1.Condition` semantics.

A condition is `{type, status: "True"|"False"|"Unknown", reason, message, lastTransitionTime,
observedGeneration}`. Setting one keeps `lastTransitionTime` unless `status` changes (so a
condition that flips back and forth tells when, and one that is merely re-asserted does not look
new); `reason` and `message` are updated every time. Functions here are pure: they return new
lists and objects and never change what they are given.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from reconcile.objects import Obj, rfc3339

Status = Literal["True", "False", "Unknown"]
STATUSES = ("True", "False", "Unknown")


def find(conditions: Sequence[Mapping[str, Any]] | None, type_: str) -> Mapping[str, Any] | None:
    for condition in conditions or ():
        if condition.get("type") == type_:
            return condition
    return None


def conditions_of(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    status = obj.get("status")
    found = status.get("conditions") if isinstance(status, Mapping) else None
    return [dict(c) for c in found if isinstance(c, Mapping)] if isinstance(found, list) else []


def is_true(obj: Mapping[str, Any], type_: str) -> bool:
    condition = find(conditions_of(obj), type_)
    return condition is not None and condition.get("status") == "True"


def set_condition(conditions: Sequence[Mapping[str, Any]] | None, type_: str, status: Status, reason: str,
                  message: str = "", *, now: float, observed_generation: int | None = None) -> list[dict[str, Any]]:
    """The conditions with `type_` set; other conditions keep their order and content."""
    if status not in STATUSES:
        raise ValueError(f"condition status must be one of {', '.join(STATUSES)}, got {status!r}")
    out = [dict(c) for c in conditions or ()]
    for condition in out:
        if condition.get("type") == type_:
            if condition.get("status") != status:
                condition["lastTransitionTime"] = rfc3339(now)
            condition.update(status=status, reason=reason, message=message)
            _set_generation(condition, observed_generation)
            return out
    condition = {"type": type_, "status": status, "reason": reason, "message": message,
                 "lastTransitionTime": rfc3339(now)}
    _set_generation(condition, observed_generation)
    out.append(condition)
    return out


def remove_condition(conditions: Sequence[Mapping[str, Any]] | None, type_: str) -> list[dict[str, Any]]:
    return [dict(c) for c in conditions or () if c.get("type") != type_]


def with_condition(obj: Obj, type_: str, status: Status, reason: str, message: str = "", *, now: float) -> Obj:
    """A copy of obj whose status carries the condition, observedGeneration from its generation."""
    out = copy.deepcopy(obj)
    generation = (out.get("metadata") or {}).get("generation")
    state = out.setdefault("status", {})
    state["conditions"] = set_condition(state.get("conditions"), type_, status, reason, message, now=now,
                                        observed_generation=generation if isinstance(generation, int) else None)
    return out


def _set_generation(condition: dict[str, Any], generation: int | None) -> None:
    if generation is not None:
        condition["observedGeneration"] = generation
