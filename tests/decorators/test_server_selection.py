"""Memory follows the selection: a DecoratorController's targets are listed and watched with the
label selector its rules imply, on the embedded cluster (which applies it as kube-apiserver does),
and a target leaving the selection is still seen leaving, finalized and let go of."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from decorators.instance import server_selection
from decorators.spec import parse_decorator
from reconcile import Kind, ObjectKey
from reconcile.cluster import Obj
from reconcile.informer import Informer
from tests.decorators.hooks_support import DECORATOR_CONTROLLER, Stage, decorator_controller, stage
from tests.waiting import eventually

__all__ = ["stage"]  # a fixture, imported to be found here

CONFIGMAP = Kind("v1", "ConfigMap")
SECRET = Kind("v1", "Secret")
FINALIZER = "metacontroller.io/decoratorcontroller-d"
WAIT = 10.0


def python(function: str) -> dict[str, Any]:
    return {"python": {"function": f"tests.decorators.pyhooks:{function}"}}


SYNC_ONLY = {"sync": python("report_status")}


def configmap(name: str, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
              **data: str) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap", "data": data,
            "metadata": {"name": name, "namespace": "default", "labels": labels or {},
                         "annotations": annotations or {}}}


def rule(**selectors: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "resource": "configmaps", **selectors}


def configmap_informers(running: Stage) -> list[Informer]:
    return [i for i in running.manager.cache.informers if i.kind == CONFIGMAP]


def finalizers_of(running: Stage, name: str) -> list[str]:
    return list(((running.get(CONFIGMAP, name, "default") or {}).get("metadata") or {}).get("finalizers") or [])


def test_a_label_selecting_decorator_caches_only_the_configmaps_it_selects(stage: Callable[..., Stage]) -> None:
    running = stage()
    for index in range(25):
        running.cluster.create(configmap(f"other-{index}", {"app": "other"}))
    for index in range(10):
        running.cluster.create(configmap(f"picked-{index}", {"sel": "yes"}))
    running.cluster.create(decorator_controller(
        "d", resources=[rule(labelSelector={"matchLabels": {"sel": "yes"}})], hooks={"sync": python("report_status")}))

    eventually(lambda: all((running.get(CONFIGMAP, f"picked-{i}", "default") or {}).get("metadata", {})
                           .get("labels", {}).get("decorated") == "true" for i in range(10)), WAIT)

    [informer] = configmap_informers(running)  # no whole-kind ConfigMap informer beside it
    assert informer.labels == "sel=yes" and not informer.holds_metadata_only
    assert sorted(o["metadata"]["name"] for o in informer.list()) == [f"picked-{i}" for i in range(10)]
    assert all(o["metadata"]["labels"].get("decorated") is None for o in running.cluster.list(
        CONFIGMAP, labels="app=other").items)


def test_a_target_relabelled_out_of_the_selection_is_finalized_and_let_go(stage: Callable[..., Stage]) -> None:
    running = stage()
    running.cluster.create(decorator_controller(
        "d", resources=[rule(labelSelector={"matchLabels": {"sel": "yes"}})],
        attachments=[{"apiVersion": "v1", "resource": "secrets"}],
        hooks={"sync": python("attach_secret"), "finalize": python("finalize_at_once")}))
    running.cluster.create(configmap("t", {"sel": "yes"}))
    eventually(lambda: FINALIZER in finalizers_of(running, "t") and running.get(SECRET, "t-secret", "default"), WAIT)

    running.edit(CONFIGMAP, "t", lambda obj: obj["metadata"]["labels"].update(sel="no"), "default")

    # the selecting watch sends DELETED as it leaves; the pass reads it live, finalizes, lets go
    eventually(lambda: FINALIZER not in finalizers_of(running, "t")
               and running.get(SECRET, "t-secret", "default") is None, WAIT)
    assert running.get(CONFIGMAP, "t", "default") is not None
    assert all(i.labels == "sel=yes" for i in configmap_informers(running))


def test_an_annotation_only_rule_watches_metadata_and_the_hook_still_gets_the_whole_target(
        stage: Callable[..., Stage]) -> None:
    running = stage()
    running.cluster.create(configmap("plain", key="not wanted"))
    running.cluster.create(configmap("t", annotations={"decorate": "yes"}, key="value"))
    running.cluster.create(decorator_controller(
        "d", resources=[rule(annotationSelector={"matchAnnotations": {"decorate": "yes"}})],
        attachments=[{"apiVersion": "v1", "resource": "secrets"}], hooks={"sync": python("attach_secret")}))

    eventually(lambda: running.get(SECRET, "t-secret", "default") is not None, WAIT)

    assert (running.get(SECRET, "t-secret", "default") or {})["data"] == {"key": "dmFsdWU="}  # base64 of "value"
    assert running.get(SECRET, "plain-secret", "default") is None
    [informer] = configmap_informers(running)
    assert informer.labels is None and informer.holds_metadata_only
    assert all(set(obj) == {"apiVersion", "kind", "metadata"} for obj in informer.list())


def test_a_rule_with_labels_and_annotations_sends_the_labels_and_filters_annotations_in_process() -> None:
    spec = parse_decorator(decorator_controller("d", hooks=SYNC_ONLY, resources=[rule(
        labelSelector={"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "NotIn",
                                                                             "values": ["db"]}]},
        annotationSelector={"matchAnnotations": {"decorate": "yes"}})]))
    assert server_selection(spec.resources[0]) == ("app=web,tier notin (db)", False)
    only_annotations = parse_decorator(decorator_controller("d", hooks=SYNC_ONLY, resources=[rule(
        annotationSelector={"matchAnnotations": {"decorate": "yes"}})]))
    assert server_selection(only_annotations.resources[0]) == (None, True)
    everything = parse_decorator(decorator_controller("d", hooks=SYNC_ONLY, resources=[rule()]))
    assert server_selection(everything.resources[0]) == (None, False)


def test_a_target_that_left_the_selection_while_no_manager_ran_is_let_go_at_start(stage: Callable[..., Stage]) -> None:
    running = stage()
    # as a manager stopped before it saw the relabel would leave it: our finalizer, labels no longer selected
    left = configmap("left", {"sel": "no"})
    left["metadata"]["finalizers"] = [FINALIZER]
    running.cluster.create(left)
    running.cluster.create(configmap("t", {"sel": "yes"}))
    running.cluster.create(decorator_controller(
        "d", resources=[rule(labelSelector={"matchLabels": {"sel": "yes"}})],
        attachments=[{"apiVersion": "v1", "resource": "secrets"}],
        hooks={"sync": python("attach_secret"), "finalize": python("finalize_at_once")}))

    eventually(lambda: FINALIZER not in finalizers_of(running, "left") and FINALIZER in finalizers_of(running, "t"),
               WAIT)
    assert running.get(SECRET, "left-secret", "default") is None
    assert all(i.labels == "sel=yes" for i in configmap_informers(running))  # found without caching the kind


def test_an_edited_or_deleted_decorator_leaves_no_informer_of_what_it_no_longer_selects(
        stage: Callable[..., Stage]) -> None:
    running = stage()
    for name, sel in (("first", "yes"), ("second", "other")):
        running.cluster.create(configmap(name, {"sel": sel}))
    running.cluster.create(decorator_controller(
        "d", resources=[rule(labelSelector={"matchLabels": {"sel": "yes"}})],
        attachments=[{"apiVersion": "v1", "resource": "secrets"}], hooks={"sync": python("attach_secret")}))
    eventually(lambda: running.get(SECRET, "first-secret", "default") is not None, WAIT)
    [old] = configmap_informers(running)

    running.edit(DECORATOR_CONTROLLER, "d", lambda obj: obj["spec"]["resources"][0].update(
        labelSelector={"matchLabels": {"sel": "other"}}))
    eventually(lambda: running.get(SECRET, "second-secret", "default") is not None, WAIT)
    assert [i.labels for i in configmap_informers(running)] == ["sel=other"]
    assert old.closed and len(old) == 0
    eventually(lambda: not old.running, WAIT, what="the old selection's informer thread to end")

    running.cluster.delete(DECORATOR_CONTROLLER, ObjectKey("", "d"))
    eventually(lambda: not [i for i in running.manager.cache.informers if i.kind in (CONFIGMAP, SECRET)], WAIT,
               what="the ConfigMap and Secret informers to stop")
