"""A manager with hostile DecoratorControllers beside a good one: each attack is refused before
anything runs or is read, reported on its DecoratorController (condition `Ready=False` and a
Warning Event naming the field), and the good one keeps working.

The manager is built as `porchkit manager --controllers decorator --python-hooks
tests.decorators.pyhooks --secret-namespaces porchkit-system` builds it (reconcile.cli's
`hook_policy` from the flags' values, `build_controllers` with the face's factory), on the
embedded cluster. The attacks, their traps and that manager are in attacks.py.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from decorators.protocol import RESPONSE_SHAPE
from decorators.spec import DECORATOR_CONTROLLER
from reconcile import EmbeddedCluster, ObjectKey
from reconcile.cluster import Obj
from reconcile.hooks import build_hook
from tests.commands import deployed_hook_policy
from tests.decorators.attacks import (
    LEAK_MARK,
    REQUEST_KEYS,
    SECRET_FIELD,
    PathTrap,
    attached,
    builtins_intact,
    good,
    hostile,
    manager_under_attack,
    python_attacks,
    ready,
    refusal,
    secret_thief,
    target,
)
from tests.decorators.hooks_support import WAIT
from tests.reconcile.support import RecordingServer, Running
from tests.waiting import eventually

ROOT = Path(__file__).resolve().parents[2]


class Live:
    """The embedded cluster and the manager under attack running on it."""

    def __init__(self) -> None:
        self.cluster = EmbeddedCluster()
        self.manager = manager_under_attack(self.cluster, "porchkit-system")
        self.running = Running(self.manager)

    def close(self) -> None:
        try:
            self.running.stop()
        finally:
            self.cluster.close()

    def refused(self, name: str) -> tuple[dict[str, Any], Obj]:
        """The Ready=False condition and the CreateError Event of `name`, once both are there."""
        found: tuple[dict[str, Any], Obj] = eventually(lambda: refusal(self.cluster, name), WAIT)
        return found


@pytest.fixture
def live() -> Iterator[Live]:
    made = Live()
    yield made
    made.close()


@pytest.fixture
def server() -> Iterator[RecordingServer]:
    made = RecordingServer()
    yield made
    made.close()


def test_the_path_trap_sees_what_popen_of_a_request_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the attack was, and so what the trap must catch: Popen(request) runs `controller`."""
    trap = PathTrap(tmp_path, monkeypatch)
    request: Any = dict.fromkeys(REQUEST_KEYS)  # what a hook is called with (Popen takes it for argv)
    subprocess.Popen(request).wait(10)  # the attack itself, on purpose
    assert trap.ran() == ["controller"]


def test_hostile_python_hooks_are_refused_and_the_good_decorator_runs(
        live: Live, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    trap = PathTrap(tmp_path, monkeypatch)
    live.cluster.create(target("t"))
    attacks = python_attacks()
    for obj, _ in attacks.values():
        live.cluster.create(obj)
    live.cluster.create(good())

    for name, (_, message) in attacks.items():
        condition, event = live.refused(name)
        assert (condition["reason"], event["type"]) == ("CreateError", "Warning")
        assert condition["message"] == event["message"]
        assert str(event["message"]).startswith(f"Cannot create new controller: {message}"), event["message"]
    eventually(attached(live.cluster, "t"), WAIT)
    assert eventually(lambda: ready(live.cluster, "good"), WAIT)["status"] == "True"

    live.cluster.create(target("t2"))  # the good one keeps going after the refusals
    eventually(attached(live.cluster, "t2"), WAIT)
    assert trap.ran() == []
    assert builtins_intact()
    assert LEAK_MARK not in capfd.readouterr().out
    assert sorted({c.name.split("/")[1] for c in live.manager.controllers if c.name.startswith("decorator/")}) \
        == ["good"]


def test_a_webhook_naming_a_secret_in_kube_system_is_refused_and_nothing_is_sent(
        live: Live, server: RecordingServer) -> None:
    live.cluster.create({"apiVersion": "v1", "kind": "Secret",
                         "metadata": {"name": "admin-token", "namespace": "kube-system"},
                         "data": {"token": "Y2x1c3Rlci1hZG1pbg=="}})
    live.cluster.create(target("t"))
    live.cluster.create(secret_thief("thief", server.url("/sync"), "admin-token"))
    live.cluster.create(good())
    condition, event = live.refused("thief")
    assert event["message"] == condition["message"] == (
        f"Cannot create new controller: {SECRET_FIELD}: refused: credentials are sent only over https, not to "
        f"{server.url('')}; use an https:// URL")
    eventually(attached(live.cluster, "t"), WAIT)
    assert server.requests == []


def test_over_https_the_secrets_namespace_is_what_refuses_it(live: Live) -> None:
    thief = secret_thief("thief", "https://hooks.example/sync", "no-such-secret")
    live.cluster.create(thief)
    condition, _ = live.refused("thief")
    assert condition["message"] == (
        f"Cannot create new controller: {SECRET_FIELD}.secretRef.namespace: refused: Secret kube-system/no-such-secret "
        "is in namespace 'kube-system'; hook TLS material and credentials are read from namespace porchkit-system "
        "(--secret-namespaces)")


def test_fixing_a_refused_decorator_starts_it_and_makes_it_ready(live: Live) -> None:
    live.cluster.create(target("t"))
    live.cluster.create(hostile("d", {"sync": {"python": {"function": "subprocess:Popen"}}}))
    live.refused("d")
    obj = live.cluster.get(DECORATOR_CONTROLLER, ObjectKey("", "d"))
    assert obj is not None
    obj["spec"] = good()["spec"]
    live.cluster.update(obj)
    eventually(attached(live.cluster, "t"), WAIT)
    condition = eventually(lambda: (found := ready(live.cluster, "d")) and found["status"] == "True" and found, WAIT)
    assert (condition["reason"], condition["message"]) == ("Started", "")


def test_the_shipped_deployment_runs_the_shipped_python_example() -> None:
    policy = deployed_hook_policy("decorators-deployment.yaml")
    example = yaml.safe_load((ROOT / "testdata" / "decorators" / "service-per-pod" / "decoratorcontroller.yaml")
                             .read_text())
    hook = build_hook(example["spec"]["hooks"]["sync"], field="spec.hooks.sync", controller="service-per-pod",
                      hook="sync", shape=RESPONSE_SHAPE, output_field="attachments", policy=policy)
    assert hook is not None and hook.target == "decorators.examples.service_per_pod:sync_services"
    hook.close()
