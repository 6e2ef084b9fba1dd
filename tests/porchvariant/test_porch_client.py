"""The Porch client sends Porch's request shapes, and reads what the server answers.

Here the Porch kinds are plain custom resources on the embedded cluster, which checks the
client's side; Porch's own semantics (naming, tasks, render, approval) belong to the embedded
Porch and its tests.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from porchvariant.porch_client import (
    PACKAGE_REVISION_RESOURCES,
    PorchClient,
    clone_git_task,
    clone_task,
    edit_task,
    is_published,
    upgrade_task,
)
from reconcile import EmbeddedCluster, ObjectKey


def crd(kind: str, plural: str, group: str) -> dict:
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{group}"},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
                     "versions": [{"name": "v1alpha1", "served": True, "storage": True, "schema": schema}]}}


@pytest.fixture
def client() -> Iterator[PorchClient]:
    with EmbeddedCluster() as cluster:
        cluster.create(crd("PackageRevision", "packagerevisions", "porch.kpt.dev"))
        cluster.create(crd("PackageRevisionResources", "packagerevisionresources", "porch.kpt.dev"))
        cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "prod"}})
        yield PorchClient(cluster)


def test_tasks_have_porchs_json_shapes() -> None:
    assert clone_task("catalog.web.v1") == {
        "type": "clone", "clone": {"upstreamRef": {"upstreamRef": {"name": "catalog.web.v1"}}}}
    assert clone_git_task("https://example.com/r.git", "web/v1", "/web") == {
        "type": "clone", "clone": {"upstreamRef": {"type": "git", "git": {
            "repo": "https://example.com/r.git", "ref": "web/v1", "directory": "/web"}}}}
    assert edit_task("prod.web.v1") == {"type": "edit", "edit": {"sourceRef": {"name": "prod.web.v1"}}}
    assert upgrade_task("c.web.v1", "c.web.v2", "prod.web.v1") == {"type": "upgrade", "upgrade": {
        "oldUpstreamRef": {"name": "c.web.v1"}, "newUpstreamRef": {"name": "c.web.v2"},
        "localPackageRevisionRef": {"name": "prod.web.v1"}, "strategy": "resource-merge"}}


@pytest.mark.parametrize(("lifecycle", "published"), [("Draft", False), ("Proposed", False),
                                                      ("Published", True), ("DeletionProposed", True), (None, False)])
def test_published_means_published_or_deletion_proposed(lifecycle: str | None, published: bool) -> None:
    assert is_published({"spec": {"lifecycle": lifecycle}}) is published


def revision(name: str, repository: str, package: str, lifecycle: str = "Draft") -> dict:
    return {"apiVersion": "porch.kpt.dev/v1alpha1", "kind": "PackageRevision",
            "metadata": {"name": name, "namespace": "prod"},
            "spec": {"repository": repository, "packageName": package, "workspaceName": "ws",
                     "lifecycle": lifecycle}}


def test_revisions_filter_by_repository_and_package_in_list_order(client: PorchClient) -> None:
    for name, repository, package in [("a", "prod", "web"), ("b", "prod", "db"), ("c", "lab", "web")]:
        client.cluster.create(revision(name, repository, package))
    names = [[item["metadata"]["name"] for item in found] for found in (
        client.revisions("prod"), client.revisions("prod", repository="prod"),
        client.revisions("prod", package="web"), client.revisions("prod", repository="lab", package="db"))]
    assert names == [["a", "b", "c"], ["a", "b"], ["a", "c"], []]


def test_lifecycle_changes_are_updates_that_keep_the_rest_of_the_spec(client: PorchClient) -> None:
    made = client.cluster.create(revision("a", "prod", "web"))
    proposed = client.propose(made)
    assert proposed["spec"] == {**made["spec"], "lifecycle": "Proposed"}
    assert client.propose_deletion(proposed)["spec"]["lifecycle"] == "DeletionProposed"
    client.delete(proposed)
    assert client.revision("prod", "a") is None


def test_updating_resources_sends_the_files_and_returns_the_render_status(client: PorchClient) -> None:
    client.cluster.create({**revision("a", "prod", "web"), "kind": "PackageRevisionResources",
                           "spec": {"resources": {"Kptfile": "old"}},
                           "status": {"renderStatus": {"error": "", "result": {"items": []}}}})
    stored = client.resources(client.cluster.create(revision("a", "prod", "web")))
    assert stored is not None
    updated, render_status = client.update_resources(stored, {"Kptfile": "new", "cm.yaml": "x"})
    assert client.cluster.get(PACKAGE_REVISION_RESOURCES, ObjectKey("prod", "a"))["spec"]["resources"] == {
        "Kptfile": "new", "cm.yaml": "x"}
    assert render_status == {"error": "", "result": {"items": []}}
    assert updated["spec"]["resources"] == {"Kptfile": "new", "cm.yaml": "x"}
