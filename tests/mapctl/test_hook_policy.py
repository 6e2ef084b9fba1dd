"""MapControllers whose hooks the manager's HookPolicy refuses: reported on the MapController
(condition `Ready=False` and a Warning Event `CreateError` naming the field), never called or
read, not retried, while the other MapControllers keep mapping.

The stage's manager allows python hooks from tests.mapctl.pyhooks and mapctl.examples, and
credentials from the namespace `default` (support.MANAGER_POLICY).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from mapctl.protocol import MAP_SHAPE, TOMBSTONE_SHAPE
from reconcile import ObjectKey, conditions
from reconcile.hooks import build_hook
from tests.commands import deployed_hook_policy
from tests.decorators.attacks import PathTrap, builtins_intact
from tests.mapctl import pyhooks
from tests.mapctl.support import (
    MAP_CONTROLLER,
    WAIT,
    Stage,
    bucket,
    map_controller,
    python,
    service,
    stage,
)
from tests.reconcile.support import RecordingServer
from tests.waiting import eventually

__all__ = ["stage"]  # a fixture, imported to be found here

MakeStage = Callable[..., Stage]
ROOT = Path(__file__).resolve().parents[2]
KUBE_SYSTEM_TOKEN = {"name": "admin-token", "namespace": "kube-system", "key": "token"}


def ready(live: Stage, name: str) -> dict[str, Any] | None:
    obj = live.cluster.get(MAP_CONTROLLER, ObjectKey("", name))
    found = conditions.find(conditions.conditions_of(obj or {}), "Ready")
    return dict(found) if found is not None else None


def refused_with(live: Stage, name: str) -> str:
    """The message of `name`'s Ready=False condition, once its CreateError Event says the same."""
    def message() -> str | None:
        condition = ready(live, name)
        events = live.events(name, "CreateError")
        if condition and condition["status"] == "False" and events:
            assert events[0]["type"] == "Warning" and events[0]["message"] == condition["message"]
            return str(condition["message"])
        return None
    found: str = eventually(message, WAIT)
    return found


@pytest.mark.parametrize(("hook", "message"), [
    ({"python": {"function": "subprocess:Popen"}},
     "spec.hooks.map.python.function: refused 'subprocess:Popen': python hooks may come from modules under "
     "tests.mapctl.pyhooks, mapctl.examples (--python-hooks)"),
    ({"python": {"function": "builtins:__dict__.update"}},
     "spec.hooks.map.python.function: expected \"package.module:function\" (an absolute module name and the name of "
     "a function in it, nothing more), got 'builtins:__dict__.update'"),
    ({"webhook": {"url": "https://hooks.example/map", "authorization": {"secretRef": KUBE_SYSTEM_TOKEN}}},
     "spec.hooks.map.webhook.authorization.secretRef.namespace: refused: Secret kube-system/admin-token is in "
     "namespace 'kube-system'; hook TLS material and credentials are read from namespace default "
     "(--secret-namespaces)"),
])
def test_a_refused_map_hook_is_reported_and_the_other_map_controllers_run(
        stage: MakeStage, hook: dict[str, Any], message: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    trap = PathTrap(tmp_path, monkeypatch)
    live = stage()
    live.create(service("a"), bucket(), map_controller("hostile", map_hook=hook),
                map_controller("copy", map_hook=python("map_copy")))
    assert refused_with(live, "hostile") == f"Cannot create new controller: {message}"
    eventually(lambda: live.output_names("copy") == {"a-service"}, WAIT)
    assert eventually(lambda: ready(live, "copy"), WAIT)["status"] == "True"
    assert "hostile" not in live.maps.running
    assert live.metric("controller_runtime_terminal_reconcile_errors_total", controller="mapcontroller") >= 1
    assert trap.ran() == [] and builtins_intact()


def test_a_tombstone_hook_that_would_send_a_token_over_http_is_refused(stage: MakeStage) -> None:
    server = RecordingServer()
    try:
        live = stage()
        tombstone = {"webhook": {"url": server.url("/tombstone"),
                                 "basicAuth": {"secretRef": {"name": "login", "namespace": "default"}}}}
        live.create(service("a"), bucket(), map_controller("thief", map_hook=python("map_copy"), tombstone=tombstone))
        assert refused_with(live, "thief") == (
            "Cannot create new controller: spec.hooks.tombstone.webhook.basicAuth: refused: credentials are sent only "
            f"over https, not to {server.url('')}; use an https:// URL")
        assert server.requests == [] and pyhooks.CALLS.total() == 0
    finally:
        server.close()


def test_the_shipped_deployment_runs_the_shipped_python_example() -> None:
    policy = deployed_hook_policy("mapctl-deployment.yaml")
    example = yaml.safe_load((ROOT / "testdata" / "mapctl" / "snapshotschedule" / "mapcontroller.yaml").read_text())
    for name, shape in (("map", MAP_SHAPE), ("tombstone", TOMBSTONE_SHAPE)):
        hook = build_hook(example["spec"]["hooks"][name], field=f"spec.hooks.{name}", controller="snapshots",
                          hook=name, shape=shape, output_field="outputs", policy=policy)
        assert hook is not None and hook.target.startswith("mapctl.examples.snapshots:")
        hook.close()
