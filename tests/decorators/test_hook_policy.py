"""A manager with hostile DecoratorControllers beside a good one: each attack is refused before
anything runs or is read, reported on its DecoratorController (condition `Ready=False` and a
Warning Event naming the field), and the good one keeps working.

The manager is built as `porchkit manager --controllers decorator --python-hooks
tests.decorators.pyhooks --secret-namespaces porchkit-system` builds it (reconcile.cli's
`hook_policy` from the flags' values, `build_controllers` with the face's factory), on the
embedded cluster. The attacks and their traps are in attacks.py.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from decorators.protocol import RESPONSE_SHAPE
from decorators.spec import DECORATOR_CONTROLLER
from porchkit import cli
from reconcile import EmbeddedCluster, Kind, ObjectKey, conditions
from reconcile.cli import build_controllers, hook_policy
from reconcile.cluster import Obj
from reconcile.events import EventRecorder
from reconcile.hooks import build_hook
from reconcile.manager import Manager
from tests.decorators.attacks import (
    LEAK_MARK,
    REQUEST_KEYS,
    SECRET_FIELD,
    PathTrap,
    RecordingServer,
    builtins_intact,
    hostile,
    python_attacks,
    secret_thief,
    target,
)
from tests.decorators.hooks_support import WAIT
from tests.reconcile.support import Running, eventually

ROOT = Path(__file__).resolve().parents[2]
CONFIGMAP = Kind("v1", "ConfigMap")
EVENT = Kind("v1", "Event")


class Live:
    """The embedded cluster and the manager running the decorator controller on it."""

    def __init__(self) -> None:
        self.cluster = EmbeddedCluster()
        self.manager = Manager(self.cluster, events=EventRecorder(self.cluster, "porchkit-manager"), grace_period=5.0)
        policy = hook_policy(["tests.decorators.pyhooks"], ["porchkit-system"])
        for controller in build_controllers(cli.CONTROLLERS["decorator"], self.manager, hook_policy=policy):
            self.manager.add(controller)
        self.running = Running(self.manager)

    def close(self) -> None:
        try:
            self.running.stop()
        finally:
            self.cluster.close()

    def ready(self, name: str) -> dict[str, object] | None:
        """The Ready condition of DecoratorController `name`, once it has one."""
        obj = self.cluster.get(DECORATOR_CONTROLLER, ObjectKey("", name))
        found = conditions.find(conditions.conditions_of(obj or {}), "Ready")
        return dict(found) if found is not None else None

    def refused(self, name: str) -> tuple[dict[str, object], Obj]:
        """The Ready=False condition and the CreateError Event of `name`, once both are there."""
        def both() -> tuple[dict[str, object], Obj] | None:
            condition = self.ready(name)
            events = [e for e in self.cluster.list(EVENT, namespace="default").items
                      if e["involvedObject"].get("name") == name and e.get("reason") == "CreateError"]
            return (condition, events[0]) if condition and condition["status"] == "False" and events else None
        found: tuple[dict[str, object], Obj] = eventually(both, WAIT)
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


def good() -> Obj:
    return hostile("good", {"sync": {"python": {"function": "tests.decorators.pyhooks:attach_first"}}})


def attached(live: Live, name: str) -> Callable[[], Obj | None]:
    return lambda: live.cluster.get(CONFIGMAP, ObjectKey("default", f"{name}-first"))


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
    eventually(attached(live, "t"), WAIT)
    assert eventually(lambda: live.ready("good"), WAIT)["status"] == "True"

    live.cluster.create(target("t2"))  # the good one keeps going after the refusals
    eventually(attached(live, "t2"), WAIT)
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
    eventually(attached(live, "t"), WAIT)
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
    eventually(attached(live, "t"), WAIT)
    ready = eventually(lambda: (found := live.ready("d")) and found["status"] == "True" and found, WAIT)
    assert (ready["reason"], ready["message"]) == ("Started", "")


def test_the_shipped_deployment_runs_the_shipped_python_example() -> None:
    [deployment] = [doc for doc in yaml.safe_load_all((ROOT / "deploy" / "decorators-deployment.yaml").read_text())
                    if doc and doc.get("kind") == "Deployment"]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    parser, _ = cli.build_parser("manager")
    args = parser.parse_args(container["args"])
    policy = hook_policy(args.python_hooks, args.secret_namespaces)
    example = yaml.safe_load((ROOT / "testdata" / "decorators" / "service-per-pod" / "decoratorcontroller.yaml")
                             .read_text())
    hook = build_hook(example["spec"]["hooks"]["sync"], field="spec.hooks.sync", controller="service-per-pod",
                      hook="sync", shape=RESPONSE_SHAPE, output_field="attachments", policy=policy)
    assert hook is not None and hook.target == "decorators.examples.service_per_pod:sync_services"
    hook.close()
