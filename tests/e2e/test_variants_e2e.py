"""The PackageVariant and PackageVariantSet controllers against a real API server (`make e2e`).

PackageVariants, sets, Repositories and the ConfigMaps they inject live in the real API server,
with the CRDs of deploy/crds (Porch's Repository CRD stands in for Porch's own); the `porch.kpt.dev`
group is served by the embedded Porch from git, next to it (variants_support.py). Checked against
the real server: finalizers, the status subresource, owner references and garbage collection of a
set's PackageVariants by kube-controller-manager.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from porchvariant.embedded.git.repository import GitPackageRepository, Lifecycle
from porchvariant.packagevariant_controller import PACKAGE_VARIANT
from porchvariant.packagevariantset_controller import PACKAGE_VARIANT_SET
from reconcile import Cluster, Kind, ObjectKey, conditions
from tests.e2e.support import eventually
from tests.e2e.variants_support import Controllers
from tests.porchvariant.variants_support import Repos

CONFIGMAP = Kind("v1", "ConfigMap")


@pytest.fixture
def controllers(cluster: Cluster, namespace: str, tmp_path: Path, variant_crds: None) -> Iterator[Controllers]:
    running = Controllers(cluster, Repos(tmp_path, deployments=("prod", "dev")), namespace)
    yield running
    running.stop()


def revisions(controllers: Controllers, repo: str) -> list[tuple[str, Lifecycle]]:
    with GitPackageRepository(controllers.repos.deployments[repo]) as git:
        return sorted((r.name, r.lifecycle) for r in git.list_revisions() if not r.is_placeholder)


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
    assert revisions(controllers, "prod") == [("web", Lifecycle.DRAFT)]

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
    assert revisions(controllers, "prod") == []  # deletionPolicy delete: the draft went with it


def test_a_set_creates_its_variants_on_the_server_and_they_are_collected_with_it(controllers: Controllers) -> None:
    kube, namespace = controllers.kube, controllers.namespace
    entries = controllers.fan_out()
    assert sorted(e["repo"] for e in entries) == ["dev", "prod"]
    assert revisions(controllers, "prod") == [("web", Lifecycle.DRAFT)]
    assert revisions(controllers, "dev") == [("web", Lifecycle.DRAFT)]

    kube.delete(PACKAGE_VARIANT_SET, ObjectKey(namespace, "web"))
    # kube-controller-manager's garbage collector deletes the owned PackageVariants; their
    # finalizer lets the controller delete their drafts first
    eventually(lambda: all(controllers.get(PACKAGE_VARIANT, e["name"]) is None for e in entries))
    assert revisions(controllers, "prod") == [] and revisions(controllers, "dev") == []
