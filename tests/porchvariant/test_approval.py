"""The approval controller: Nephio's `initial` policy, allowed by the Repository, over the embedded Porch."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from porchvariant.approval_controller import APPROVAL_POLICIES_ANNOTATION, POLICY_ANNOTATION, approval_decision
from porchvariant.local_run import serve_porch
from porchvariant.manager import approval_controllers, package_variant_controllers
from porchvariant.packagevariant_controller import PACKAGE_VARIANT
from porchvariant.porch_client import PACKAGE_REVISION, REPOSITORY
from reconcile import EmbeddedCluster, Kind, ObjectKey
from reconcile.events import EventRecorder
from reconcile.idle import run_until_idle
from reconcile.manager import Manager
from tests.porchvariant.variants_support import NS, Repos, package_variant, refs

EVENT = Kind("v1", "Event")
INITIAL = {POLICY_ANNOTATION: "initial"}


class World:
    """The embedded cluster and Porch over `repos`, with the PackageVariant and approval controllers
    run until idle by `settle()`."""

    def __init__(self, repos: Repos, *, allow: str | None = "initial") -> None:
        self.repos = repos
        self.cluster = EmbeddedCluster()
        self.porch = serve_porch(self.cluster)
        self.cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        for repository in repos.repositories():
            if allow is not None and repository["metadata"]["name"] == "prod":
                repository["metadata"]["annotations"] = {APPROVAL_POLICIES_ANNOTATION: allow}
            self.cluster.create(repository)

    def settle(self) -> None:
        manager = Manager(self.cluster, events=EventRecorder(self.cluster, "porchkit-test"))
        manager.add(package_variant_controllers(manager))
        manager.add(approval_controllers(manager))
        run_until_idle(manager, timeout=60)

    def downstream(self) -> list[dict[str, Any]]:
        """The prod revisions of package `app`, by revision number, drafts (revision 0) last."""
        found = [pr for pr in self.cluster.list(PACKAGE_REVISION, namespace=NS).items
                 if pr["spec"]["repository"] == "prod" and pr["spec"]["packageName"] == "app"
                 and pr["spec"].get("revision") != -1]
        return sorted(found, key=lambda pr: pr["spec"].get("revision") or float("inf"))

    def close(self) -> None:
        self.porch.close()
        self.cluster.close()


@pytest.fixture(name="repos")
def repos_fixture(tmp_path: Path) -> Repos:
    return Repos(tmp_path)


@pytest.fixture(name="world")
def world_fixture(repos: Repos) -> Iterator[World]:
    world = World(repos)
    yield world
    world.close()


def test_the_first_revision_of_a_variant_with_the_initial_policy_is_published(world: World) -> None:
    world.cluster.create(package_variant("app", package="app", annotations=INITIAL))
    world.settle()
    (published,) = world.downstream()
    assert published["spec"]["lifecycle"] == "Published" and published["spec"]["revision"] == 1
    assert published["metadata"]["annotations"][POLICY_ANNOTATION] == "initial"
    assert "refs/tags/app/v1" in refs(world.repos.deployments["prod"])


def test_a_later_revision_is_left_for_a_person(world: World) -> None:
    world.cluster.create(package_variant("app", package="app", annotations=INITIAL))
    world.settle()
    live = world.cluster.get(PACKAGE_VARIANT, ObjectKey(NS, "app"))
    assert live is not None
    live["spec"]["upstream"]["revision"] = 2
    world.cluster.update(live)
    world.settle()
    first, upgrade = world.downstream()
    assert (first["spec"]["lifecycle"], upgrade["spec"]["lifecycle"]) == ("Published", "Draft")
    variants = {"app": world.cluster.get(PACKAGE_VARIANT, ObjectKey(NS, "app"))}
    assert approval_decision(upgrade, world.cluster.get(REPOSITORY, ObjectKey(NS, "prod")), world.downstream(),
                             variants) == "package 'app' is published already (policy 'initial')"


def test_nothing_is_approved_until_the_repository_allows_the_policy(repos: Repos) -> None:
    world = World(repos, allow=None)
    try:
        world.cluster.create(package_variant("app", package="app", annotations=INITIAL))
        world.settle()
        (draft,) = world.downstream()
        assert draft["spec"]["lifecycle"] == "Draft"
        assert "refs/tags/app/v1" not in refs(repos.deployments["prod"])
        prod = world.cluster.get(REPOSITORY, ObjectKey(NS, "prod"))
        assert prod is not None
        prod["metadata"]["annotations"] = {APPROVAL_POLICIES_ANNOTATION: "always, initial"}
        world.cluster.update(prod)
        world.settle()
        assert [pr["spec"]["lifecycle"] for pr in world.downstream()] == ["Published"]
    finally:
        world.close()


def test_an_unknown_policy_is_a_warning_event_and_nothing_is_approved(world: World) -> None:
    world.cluster.create(package_variant("app", package="app", annotations={POLICY_ANNOTATION: "always"}))
    world.settle()
    (draft,) = world.downstream()
    assert draft["spec"]["lifecycle"] == "Draft"
    warnings = [e for e in world.cluster.list(EVENT, namespace=NS).items if e["reason"] == "UnknownApprovalPolicy"]
    assert len(warnings) == 1 and warnings[0]["involvedObject"]["name"] == draft["metadata"]["name"]
    assert "'always'" in warnings[0]["message"]


def _revision(**changes: Any) -> dict[str, Any]:
    revision: dict[str, Any] = {
        "metadata": {"name": "prod-abc", "namespace": NS, "annotations": dict(INITIAL)},
        "spec": {"repository": "prod", "packageName": "app", "lifecycle": "Draft",
                 "readinessGates": [{"conditionType": "Rendered"}]},
        "status": {"conditions": [{"type": "Rendered", "status": "True"}]}}
    for path, value in changes.items():
        section, key = path.split("__")
        if value is None:
            revision[section].pop(key, None)
        else:
            revision[section][key] = value
    return revision


ALLOWING = {"metadata": {"name": "prod", "annotations": {APPROVAL_POLICIES_ANNOTATION: "initial"}}}


@pytest.mark.parametrize(("revision", "repository", "siblings", "why"), [
    (_revision(), ALLOWING, [], None),
    (_revision(spec__lifecycle="Proposed"), ALLOWING, [], None),
    (_revision(metadata__annotations=None), ALLOWING, [], "no approval policy"),
    (_revision(spec__lifecycle="Published"), ALLOWING, [], "not a draft or proposal"),
    (_revision(metadata__deletionTimestamp="2026-01-01T00:00:00Z"), ALLOWING, [], "not a draft or proposal"),
    (_revision(), None, [], "repository 'prod' not found"),
    (_revision(), {"metadata": {"name": "prod"}}, [],
     "repository 'prod' does not allow the approval policy 'initial' (annotation porchkit.dev/approval-policies)"),
    (_revision(status__conditions=[{"type": "Rendered", "status": "False"}]), ALLOWING, [],
     "readiness gates not met: Rendered"),
    (_revision(), ALLOWING, [_revision(spec__lifecycle="DeletionProposed")],
     "package 'app' is published already (policy 'initial')"),
    (_revision(), ALLOWING, [_revision(spec__lifecycle="Published", spec__packageName="other")], None),
])
def test_the_decision(revision: dict[str, Any], repository: dict[str, Any] | None, siblings: list[dict[str, Any]],
                      why: str | None) -> None:
    assert approval_decision(revision, repository, siblings) == why


OWNED = _revision(metadata__ownerReferences=[{"apiVersion": "config.porch.kpt.dev/v1alpha1", "kind": "PackageVariant",
                                              "name": "app", "uid": "u1"}])


def _variant(*, ready: str = "True", observed: int = 3, targets: tuple[str, ...] = ("prod-abc",)) -> dict[str, Any]:
    return {"metadata": {"name": "app", "generation": 3},
            "status": {"conditions": [{"type": "Ready", "status": ready, "observedGeneration": observed}],
                       "downstreamTargets": [{"name": name} for name in targets]}}


@pytest.mark.parametrize(("variants", "why"), [
    ({"app": _variant()}, None),
    ({}, "package variant 'app' not found"),
    ({"app": _variant(ready="False")}, "package variant 'app' is not Ready yet"),
    ({"app": _variant(observed=2)}, "package variant 'app' is not Ready yet"),
    ({"app": _variant(targets=("prod-old",))}, "package variant 'app' does not list it as a downstream target yet"),
])
def test_a_revision_a_variant_owns_waits_for_the_variant_to_settle(variants: dict[str, Any], why: str | None) -> None:
    assert approval_decision(OWNED, ALLOWING, [], variants) == why
