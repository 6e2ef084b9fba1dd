"""Python hooks of tests/e2e/test_decorators_e2e.py: one ConfigMap per Widget, its size as data."""

from __future__ import annotations

from typing import Any


def sync(request: dict[str, Any]) -> dict[str, Any]:
    widget = request["object"]
    attached = request["attachments"]["ConfigMap.v1"]
    return {"labels": {"decorated": "true"}, "status": {"attached": len(attached)},
            "attachments": [{"apiVersion": "v1", "kind": "ConfigMap",
                             "metadata": {"name": f"{widget['metadata']['name']}-widget"},
                             "data": {"size": str(widget["spec"]["size"])}}]}


def finalize(request: dict[str, Any]) -> dict[str, Any]:
    return {"attachments": [], "finalized": not request["attachments"]["ConfigMap.v1"]}
