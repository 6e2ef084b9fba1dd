"""Python hooks for the end-to-end tests: `python: {function: tests.decorators.pyhooks:<name>}`.

Each takes the request a webhook would get and returns the answer, computed from the target
alone (no state kept between calls).
"""

from __future__ import annotations

from typing import Any

Request = dict[str, Any]
Answer = dict[str, Any]


def _config(target: dict[str, Any], suffix: str, data: dict[str, str]) -> dict[str, Any]:
    meta = target["metadata"]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{meta['name']}-{suffix}"}, "data": data}


def attach_first(request: Request) -> Answer:
    """A ConfigMap `<target>-first` recording the target's kind."""
    return {"attachments": [_config(request["object"], "first", {"kind": request["object"]["kind"]})]}


def attach_second(request: Request) -> Answer:
    """A ConfigMap `<target>-second` (what a DecoratorController's edited spec switches to)."""
    return {"attachments": [_config(request["object"], "second", {"kind": request["object"]["kind"]})]}


def report_status(request: Request) -> Answer:
    """No attachments; writes back a status naming the target, the label `decorated: "true"`, and
    deletes the label `stale` and the annotation `obsolete` (null values)."""
    name = request["object"]["metadata"]["name"]
    return {"status": {"phase": "Decorated", "observedName": name},
            "labels": {"decorated": "true", "stale": None},
            "annotations": {"obsolete": None}}
