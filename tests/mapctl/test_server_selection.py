"""Memory follows the selection: a MapController lists and watches its inputs with each parent's
selector, in the parent's namespace, and its outputs by the stamp every output carries, so that
the other objects of those kinds stay on the server (here the embedded one, which applies the
selectors as kube-apiserver does)."""

from __future__ import annotations

from collections.abc import Callable

from mapctl.keys import CONTROLLER_LABEL
from mapctl.selection import STAMPED, server_selector
from reconcile.cluster import Obj
from reconcile.informer import Informer
from reconcile.selectors import parse_labels
from tests.mapctl.support import (
    BUCKET,
    CONFIGMAP,
    MAP_CONTROLLER,
    WAIT,
    Stage,
    bucket,
    configmap,
    map_controller,
    python,
    rule,
    stage,
)
from tests.waiting import eventually

__all__ = ["stage"]  # a fixture, imported to be found here

MakeStage = Callable[..., Stage]


def configmap_informers(live: Stage) -> list[Informer]:
    return [i for i in live.manager.cache.informers if i.kind == CONFIGMAP]


def copier(live: Stage, *objs: Obj) -> None:
    """MapController `copy`: ConfigMap inputs -> ConfigMap outputs `<name>-configmap`."""
    live.start(map_controller("copy", map_hook=python("map_copy"), inputs=[rule("v1", "configmaps")]), *objs)


def test_inputs_and_outputs_of_one_kind_are_cached_as_selected_not_as_the_whole_kind(stage: MakeStage) -> None:
    live = stage()
    others = [configmap(f"other-{i}", {"app": "other"}) for i in range(25)]
    picked = [configmap(f"picked-{i}", {"app": "picked"}) for i in range(10)]
    copier(live, *others, *picked, bucket(selector={"matchLabels": {"app": "picked"}}))

    assert live.output_names("copy") == {f"picked-{i}-configmap" for i in range(10)}
    scopes = {(i.namespace, i.labels): len(i) for i in configmap_informers(live)}
    assert scopes == {("default", "app=picked"): 10, ("", STAMPED): 10}  # no whole-kind ConfigMap informer


def test_parents_of_one_selection_share_an_informer_and_another_selection_gets_its_own(stage: MakeStage) -> None:
    live = stage()
    copier(live, configmap("a", {"app": "a"}), configmap("b", {"app": "b"}),
           bucket("one", selector={"matchLabels": {"app": "a"}}), bucket("two", selector={"matchLabels": {"app": "a"}}))
    live.create(bucket("three", selector={"matchLabels": {"app": "b"}}))

    eventually(lambda: live.output_names("copy") == {"a-configmap", "b-configmap"}, WAIT)
    inputs = sorted(str(i.labels) for i in configmap_informers(live) if i.labels != STAMPED)
    assert inputs == ["app=a", "app=b"]


def test_an_input_relabelled_out_of_every_selection_loses_its_output(stage: MakeStage) -> None:
    live = stage()
    copier(live, configmap("web", {"app": "web"}), bucket(selector={"matchLabels": {"app": "web"}}))
    assert live.output_names("copy") == {"web-configmap"}

    live.edit(CONFIGMAP, "web", lambda obj: obj["metadata"]["labels"].update(app="gone"))

    eventually(lambda: live.get(CONFIGMAP, "web-configmap") is None, WAIT)
    assert live.get(CONFIGMAP, "web") is not None


def test_the_selector_sent_is_the_parents_and_everything_sends_none() -> None:
    assert server_selector(parse_labels({"matchLabels": {"app": "web"}})) == "app=web"
    assert server_selector(parse_labels(None)) is None
    assert STAMPED == CONTROLLER_LABEL  # every output carries it (keys.stamp)


def test_a_selection_no_parent_makes_any_more_is_no_longer_listed_watched_or_cached(stage: MakeStage) -> None:
    live = stage()
    copier(live, configmap("a", {"app": "a"}), configmap("b", {"app": "b"}),
           bucket("one", selector={"matchLabels": {"app": "a"}}), bucket("two", selector={"matchLabels": {"app": "a"}}))
    [old] = [i for i in configmap_informers(live) if i.labels == "app=a"]

    live.edit(BUCKET, "one", lambda obj: obj["spec"].update(selector={"matchLabels": {"app": "b"}}))
    eventually(lambda: live.output_names("copy") == {"a-configmap", "b-configmap"}, WAIT)
    assert sorted(str(i.labels) for i in configmap_informers(live)) == ["app=a", "app=b", STAMPED]  # two keeps it

    live.delete(BUCKET, "two")
    eventually(lambda: sorted(str(i.labels) for i in configmap_informers(live)) == ["app=b", STAMPED], WAIT)
    assert old.closed and len(old) == 0
    eventually(lambda: not old.running, WAIT, what="the old selection's informer thread to end")

    live.delete(MAP_CONTROLLER, "copy", "")
    eventually(lambda: not configmap_informers(live), WAIT, what="every ConfigMap informer to stop")
    assert not [i for i in live.manager.cache.informers if i.kind == BUCKET]
