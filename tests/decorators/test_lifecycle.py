"""Edits and deletions of DecoratorControllers, and the edges of finalizing, on the embedded cluster.

Each test is a case where a DecoratorController changes under running passes, or a target
leaves, and where something could be left behind: a finalizer no one will remove, an attachment
changed by a decorator that no longer selects its target, an Event about a pass that was only
cut short by a restart, a queue the metrics still hold.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from decorators.manager import decorator_controllers
from decorators.spec import DECORATOR_CONTROLLER
from reconcile import EmbeddedCluster, Kind, ObjectKey
from reconcile.cluster import Obj
from reconcile.finalizers import RELEASE_ANNOTATION
from reconcile.hooks import HookPolicy
from reconcile.manager import Manager
from tests.decorators.hooks_support import Stage, decorator_controller, stage
from tests.reconcile.support import Running
from tests.waiting import eventually

__all__ = ["stage"]  # a fixture, imported to be found here

CONFIGMAP = Kind("v1", "ConfigMap")
SECRET = Kind("v1", "Secret")
FINALIZER = "metacontroller.io/decoratorcontroller-d"
HOLD = "example.com/hold"
WAIT = 10.0


def python(function: str) -> dict[str, Any]:
    return {"python": {"function": f"tests.decorators.pyhooks:{function}"}}


def selected(kind: str = "configmaps") -> dict[str, Any]:
    return {"apiVersion": "v1", "resource": kind, "labelSelector": {"matchLabels": {"sel": "yes"}}}


def decorator(**hooks: str) -> Obj:
    return decorator_controller("d", resources=[selected()], attachments=[{"apiVersion": "v1",
                                                                          "resource": "configmaps"}],
                                hooks={name: python(function) for name, function in hooks.items()})


def target(name: str = "t", kind: Kind = CONFIGMAP, **labels: str) -> Obj:
    return {"apiVersion": kind.api_version, "kind": kind.kind,
            "metadata": {"name": name, "namespace": "default", "labels": labels or {"sel": "yes"}}}


def finalizers_of(running: Stage, name: str, kind: Kind = CONFIGMAP) -> list[str]:
    obj = running.get(kind, name, "default")
    return list((obj or {}).get("metadata", {}).get("finalizers") or [])


def decorated(running: Stage, name: str = "t") -> None:
    eventually(lambda: FINALIZER in finalizers_of(running, name) and running.get(CONFIGMAP, f"{name}-first",
                                                                                  "default"), WAIT)


def test_deleting_a_decorator_whose_spec_became_invalid_still_releases_its_targets(
        stage: Callable[..., Stage]) -> None:
    running = stage()
    running.cluster.create(decorator(sync="attach_first", finalize="finalize_at_once"))
    running.cluster.create(target())
    decorated(running)
    running.edit(DECORATOR_CONTROLLER, "d", lambda obj: obj["spec"]["resources"][0]["labelSelector"]
                 ["matchLabels"].update(sel="not valid"))
    eventually(lambda: "d" in running.decorators.failed, WAIT)
    running.cluster.delete(DECORATOR_CONTROLLER, ObjectKey("", "d"))
    eventually(lambda: running.get(DECORATOR_CONTROLLER, "d") is None, WAIT)
    assert FINALIZER not in finalizers_of(running, "t")


def test_a_kind_an_edit_drops_is_released_at_once(stage: Callable[..., Stage]) -> None:
    running = stage()
    running.cluster.create(decorator(sync="attach_first", finalize="finalize_at_once"))
    running.cluster.create(target())
    decorated(running)
    running.edit(DECORATOR_CONTROLLER, "d", lambda obj: obj["spec"]["resources"][0].update(resource="secrets"))
    eventually(lambda: FINALIZER not in finalizers_of(running, "t"), WAIT)
    assert running.get(DECORATOR_CONTROLLER, "d") is not None  # still running, on Secrets


def test_dropping_the_finalize_hook_releases_every_target_before_the_decorator_lets_go_of_itself(
        stage: Callable[..., Stage]) -> None:
    running = stage()
    running.cluster.create(decorator(sync="attach_first", finalize="finalize_at_once"))
    running.cluster.create(target())
    decorated(running)
    running.edit(DECORATOR_CONTROLLER, "d", lambda obj: obj["spec"]["hooks"].pop("finalize"))
    eventually(lambda: not (running.get(DECORATOR_CONTROLLER, "d") or {})["metadata"].get("finalizers"), WAIT)
    assert FINALIZER not in finalizers_of(running, "t")


def test_an_edit_that_drops_a_target_and_its_finalize_hook_at_once_leaves_its_attachments_alone(
        stage: Callable[..., Stage]) -> None:
    running = stage()
    running.cluster.create(decorator(sync="attach_first", finalize="finalize_at_once"))
    running.cluster.create(target())
    decorated(running)
    first = running.get(CONFIGMAP, "t-first", "default")

    def edit(obj: Obj) -> None:
        obj["spec"]["hooks"] = {"sync": python("attach_second")}
        obj["spec"]["resources"][0]["labelSelector"]["matchLabels"]["sel"] = "other"
    running.edit(DECORATOR_CONTROLLER, "d", edit)
    eventually(lambda: FINALIZER not in finalizers_of(running, "t"), WAIT)
    running.wait_idle("d")
    assert running.get(CONFIGMAP, "t-second", "default") is None  # no sync of a target it does not select
    kept = running.get(CONFIGMAP, "t-first", "default")
    assert kept is not None and first is not None and kept["metadata"]["uid"] == first["metadata"]["uid"]


def test_a_finalize_answering_finalized_at_once_still_removes_the_attachments(stage: Callable[..., Stage]) -> None:
    running = stage()
    running.cluster.create(decorator(sync="attach_first", finalize="finalize_at_once"))
    running.cluster.create({**target(), "metadata": {**target()["metadata"], "finalizers": [HOLD]}})
    decorated(running)
    running.cluster.delete(CONFIGMAP, ObjectKey("default", "t"))  # held by HOLD after we let go
    eventually(lambda: FINALIZER not in finalizers_of(running, "t"), WAIT)
    eventually(lambda: running.get(CONFIGMAP, "t-first", "default") is None, WAIT)
    assert finalizers_of(running, "t") == [HOLD]


def test_the_release_annotation_lets_a_target_go_without_its_failing_finalize(stage: Callable[..., Stage]) -> None:
    running = stage()
    running.cluster.create(decorator(sync="attach_first", finalize="fail_finalize"))
    running.cluster.create(target())
    decorated(running)
    running.cluster.delete(CONFIGMAP, ObjectKey("default", "t"))
    # two failed calls: the first pass is over, and the second began after it
    eventually(lambda: running.metric("porchkit_hook_requests_total", controller="d", hook="finalize",
                                      code="error") >= 2, WAIT)
    assert FINALIZER in finalizers_of(running, "t")  # finalize keeps failing
    running.edit(CONFIGMAP, "t", lambda obj: obj["metadata"].setdefault("annotations", {}).update(
        {RELEASE_ANNOTATION: FINALIZER}), "default")
    eventually(lambda: running.get(CONFIGMAP, "t", "default") is None, WAIT)


def test_an_edit_under_running_passes_records_no_sync_error_and_leaves_no_queue_in_the_metrics(
        stage: Callable[..., Stage]) -> None:
    running = stage()
    spec = decorator_controller("d", resources=[selected(), selected("secrets")],
                                attachments=[{"apiVersion": "v1", "resource": "configmaps"}],
                                hooks={"sync": python("attach_first_slowly")})
    running.cluster.create(spec)
    for i in range(8):
        running.cluster.create(target(f"c{i}"))
        running.cluster.create(target(f"s{i}", SECRET))
    eventually(lambda: running.metric("porchkit_hook_requests_total", controller="d") >= 2, WAIT)

    def restart() -> None:
        replaced = running.decorators.running["d"]
        running.edit(DECORATOR_CONTROLLER, "d", lambda obj: obj["spec"].update(
            resyncPeriodSeconds=(obj["spec"].get("resyncPeriodSeconds") or 3600) + 1))
        eventually(lambda: running.decorators.running.get("d") not in (None, replaced), WAIT)
        eventually(lambda: any(c.queue.in_flight() for c in running.decorators.running["d"].controllers), WAIT)

    for _ in range(2):  # restarts while passes are waiting on the slow hook
        restart()
    eventually(lambda: all(running.get(CONFIGMAP, f"{name}{i}-first", "default")
                           for name in ("c", "s") for i in range(8)), 20)
    events = running.cluster.list(Kind("v1", "Event"), namespace="default").items
    assert [e for e in events if e.get("reason") == "SyncError"] == []
    series = [line for line in running.manager.metrics.render().splitlines()
              if line.startswith("workqueue_unfinished_work_seconds{") and 'name="decorator/d/configmaps"' in line]
    assert len(series) == 1, series  # the queues of the instances the edits replaced are gone


def test_stopping_the_manager_stops_the_decorators_it_runs_and_ends_their_hook_threads() -> None:
    """As `porchkit manager --controllers decorator` builds it: the face's factory, nothing else
    told to stop."""
    with EmbeddedCluster() as cluster:
        manager = Manager(cluster, grace_period=5)
        policy = HookPolicy.for_manager(["tests.decorators.pyhooks"], [])
        manager.add(decorator_controllers(manager, hook_policy=policy))
        running = Running(manager)
        cluster.create(decorator(sync="attach_first"))
        cluster.create(target())
        eventually(lambda: cluster.get(CONFIGMAP, ObjectKey("default", "t-first")), WAIT)
        hook_threads = [t for t in threading.enumerate() if t.name == "hook tests.decorators.pyhooks:attach_first"]
        assert hook_threads
        assert running.stop() == 0
    assert [controller.name for controller in manager.controllers] == ["decoratorcontroller"]
    eventually(lambda: not any(thread.is_alive() for thread in hook_threads), WAIT)
