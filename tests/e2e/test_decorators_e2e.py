"""DecoratorControllers against a real API server (`make e2e`), with hooks as separate processes.

The DecoratorController CRD comes from deploy/crds; the controller runs as `porchkit manager
--controllers decorator` would run it (decorators.manager), on a KubeCluster. Webhooks are the
stdlib hook servers of tests/decorators/hookservers, started as processes on loopback and reached
through their in-cluster service names (`resolve`), as Metacontroller's examples are deployed.
Checked against the real server: owner references and garbage collection by
kube-controller-manager, the status subresource of a custom resource, finalizers held during a
deletion, and the release of finalizers when a DecoratorController is deleted.
"""

from __future__ import annotations

import contextlib
import copy
import secrets
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from decorators.instance import Options
from decorators.spec import DECORATOR_CONTROLLER
from decorators.supervisor import Decorators
from reconcile import Cluster, Kind, ObjectKey
from reconcile.errors import ApiError, NotFound
from reconcile.events import EventRecorder
from reconcile.hooks import HookPolicy
from reconcile.manager import Manager
from tests.e2e.support import eventually, served
from tests.reconcile.support import Running
from tests.waiting import settled

ROOT = Path(__file__).resolve().parents[2]
HOOKS = ROOT / "tests" / "decorators" / "hookservers"
CRD = Kind("apiextensions.k8s.io/v1", "CustomResourceDefinition")
CLUSTER_ROLE = Kind("rbac.authorization.k8s.io/v1", "ClusterRole")
ROLE_BINDING = Kind("rbac.authorization.k8s.io/v1", "RoleBinding")
CONFIGMAP = Kind("v1", "ConfigMap")
GROUP = "e2e.porchkit.dev"


@pytest.fixture
def hook() -> Iterator[Callable[[str], int]]:
    """Start a hook server script of tests/decorators/hookservers; returns its port."""
    processes: list[subprocess.Popen[str]] = []

    def start(script: str) -> int:
        process = subprocess.Popen([sys.executable, str(HOOKS / script)], stdout=subprocess.PIPE, text=True)
        processes.append(process)
        assert process.stdout is not None
        return int(process.stdout.readline())

    yield start
    for process in processes:
        process.kill()
        process.wait()


def decorator_manager(cluster: Cluster, resolve: dict[str, str]) -> Manager:
    """The decorator controller on the real server, as `porchkit manager --controllers decorator`."""
    manager = Manager(cluster, events=EventRecorder(cluster, "porchkit-decorators"), grace_period=5)
    options = Options(resolve=resolve, hook_policy=HookPolicy.for_manager(["tests.e2e.decorator_hooks"], []))
    manager.add(Decorators(manager, options).controller())
    return manager


@pytest.fixture
def run(cluster: Cluster, decorator_crd: None) -> Iterator[Callable[[dict[str, str]], Running]]:
    started: list[Running] = []

    def start(resolve: dict[str, str]) -> Running:
        started.append(Running(decorator_manager(cluster, resolve)))
        return started[-1]

    yield start
    for running in started:
        running.stop(30)


@pytest.fixture
def cleanup(cluster: Cluster) -> Iterator[Callable[[Kind, str], None]]:
    """Cluster-scoped objects a test made, deleted after it (their finalizers dropped first)."""
    made: list[tuple[Kind, str]] = []
    yield lambda kind, name: made.append((kind, name))
    for kind, name in reversed(made):
        obj = cluster.get(kind, ObjectKey("", name))
        if obj is None:
            continue
        if obj["metadata"].get("finalizers"):
            obj["metadata"]["finalizers"] = []
            with contextlib.suppress(ApiError):  # gone meanwhile, or changed: the delete below still runs
                cluster.update(obj)
        with contextlib.suppress(NotFound):
            cluster.delete(kind, ObjectKey("", name))


def decorator(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "DecoratorController",
            "metadata": {"name": name}, "spec": spec}


def owned_by(obj: dict[str, Any], owner: dict[str, Any]) -> bool:
    return any(ref.get("uid") == owner["metadata"]["uid"] and ref.get("controller")
               for ref in obj["metadata"].get("ownerReferences") or [])


def test_a_crd_annotated_enable_default_roles_gets_a_cluster_role_collected_with_it(
        cluster: Cluster, run: Callable[[dict[str, str]], Running], hook: Callable[[str], int],
        cleanup: Callable[[Kind, str], None]) -> None:
    suffix = secrets.token_hex(3)
    port = hook("crd_roles.py")
    run({"crd-role-controller.metacontroller": f"127.0.0.1:{port}"})
    name = f"crd-roles-{suffix}"
    cleanup(DECORATOR_CONTROLLER, name)
    cluster.create(decorator(name, {
        "resources": [{"apiVersion": "apiextensions.k8s.io/v1", "resource": "customresourcedefinitions",
                       "annotationSelector": {"matchExpressions": [{"key": "enable-default-roles",
                                                                    "operator": "Exists"}]}}],
        "attachments": [{"apiVersion": "rbac.authorization.k8s.io/v1", "resource": "clusterroles"}],
        "hooks": {"sync": {"webhook": {"url": "http://crd-role-controller.metacontroller/sync-crd-role",
                                       "timeout": "10s"}}}}))
    plural = f"things{suffix}"
    crd_name = f"{plural}.{GROUP}"
    cleanup(CRD, crd_name)
    crd = cluster.create(custom_resource_definition(plural, f"Thing{suffix}",
                                                        annotations={"enable-default-roles": "yes"}))
    role = eventually(lambda: cluster.get(CLUSTER_ROLE, ObjectKey("", f"{crd_name}-reader")))
    assert owned_by(role, crd) and not role["rules"]  # the real server reads `rules: []` back as null
    assert role["metadata"]["annotations"]["metacontroller.k8s.io/decorator-controller"] == name

    cluster.delete(CRD, ObjectKey("", crd_name))
    # kube-controller-manager's garbage collector follows the owner reference
    eventually(lambda: cluster.get(CLUSTER_ROLE, ObjectKey("", f"{crd_name}-reader")) is None)


def test_a_cluster_scoped_parent_keeps_its_namespaced_attachment(
        cluster: Cluster, run: Callable[[dict[str, str]], Running], hook: Callable[[str], int],
        cleanup: Callable[[Kind, str], None]) -> None:
    suffix = secrets.token_hex(3)
    port = hook("clustered_parent.py")
    run({"cluster-parent.metacontroller": f"127.0.0.1:{port}"})
    name = f"cluster-parent-{suffix}"
    cleanup(DECORATOR_CONTROLLER, name)
    cluster.create(decorator(name, {
        "resources": [{"apiVersion": "rbac.authorization.k8s.io/v1", "resource": "clusterroles",
                       "annotationSelector": {"matchExpressions": [{"key": "default-service-account-binding",
                                                                    "operator": "Exists"}]}}],
        "attachments": [{"apiVersion": "rbac.authorization.k8s.io/v1", "resource": "rolebindings"}],
        "hooks": {"sync": {"webhook": {"url": "http://cluster-parent.metacontroller/sync"}}}}))
    role_name = f"my-clusterrole-{suffix}"
    cleanup(CLUSTER_ROLE, role_name)
    role = cluster.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                           "metadata": {"name": role_name, "annotations": {"default-service-account-binding": "x"}},
                           "rules": []})
    key = ObjectKey("default", role_name)
    binding = eventually(lambda: cluster.get(ROLE_BINDING, key))
    assert owned_by(binding, role) and binding["roleRef"]["name"] == role_name

    cluster.delete(ROLE_BINDING, key)  # deleting the attachment by hand wakes its cluster-scoped parent
    eventually(lambda: (found := cluster.get(ROLE_BINDING, key)) and found["metadata"]["uid"]
               != binding["metadata"]["uid"])
    cluster.delete(CLUSTER_ROLE, ObjectKey("", role_name))
    eventually(lambda: cluster.get(ROLE_BINDING, key) is None)


def test_status_write_back_finalize_on_delete_and_release_when_the_decorator_goes(
        cluster: Cluster, namespace: str, run: Callable[[dict[str, str]], Running],
        cleanup: Callable[[Kind, str], None]) -> None:
    suffix = secrets.token_hex(3)
    plural = f"widgets{suffix}"
    cleanup(CRD, f"{plural}.{GROUP}")
    cluster.create(custom_resource_definition(plural, f"Widget{suffix}", scope="Namespaced", status=True))
    widget_kind = Kind(f"{GROUP}/v1", f"Widget{suffix}")
    eventually(lambda: served(cluster, widget_kind))
    run({})
    name = f"widgets-{suffix}"
    cleanup(DECORATOR_CONTROLLER, name)
    cluster.create(decorator(name, {
        "resources": [{"apiVersion": f"{GROUP}/v1", "resource": plural}],
        "attachments": [{"apiVersion": "v1", "resource": "configmaps", "updateStrategy": {"method": "InPlace"}}],
        "hooks": {"sync": {"python": {"function": "tests.e2e.decorator_hooks:sync"}},
                  "finalize": {"python": {"function": "tests.e2e.decorator_hooks:finalize"}}}}))
    finalizer = f"metacontroller.io/decoratorcontroller-{name}"
    for widget in ("a", "b"):
        cluster.create({"apiVersion": widget_kind.api_version, "kind": widget_kind.kind,
                        "metadata": {"name": widget, "namespace": namespace}, "spec": {"size": 3}})

    def decorated(widget: str) -> dict[str, Any] | None:
        obj = cluster.get(widget_kind, ObjectKey(namespace, widget))
        ok = (obj is not None and (obj.get("status") or {}).get("attached") == 1
              and finalizer in obj["metadata"].get("finalizers", []) and obj["metadata"]["labels"].get("decorated"))
        return obj if ok else None

    a = eventually(lambda: decorated("a"))
    eventually(lambda: decorated("b"))
    attachment = eventually(lambda: cluster.get(CONFIGMAP, ObjectKey(namespace, "a-widget")))
    assert owned_by(attachment, a) and attachment["data"] == {"size": "3"}

    cluster.delete(widget_kind, ObjectKey(namespace, "a"))  # finalize: the attachment goes, then the widget
    eventually(lambda: cluster.get(widget_kind, ObjectKey(namespace, "a")) is None)
    assert cluster.get(CONFIGMAP, ObjectKey(namespace, "a-widget")) is None

    cluster.delete(DECORATOR_CONTROLLER, ObjectKey("", name))  # releases its finalizer from "b"
    eventually(lambda: cluster.get(DECORATOR_CONTROLLER, ObjectKey("", name)) is None)
    b = cluster.get(widget_kind, ObjectKey(namespace, "b"))
    assert b is not None and finalizer not in (b["metadata"].get("finalizers") or [])


def custom_resource_definition(plural: str, kind: str, *, scope: str = "Cluster", status: bool = False,
                               annotations: dict[str, str] | None = None) -> dict[str, Any]:
    version: dict[str, Any] = {"name": "v1", "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": {"type": "object",
                                                              "x-kubernetes-preserve-unknown-fields": True}}}
    if status:
        version["subresources"] = {"status": {}}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{GROUP}", "annotations": annotations or {}},
            "spec": {"group": GROUP, "scope": scope,
                     "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": plural[:-1]},
                     "versions": [version]}}


def test_the_shipped_crd_keeps_every_field_of_a_metacontroller_manifest(
        cluster: Cluster, decorator_crd: None, cleanup: Callable[[Kind, str], None]) -> None:
    from tests.decorators.test_crds import EVERY_FIELD

    name = f"everything-{secrets.token_hex(3)}"
    cleanup(DECORATOR_CONTROLLER, name)
    cluster.create({**EVERY_FIELD, "metadata": {"name": name}})
    stored = cluster.get(DECORATOR_CONTROLLER, ObjectKey("", name))
    expected = copy.deepcopy(EVERY_FIELD["spec"])
    for hook in ("finalize", "customize"):  # the schema's default, as Metacontroller's CRD has it
        expected["hooks"][hook]["version"] = "v1"
    assert stored is not None and stored["spec"] == expected  # nothing pruned


def test_converging_targets_on_a_real_server_costs_one_sync_call_each(
        cluster: Cluster, namespace: str, decorator_crd: None, cleanup: Callable[[Kind, str], None]) -> None:
    # The echo of the pass's own create (its watch event, from the real server's watch) asks no
    # hook; reading back after the server's own pace, the count must not have grown.
    names = [f"t-{i:02d}" for i in range(20)]
    for name in names:
        cluster.create({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": name, "namespace": namespace, "labels": {f"{GROUP}/calls": namespace}}})
    calls: list[str] = []
    options = Options(hook_policy=HookPolicy.for_manager(["tests.decorators.pyhooks"], []),
                      report=lambda decorator, kind, key, result: calls.append(str(key)))
    manager = Manager(cluster, grace_period=5)
    decorators = Decorators(manager, options)
    manager.add(decorators.controller())
    running = Running(manager)
    try:
        name = f"calls-{secrets.token_hex(3)}"
        cluster.create(decorator(name, {
            "resources": [{"apiVersion": "v1", "resource": "configmaps",
                           "labelSelector": {"matchLabels": {f"{GROUP}/calls": namespace}}}],
            "attachments": [{"apiVersion": "v1", "resource": "configmaps"}],
            "hooks": {"sync": {"python": {"function": "tests.decorators.pyhooks:attach_first"}}}}))
        cleanup(DECORATOR_CONTROLLER, name)
        eventually(lambda: all(cluster.get(CONFIGMAP, ObjectKey(namespace, f"{target}-first")) for target in names))
        eventually(lambda: len(calls) >= len(names))
        settled(lambda: len(calls), quiet=2.0, timeout=30.0)
        assert sorted(calls) == sorted(f"{namespace}/{target}" for target in names)  # one call per target
    finally:
        running.stop(30)
        decorators.stop_all()  # and the python hooks' threads
