"""One sync-hook call per target change, and the writes converging costs, on the embedded cluster.

A manager runs the DecoratorControllers (tests/decorators/hooks_support.py's stage) on an embedded
cluster that keeps every write request it is sent, whether or not it changes anything. Hooks are
in-process python functions (tests/decorators/pyhooks.py); calls are read from the manager's
`porchkit_hook_requests_total`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from reconcile import Kind, ObjectKey
from reconcile.cluster import Obj
from reconcile.embedded import EmbeddedCluster
from tests.decorators.hooks_support import WAIT, Stage, decorator_controller, stage
from tests.waiting import eventually

__all__ = ["stage"]  # a fixture, imported to be found here

CONFIGMAP = Kind("v1", "ConfigMap")
LABEL = "decorate"
MakeStage = Callable[..., Stage]


class CountingCluster(EmbeddedCluster):
    """The embedded cluster, keeping every write request it is sent as (verb, kind, name)."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[tuple[str, str, str]] = []
        self._noted = threading.Lock()

    def _note(self, verb: str, kind: object, name: str) -> None:
        with self._noted:
            self.requests.append((verb, str(kind), name))

    def create(self, obj: Obj) -> Obj:
        self._note("create", obj.get("kind"), ObjectKey.of(obj).name)
        return super().create(obj)

    def update(self, obj: Obj) -> Obj:
        self._note("update", obj.get("kind"), ObjectKey.of(obj).name)
        return super().update(obj)

    def update_status(self, obj: Obj) -> Obj:
        self._note("update_status", obj.get("kind"), ObjectKey.of(obj).name)
        return super().update_status(obj)

    def patch(self, kind: Kind, key: ObjectKey, patch: Any, **options: Any) -> Obj:
        self._note("patch", kind.kind, key.name)
        return super().patch(kind, key, patch, **options)

    def apply(self, obj: Obj, **options: Any) -> Obj:
        self._note("apply", obj.get("kind"), ObjectKey.of(obj).name)
        return super().apply(obj, **options)

    def delete(self, kind: Kind, key: ObjectKey, **options: Any) -> Obj | None:
        self._note("delete", kind.kind, key.name)
        return super().delete(kind, key, **options)

    def configmap_writes(self, since: int) -> list[tuple[str, str]]:
        """(verb, name) of the ConfigMap write requests after the first `since` requests."""
        with self._noted:
            return [(verb, name) for verb, kind, name in self.requests[since:] if kind == "ConfigMap"]


@pytest.fixture
def counted(stage: MakeStage) -> tuple[Stage, CountingCluster]:
    cluster = CountingCluster()
    return stage(cluster=cluster), cluster


def configmaps(stage: Stage, count: int) -> list[str]:
    """`count` labelled ConfigMaps (the targets) in `default`; their names."""
    names = [f"t-{i:02d}" for i in range(count)]
    for name in names:
        stage.cluster.create({"apiVersion": "v1", "kind": "ConfigMap",
                              "metadata": {"name": name, "namespace": "default", "labels": {LABEL: "yes"}},
                              "data": {"n": name}})
    return names


def decorator(name: str, sync: str, **spec: Any) -> Obj:
    """A DecoratorController over the labelled ConfigMaps, attaching ConfigMaps, with python hooks."""
    hooks = {"sync": {"python": {"function": f"tests.decorators.pyhooks:{sync}"}}}
    if finalize := spec.pop("finalize", None):
        hooks["finalize"] = {"python": {"function": f"tests.decorators.pyhooks:{finalize}"}}
    selected = {"matchLabels": {LABEL: "yes"}}
    return decorator_controller(
        name, resources=[{"apiVersion": "v1", "resource": "configmaps", "labelSelector": selected}],
        attachments=[{"apiVersion": "v1", "resource": "configmaps", "updateStrategy": {"method": "InPlace"}}],
        hooks=hooks, **spec)


def calls(stage: Stage, name: str, hook: str = "sync") -> float:
    return stage.metric("porchkit_hook_requests_total", controller=name, hook=hook)


def attached(stage: Stage, names: list[str]) -> bool:
    return all(stage.get(CONFIGMAP, f"{name}-first", "default") is not None for name in names)


def test_converging_targets_costs_one_sync_call_and_one_create_each(
        counted: tuple[Stage, CountingCluster]) -> None:
    live, cluster = counted
    names = configmaps(live, 20)
    since = len(cluster.requests)
    live.cluster.create(decorator("one-each", "attach_first"))
    eventually(lambda: attached(live, names), WAIT)
    live.wait_idle("one-each")
    assert calls(live, "one-each") == len(names)
    assert sorted(cluster.configmap_writes(since)) == [("create", f"{name}-first") for name in names]


def test_a_hook_that_labels_its_target_is_asked_again_once_and_its_finalizer_rides_with_the_label(
        counted: tuple[Stage, CountingCluster]) -> None:
    # It may be reporting on its attachments (as Metacontroller's service-per-pod v2 does), so it
    # sees them once as stored; that call changes nothing, and its echo asks nothing.
    live, cluster = counted
    names = configmaps(live, 5)
    since = len(cluster.requests)
    live.cluster.create(decorator("labels", "attach_and_label", finalize="finalize_at_once"))
    eventually(lambda: attached(live, names), WAIT)
    live.wait_idle("labels")
    assert calls(live, "labels") == 2 * len(names)
    # per target: one update carrying the finalizer and the label together, and the attachment's create
    writes = cluster.configmap_writes(since)
    assert sorted(writes) == sorted([("update", name) for name in names]
                                    + [("create", f"{name}-first") for name in names])
    for name in names:
        meta = (live.get(CONFIGMAP, name, "default") or {})["metadata"]
        assert meta["labels"]["decorated"] == "true"
        assert meta["finalizers"] == ["metacontroller.io/decoratorcontroller-labels"]


def test_someone_elses_change_to_an_attachment_calls_the_hook_again(counted: tuple[Stage, CountingCluster]) -> None:
    live, cluster = counted
    [name] = configmaps(live, 1)
    live.cluster.create(decorator("foreign", "attach_first"))
    eventually(lambda: attached(live, [name]), WAIT)
    live.wait_idle("foreign")
    assert calls(live, "foreign") == 1

    def edit(obj: Obj) -> None:
        obj["data"] = {"kind": "edited by someone else"}
    live.edit(CONFIGMAP, f"{name}-first", edit, "default")
    eventually(lambda: calls(live, "foreign") == 2, WAIT)
    eventually(lambda: (live.get(CONFIGMAP, f"{name}-first", "default") or {}).get("data") == {"kind": "ConfigMap"},
               WAIT)  # InPlace: the hook's answer is written back
    live.wait_idle("foreign")
    assert calls(live, "foreign") == 2  # our own fix's echo asks nothing


def test_a_resync_period_calls_the_hook_and_writes_nothing(counted: tuple[Stage, CountingCluster]) -> None:
    live, cluster = counted
    names = configmaps(live, 3)
    live.cluster.create(decorator("resync", "attach_first", resyncPeriodSeconds=1))
    eventually(lambda: attached(live, names), WAIT)
    eventually(lambda: calls(live, "resync") >= len(names), WAIT)
    converged, since = calls(live, "resync"), len(cluster.requests)
    eventually(lambda: calls(live, "resync") >= converged + 2 * len(names), WAIT)  # two periods, no change
    assert cluster.configmap_writes(since) == []
