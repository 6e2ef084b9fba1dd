"""The runtime on a real API server: the Greetings controller of docs/runtime.md under a manager.

It owns a child ConfigMap per Greeting (a CRD), writes status through the subresource, holds a
finalizer until it has said goodbye, and its children are garbage-collected by
kube-controller-manager when their Greeting goes. Two managers elect a leader through a real
Lease: only the leader reconciles, and the other takes over when it stops.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconcile import Cluster, Kind, NotFound, ObjectKey, conditions
from reconcile.controller import Controller
from reconcile.manager import LeaderElection, Manager
from tests.e2e.support import eventually
from tests.reconcile.support import Running

DOC = (Path(__file__).resolve().parents[2] / "docs" / "runtime.md").read_text(encoding="utf-8")
CRD = Kind("apiextensions.k8s.io/v1", "CustomResourceDefinition")
GREETING = Kind("example.com/v1", "Greeting")
CONFIGMAP = Kind("v1", "ConfigMap")
LEASE = Kind("coordination.k8s.io/v1", "Lease")


def example(name: str) -> str:
    match = re.search(rf"<!-- example: {name} -->\n```\w+\n(.*?)```", DOC, re.S)
    assert match, f"no `{name}` example in docs/runtime.md"
    return match.group(1)


@pytest.fixture(scope="module")
def greetings_module() -> dict[str, Any]:
    module: dict[str, Any] = {}
    exec(compile(example("controller"), "docs/runtime.md (controller)", "exec"), module)
    return module


@pytest.fixture
def greeting_crd(cluster: Cluster) -> Iterator[None]:
    """The Greeting CRD of docs/runtime.md, installed (or already there) and served."""
    if cluster.get(CRD, ObjectKey("", "greetings.example.com")) is None:
        cluster.create(yaml.safe_load(example("crd")))

    def served() -> bool:
        try:
            cluster.resource(GREETING)
            cluster.list(GREETING)
            return True
        except NotFound:
            return False

    eventually(served)
    yield


@pytest.fixture
def start() -> Iterator[Callable[[Manager], Running]]:
    running: list[Running] = []

    def run(manager: Manager) -> Running:
        running.append(Running(manager))
        return running[-1]

    yield run
    for each in running:
        if each.thread.is_alive():
            each.stop(timeout=30)


def greeting(name: str, namespace: str, who: str) -> dict[str, Any]:
    return {"apiVersion": GREETING.api_version, "kind": GREETING.kind,
            "metadata": {"name": name, "namespace": namespace}, "spec": {"name": who}}


def counting(module: dict[str, Any], manager: Manager, seen: list[ObjectKey]) -> Controller:
    """The documented controller for `manager`, recording each key it reconciles."""
    controller: Controller = module["greetings_controller"](manager.cluster, manager.clock)
    reconcile = controller.reconcile

    def recorded(key: ObjectKey) -> Any:
        seen.append(key)
        return reconcile(key)

    controller.reconcile = recorded
    return controller


@pytest.mark.usefixtures("greeting_crd")
def test_the_greetings_controller_owns_children_writes_status_finalizes_and_its_children_are_collected(
        cluster: Cluster, namespace: str, greetings_module: dict[str, Any],
        start: Callable[[Manager], Running]) -> None:
    manager = Manager(cluster)
    manager.add(greetings_module["greetings_controller"](manager.cluster, manager.clock))
    running = start(manager)
    key, child = ObjectKey(namespace, "world"), ObjectKey(namespace, "world-greeting")

    made = cluster.create(greeting("world", namespace, "World"))

    configmap = eventually(lambda: cluster.get(CONFIGMAP, child))
    assert configmap["data"] == {"message": "Hello, World!"}
    owner = configmap["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("Greeting", "world", made["metadata"]["uid"])
    ready = eventually(lambda: (g := cluster.get(GREETING, key)) and conditions.is_true(g, "Ready") and g)
    assert ready["metadata"]["finalizers"] == ["example.com/say-goodbye"]
    assert ready["status"]["conditions"][0]["observedGeneration"] == ready["metadata"]["generation"]

    cluster.update({**configmap, "data": {"message": "edited by hand"}})  # drift is put right
    eventually(lambda: (cluster.get(CONFIGMAP, child) or {}).get("data") == {"message": "Hello, World!"})

    cluster.delete(GREETING, key)
    eventually(lambda: cluster.get(GREETING, key) is None)  # the finalizer was released
    farewells = cluster.get(CONFIGMAP, ObjectKey(namespace, "farewells"))
    assert farewells is not None and farewells["data"] == {"world": "Goodbye, World!"}
    eventually(lambda: cluster.get(CONFIGMAP, child) is None)  # kube-controller-manager collected it

    assert running.stop(timeout=30) == 0


@pytest.mark.usefixtures("greeting_crd")
def test_two_managers_elect_one_leader_through_a_lease_and_the_other_takes_over(
        connect: Callable[[], Cluster], cluster: Cluster, namespace: str, greetings_module: dict[str, Any],
        start: Callable[[Manager], Running]) -> None:
    election = LeaderElection(namespace=namespace, name="greetings", lease_duration=6, renew_deadline=4,
                              retry_period=1)
    seen: dict[str, list[ObjectKey]] = {"a": [], "b": []}
    managers: dict[str, Manager] = {}
    running: dict[str, Running] = {}
    for name in ("a", "b"):  # each its own connection, as two replicas would have
        managers[name] = Manager(connect(), leader_election=replace(election, identity=name))
        managers[name].add(counting(greetings_module, managers[name], seen[name]))
        running[name] = start(managers[name])

    def holder() -> str:
        lease = cluster.get(LEASE, ObjectKey(namespace, "greetings"))
        return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")

    leader = eventually(lambda: holder() in ("a", "b") and holder())
    standby = "b" if leader == "a" else "a"
    eventually(lambda: managers[leader].state == "running")
    eventually(lambda: managers[standby].state == "standby")  # synced, waiting for the Lease

    cluster.create(greeting("first", namespace, "First"))
    eventually(lambda: ObjectKey(namespace, "first") in seen[leader])
    assert seen[standby] == []

    assert running[leader].stop(timeout=30) == 0  # releases the Lease
    eventually(lambda: holder() == standby, timeout=election.lease_duration + 5)
    cluster.create(greeting("second", namespace, "Second"))
    eventually(lambda: ObjectKey(namespace, "second") in seen[standby])
    eventually(lambda: (g := cluster.get(GREETING, ObjectKey(namespace, "second"))) and conditions.is_true(g, "Ready"))

    for name in ("first", "second"):  # let the new leader say goodbye, so nothing holds the namespace
        cluster.delete(GREETING, ObjectKey(namespace, name))
    eventually(lambda: not cluster.list(GREETING, namespace=namespace).items)
    assert running[standby].stop(timeout=30) == 0
