"""The PackageVariantSet Secret attack on a real API server (`make e2e`), with the controllers running
as deploy/'s ServiceAccount `porchkit` under deploy/'s RBAC.

The attack: a set whose objectSelector picks Secrets, and a template copying
`kubectl.kubernetes.io/last-applied-configuration` (which holds a Secret's data, or any applied
object's spec) into the package context of a committed draft. Here the set is refused: Stalled
with one line naming `spec.targets[0].objectSelector.kind`, told as a Warning Event, and no
PackageVariant and no draft is made. A template reading the annotation on an object it may select
(a ConfigMap, once an administrator grants ConfigMaps through the aggregation label, as
deploy/examples/variants-targets-and-injection.yaml does) finds no such key, and says why.

As in test_variants_e2e.py (variants_support.py), Porch is not installed on the e2e server:
`porch.kpt.dev` is served by the embedded Porch from git repositories in a temporary folder, joined
by a RoutedCluster. Every other request (sets, variants, Repositories, Events, the Lease) goes to
the real server with the ServiceAccount's token, so these tests also show that the shipped
ClusterRole is enough for the controllers to work: a set with a repositorySelector fans out, and
its variants become Ready.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from porchvariant.embedded.git.repository import GitPackageRepository
from porchvariant.packagevariant_controller import PACKAGE_VARIANT
from porchvariant.packagevariantset_controller import PACKAGE_VARIANT_SET
from reconcile import Cluster, Kind, ObjectKey, conditions
from reconcile.manager import LeaderElection
from tests.deploy.rbac_model import NAMESPACE, cluster_role_rules, load, shipped
from tests.e2e.rbac_support import ShippedRbac, cluster_as
from tests.e2e.support import eventually
from tests.e2e.variants_support import Controllers
from tests.porchvariant.variants_support import Repos

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
PASSWORD = "hunter2"
REFUSED = ("spec.targets[0].objectSelector.kind: Secrets cannot be PackageVariantSet targets: a template could "
           "copy their data into a package in git")
EVENT = Kind("v1", "Event")
EXAMPLE = "examples/variants-targets-and-injection.yaml"


@pytest.fixture
def rbac(cluster: Cluster) -> Iterator[ShippedRbac]:
    """deploy/'s RBAC and the variants example (ConfigMaps as set targets), aggregated."""
    applied = ShippedRbac(cluster)
    docs = shipped() + load(EXAMPLE)
    applied.apply(docs)
    wanted = cluster_role_rules(docs, "porchkit-variants")
    eventually(lambda: all(rule in applied.aggregated_rules("porchkit-variants") for rule in wanted),
               what="the aggregated rules of porchkit-variants")
    yield applied
    applied.clean_up()


class ControllersAsServiceAccount(Controllers):
    """Both controllers, authenticated as system:serviceaccount:porchkit-system:porchkit, leading
    through the Lease porchkit-variants in porchkit-system, with Events on."""

    def __init__(self, kubeconfig: str, admin: Cluster, repos: Repos, namespace: str) -> None:
        super().__init__(cluster_as(kubeconfig, "porchkit"), repos, namespace, admin=admin, events="porchkit-variants",
                         leader_election=LeaderElection(NAMESPACE, "porchkit-variants", retry_period=0.5))

    def stop(self) -> None:
        super().stop()
        self.kube.close()  # type: ignore[attr-defined]

    def stalled(self, name: str) -> dict[str, Any] | None:
        found = conditions.find(conditions.conditions_of(self.get(PACKAGE_VARIANT_SET, name) or {}), "Stalled")
        return dict(found) if found is not None and found.get("status") == "True" else None

    def warnings(self, name: str) -> list[dict[str, Any]]:
        return [e for e in self.admin.list(EVENT, namespace=self.namespace).items
                if e["involvedObject"].get("kind") == "PackageVariantSet" and e["involvedObject"]["name"] == name
                and e["type"] == "Warning"]

    def git_text(self) -> str:
        out = []
        for path in self.repos.deployments.values():
            with GitPackageRepository(path) as git:
                out += [t for r in git.list_revisions() for t in git.read_resources(r).values()]
        return "\n".join(out)


@pytest.fixture
def controllers(kubeconfig: str, cluster: Cluster, namespace: str, tmp_path: Path, variant_crds: None,
                rbac: ShippedRbac) -> Iterator[ControllersAsServiceAccount]:
    running = ControllersAsServiceAccount(kubeconfig, cluster, Repos(tmp_path, deployments=("prod", "dev")), namespace)
    yield running
    running.stop()


def applied(namespace: str, kind: str, name: str, **fields: Any) -> dict[str, Any]:
    """An object as `kubectl apply` leaves it: its whole manifest in an annotation."""
    manifest = {"apiVersion": "v1", "kind": kind, "metadata": {"name": name, "namespace": namespace}, **fields}
    return {**manifest, "metadata": {**manifest["metadata"], "labels": {"team": "edge"},
                                     "annotations": {LAST_APPLIED: json.dumps(manifest)}}}


def leaking_set(namespace: str, kind: str) -> dict[str, Any]:
    return {"apiVersion": "config.porch.kpt.dev/v1alpha2", "kind": "PackageVariantSet",
            "metadata": {"name": "leak", "namespace": namespace},
            "spec": {"upstream": {"repo": "catalog", "package": "web", "revision": 1},
                     "targets": [{"objectSelector": {"apiVersion": "v1", "kind": kind, "matchLabels": {"team": "edge"}},
                                  "template": {"downstream": {"repoExpr": "target.name"},
                                               "packageContext": {"dataExprs": [
                                                   {"key": "copied",
                                                    "valueExpr": f"target.annotations['{LAST_APPLIED}']"}]}}}]}}


def test_a_set_selecting_secrets_is_refused_with_a_condition_and_an_event_and_creates_nothing(
        controllers: ControllersAsServiceAccount) -> None:
    admin, namespace = controllers.admin, controllers.namespace
    admin.create(applied(namespace, "Secret", "prod", stringData={"password": PASSWORD}))
    admin.create(leaking_set(namespace, "Secret"))

    condition = eventually(lambda: controllers.stalled("leak"), what="the set Stalled")
    assert (condition["reason"], condition["message"]) == ("ValidationError", REFUSED)
    [event] = eventually(lambda: controllers.warnings("leak"), what="a Warning Event on the set")
    assert (event["reason"], event["message"], event["source"]["component"]) == (
        "ValidationError", REFUSED, "porchkit-variants")
    assert admin.list(PACKAGE_VARIANT, namespace=namespace).items == []
    assert controllers.git_text() == ""  # no draft anywhere


def test_a_template_copying_last_applied_configuration_finds_no_such_key(
        controllers: ControllersAsServiceAccount) -> None:
    admin, namespace = controllers.admin, controllers.namespace
    admin.create(applied(namespace, "ConfigMap", "prod", data={"password": PASSWORD}))
    admin.create(leaking_set(namespace, "ConfigMap"))

    # (UpstreamNotFound comes first, until the embedded Porch has announced the catalog's revisions)
    condition = eventually(lambda: (found := controllers.stalled("leak")) and "valueExpr" in found["message"] and found,
                           what="the set Stalled on its template")
    assert condition["reason"] == "UnexpectedError" and condition["message"].endswith(
        f"template.packageContext.dataExprs[0].valueExpr: no such key: {LAST_APPLIED} (templates never see this "
        "annotation: it holds a copy of the object or a credential; see docs/variants.md)")
    assert admin.list(PACKAGE_VARIANT, namespace=namespace).items == []
    assert PASSWORD not in controllers.git_text()


def test_under_the_shipped_role_a_set_fans_out_and_its_variants_become_ready(
        controllers: ControllersAsServiceAccount) -> None:
    entries = controllers.fan_out()
    assert sorted(e["repo"] for e in entries) == ["dev", "prod"]
    lease = controllers.admin.get(Kind("coordination.k8s.io/v1", "Lease"), ObjectKey(NAMESPACE, "porchkit-variants"))
    assert lease is not None and lease["spec"]["holderIdentity"]
