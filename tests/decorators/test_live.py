"""DecoratorControllers running live: a manager on the embedded cluster, hooks served by real processes.

Each test starts the hook servers it needs (tests/decorators/hookservers, run as `python3
script.py`), runs the DecoratorControllers' controller as `porchkit manager` does, and asserts
what ends up on the cluster: attachments, owner references, finalizers, write-backs, Events,
call counts and metrics. The scenarios are those of Metacontroller's examples (crd-roles,
clusteredparent, service-per-pod and its v2, update-strategy) and integration tests, plus
porchkit's own hooks (python, pipeline) and its deviations (docs/decorators.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from decorators.spec import DECORATOR_ANNOTATION
from reconcile import Kind, ObjectKey
from reconcile.cluster import Obj
from tests.decorators.hooks_support import (
    DECORATOR_CONTROLLER,
    WAIT,
    HookServer,
    Stage,
    decorator_controller,
    hook_server,
    stage,
)
from tests.waiting import eventually, settled

__all__ = ["hook_server", "stage"]  # fixtures, imported to be found here

Start = Callable[[str], HookServer]
MakeStage = Callable[..., Stage]

CRD = Kind("apiextensions.k8s.io/v1", "CustomResourceDefinition")
CLUSTER_ROLE = Kind("rbac.authorization.k8s.io/v1", "ClusterRole")
ROLE_BINDING = Kind("rbac.authorization.k8s.io/v1", "RoleBinding")
STATEFULSET = Kind("apps/v1", "StatefulSet")
DEPLOYMENT = Kind("apps/v1", "Deployment")
SERVICE = Kind("v1", "Service")
CONFIGMAP = Kind("v1", "ConfigMap")
WIDGET = Kind("example.com/v1", "Widget")
HOLD = "example.com/hold"


# --- objects -------------------------------------------------------------------------------------


def crd(plural: str, group: str, *, annotations: dict[str, str] | None = None, status: bool = False) -> Obj:
    kind = plural[:-1].capitalize()
    version: dict[str, Any] = {"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
        "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}
    if status:
        version["subresources"] = {"status": {}}
    return {"apiVersion": CRD.api_version, "kind": CRD.kind,
            "metadata": {"name": f"{plural}.{group}", "annotations": annotations or {}},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": plural[:-1]},
                     "versions": [version]}}


def statefulset(name: str, *, replicas: int = 2, ports: str = "80:8080", **annotations: str) -> Obj:
    return {"apiVersion": STATEFULSET.api_version, "kind": STATEFULSET.kind,
            "metadata": {"name": name, "namespace": "default",
                         "annotations": {"service-per-pod-label": "pod-name", "service-per-pod-ports": ports,
                                         **annotations}},
            "spec": {"replicas": replicas, "serviceName": name, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "nginx", "image": "nginx"}]}}}}


def deployment(name: str, *, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
               kind: Kind = DEPLOYMENT) -> Obj:
    """A Deployment (or, with `kind`, another workload of that shape: a StatefulSet)."""
    return {"apiVersion": kind.api_version, "kind": kind.kind,
            "metadata": {"name": name, "namespace": "default", "labels": labels or {},
                         "annotations": annotations or {}},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "app", "image": "busybox"}]}}}}


def rule(api_version: str, resource: str, **fields: Any) -> dict[str, Any]:
    return {"apiVersion": api_version, "resource": resource, **fields}


def webhook(url: str, *, version: str | None = None, timeout: str = "2s") -> dict[str, Any]:
    hook: dict[str, Any] = {"webhook": {"url": url, "timeout": timeout}}
    if version:
        hook["version"] = version
    return hook


def python(function: str) -> dict[str, Any]:
    return {"python": {"function": f"tests.decorators.pyhooks:{function}"}}


def labelled(key: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {key: "yes"}}}


def has_annotations(*keys: str) -> dict[str, Any]:
    return {"annotationSelector": {"matchExpressions": [{"key": key, "operator": "Exists"} for key in keys]}}


def service_per_pod(name: str = "service-per-pod", *, version: str | None = None, finalize: bool = True,
                    sync: bool = True, method: str | None = None, **spec: Any) -> Obj:
    prefix = "/v2" if version == "v2" else ""
    hooks: dict[str, Any] = {}
    if sync:
        hooks["sync"] = webhook(f"http://service-per-pod.metacontroller{prefix}/sync", version=version)
    if finalize:
        hooks["finalize"] = webhook(f"http://service-per-pod.metacontroller{prefix}/finalize", version=version)
    attachment = rule("v1", "services", **({"updateStrategy": {"method": method}} if method else {}))
    return decorator_controller(
        name, resources=[rule("apps/v1", "statefulsets", **has_annotations("service-per-pod-label",
                                                                          "service-per-pod-ports"))],
        attachments=[attachment], hooks=hooks, **spec)


# --- reading -------------------------------------------------------------------------------------


def finalizers(obj: Obj | None) -> list[str]:
    assert obj is not None
    return list(obj["metadata"].get("finalizers", []))


def owned_by(obj: Obj, owner: Obj) -> bool:
    """`obj` has a controller owner reference to `owner`, and carries the decorator annotation."""
    refs = obj["metadata"].get("ownerReferences", [])
    return DECORATOR_ANNOTATION in obj["metadata"].get("annotations", {}) and any(
        ref["uid"] == owner["metadata"]["uid"] and ref.get("controller") is True for ref in refs)


def services(live: Stage, prefix: str) -> dict[str, Obj]:
    return {svc["metadata"]["name"]: svc for svc in live.cluster.list(SERVICE, namespace="default").items
            if svc["metadata"]["name"].startswith(prefix + "-")}


def hook_calls(live: Stage, controller: str, hook: str = "sync") -> float:
    return live.metric("porchkit_hook_requests_total", controller=controller, hook=hook)


def without_annotation(key: str) -> Callable[[Obj], None]:
    return lambda obj: obj["metadata"]["annotations"].pop(key)


def with_annotations(**values: str) -> Callable[[Obj], None]:
    return lambda obj: obj["metadata"].setdefault("annotations", {}).update(values)


# --- crd-roles: a cluster-scoped target, a cluster-scoped attachment -----------------------------


@pytest.fixture
def crd_roles(hook_server: Start, stage: MakeStage) -> Stage:
    live = stage({"crd-role-controller.metacontroller": hook_server("crd_roles").address})
    live.cluster.create(decorator_controller(
        "crd-role-controller", resources=[rule(CRD.api_version, "customresourcedefinitions",
                                               **has_annotations("enable-default-roles"))],
        attachments=[rule(CLUSTER_ROLE.api_version, "clusterroles")],
        hooks={"sync": webhook("http://crd-role-controller.metacontroller/sync-crd-role")}))
    return live


class TestCrdRoles:
    def test_an_annotated_crd_gets_a_reader_role_controlled_by_it(self, crd_roles: Stage) -> None:
        target = crd_roles.cluster.create(crd("mytests", "ctl.rlg.io", annotations={"enable-default-roles": "yes"}))
        role = eventually(lambda: crd_roles.get(CLUSTER_ROLE, "mytests.ctl.rlg.io-reader"), WAIT)
        assert role["rules"] == []
        assert role["metadata"]["ownerReferences"] == [{
            "apiVersion": CRD.api_version, "kind": CRD.kind, "name": "mytests.ctl.rlg.io",
            "uid": target["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]
        assert role["metadata"]["annotations"][DECORATOR_ANNOTATION] == "crd-role-controller"

    def test_a_crd_without_the_annotation_gets_no_role(self, crd_roles: Stage) -> None:
        crd_roles.cluster.create(crd("plains", "ctl.rlg.io"))
        crd_roles.cluster.create(crd("marked", "ctl.rlg.io", annotations={"enable-default-roles": "yes"}))
        eventually(lambda: crd_roles.get(CLUSTER_ROLE, "marked.ctl.rlg.io-reader"), WAIT)
        crd_roles.wait_idle("crd-role-controller")
        assert crd_roles.get(CLUSTER_ROLE, "plains.ctl.rlg.io-reader") is None

    def test_removing_the_annotation_without_a_finalize_hook_leaves_the_role(self, crd_roles: Stage) -> None:
        crd_roles.cluster.create(crd("mytests", "ctl.rlg.io", annotations={"enable-default-roles": "yes"}))
        role = eventually(lambda: crd_roles.get(CLUSTER_ROLE, "mytests.ctl.rlg.io-reader"), WAIT)
        crd_roles.edit(CRD, "mytests.ctl.rlg.io", without_annotation("enable-default-roles"))
        eventually(lambda: "enable-default-roles" not in (crd_roles.manager.cache.get(
            CRD, ObjectKey("", "mytests.ctl.rlg.io")) or {})["metadata"].get("annotations", {}), WAIT)
        for controller in crd_roles.decorators.running["crd-role-controller"].controllers:
            controller.queue.add(ObjectKey("", "mytests.ctl.rlg.io"))  # a pass over the unselected target
        crd_roles.wait_idle("crd-role-controller")
        kept = crd_roles.get(CLUSTER_ROLE, "mytests.ctl.rlg.io-reader")
        assert kept is not None and kept["metadata"]["uid"] == role["metadata"]["uid"]
        assert crd_roles.events("mytests.ctl.rlg.io", "SyncError") == []

    def test_hook_requests_are_counted_by_controller_hook_and_code(self, crd_roles: Stage) -> None:
        crd_roles.cluster.create(crd("mytests", "ctl.rlg.io", annotations={"enable-default-roles": "yes"}))
        eventually(lambda: crd_roles.get(CLUSTER_ROLE, "mytests.ctl.rlg.io-reader"), WAIT)
        rendered = crd_roles.manager.metrics.render()
        assert "porchkit_hook_requests_total{" in rendered
        assert crd_roles.metric("porchkit_hook_requests_total", controller="crd-role-controller", hook="sync",
                                code="200") >= 1
        assert crd_roles.metric("porchkit_hook_request_duration_seconds_count", controller="crd-role-controller",
                                hook="sync") >= 1


# --- clusteredparent: a cluster-scoped target, a namespaced attachment ---------------------------


@pytest.fixture
def cluster_parent(hook_server: Start, stage: MakeStage) -> Stage:
    live = stage({"cluster-parent.metacontroller": hook_server("clustered_parent").address})
    live.cluster.create(decorator_controller(
        "cluster-parent", resources=[rule(CLUSTER_ROLE.api_version, "clusterroles",
                                          **has_annotations("default-service-account-binding"))],
        attachments=[rule(ROLE_BINDING.api_version, "rolebindings")],
        hooks={"sync": webhook("http://cluster-parent.metacontroller/sync")}))
    return live


def cluster_role(name: str) -> Obj:
    return {"apiVersion": CLUSTER_ROLE.api_version, "kind": CLUSTER_ROLE.kind,
            "metadata": {"name": name, "annotations": {"default-service-account-binding": "default"}},
            "rules": []}


class TestClusteredParent:
    def test_a_cluster_role_gets_a_role_binding_in_default(self, cluster_parent: Stage) -> None:
        role = cluster_parent.cluster.create(cluster_role("my-clusterrole"))
        binding = eventually(lambda: cluster_parent.get(ROLE_BINDING, "my-clusterrole", "default"), WAIT)
        assert owned_by(binding, role)
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                      "name": "my-clusterrole"}
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "default", "namespace": "default"}]

    def test_a_role_binding_deleted_by_hand_comes_back(self, cluster_parent: Stage) -> None:
        cluster_parent.cluster.create(cluster_role("my-clusterrole"))
        first = eventually(lambda: cluster_parent.get(ROLE_BINDING, "my-clusterrole", "default"), WAIT)
        cluster_parent.cluster.delete(ROLE_BINDING, ObjectKey("default", "my-clusterrole"))
        again = eventually(lambda: (found := cluster_parent.get(ROLE_BINDING, "my-clusterrole", "default"))
                           and found["metadata"]["uid"] != first["metadata"]["uid"] and found, WAIT)
        assert again["roleRef"]["name"] == "my-clusterrole"

    def test_deleting_the_cluster_role_garbage_collects_its_binding(self, cluster_parent: Stage) -> None:
        cluster_parent.cluster.create(cluster_role("my-clusterrole"))
        eventually(lambda: cluster_parent.get(ROLE_BINDING, "my-clusterrole", "default"), WAIT)
        cluster_parent.cluster.delete(CLUSTER_ROLE, ObjectKey("", "my-clusterrole"))
        eventually(lambda: cluster_parent.get(ROLE_BINDING, "my-clusterrole", "default") is None, WAIT)
        assert cluster_parent.get(CLUSTER_ROLE, "my-clusterrole") is None


# --- service-per-pod: a namespaced target, finalize, opt-out, deletion order, v2 keys -------------


@pytest.fixture
def per_pod(hook_server: Start, stage: MakeStage) -> Stage:
    return stage({"service-per-pod.metacontroller": hook_server("service_per_pod").address})


FINALIZER = "metacontroller.io/decoratorcontroller-service-per-pod"


class TestServicePerPod:
    def test_one_service_per_replica_controlled_by_the_statefulset(self, per_pod: Stage) -> None:
        per_pod.cluster.create(service_per_pod())
        sts = per_pod.cluster.create(statefulset("nginx", replicas=3, ports="80:80,8080:8080"))
        found = eventually(lambda: len(svcs := services(per_pod, "nginx")) == 3 and svcs, WAIT)
        assert sorted(found) == ["nginx-0", "nginx-1", "nginx-2"]
        svc = found["nginx-2"]
        assert svc["spec"]["selector"] == {"pod-name": "nginx-2"}
        assert svc["spec"]["ports"] == [{"name": "port-80", "port": 80, "targetPort": 80},
                                        {"name": "port-8080", "port": 8080, "targetPort": 8080}]
        assert all(owned_by(each, sts) for each in found.values())
        assert FINALIZER in finalizers(per_pod.get(STATEFULSET, "nginx", "default"))

    def test_scaling_down_deletes_the_services_no_longer_answered(self, per_pod: Stage) -> None:
        per_pod.cluster.create(service_per_pod())
        per_pod.cluster.create(statefulset("nginx", replicas=3))
        eventually(lambda: len(services(per_pod, "nginx")) == 3, WAIT)
        per_pod.edit(STATEFULSET, "nginx", lambda obj: obj["spec"].update({"replicas": 1}), "default")
        eventually(lambda: sorted(services(per_pod, "nginx")) == ["nginx-0"], WAIT)

    def test_deleting_the_target_finalizes_it_then_lets_it_go(self, per_pod: Stage) -> None:
        per_pod.cluster.create(service_per_pod())
        per_pod.cluster.create(statefulset("nginx"))
        eventually(lambda: len(services(per_pod, "nginx")) == 2
                   and FINALIZER in finalizers(per_pod.get(STATEFULSET, "nginx", "default")), WAIT)
        per_pod.cluster.delete(STATEFULSET, ObjectKey("default", "nginx"))
        eventually(lambda: per_pod.get(STATEFULSET, "nginx", "default") is None and not services(per_pod, "nginx"),
                   WAIT)
        assert hook_calls(per_pod, "service-per-pod", "finalize") >= 1

    def test_a_foreground_deletion_completes_without_errors(self, per_pod: Stage) -> None:
        per_pod.cluster.create(service_per_pod())
        per_pod.cluster.create(statefulset("nginx"))
        eventually(lambda: len(services(per_pod, "nginx")) == 2
                   and FINALIZER in finalizers(per_pod.get(STATEFULSET, "nginx", "default")), WAIT)
        per_pod.cluster.delete(STATEFULSET, ObjectKey("default", "nginx"), propagation="Foreground")
        eventually(lambda: per_pod.get(STATEFULSET, "nginx", "default") is None and not services(per_pod, "nginx"),
                   WAIT)
        assert per_pod.events("nginx", "SyncError") == []

    def test_opting_out_finalizes_and_opting_back_in_syncs_again(self, per_pod: Stage) -> None:
        per_pod.cluster.create(service_per_pod())
        per_pod.cluster.create(statefulset("nginx"))
        eventually(lambda: len(services(per_pod, "nginx")) == 2, WAIT)

        per_pod.edit(STATEFULSET, "nginx", without_annotation("service-per-pod-label"), "default")
        eventually(lambda: not services(per_pod, "nginx")
                   and FINALIZER not in finalizers(per_pod.get(STATEFULSET, "nginx", "default")), WAIT)
        assert hook_calls(per_pod, "service-per-pod", "finalize") >= 1

        per_pod.edit(STATEFULSET, "nginx", with_annotations(**{"service-per-pod-label": "pod-name"}), "default")
        eventually(lambda: len(services(per_pod, "nginx")) == 2
                   and FINALIZER in finalizers(per_pod.get(STATEFULSET, "nginx", "default")), WAIT)

    def test_deleting_while_another_finalizer_holds_it_finalizes_before_it_goes(self, per_pod: Stage) -> None:
        per_pod.cluster.create(service_per_pod())
        per_pod.cluster.create(statefulset("nginx"))
        eventually(lambda: len(services(per_pod, "nginx")) == 2
                   and FINALIZER in finalizers(per_pod.get(STATEFULSET, "nginx", "default")), WAIT)
        per_pod.edit(STATEFULSET, "nginx", lambda obj: obj["metadata"]["finalizers"].append(HOLD), "default")
        per_pod.cluster.delete(STATEFULSET, ObjectKey("default", "nginx"))

        eventually(lambda: not services(per_pod, "nginx")
                   and finalizers(per_pod.get(STATEFULSET, "nginx", "default")) == [HOLD], WAIT)
        held = per_pod.get(STATEFULSET, "nginx", "default")
        assert held is not None and held["metadata"].get("deletionTimestamp")
        per_pod.edit(STATEFULSET, "nginx", lambda obj: obj["metadata"].pop("finalizers"), "default")
        eventually(lambda: per_pod.get(STATEFULSET, "nginx", "default") is None, WAIT)

    def test_v2_hooks_key_attachments_by_namespace_and_name(self, per_pod: Stage) -> None:
        per_pod.cluster.create(service_per_pod(version="v2"))
        per_pod.cluster.create(statefulset("nginx"))
        eventually(lambda: (per_pod.get(STATEFULSET, "nginx", "default") or {})["metadata"]
                   .get("annotations", {}).get("v2-naming-verified") == "true", WAIT)
        assert len(services(per_pod, "nginx")) == 2

    def test_deleting_the_decorator_releases_its_finalizer_from_every_target(self, per_pod: Stage) -> None:
        per_pod.cluster.create(service_per_pod())
        for name in ("web", "db"):
            per_pod.cluster.create(statefulset(name))
        eventually(lambda: all(FINALIZER in finalizers(per_pod.get(STATEFULSET, name, "default"))
                               and len(services(per_pod, name)) == 2 for name in ("web", "db")), WAIT)
        assert finalizers(per_pod.get(DECORATOR_CONTROLLER, "service-per-pod")) == [
            "porchkit.dev/decoratorcontroller-cleanup"]

        per_pod.cluster.delete(DECORATOR_CONTROLLER, ObjectKey("", "service-per-pod"))
        eventually(lambda: per_pod.get(DECORATOR_CONTROLLER, "service-per-pod") is None, WAIT)
        assert all(FINALIZER not in finalizers(per_pod.get(STATEFULSET, name, "default")) for name in ("web", "db"))
        assert hook_calls(per_pod, "service-per-pod", "finalize") == 0  # released, not finalized
        assert len(services(per_pod, "web")) == 2

    def test_dropping_the_finalize_hook_releases_the_finalizer_and_the_cleanup_hold(self, per_pod: Stage) -> None:
        per_pod.cluster.create(service_per_pod())
        per_pod.cluster.create(statefulset("web"))
        eventually(lambda: len(services(per_pod, "web")) == 2
                   and FINALIZER in finalizers(per_pod.get(STATEFULSET, "web", "default")), WAIT)
        per_pod.edit(DECORATOR_CONTROLLER, "service-per-pod", lambda obj: obj["spec"]["hooks"].pop("finalize"))
        eventually(lambda: FINALIZER not in finalizers(per_pod.get(STATEFULSET, "web", "default"))
                   and finalizers(per_pod.get(DECORATOR_CONTROLLER, "service-per-pod")) == [], WAIT)
        assert len(services(per_pod, "web")) == 2

    def test_a_finalize_only_decorator_only_puts_its_finalizer_on_live_targets(self, per_pod: Stage) -> None:
        per_pod.cluster.create(service_per_pod(sync=False))
        per_pod.cluster.create(statefulset("nginx"))
        eventually(lambda: FINALIZER in finalizers(per_pod.get(STATEFULSET, "nginx", "default")), WAIT)
        controller = "decorator/service-per-pod/statefulsets.apps"
        eventually(lambda: per_pod.metric("controller_runtime_reconcile_total", controller=controller) >= 2, WAIT)
        per_pod.wait_idle("service-per-pod")
        assert per_pod.metric("controller_runtime_reconcile_errors_total", controller=controller) == 0
        assert per_pod.events("nginx", "SyncError") == []
        assert services(per_pod, "nginx") == {}
        assert per_pod.metric("porchkit_hook_requests_total", controller="service-per-pod") == 0

    @pytest.mark.parametrize("strategy", ["dynamic-apply", "server-side-apply"])
    def test_an_idle_resync_writes_nothing(self, per_pod: Stage, strategy: str) -> None:
        dc = service_per_pod(method="InPlace", resyncPeriodSeconds=1)
        dc["metadata"]["annotations"] = {"porchkit.dev/apply-strategy": strategy}
        per_pod.cluster.create(dc)
        for name in ("web", "db"):
            per_pod.cluster.create(statefulset(name, ports="80:8080,443:8443"))
        eventually(lambda: len(services(per_pod, "web")) == len(services(per_pod, "db")) == 2, WAIT)

        def versions() -> tuple[dict[tuple[str, ObjectKey], str], str]:
            return ({(kind.kind, ObjectKey.of(obj)): obj["metadata"]["resourceVersion"]
                     for kind in (STATEFULSET, SERVICE) for obj in per_pod.cluster.list(kind).items},
                    per_pod.cluster.list(SERVICE).resource_version)
        before = settled(versions, quiet=0.5, timeout=WAIT)
        calls = hook_calls(per_pod, "service-per-pod")

        eventually(lambda: hook_calls(per_pod, "service-per-pod") >= calls + 4, WAIT)  # two resyncs each
        assert versions() == before  # nothing at all was written


# --- update strategies -----------------------------------------------------------------------------


class TestUpdateStrategies:
    """The hook changes an attachment (new target ports); someone else has labelled it meanwhile."""

    def change_ports(self, per_pod: Stage, method: str) -> tuple[Obj, Obj, list[str]]:
        """The Service before and after the change, settled, and the watch events it went through."""
        per_pod.cluster.create(service_per_pod(method=method, finalize=False))
        per_pod.cluster.create(statefulset("web", replicas=1))
        eventually(lambda: per_pod.get(SERVICE, "web-0", "default"), WAIT)
        labelled_svc = per_pod.edit(SERVICE, "web-0", lambda obj: obj["metadata"].setdefault(
            "labels", {}).update({"team": "platform"}), "default")
        per_pod.wait_idle("service-per-pod")
        before = per_pod.get(SERVICE, "web-0", "default")
        assert before is not None and before["metadata"]["labels"] == labelled_svc["metadata"]["labels"]
        calls = hook_calls(per_pod, "service-per-pod")

        per_pod.edit(STATEFULSET, "web", with_annotations(**{"service-per-pod-ports": "80:9090"}), "default")
        eventually(lambda: hook_calls(per_pod, "service-per-pod") > calls, WAIT)
        if method != "OnDelete":
            eventually(lambda: (svc := per_pod.get(SERVICE, "web-0", "default")) is not None
                       and svc["spec"]["ports"][0]["targetPort"] == 9090, WAIT)
        per_pod.wait_idle("service-per-pod")
        after = per_pod.get(SERVICE, "web-0", "default")
        assert after is not None
        assert per_pod.events("web", "SyncError") == []
        stream = per_pod.cluster.watch(SERVICE, resource_version=before["metadata"]["resourceVersion"], timeout=0.2)
        seen: list[str] = [event.type for event in stream if event.type != "BOOKMARK"
                and event.object["metadata"]["name"] == "web-0"]
        return before, after, seen

    def test_on_delete_never_updates_an_attachment(self, per_pod: Stage) -> None:
        before, after, seen = self.change_ports(per_pod, "OnDelete")
        assert after["spec"]["ports"] == [{"name": "port-80", "port": 80, "targetPort": 8080}]
        assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
        assert seen == []

    def test_in_place_updates_it_and_keeps_fields_others_set(self, per_pod: Stage) -> None:
        before, after, seen = self.change_ports(per_pod, "InPlace")
        assert after["spec"]["ports"] == [{"name": "port-80", "port": 80, "targetPort": 9090}]
        assert after["metadata"]["uid"] == before["metadata"]["uid"]
        assert after["metadata"]["labels"] == {"team": "platform"}
        assert seen == ["MODIFIED"]

    def test_recreate_deletes_and_creates_it_once(self, per_pod: Stage) -> None:
        before, after, seen = self.change_ports(per_pod, "Recreate")
        assert after["spec"]["ports"] == [{"name": "port-80", "port": 80, "targetPort": 9090}]
        assert after["metadata"]["uid"] != before["metadata"]["uid"]
        assert "labels" not in after["metadata"]  # a new object: the other writer's label went with the old one
        assert seen == ["DELETED", "ADDED"]


# --- write-back to the target ----------------------------------------------------------------------


class TestWriteBack:
    def test_status_goes_through_the_subresource_and_null_deletes_labels_and_annotations(
            self, stage: MakeStage) -> None:
        live = stage()
        live.cluster.create(crd("widgets", "example.com", status=True))
        live.cluster.create(decorator_controller("status-writer", resources=[rule(WIDGET.api_version, "widgets")],
                                                 hooks={"sync": python("report_status")}))
        live.cluster.create({"apiVersion": WIDGET.api_version, "kind": WIDGET.kind,
                             "metadata": {"name": "w1", "namespace": "default",
                                          "labels": {"stale": "x", "keep": "yes"},
                                          "annotations": {"obsolete": "x", "other": "kept"}},
                             "spec": {"size": 3}})
        # With a status subresource an ordinary update cannot change status: it was written there.
        widget = eventually(lambda: (obj := live.get(WIDGET, "w1", "default")) and "status" in obj
                            and obj["metadata"]["labels"].get("decorated") and obj, WAIT)
        assert widget["status"] == {"phase": "Decorated", "observedName": "w1"}
        assert widget["metadata"]["labels"] == {"keep": "yes", "decorated": "true"}
        assert widget["metadata"]["annotations"] == {"other": "kept"}
        assert widget["spec"] == {"size": 3}
        assert widget["metadata"]["generation"] == 1


# --- resync ------------------------------------------------------------------------------------------


@pytest.fixture
def faulty(hook_server: Start) -> HookServer:
    return hook_server("faulty")


def counting(name: str, path: str, *, selector: dict[str, Any] | None = None, **spec: Any) -> Obj:
    """A decorator over Deployments whose sync hook is faulty.py's counting `path` (an /ok one)."""
    return decorator_controller(name, resources=[rule("apps/v1", "deployments", **(selector or {}))],
                                attachments=[rule("v1", "configmaps")],
                                hooks={"sync": webhook(f"http://faulty.hooks{path}")}, **spec)


class TestResync:
    def test_resync_after_seconds_calls_the_hook_again(self, faulty: HookServer, stage: MakeStage) -> None:
        live = stage({"faulty.hooks": faulty.address})
        live.cluster.create(counting("again", "/ok"))
        live.cluster.create(deployment("a", annotations={"resync-after": "0.2"}))
        eventually(lambda: live.get(CONFIGMAP, "a-ok", "default"), WAIT)
        start = len(faulty.times("/ok", "default/a"))
        times = eventually(lambda: len(found := faulty.times("/ok", "default/a")) >= start + 3 and found, WAIT)
        gaps = sorted(later - earlier for earlier, later in zip(times[start:], times[start + 1:], strict=False))
        assert gaps[len(gaps) // 2] >= 0.15  # a timer, not a loop

    def test_resync_period_seconds_resyncs_every_target(self, faulty: HookServer, stage: MakeStage) -> None:
        live = stage({"faulty.hooks": faulty.address})
        live.cluster.create(counting("periodic", "/ok", resyncPeriodSeconds=1))
        names = ("a", "b", "c")
        for name in names:
            live.cluster.create(deployment(name))
        eventually(lambda: all(live.get(CONFIGMAP, f"{name}-ok", "default") for name in names), WAIT)
        start = {name: len(faulty.times("/ok", f"default/{name}")) for name in names}
        eventually(lambda: all(len(faulty.times("/ok", f"default/{name}")) >= start[name] + 2 for name in names),
                   WAIT)

    def test_ignore_status_changes_skips_status_updates_but_not_label_changes(
            self, faulty: HookServer, stage: MakeStage) -> None:
        live = stage({"faulty.hooks": faulty.address})
        watched = labelled("watched")
        live.cluster.create(counting("sentinel", "/ok/sentinel", selector=watched))
        live.cluster.create(counting("ignoring", "/ok/ignoring",
                                     selector={**watched, "ignoreStatusChanges": True}))
        live.cluster.create(deployment("d", labels={"watched": "yes"}))
        eventually(lambda: live.get(CONFIGMAP, "d-sentinel", "default") and live.get(CONFIGMAP, "d-ignoring",
                                                                                      "default"), WAIT)
        live.wait_idle("sentinel")
        live.wait_idle("ignoring")
        sentinel, ignoring = (len(faulty.times(f"/ok/{name}", "default/d")) for name in ("sentinel", "ignoring"))

        current = live.get(DEPLOYMENT, "d", "default")
        assert current is not None
        live.cluster.update_status({**current, "status": {"replicas": 1, "observedGeneration": 1}})
        eventually(lambda: len(faulty.times("/ok/sentinel", "default/d")) > sentinel, WAIT)
        live.wait_idle("ignoring")
        assert len(faulty.times("/ok/ignoring", "default/d")) == ignoring

        live.edit(DEPLOYMENT, "d", lambda obj: obj["metadata"]["labels"].update({"tier": "web"}), "default")
        eventually(lambda: len(faulty.times("/ok/ignoring", "default/d")) > ignoring, WAIT)


# --- customize -------------------------------------------------------------------------------------


class TestCustomize:
    def test_related_configmap_is_copied_and_its_edits_resync_the_target(
            self, hook_server: Start, stage: MakeStage) -> None:
        live = stage({"copier.hooks": hook_server("customize").address})
        live.cluster.create({"apiVersion": "v1", "kind": "ConfigMap",
                             "metadata": {"name": "settings", "namespace": "default"}, "data": {"color": "blue"}})
        live.cluster.create(decorator_controller(
            "copier", resources=[rule("apps/v1", "deployments", **labelled("copied"))],
            attachments=[rule("v1", "configmaps", updateStrategy={"method": "InPlace"})],
            hooks={"customize": webhook("http://copier.hooks/customize"),
                   "sync": webhook("http://copier.hooks/sync")}))
        target = live.cluster.create(deployment("app", labels={"copied": "yes"},
                                                annotations={"copy-from": "settings"}))
        copy = eventually(lambda: live.get(CONFIGMAP, "app-copy", "default"), WAIT)
        assert copy["data"] == {"color": "blue"}
        assert owned_by(copy, target)

        live.edit(CONFIGMAP, "settings", lambda obj: obj["data"].update({"color": "green"}), "default")
        eventually(lambda: (live.get(CONFIGMAP, "app-copy", "default") or {}).get("data") == {"color": "green"},
                   WAIT)


    def test_a_related_object_created_later_and_a_target_naming_another_are_followed(
            self, hook_server: Start, stage: MakeStage) -> None:
        live = stage({"copier.hooks": hook_server("customize").address})
        live.cluster.create(decorator_controller(
            "copier", resources=[rule("apps/v1", "statefulsets", **labelled("copied"))],
            attachments=[rule("v1", "configmaps", updateStrategy={"method": "InPlace"})],
            hooks={"customize": webhook("http://copier.hooks/customize"),
                   "sync": webhook("http://copier.hooks/sync")}))
        live.cluster.create(deployment("app", labels={"copied": "yes"}, annotations={"copy-from": "settings"},
                                       kind=STATEFULSET))
        live.wait_idle("copier")
        assert live.get(CONFIGMAP, "app-copy", "default") is None
        for name, color in (("settings", "blue"), ("other", "red")):
            live.cluster.create({"apiVersion": "v1", "kind": "ConfigMap",
                                 "metadata": {"name": name, "namespace": "default"}, "data": {"color": color}})
        eventually(lambda: (live.get(CONFIGMAP, "app-copy", "default") or {}).get("data") == {"color": "blue"},
                   WAIT)
        # A StatefulSet's annotations are not part of its generation: Metacontroller would keep
        # the customize answer it cached for that generation; porchkit asks again.
        edited = live.edit(STATEFULSET, "app", with_annotations(**{"copy-from": "other"}), "default")
        assert edited["metadata"]["generation"] == 1
        eventually(lambda: (live.get(CONFIGMAP, "app-copy", "default") or {}).get("data") == {"color": "red"},
                   WAIT)
        live.cluster.delete(CONFIGMAP, ObjectKey("default", "other"))
        eventually(lambda: live.get(CONFIGMAP, "app-copy", "default") is None, WAIT)


# --- python and pipeline hooks, and the life of a DecoratorController --------------------------------


PIPELINE = {"name": "summary", "target": {"apiVersion": "v1", "kind": "ConfigMap"},
            "pipeline": [{"@project": {"metadata": {"name": {"@concat": ["$.metadata.name", "-piped"]},
                                                    "namespace": "$.metadata.namespace"},
                                       "data": {"replicas": {"@string": "$.spec.replicas"}}}}]}


class TestInProcessHooks:
    def test_a_python_hook_attaches_what_it_returns(self, stage: MakeStage) -> None:
        live = stage()
        live.cluster.create(decorator_controller("py", resources=[rule("apps/v1", "deployments")],
                                                 attachments=[rule("v1", "configmaps")],
                                                 hooks={"sync": python("attach_first")}))
        target = live.cluster.create(deployment("app"))
        found = eventually(lambda: live.get(CONFIGMAP, "app-first", "default"), WAIT)
        assert found["data"] == {"kind": "Deployment"} and owned_by(found, target)
        assert live.metric("porchkit_hook_requests_total", controller="py", hook="sync", code="ok") >= 1

    def test_a_pipeline_hook_attaches_its_outputs(self, stage: MakeStage) -> None:
        live = stage()
        live.cluster.create(decorator_controller("piped", resources=[rule("apps/v1", "deployments")],
                                                 attachments=[rule("v1", "configmaps")],
                                                 hooks={"sync": {"pipeline": PIPELINE}}))
        target = live.cluster.create(deployment("app"))
        found = eventually(lambda: live.get(CONFIGMAP, "app-piped", "default"), WAIT)
        assert found["data"] == {"replicas": "1"} and owned_by(found, target)


class TestDecoratorLifecycle:
    def test_editing_the_spec_restarts_it_with_the_new_hook(self, stage: MakeStage) -> None:
        live = stage()
        live.cluster.create(decorator_controller("py", resources=[rule("apps/v1", "deployments")],
                                                 attachments=[rule("v1", "configmaps")],
                                                 hooks={"sync": python("attach_first")}))
        live.cluster.create(deployment("app"))
        eventually(lambda: live.get(CONFIGMAP, "app-first", "default"), WAIT)
        first = live.decorators.running["py"]

        live.edit(DECORATOR_CONTROLLER, "py", lambda obj: obj["spec"]["hooks"].update(
            {"sync": python("attach_second")}))
        eventually(lambda: live.get(CONFIGMAP, "app-second", "default")
                   and live.get(CONFIGMAP, "app-first", "default") is None, WAIT)
        assert live.decorators.running["py"] is not first

    def test_editing_only_labels_does_not_restart_it(self, stage: MakeStage) -> None:
        live = stage()
        live.cluster.create(decorator_controller("py", resources=[rule("apps/v1", "deployments")],
                                                 attachments=[rule("v1", "configmaps")],
                                                 hooks={"sync": python("attach_first")}))
        eventually(lambda: "py" in live.decorators.running, WAIT)
        first = live.decorators.running["py"]
        passes = live.metric("controller_runtime_reconcile_total", controller="decoratorcontroller")
        live.edit(DECORATOR_CONTROLLER, "py", lambda obj: obj["metadata"].setdefault("labels", {}).update(
            {"team": "x"}))
        eventually(lambda: live.metric("controller_runtime_reconcile_total", controller="decoratorcontroller")
                   > passes, WAIT)
        assert live.decorators.running["py"] is first
