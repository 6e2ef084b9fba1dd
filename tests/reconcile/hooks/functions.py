"""Python hooks for test_python.py, named as "tests.reconcile.hooks.functions:<name>"."""

from __future__ import annotations

import threading
from typing import Any

CONSTANT_ANSWER: dict[str, Any] = {"labels": {"kept": "as written"}}
NOT_A_FUNCTION = 42

started = threading.Event()  # set by `blocked` when it begins
release = threading.Event()  # `blocked` returns once this is set
finished = threading.Event()  # set by `blocked` when it returns


def sync(request: dict[str, Any]) -> dict[str, Any]:
    """A decorator sync hook: one ConfigMap per target, named after it."""
    meta = request["object"]["metadata"]
    attachment = {"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": f"{meta['name']}-decorated", "namespace": meta.get("namespace", "")}}
    return {"attachments": [attachment], "labels": {"decorated": "yes"}}


def meddle(request: dict[str, Any]) -> dict[str, Any]:
    """Changes the request it was given, then answers with a part of it."""
    request["object"]["metadata"]["name"] = "changed"
    return {"status": request["object"]["metadata"]}


def constant(request: dict[str, Any]) -> dict[str, Any]:
    return CONSTANT_ANSWER


def explode(request: dict[str, Any]) -> dict[str, Any]:
    raise ValueError("no good")


def listing(request: dict[str, Any]) -> list[Any]:
    return []


def extra_field(request: dict[str, Any]) -> dict[str, Any]:
    return {"children": []}


def blocked(request: dict[str, Any]) -> dict[str, Any]:
    started.set()
    release.wait(10)
    finished.set()
    return {}


def blocked_for_stuck(request: dict[str, Any]) -> dict[str, Any]:
    """Blocks like `blocked` when the target is named "stuck"; answers at once otherwise."""
    if request["object"]["metadata"]["name"] == "stuck":
        return blocked(request)
    return {"labels": {"answered": request["object"]["metadata"]["name"]}}


class Hooks:
    @staticmethod
    def nested(request: dict[str, Any]) -> dict[str, Any]:
        return {"labels": {"from": "Hooks.nested"}}


calls: list[str] = []  # names of the requests `recording` was called with


def recording(request: dict[str, Any]) -> dict[str, Any]:
    """Records that it ran, for tests that check a hook was never called."""
    calls.append(request["object"]["metadata"]["name"])
    return {}
