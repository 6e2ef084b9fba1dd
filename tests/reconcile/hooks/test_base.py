"""Durations read as Go reads them, and response checks that keep JSON's types apart."""

from __future__ import annotations

from typing import Any

import pytest

from reconcile.hooks import HookConfigError, HookError
from reconcile.hooks.base import check_response, decode_response, parse_duration

SHAPE = {"resyncAfterSeconds": (int, float, type(None)), "finalized": (bool, type(None))}


@pytest.mark.parametrize(("text", "seconds"), [
    ("10s", 10.0), ("1m30s", 90.0), ("500ms", 0.5), ("1.5h", 5400.0), ("-2s", -2.0), ("0", 0.0),
    ("+1h2m3.5s", 3723.5), ("250us", 0.00025), ("3µs", 0.000003), (".5s", 0.5), ("2h0m0s", 7200.0),
])
def test_durations_read_as_go_reads_them(text: str, seconds: float) -> None:
    assert parse_duration(text, "f") == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["10x", "", "10", "s", "1.s.", "ten seconds", "1 s", "."])
def test_anything_else_is_not_a_duration(text: str) -> None:
    with pytest.raises(HookConfigError) as raised:
        parse_duration(text, "spec.hooks.sync.webhook.timeout")
    assert str(raised.value).startswith(f'spec.hooks.sync.webhook.timeout: "{text}" is not a duration')


@pytest.mark.parametrize(("answer", "found"), [({"finalized": 1}, "number"), ({"resyncAfterSeconds": False}, "boolean"),
                                              ({"resyncAfterSeconds": "5"}, "string")])
def test_bool_and_number_are_different_types(answer: dict[str, Any], found: str) -> None:
    with pytest.raises(HookError, match=f"got {found}$"):
        check_response(answer, SHAPE, strict=False, source="hook")


def test_a_duplicated_key_deep_inside_is_found_when_strict() -> None:
    shape = {**SHAPE, "x": (dict,)}
    body = b'{"x": {"a": [{"k": 1, "k": 2}]}}'
    assert decode_response(body, shape, strict=False, source="hook") == {"x": {"a": [{"k": 2}]}}
    with pytest.raises(HookError, match="duplicate key 'k'"):
        decode_response(body, shape, strict=True, source="hook")


def test_a_body_that_is_not_utf8_is_invalid_json() -> None:
    with pytest.raises(HookError, match="invalid JSON"):
        decode_response(b'{"finalized": "\xff"}', SHAPE, strict=False, source="hook")
