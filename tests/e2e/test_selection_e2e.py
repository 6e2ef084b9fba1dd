"""Memory follows the selection, on a real API server: informers that send label selectors and
ask for metadata alone, what the server answers, and a DecoratorController that still lets go
of a target the server stops sending (an object leaving a label selection arrives as DELETED).

The Cluster-level half (the events and the PartialObjectMetadata shape) is in the contract suite
(tests/reconcile/contract/test_watch.py, test_metadata.py); here the runtime meets the server.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from decorators.instance import Options
from decorators.spec import DECORATOR_CONTROLLER
from decorators.supervisor import Decorators
from reconcile import Cluster, Kind, ObjectKey
from reconcile.cache import InformerCache
from reconcile.errors import ApiError
from reconcile.hooks import HookPolicy
from reconcile.manager import Manager
from tests.e2e.support import eventually
from tests.reconcile.support import Running

CONFIGMAP = Kind("v1", "ConfigMap")
SECRET = Kind("v1", "Secret")
SELECTED = "e2e.porchkit.dev/selected"
FINALIZER_PREFIX = "metacontroller.io/decoratorcontroller-"


def configmap(name: str, namespace: str, selected: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "data": data,
            "metadata": {"name": name, "namespace": namespace, "labels": {SELECTED: selected}}}


def test_a_selecting_metadata_informer_holds_the_selected_objects_as_their_own_kind(
        cluster: Cluster, namespace: str) -> None:
    for index in range(5):
        cluster.create(configmap(f"other-{index}", namespace, "no", payload="x" * 1000))
    cluster.create(configmap("picked", namespace, "yes", payload="y" * 1000))
    cache = InformerCache(cluster)
    informer = cache.informer(CONFIGMAP, namespace=namespace, labels=f"{SELECTED}=yes", metadata_only=True)
    stop = threading.Event()
    cache.start(stop)
    try:
        assert informer.synced.wait(30)
        [obj] = informer.list()
        # the server sent PartialObjectMetadata (apiVersion meta.k8s.io/v1); the cache keeps the object's own kind
        assert (obj["apiVersion"], obj["kind"], obj["metadata"]["name"]) == ("v1", "ConfigMap", "picked")
        assert set(obj) == {"apiVersion", "kind", "metadata"} and "managedFields" not in obj["metadata"]

        found = cluster.get(CONFIGMAP, ObjectKey(namespace, "picked"))
        assert found is not None
        cluster.update({**found, "metadata": {**found["metadata"], "labels": {SELECTED: "no"}}})
        eventually(lambda: len(informer) == 0, what="the relabelled object to leave the cache")
        cluster.create(configmap("late", namespace, "yes"))
        eventually(lambda: [o["kind"] for o in informer.list()] == ["ConfigMap"], what="the new one to arrive")
    finally:
        stop.set()
        cache.stop()


def sync(request: dict[str, Any]) -> dict[str, Any]:
    """A Secret `<target>-copy` carrying the target's data."""
    target = request["object"]
    return {"attachments": [{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"{target['metadata']['name']}"
                                                                                "-copy"},
                             "stringData": dict(target.get("data") or {})}]}


def finalize(request: dict[str, Any]) -> dict[str, Any]:
    return {"attachments": [], "finalized": True}


@pytest.fixture
def decorators(cluster: Cluster, decorator_crd: None) -> Iterator[Callable[[], Manager]]:
    started: list[tuple[Running, Decorators]] = []

    def run() -> Manager:
        manager = Manager(cluster, grace_period=5)
        policy = HookPolicy.for_manager(["tests.e2e.test_selection_e2e"], [])
        supervisor = Decorators(manager, Options(hook_policy=policy))
        manager.add(supervisor.controller())
        started.append((Running(manager), supervisor))
        return manager

    yield run
    for running, supervisor in started:
        try:
            running.stop(30)
        finally:
            supervisor.stop_all()  # the hooks' threads with them


def test_a_decorator_target_relabelled_out_of_its_selection_is_finalized_and_let_go(
        cluster: Cluster, namespace: str, decorators: Callable[[], Manager]) -> None:
    name = f"select-{namespace}"
    finalizer = FINALIZER_PREFIX + name
    cluster.create({"apiVersion": DECORATOR_CONTROLLER.api_version, "kind": DECORATOR_CONTROLLER.kind,
                    "metadata": {"name": name},
                    # the server is shared: only this test's ConfigMaps carry this value
                    "spec": {"resources": [{"apiVersion": "v1", "resource": "configmaps",
                                            "labelSelector": {"matchLabels": {SELECTED: namespace}}}],
                             "attachments": [{"apiVersion": "v1", "resource": "secrets"}],
                             "hooks": {"sync": {"python": {"function": "tests.e2e.test_selection_e2e:sync"}},
                                       "finalize": {"python": {"function": "tests.e2e.test_selection_e2e:finalize"}}}}})
    try:
        cluster.create(configmap("other", namespace, "no", k="other"))
        cluster.create(configmap("t", namespace, namespace, k="v"))
        manager = decorators()

        def held() -> bool:
            target = cluster.get(CONFIGMAP, ObjectKey(namespace, "t")) or {}
            return finalizer in (target.get("metadata", {}).get("finalizers") or [])
        eventually(lambda: held() and cluster.get(SECRET, ObjectKey(namespace, "t-copy")) is not None,
                   what="the target decorated")
        configmaps = [i for i in manager.cache.informers if i.kind == CONFIGMAP]
        assert [(i.labels, sorted(o["metadata"]["name"] for o in i.list())) for i in configmaps] == \
            [(f"{SELECTED}={namespace}", ["t"])]

        target = cluster.get(CONFIGMAP, ObjectKey(namespace, "t"))
        assert target is not None
        cluster.update({**target, "metadata": {**target["metadata"], "labels": {SELECTED: "no"}}})

        eventually(lambda: not held() and cluster.get(SECRET, ObjectKey(namespace, "t-copy")) is None,
                   what="the finalizer and the attachment gone")
        assert cluster.get(CONFIGMAP, ObjectKey(namespace, "t")) is not None
    finally:
        with contextlib.suppress(ApiError):
            cluster.delete(DECORATOR_CONTROLLER, ObjectKey("", name))
