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


def attach_and_label(request: Request) -> Answer:
    """attach_first, and the label `decorated: "true"` on the target."""
    return {**attach_first(request), "labels": {"decorated": "true"}}


def finalize_at_once(request: Request) -> Answer:
    """Finalize in one answer: no attachments, and done (without waiting to see them gone)."""
    return {"attachments": [], "finalized": True}


def attach_first_slowly(request: Request) -> Answer:
    """attach_first, after a pause: passes are still in flight when a spec edit arrives."""
    import time

    time.sleep(0.2)
    return attach_first(request)


def fail_finalize(request: Request) -> Answer:
    """A finalize hook that never succeeds."""
    raise RuntimeError("the cleanup cannot be done")


def attach_secret(request: Request) -> Answer:
    """A Secret `<target>-secret` holding the target's data (attachments of another kind than the
    ConfigMap targets, so that only the targets' informer lists ConfigMaps)."""
    target = request["object"]
    return {"attachments": [{"apiVersion": "v1", "kind": "Secret",
                             "metadata": {"name": f"{target['metadata']['name']}-secret"},
                             "stringData": dict(target.get("data") or {})}]}
