"""The example controller in docs/runtime.md runs, under a manager, and does what the page says."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from reconcile import Kind, ObjectKey, conditions
from tests.waiting import eventually

DOC = (Path(__file__).resolve().parents[2] / "docs" / "runtime.md").read_text(encoding="utf-8")
GREETING = Kind("example.com/v1", "Greeting")
CONFIGMAP = Kind("v1", "ConfigMap")
WAIT = 10.0  # seconds the documented controller gets for each step


def example(name: str) -> str:
    match = re.search(rf"<!-- example: {name} -->\n```\w+\n(.*?)```", DOC, re.S)
    assert match, f"no `{name}` example in docs/runtime.md"
    return match.group(1)


def test_the_documented_greetings_controller_does_what_the_page_says(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "greeting-crd.yaml").write_text(example("crd"), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    world: dict[str, Any] = {}
    exec(compile(example("controller"), "docs/runtime.md (controller)", "exec"), world)
    exec(compile(example("run"), "docs/runtime.md (run)", "exec"), world)
    cluster, manager, runner = world["cluster"], world["manager"], world["runner"]
    key, child = ObjectKey("default", "world"), ObjectKey("default", "world-greeting")
    try:
        configmap = eventually(lambda: cluster.get(CONFIGMAP, child), WAIT)
        assert configmap["data"] == {"message": "Hello, World!"}
        assert configmap["metadata"]["ownerReferences"][0]["name"] == "world"
        greeting = eventually(lambda: (g := cluster.get(GREETING, key)) and conditions.is_true(g, "Ready") and g, WAIT)
        assert greeting["metadata"]["finalizers"] == ["example.com/say-goodbye"]

        cluster.update({**configmap, "data": {"message": "Hello, nobody."}})  # someone edits it by hand
        eventually(lambda: cluster.get(CONFIGMAP, child)["data"]["message"] == "Hello, World!", WAIT)

        cluster.delete(GREETING, key)
        eventually(lambda: cluster.get(GREETING, key) is None, WAIT)
        farewells = cluster.get(CONFIGMAP, ObjectKey("default", "farewells"))
        assert farewells is not None and farewells["data"] == {"world": "Goodbye, World!"}
        assert cluster.get(CONFIGMAP, child) is None  # garbage-collected with its owner
    finally:
        manager.stop()
        runner.join(10)
    assert not runner.is_alive()
