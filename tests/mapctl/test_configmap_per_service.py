"""The ConfigMap-per-Service example (testdata/mapctl/configmap-per-service), live.

The example's manifests are loaded into an embedded API server and a manager runs the
MapControllers on it (the Stage of test_snapshotschedule.py, on a FakeClock so that the
controllers' settling delays cost no real time). The map hook is the example's Δ pipeline. The
tests change Services as a user would and assert the ConfigMaps, the ServiceDirectory's status,
and how many times the hook was asked.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mapctl.keys import CONTROLLER_LABEL, INPUT_ANNOTATION
from reconcile import Kind, ObjectKey
from reconcile.clock import FakeClock
from reconcile.cluster import Cluster, Obj, WatchEvent
from reconcile.embedded import EmbeddedCluster
from reconcile.objects import controller_of
from tests.mapctl.test_snapshotschedule import Stage, counts, mapped

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "testdata" / "mapctl" / "configmap-per-service"

DIRECTORY = Kind("examples.porchkit.dev/v1alpha1", "ServiceDirectory")
SERVICE = Kind("v1", "Service")
CONFIGMAP = Kind("v1", "ConfigMap")
CONTROLLER = "configmap-per-service"
HELD = 10.0  # real seconds a held watch event waits at most


@pytest.fixture
def stage() -> Iterator[Stage]:
    running = Stage(EXAMPLE, FakeClock())
    yield running
    running.close()


def service(name: str, port: int, **labels: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "default", "labels": labels},
            "spec": {"selector": {"app": name}, "ports": [{"port": port}]}}


def endpoint(name: str, port: str | None) -> dict[str, str]:
    """The data of the ConfigMap of Service `name`."""
    data = {"host": f"{name}.default.svc.cluster.local"}
    return {**data, "port": port} if port is not None else data


def endpoints(stage: Stage) -> dict[str, dict[str, str]]:
    """The data of every ConfigMap the directory owns, by name."""
    return {cm["metadata"]["name"]: cm.get("data") or {} for cm in stage.list(CONFIGMAP)
            if (ref := controller_of(cm)) is not None and ref.get("name") == "exposed-services"}


def counting(services: int) -> tuple[Any, Any, str]:
    return {"services": {"total": services}}, {"configmaps": {"total": services}}, "True"


def settled(stage: Stage, expected: dict[str, dict[str, str]]) -> float:
    """The map hook's call count, once the ConfigMaps are `expected`, the status counts them and
    the MapController is idle."""
    stage.until(lambda: endpoints(stage) == expected)
    stage.status_until(DIRECTORY, "exposed-services", lambda status: counts(status) == counting(len(expected)))
    return stage.settled_calls(CONTROLLER, "map")


START = {"web-endpoint": endpoint("web", "80"), "api-endpoint": endpoint("api", "9000")}


# --- the pipeline at work -----------------------------------------------------------------------------


def test_each_selected_service_gets_its_configmap_and_the_unselected_one_none(stage: Stage) -> None:
    calls = settled(stage, START)
    # At least one call per selected Service. (Two start-up triggers of one input, its parent's
    # first pass and its informer's first list, may each ask the hook: up to three calls then.)
    assert calls >= 2
    assert stage.get(CONFIGMAP, "database-endpoint") is None  # database is not labelled expose: "true"
    web = stage.get(CONFIGMAP, "web-endpoint")
    assert web is not None
    owner = controller_of(web)
    assert owner is not None and (owner["kind"], owner["name"]) == ("ServiceDirectory", "exposed-services")
    assert web["metadata"]["labels"][CONTROLLER_LABEL] == CONTROLLER
    assert web["metadata"]["annotations"][INPUT_ANNOTATION] == "Service/default/web"
    assert mapped(stage.status(DIRECTORY, "exposed-services"))["reason"] == "Mapped"

    stage.advance_to(stage.clock.time() + 3600)  # no resync period: time alone asks nothing
    assert settled(stage, START) == calls


def test_a_newly_labelled_service_gets_one(stage: Stage) -> None:
    calls = settled(stage, START)
    stage.cluster.create(service("search", 443, expose="true"))
    assert settled(stage, {**START, "search-endpoint": endpoint("search", "443")}) == calls + 1


def test_a_changed_port_updates_the_configmap_in_place(stage: Stage) -> None:
    calls = settled(stage, START)
    before = stage.get(CONFIGMAP, "web-endpoint")
    assert before is not None

    def new_port(obj: Obj) -> None:
        obj["spec"]["ports"][0]["port"] = 8080
    stage.edit(SERVICE, "web", new_port)

    assert settled(stage, {**START, "web-endpoint": endpoint("web", "8080")}) == calls + 1
    after = stage.get(CONFIGMAP, "web-endpoint")
    assert after is not None
    assert after["metadata"]["uid"] == before["metadata"]["uid"]  # InPlace: updated, not re-created
    assert after["metadata"]["resourceVersion"] != before["metadata"]["resourceVersion"]


def test_removing_the_label_deletes_the_configmap(stage: Stage) -> None:
    settled(stage, START)

    def unlabel(obj: Obj) -> None:
        del obj["metadata"]["labels"]["expose"]
    stage.edit(SERVICE, "api", unlabel)

    settled(stage, {"web-endpoint": endpoint("web", "80")})  # no tombstone hook: deleted at once
    assert stage.get(SERVICE, "api") is not None


def test_a_deleted_service_loses_its_configmap(stage: Stage) -> None:
    settled(stage, START)
    stage.cluster.delete(SERVICE, ObjectKey("default", "web"))
    settled(stage, {"api-endpoint": endpoint("api", "9000")})


def test_services_the_directory_does_not_select_are_never_mapped(stage: Stage) -> None:
    calls = settled(stage, START)

    def relabel(obj: Obj) -> None:
        obj["metadata"].setdefault("labels", {})["expose"] = "false"
        obj["spec"]["ports"][0]["port"] = 5433
    stage.edit(SERVICE, "database", relabel)
    stage.cluster.create(service("cache", 6379, expose="yes"))

    assert settled(stage, START) == calls  # not inputs, so no hook call
    assert stage.get(CONFIGMAP, "database-endpoint") is None
    assert stage.get(CONFIGMAP, "cache-endpoint") is None


# --- the status follows what the cache sees -----------------------------------------------------------


class HeldWatch:
    """The embedded cluster, except that watch events of `kind` wait while `hold()` is on: the
    manager's cache lags the API server for as long as a test likes, as behind a slow watch."""

    def __init__(self, cluster: EmbeddedCluster, kind: Kind) -> None:
        self.cluster, self.kind = cluster, kind
        self.released = threading.Event()
        self.released.set()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cluster, name)

    def hold(self) -> None:
        self.released.clear()

    def release(self) -> None:
        self.released.set()

    def watch(self, kind: Kind, **options: Any) -> Iterator[WatchEvent]:
        events = self.cluster.watch(kind, **options)
        return HeldEvents(events, self.released) if kind == self.kind else events


class HeldEvents(Iterator[WatchEvent]):
    """A watch stream whose events wait for `released`; `close()` (from any thread) closes the
    stream underneath, as the informer expects of a stream."""

    def __init__(self, events: Iterator[WatchEvent], released: threading.Event) -> None:
        self.events, self.released = events, released

    def __next__(self) -> WatchEvent:
        event = next(self.events)
        self.released.wait(HELD)
        return event

    def close(self) -> None:
        getattr(self.events, "close", lambda: None)()


@pytest.fixture
def held() -> Iterator[tuple[Stage, HeldWatch]]:
    """A stage whose manager sees ConfigMap events only while they are not held."""
    views: list[HeldWatch] = []

    def view(cluster: EmbeddedCluster) -> Cluster:
        views.append(HeldWatch(cluster, CONFIGMAP))
        return views[0]  # a Cluster by delegation
    running = Stage(EXAMPLE, FakeClock(), seen_through=view)
    yield running, views[0]
    views[0].release()
    running.close()


def test_the_status_counts_outputs_the_cache_sees_late(held: tuple[Stage, HeldWatch]) -> None:
    stage, watch = held
    # First the manager's cache must have seen the start-up outputs, and their echoes be over.
    stage.until(lambda: {ObjectKey.of(cm).name for cm in stage.manager.cache.list(CONFIGMAP, "default")} >= set(START))
    stage.settled_calls(CONTROLLER, "map")
    stage.advance_to(stage.clock.time() + 1)
    stage.settled_calls(CONTROLLER, "map")
    watch.hold()
    stage.cluster.create(service("search", 443, expose="true"))
    stage.until(lambda: stage.get(CONFIGMAP, "search-endpoint") is not None)
    # The parent is recounted while the cache has not seen search-endpoint yet...
    stage.until(lambda: counts(stage.status(DIRECTORY, "exposed-services"))[0] == {"services": {"total": 3}})
    stage.until(lambda: stage.idle(CONTROLLER))
    watch.release()
    # ...and once it has, the count follows (no poke here: see Stage.status_until).
    stage.until(lambda: counts(stage.status(DIRECTORY, "exposed-services")) == counting(3), limit=5.0)
