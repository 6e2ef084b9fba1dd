"""deploy/: the manifests that run the PackageVariant controllers in a cluster.

The Deployment's arguments must be ones `porchkit manager` accepts, its probes must hit the
endpoints the manager serves, and the RBAC must grant every request the controllers make: the
Porch API calls are recorded from PorchClient itself, so a new call there fails here until the
ClusterRole covers it. (tests/deploy/ checks that the RBAC grants nothing more.)
"""

from __future__ import annotations

import inspect
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from porchkit import cli
from porchvariant.porch_client import PACKAGE_REVISION, PACKAGE_REVISION_RESOURCES, REPOSITORY, PorchClient
from reconcile import health
from reconcile.cli import selected_controllers
from reconcile.cluster import Kind, ListResult, ObjectKey
from reconcile.embedded import EmbeddedCluster
from reconcile.events import EVENT
from reconcile.leaderelection import LEASE
from reconcile.manager import Manager
from tests.deploy.rbac_model import cluster_role_rules

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
NAMESPACE = "porchkit-system"
SERVICE_ACCOUNT = "porchkit"

PACKAGE_VARIANT = Kind("config.porch.kpt.dev/v1alpha1", "PackageVariant")
PACKAGE_VARIANT_SET = Kind("config.porch.kpt.dev/v1alpha2", "PackageVariantSet")
CONFIG_MAP = Kind("v1", "ConfigMap")
DECORATOR_CONTROLLER = Kind("metacontroller.k8s.io/v1alpha1", "DecoratorController")
MAP_CONTROLLER = Kind("porchkit.dev/v1alpha1", "MapController")
# kinds a MapController may name: the example's parent and output (deploy/examples/mapctl-snapshotschedule.yaml)
SNAPSHOT_SCHEDULE = Kind("examples.porchkit.dev/v1alpha1", "SnapshotSchedule")
VOLUME_SNAPSHOT = Kind("snapshot.storage.k8s.io/v1", "VolumeSnapshot")
PLURALS = {DECORATOR_CONTROLLER: "decoratorcontrollers", MAP_CONTROLLER: "mapcontrollers",
           PACKAGE_REVISION: "packagerevisions", PACKAGE_REVISION_RESOURCES: "packagerevisionresources",
           REPOSITORY: "repositories", PACKAGE_VARIANT: "packagevariants",
           PACKAGE_VARIANT_SET: "packagevariantsets", CONFIG_MAP: "configmaps", EVENT: "events",
           LEASE: "leases"}

# What the controllers do besides PorchClient's calls: (kind, subresource, verb).
CONTROLLER_REQUESTS = [
    # reads and informers: both controllers read their own kind live and watch it, PackageRevisions
    # and Repositories; the set controller also watches the PackageVariants it owns
    *[(kind, "", verb) for kind in (PACKAGE_VARIANT, PACKAGE_VARIANT_SET, PACKAGE_REVISION, REPOSITORY)
      for verb in ("get", "list", "watch")],
    (PACKAGE_VARIANT, "", "update"),  # its finalizer (sets have none: their PackageVariants are owned)
    (PACKAGE_VARIANT, "status", "update"), (PACKAGE_VARIANT_SET, "status", "update"),  # Stalled/Ready
    *[(PACKAGE_VARIANT, "", verb) for verb in ("get", "create", "update", "delete")],  # the set's variants
    (EVENT, "", "create"), (EVENT, "", "patch"),  # reconcile/events.py: a repeat patches the count
]
INJECTION_REQUESTS = [(CONFIG_MAP, "", verb) for verb in ("get", "list", "watch")]  # granted by deploy/examples
LOCAL_ONLY = {"approve"}  # `porchkit variants reconcile --approve`; in a cluster a person approves
LEADER_ELECTION_REQUESTS = [(LEASE, "", verb) for verb in ("get", "create", "update")]  # reconcile/leaderelection.py


class RecordingCluster:
    """A Cluster that answers nothing and records every request as (kind, subresource, verb)."""

    def __init__(self) -> None:
        self.requests: list[tuple[Kind, str, str]] = []

    def get(self, kind: Kind, key: ObjectKey) -> None:
        self.requests.append((kind, "", "get"))

    def list(self, kind: Kind, **_: Any) -> ListResult:
        self.requests.append((kind, "", "list"))
        return ListResult([], "1")

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.requests.append((Kind.of(obj), "", "create"))
        return obj

    def update(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.requests.append((Kind.of(obj), "", "update"))
        return obj

    def patch(self, kind: Kind, key: ObjectKey, patch: Any, *, subresource: str | None = None,
              **_: Any) -> dict[str, Any]:
        self.requests.append((kind, subresource or "", "patch"))
        return {}

    def delete(self, kind: Kind, key: ObjectKey, **_: Any) -> None:
        self.requests.append((kind, "", "delete"))


def porch_client_requests(*, leave_out: set[str] = LOCAL_ONLY) -> list[tuple[Kind, str, str]]:
    """Every request PorchClient makes, each public method called once (but those `leave_out`
    names); fails if one is left out of `calls`."""
    cluster = RecordingCluster()
    client = PorchClient(cluster)  # type: ignore[arg-type]
    revision = {"apiVersion": PACKAGE_REVISION.api_version, "kind": PACKAGE_REVISION.kind,
                "metadata": {"namespace": "ns", "name": "repo.pkg.ws"}, "spec": {}}
    resources = {**revision, "kind": PACKAGE_REVISION_RESOURCES.kind}
    calls = {
        "revisions": lambda: client.revisions("ns"),
        "revision": lambda: client.revision("ns", "repo.pkg.ws"),
        "repository": lambda: client.repository("ns", "repo"),
        "repositories": lambda: client.repositories("ns"),
        "resources": lambda: client.resources(revision),
        "create_revision": lambda: client.create_revision("ns", repository="repo", package="pkg", workspace="ws",
                                                          task={"type": "init"}),
        "update_revision": lambda: client.update_revision(revision),
        "update_resources": lambda: client.update_resources(resources, {"Kptfile": ""}),
        "propose": lambda: client.propose(revision),
        "approve": lambda: client.approve(revision),
        "propose_deletion": lambda: client.propose_deletion(revision),
        "delete": lambda: client.delete(revision),
    }
    public = {name for name, _ in inspect.getmembers(PorchClient, inspect.isfunction) if not name.startswith("_")}
    assert public == set(calls), f"PorchClient methods not exercised here: {sorted(public - set(calls))}"
    for name, call in calls.items():
        if name not in leave_out:
            call()
    return cluster.requests


def load(name: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all((DEPLOY / name).read_text(encoding="utf-8")) if doc]


def find(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    [found] = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return found


def resource_of(kind: Kind, subresource: str = "") -> str:
    plural = PLURALS.get(kind) or kind.kind.lower() + "s"
    return f"{plural}/{subresource}" if subresource else plural


def allows(rules: list[dict[str, Any]], kind: Kind, subresource: str, verb: str) -> bool:
    """Whether RBAC rules grant `verb` on the kind's resource (or subresource), as the API server decides."""
    resource = resource_of(kind, subresource)
    return any((kind.group in rule["apiGroups"] or "*" in rule["apiGroups"])
               and (resource in rule["resources"] or "*" in rule["resources"])
               and (verb in rule["verbs"] or "*" in rule["verbs"])
               for rule in rules)


def manager_container() -> dict[str, Any]:
    deployment = find(load("variants/deployment.yaml"), "Deployment", "porchkit-variants")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    return container


def test_every_deploy_file_is_a_stream_of_kubernetes_objects() -> None:
    for path in sorted(DEPLOY.rglob("*.yaml")):
        docs = [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]
        assert docs, path
        for doc in docs:
            assert doc.get("apiVersion") and doc.get("kind"), path
            if doc["kind"] != "Kustomization":
                assert doc.get("metadata", {}).get("name"), f"{path}: a {doc['kind']} without a name"


def test_the_kustomizations_list_every_crd_and_manifest() -> None:
    [kustomization] = load("kustomization.yaml")
    assert set(kustomization["resources"]) == {"crds", "variants", "decorators-rbac.yaml", "decorators-deployment.yaml",
                                               "mapctl-rbac.yaml", "mapctl-deployment.yaml"}
    [crds] = load("crds/kustomization.yaml")
    assert set(crds["resources"]) == {p.name for p in (DEPLOY / "crds").glob("*_*.yaml")}
    [variants] = load("variants/kustomization.yaml")
    assert set(variants["resources"]) == {"rbac.yaml", "deployment.yaml"}


def test_kubectl_kustomize_builds_the_whole_install() -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not on PATH, so `kubectl kustomize deploy/` cannot be checked")
    out = subprocess.run([kubectl, "kustomize", str(DEPLOY)], capture_output=True, text=True, check=True).stdout
    kinds = sorted((d["kind"], d["metadata"]["name"]) for d in yaml.safe_load_all(out) if d)
    assert kinds == sorted([
        ("Namespace", NAMESPACE), ("ServiceAccount", SERVICE_ACCOUNT),
        ("CustomResourceDefinition", "packagevariants.config.porch.kpt.dev"),
        ("CustomResourceDefinition", "packagevariantsets.config.porch.kpt.dev"),
        ("ClusterRole", "porchkit-variants"), ("ClusterRole", "porchkit-variants-controller"),
        ("ClusterRoleBinding", "porchkit-variants"),
        ("Role", "porchkit-leader-election"), ("RoleBinding", "porchkit-leader-election"),
        ("Deployment", "porchkit-variants"),
        ("CustomResourceDefinition", "decoratorcontrollers.metacontroller.k8s.io"),
        ("ServiceAccount", "porchkit-decorators"),
        ("ClusterRole", "porchkit-decorators"), ("ClusterRole", "porchkit-decorators-controller"),
        ("ClusterRoleBinding", "porchkit-decorators"),
        ("Role", "porchkit-decorators-leader-election"), ("RoleBinding", "porchkit-decorators-leader-election"),
        ("Role", "porchkit-decorators-hook-credentials"), ("RoleBinding", "porchkit-decorators-hook-credentials"),
        ("Deployment", "porchkit-decorators"),
        ("CustomResourceDefinition", "mapcontrollers.porchkit.dev"),
        ("ServiceAccount", "porchkit-mapctl"),
        ("ClusterRole", "porchkit-mapctl"), ("ClusterRole", "porchkit-mapctl-controller"),
        ("ClusterRoleBinding", "porchkit-mapctl"),
        ("Role", "porchkit-mapctl-leader-election"), ("RoleBinding", "porchkit-mapctl-leader-election"),
        ("Role", "porchkit-mapctl-hook-credentials"), ("RoleBinding", "porchkit-mapctl-hook-credentials"),
        ("Deployment", "porchkit-mapctl"),
    ])


def test_the_decorators_deployment_runs_the_decorator_controller_under_its_own_account() -> None:
    deployment = find(load("decorators-deployment.yaml"), "Deployment", "porchkit-decorators")
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    parser, _ = cli.build_parser("manager")
    args = parser.parse_args(container["args"])
    assert selected_controllers(args.controllers, cli.CONTROLLERS) == ["decorator"]
    assert args.leader_elect and args.leader_election_id == "porchkit-decorators"
    assert pod["serviceAccountName"] == "porchkit-decorators"
    docs = load("decorators-rbac.yaml")
    binding = find(docs, "ClusterRoleBinding", "porchkit-decorators")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "porchkit-decorators", "namespace": NAMESPACE}]
    rules = cluster_role_rules(docs, "porchkit-decorators")
    for verb in ("get", "list", "watch", "update"):
        assert allows(rules, DECORATOR_CONTROLLER, "", verb)
    assert allows(rules, EVENT, "", "create") and allows(rules, EVENT, "", "patch")


def test_the_mapctl_deployment_runs_the_map_controller_under_its_own_account() -> None:
    deployment = find(load("mapctl-deployment.yaml"), "Deployment", "porchkit-mapctl")
    assert deployment["metadata"]["namespace"] == NAMESPACE
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    parser, _ = cli.build_parser("manager")
    args = parser.parse_args(container["args"])
    assert selected_controllers(args.controllers, cli.CONTROLLERS) == ["map"]
    assert args.leader_elect and args.leader_election_namespace == NAMESPACE
    assert args.leader_election_id == "porchkit-mapctl"
    [health_port] = [p for p in container["ports"] if p["name"] == "health"]
    assert health_port["containerPort"] == health.parse_address(args.health_addr)[1]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert pod["serviceAccountName"] == "porchkit-mapctl" and pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True


def test_the_mapctl_role_covers_map_controllers_and_events_and_the_example_its_parent_input_and_output() -> None:
    docs = load("mapctl-rbac.yaml")
    account = find(docs, "ServiceAccount", "porchkit-mapctl")
    assert account["metadata"]["namespace"] == NAMESPACE
    subjects = [{"kind": "ServiceAccount", "name": "porchkit-mapctl", "namespace": NAMESPACE}]
    for kind, name in (("ClusterRoleBinding", "porchkit-mapctl"), ("RoleBinding", "porchkit-mapctl-leader-election")):
        binding = find(docs, kind, name)
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": kind.removesuffix("Binding"),
                                      "name": name}
        assert binding["subjects"] == subjects
    rules = cluster_role_rules(docs, "porchkit-mapctl")
    for verb in ("get", "list", "watch"):
        assert allows(rules, MAP_CONTROLLER, "", verb)
    assert allows(rules, MAP_CONTROLLER, "status", "patch")  # reconcile/readiness.py
    assert allows(rules, EVENT, "", "create") and allows(rules, EVENT, "", "patch")
    assert not allows(rules, VOLUME_SNAPSHOT, "", "list")  # the administrator grants the kinds...
    rules = cluster_role_rules(docs + load("examples/mapctl-snapshotschedule.yaml"), "porchkit-mapctl")
    for verb in ("get", "list", "watch", "create", "update", "patch", "delete"):  # ...as the example does
        assert allows(rules, VOLUME_SNAPSHOT, "", verb)
    assert allows(rules, SNAPSHOT_SCHEDULE, "status", "update")  # a parent's aggregated status
    role = find(docs, "Role", "porchkit-mapctl-leader-election")
    assert role["metadata"]["namespace"] == NAMESPACE
    assert all(allows(role["rules"], kind, sub, verb) for kind, sub, verb in LEADER_ELECTION_REQUESTS)


def test_the_deployment_arguments_are_accepted_by_porchkit_manager() -> None:
    container = manager_container()
    assert container["args"][0] == "manager"
    parser, _ = cli.build_parser("manager")
    args = parser.parse_args(container["args"])  # argparse exits on an unknown flag
    assert args.leader_elect and args.leader_election_namespace == NAMESPACE
    assert args.leader_election_id == "porchkit-variants"
    assert args.health_addr == ":8081"
    assert selected_controllers(args.controllers, cli.CONTROLLERS) == ["packagevariant", "packagevariantset"]


def test_the_probes_hit_the_endpoints_the_manager_serves_on_its_health_port() -> None:
    container = manager_container()
    parser, _ = cli.build_parser("manager")
    port = health.parse_address(parser.parse_args(container["args"]).health_addr)[1]
    [health_port] = [p for p in container["ports"] if p["name"] == "health"]
    assert health_port["containerPort"] == port
    server = health.for_manager(Manager(EmbeddedCluster()), ("127.0.0.1", 0))
    for probe, endpoint in (("livenessProbe", "healthz"), ("readinessProbe", "readyz")):
        get = container[probe]["httpGet"]
        assert get["path"] == f"/{endpoint}" and get["port"] == "health"
        assert endpoint in server.checks


def test_the_container_runs_as_non_root_on_a_read_only_root_filesystem() -> None:
    deployment = find(load("variants/deployment.yaml"), "Deployment", "porchkit-variants")
    pod = deployment["spec"]["template"]["spec"]
    container = manager_container()
    assert pod["serviceAccountName"] == SERVICE_ACCOUNT and deployment["metadata"]["namespace"] == NAMESPACE
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]
    # the Dockerfile's user, so that runAsNonRoot holds for the image as built
    assert "USER 65532:65532" in (ROOT / "Dockerfile").read_text(encoding="utf-8")
    assert pod["securityContext"]["runAsUser"] == 65532


def test_the_cluster_role_grants_every_request_the_controllers_make() -> None:
    rules = cluster_role_rules(load("variants/rbac.yaml"), "porchkit-variants")
    needed = porch_client_requests() + CONTROLLER_REQUESTS
    missing = [(kind.group, resource_of(kind, sub), verb) for kind, sub, verb in needed
               if not allows(rules, kind, sub, verb)]
    assert missing == []
    assert not any(allows(rules, kind, sub, verb) for kind, sub, verb in porch_client_requests(leave_out=set())
                   if sub == "approval")
    assert not any(allows(rules, kind, sub, verb) for kind, sub, verb in INJECTION_REQUESTS)
    example = cluster_role_rules(load("variants/rbac.yaml") + load("examples/variants-targets-and-injection.yaml"),
                                 "porchkit-variants")
    assert all(allows(example, kind, sub, verb) for kind, sub, verb in INJECTION_REQUESTS)


def test_the_cluster_role_writes_nothing_beyond_the_kinds_the_controllers_own() -> None:
    rules = cluster_role_rules(load("variants/rbac.yaml") + load("examples/variants-targets-and-injection.yaml"),
                               "porchkit-variants")
    for rule in rules:
        if "*" in rule["apiGroups"] or "*" in rule["resources"]:
            assert set(rule["verbs"]) <= {"get", "list", "watch"}, rule
    for kind in (CONFIG_MAP, Kind("v1", "Secret"), Kind("apps/v1", "Deployment")):
        assert not allows(rules, kind, "", "update") and not allows(rules, kind, "", "delete")


def test_leader_election_is_granted_in_its_own_namespace_only() -> None:
    docs = load("variants/rbac.yaml")
    role = find(docs, "Role", "porchkit-leader-election")
    assert role["metadata"]["namespace"] == NAMESPACE
    assert all(allows(role["rules"], kind, sub, verb) for kind, sub, verb in LEADER_ELECTION_REQUESTS)
    assert not any(allows(cluster_role_rules(docs, "porchkit-variants"), kind, sub, verb)
                   for kind, sub, verb in LEADER_ELECTION_REQUESTS if verb != "get")


def test_both_roles_are_bound_to_the_deployments_service_account() -> None:
    docs = load("variants/rbac.yaml")
    account = find(docs, "ServiceAccount", SERVICE_ACCOUNT)
    assert account["metadata"]["namespace"] == NAMESPACE
    for kind, name in (("ClusterRoleBinding", "porchkit-variants"), ("RoleBinding", "porchkit-leader-election")):
        binding = find(docs, kind, name)
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": kind.removesuffix("Binding"),
                                      "name": name}
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}]
