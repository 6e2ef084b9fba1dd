"""The PackageVariant and PackageVariantSet controllers against a real API server (`make e2e`).

PackageVariants, sets, Repositories and the ConfigMaps they inject live in the real API server,
with the CRDs of deploy/crds (Porch's Repository CRD stands in for Porch's own). Porch itself is
not installed on the e2e server (it needs container images this machine cannot fetch), so the
`porch.kpt.dev` group is served by porchkit's embedded Porch from git repositories in a temporary
folder, joined to the real server by a RoutedCluster, the way an aggregated API joins a real
one. Checked against the real server: finalizers, the status subresource, owner references and
garbage collection of a set's PackageVariants by kube-controller-manager.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from porchvariant.crds import crds
from porchvariant.embedded.gitrepo import GitPackageRepository, Lifecycle
from porchvariant.embedded.porch import EmbeddedPorch
from porchvariant.manager import package_variant_controllers, package_variant_set_controllers
from porchvariant.packagevariant_controller import PACKAGE_VARIANT
from porchvariant.packagevariantset_controller import PACKAGE_VARIANT_SET
from reconcile import Cluster, EmbeddedCluster, Kind, ObjectKey, conditions
from reconcile.errors import NotFound
from reconcile.manager import Manager
from reconcile.routing import RoutedCluster
from tests.porchvariant.variants_support import Repos

ROOT = Path(__file__).resolve().parents[2]
CRD = Kind("apiextensions.k8s.io/v1", "CustomResourceDefinition")
CONFIGMAP = Kind("v1", "ConfigMap")
TIMEOUT = 30.0


def eventually(check: Callable[[], Any], timeout: float = TIMEOUT) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)
    return found


@pytest.fixture
def variant_crds(cluster: Cluster) -> None:
    """deploy/crds and a Repository CRD, installed (or already there) and served."""
    shipped = [yaml.safe_load_all(path.read_text()) for path in sorted((ROOT / "deploy" / "crds").glob("*.yaml"))]
    wanted = [doc for docs in shipped for doc in docs if doc]
    wanted += [crd for crd in crds() if crd["spec"]["names"]["kind"] == "Repository"]
    for crd in wanted:
        if cluster.get(CRD, ObjectKey("", crd["metadata"]["name"])) is None:
            cluster.create(crd)

    def served() -> bool:
        try:
            for kind in (PACKAGE_VARIANT, PACKAGE_VARIANT_SET):
                cluster.list(kind)
            return True
        except NotFound:
            return False

    eventually(served)


class Controllers:
    """Both controllers on the real server, with porch.kpt.dev served from git next to it."""

    def __init__(self, kube: Cluster, repos: Repos, namespace: str) -> None:
        self.kube, self.repos, self.namespace = kube, repos, namespace
        self.embedded = EmbeddedCluster()
        # the embedded server checks namespaces like any other: the test's must exist there too
        self.embedded.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        # Repositories are registered after the controllers started watching: the embedded Porch
        # announces their revisions (announce_every), as Porch does.
        self.porch = EmbeddedPorch(self.embedded, repositories_from=kube, announce_every=0.2)
        self.manager = Manager(RoutedCluster(kube, {"porch.kpt.dev": self.embedded}))
        self.manager.add(package_variant_controllers(self.manager))
        self.manager.add(package_variant_set_controllers(self.manager))
        self.thread = threading.Thread(target=self.manager.run, name="variants-e2e")
        self.thread.start()
        for repository in repos.repositories():
            kube.create({**repository, "metadata": {**repository["metadata"], "namespace": namespace}})

    def stop(self) -> None:
        self.manager.stop()
        self.thread.join(30)
        self.porch.close()
        self.embedded.close()

    def revisions(self, repo: str) -> list[tuple[str, Lifecycle]]:
        with GitPackageRepository(self.repos.deployments[repo]) as git:
            return sorted((r.name, r.lifecycle) for r in git.list_revisions() if not r.is_placeholder)

    def get(self, kind: Kind, name: str) -> dict[str, Any] | None:
        return self.kube.get(kind, ObjectKey(self.namespace, name))


@pytest.fixture
def controllers(cluster: Cluster, namespace: str, tmp_path: Path, variant_crds: None) -> Iterator[Controllers]:
    running = Controllers(cluster, Repos(tmp_path, deployments=("prod", "dev")), namespace)
    yield running
    running.stop()


def package_variant(namespace: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "config.porch.kpt.dev/v1alpha1", "kind": "PackageVariant",
            "metadata": {"name": "web-prod", "namespace": namespace},
            "spec": {"upstream": {"repo": "catalog", "package": "web", "revision": 1},
                     "downstream": {"repo": "prod", "package": "web"}, **spec}}


def test_a_variant_drafts_its_downstream_reports_ready_and_cleans_up_when_deleted(controllers: Controllers) -> None:
    kube, namespace = controllers.kube, controllers.namespace
    kube.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "region-eu", "namespace": namespace},
                 "data": {"name": "eu-west"}})
    kube.create(package_variant(namespace, injectors=[{"kind": "ConfigMap", "name": "region-eu"}]))

    pv = eventually(lambda: (found := controllers.get(PACKAGE_VARIANT, "web-prod")) and
                    conditions.is_true(found, "Ready") and found)
    assert "config.porch.kpt.dev/packagevariants" in pv["metadata"]["finalizers"]
    assert [t["name"] for t in pv["status"]["downstreamTargets"]] == ["prod.web.packagevariant-1"]
    assert controllers.revisions("prod") == [("web", Lifecycle.DRAFT)]

    configmap = kube.get(CONFIGMAP, ObjectKey(namespace, "region-eu"))
    assert configmap is not None
    kube.update({**configmap, "data": {"name": "eu-central"}})

    def injected() -> bool:
        with GitPackageRepository(controllers.repos.deployments["prod"]) as git:
            drafts = [r for r in git.list_revisions("web") if r.lifecycle == Lifecycle.DRAFT]
            return len(drafts) == 1 and "eu-central" in git.read_resources(drafts[0])["region.yaml"]

    eventually(injected)

    kube.delete(PACKAGE_VARIANT, ObjectKey(namespace, "web-prod"))
    eventually(lambda: controllers.get(PACKAGE_VARIANT, "web-prod") is None)
    assert controllers.revisions("prod") == []  # deletionPolicy delete: the draft went with it


def test_a_set_creates_its_variants_on_the_server_and_they_are_collected_with_it(controllers: Controllers) -> None:
    kube, namespace = controllers.kube, controllers.namespace
    for repo in ("prod", "dev"):
        live = kube.get(Kind("config.porch.kpt.dev/v1alpha1", "Repository"), ObjectKey(namespace, repo))
        assert live is not None
        kube.update({**live, "metadata": {**live["metadata"], "labels": {"tier": "edge"}}})
    kube.create({"apiVersion": "config.porch.kpt.dev/v1alpha2", "kind": "PackageVariantSet",
                 "metadata": {"name": "web", "namespace": namespace},
                 "spec": {"upstream": {"repo": "catalog", "package": "web", "revision": 1},
                          "targets": [{"repositorySelector": {"matchLabels": {"tier": "edge"}}}]}})

    def reported() -> list[dict[str, Any]] | None:
        pvs = controllers.get(PACKAGE_VARIANT_SET, "web")
        entries = ((pvs or {}).get("status") or {}).get("packageVariants") or []
        return entries if len(entries) == 2 and all(e["ready"] == "True" for e in entries) else None

    entries = eventually(reported)
    assert sorted(e["repo"] for e in entries) == ["dev", "prod"]
    assert controllers.revisions("prod") == [("web", Lifecycle.DRAFT)]
    assert controllers.revisions("dev") == [("web", Lifecycle.DRAFT)]

    kube.delete(PACKAGE_VARIANT_SET, ObjectKey(namespace, "web"))
    # kube-controller-manager's garbage collector deletes the owned PackageVariants; their
    # finalizer lets the controller delete their drafts first
    eventually(lambda: all(controllers.get(PACKAGE_VARIANT, e["name"]) is None for e in entries), timeout=60)
    assert controllers.revisions("prod") == [] and controllers.revisions("dev") == []
