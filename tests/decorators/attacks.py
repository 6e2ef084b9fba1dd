"""The attacks on hooks found on a real cluster (docs/security.md), as DecoratorControllers, the
manager they are made against, and the traps that show whether one got through. Shared by
test_hook_policy.py (embedded cluster) and tests/e2e/test_security_hooks_e2e.py (a real API server).

* `subprocess:Popen` is called with the request, a dict: Popen runs `list(request)[0]`, the
  program named `controller`, from PATH. `PathTrap` puts programs of the request's key names
  first on PATH; each one that runs leaves a file behind.
* `builtins:print` writes the target into the manager's log: the target carries `LEAK_MARK`.
* `builtins:__dict__.update` merges the request into the builtins (`object` becomes the target).
* a webhook whose `authorization.secretRef` names a Secret in kube-system, over plain http to
  a server of the attacker's (tests.reconcile.support.RecordingServer, which keeps every request
  it gets).

`manager_under_attack` builds the manager as `porchkit manager --controllers decorator
--python-hooks tests.decorators.pyhooks --secret-namespaces NS` builds it; a refused
DecoratorController shows as `refusal` (its condition and Event), the `good()` one as `attached`.
"""

from __future__ import annotations

import builtins
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from decorators.spec import DECORATOR_CONTROLLER
from porchkit.cli import CONTROLLERS
from reconcile import Cluster, Kind, ObjectKey, conditions
from reconcile.cli import build_controllers, hook_policy
from reconcile.cluster import Obj
from reconcile.events import EventRecorder
from reconcile.manager import Manager
from tests.decorators.hooks_support import decorator_controller

REQUEST_KEYS = ("controller", "object", "attachments", "related", "finalizing")
LEAK_MARK = "leaked-if-printed-7f3a9c"
SELECTED = {"hostile-demo": "yes"}
FIELD = "spec.hooks.sync.python.function"
SECRET_FIELD = "spec.hooks.sync.webhook.authorization"
CONFIGMAP = Kind("v1", "ConfigMap")
EVENT = Kind("v1", "Event")


class PathTrap:
    """Programs named after the request's keys, first on PATH: each one that runs writes a file
    named after itself in `directory`/ran."""

    def __init__(self, directory: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.bin, self.ran_in = directory / "bin", directory / "ran"
        self.bin.mkdir(parents=True)
        self.ran_in.mkdir()
        for name in REQUEST_KEYS:
            program = self.bin / name
            program.write_text(f"#!/bin/sh\ntouch '{self.ran_in / name}'\n")
            program.chmod(program.stat().st_mode | stat.S_IXUSR)
        monkeypatch.setenv("PATH", f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}")

    def ran(self) -> list[str]:
        return sorted(path.name for path in self.ran_in.iterdir())


def builtins_intact() -> bool:
    """Whether no request was merged into the builtins."""
    return builtins.object is object and not any(hasattr(builtins, key) for key in REQUEST_KEYS if key != "object")


def hostile(name: str, hooks: dict[str, Any]) -> Obj:
    """A DecoratorController `name` over the ConfigMaps labelled SELECTED, with `hooks`."""
    return decorator_controller(name, resources=[{"apiVersion": "v1", "resource": "configmaps",
                                                  "labelSelector": {"matchLabels": SELECTED}}],
                                attachments=[{"apiVersion": "v1", "resource": "configmaps"}], hooks=hooks)


def python_attacks() -> dict[str, tuple[Obj, str]]:
    """name -> (the DecoratorController, the message it gets) for the python hook attacks, under
    a manager whose --python-hooks does not name the module."""
    attacks = {}
    for name, reference in (("popen", "subprocess:Popen"), ("printer", "builtins:print")):
        message = f"{FIELD}: refused {reference!r}: python hooks may come from modules under"
        attacks[name] = (hostile(name, {"sync": {"python": {"function": reference}}}), message)
    reference = "builtins:__dict__.update"
    attacks["builtins-update"] = (hostile("builtins-update", {"sync": {"python": {"function": reference}}}),
                                  f"{FIELD}: expected \"package.module:function\"")
    return attacks


def secret_thief(name: str, url: str, secret: str) -> Obj:
    """A DecoratorController whose webhook would send the token of Secret kube-system/`secret` to `url`."""
    ref = {"name": secret, "namespace": "kube-system", "key": "token"}
    return hostile(name, {"sync": {"webhook": {"url": url, "authorization": {"secretRef": ref}}}})


def target(name: str, namespace: str = "default") -> Obj:
    """A ConfigMap every hostile DecoratorController selects, carrying LEAK_MARK."""
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(SELECTED),
                         "annotations": {"example.com/mark": LEAK_MARK}},
            "data": {"mark": LEAK_MARK}}


def good() -> Obj:
    """A DecoratorController whose (allowed) python hook attaches `<target>-first` to each target."""
    return hostile("good", {"sync": {"python": {"function": "tests.decorators.pyhooks:attach_first"}}})


def manager_under_attack(cluster: Cluster, secret_namespace: str) -> Manager:
    """The manager of `porchkit manager --controllers decorator --python-hooks tests.decorators.pyhooks
    --secret-namespaces <secret_namespace>` (reconcile.cli's `hook_policy` from the flags' values,
    `build_controllers` with the face's factory), on `cluster`; not started."""
    manager = Manager(cluster, events=EventRecorder(cluster, "porchkit-manager"), grace_period=5)
    policy = hook_policy(["tests.decorators.pyhooks"], [secret_namespace])
    for controller in build_controllers(CONTROLLERS["decorator"], manager, hook_policy=policy):
        manager.add(controller)
    return manager


def attached(cluster: Cluster, name: str, namespace: str = "default") -> Callable[[], Obj | None]:
    """A check for `eventually`: the attachment `good()` makes for target `name`."""
    return lambda: cluster.get(CONFIGMAP, ObjectKey(namespace, f"{name}-first"))


def ready(cluster: Cluster, name: str) -> dict[str, Any] | None:
    """The Ready condition of DecoratorController `name`, once it has one."""
    obj = cluster.get(DECORATOR_CONTROLLER, ObjectKey("", name))
    found = conditions.find(conditions.conditions_of(obj or {}), "Ready")
    return dict(found) if found is not None else None


def refusal(cluster: Cluster, name: str) -> tuple[dict[str, Any], Obj] | None:
    """A check for `eventually`: the Ready=False condition of DecoratorController `name` and its
    CreateError Event, once the server has both."""
    condition = ready(cluster, name)
    events = [e for e in cluster.list(EVENT, namespace="default").items
              if e["involvedObject"].get("name") == name and e.get("reason") == "CreateError"]
    return (condition, events[0]) if condition and condition["status"] == "False" and events else None
