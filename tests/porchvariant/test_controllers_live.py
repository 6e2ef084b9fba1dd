"""The controllers running under a Manager, reacting to changes as they happen (no restart in between)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from porchvariant.embedded.git.repository import GitPackageRepository, Lifecycle
from porchvariant.packagevariant_controller import PACKAGE_VARIANT
from porchvariant.packagevariantset_controller import PACKAGE_VARIANT_SET
from reconcile import Kind, ObjectKey, conditions
from tests.porchvariant.variants_support import NS, Live, Repos, configmap, eventually, package_variant
from tests.reconcile.heard import Heard, handled

CONFIGMAP = Kind("v1", "ConfigMap")


def drafts(live: Live, repo: str) -> list[str]:
    """region.yaml of each draft of `web` in deployment repository `repo`."""
    with GitPackageRepository(live.repos.deployments[repo]) as git:
        return [git.read_resources(r)["region.yaml"] for r in git.list_revisions("web")
                if r.lifecycle == Lifecycle.DRAFT]


@pytest.fixture(name="live")
def live_fixture(tmp_path: Path) -> Iterator[Live]:
    running = Live(Repos(tmp_path, deployments=("prod", "dev")))
    yield running
    running.stop()


def test_editing_an_injected_configmap_updates_the_draft_without_a_restart(live: Live) -> None:
    live.cluster.create(configmap("region-eu", name="eu-west"))
    live.cluster.create(package_variant("web-prod", injectors=[{"kind": "ConfigMap", "name": "region-eu"}]))
    eventually(lambda: any("eu-west" in text for text in drafts(live, "prod")))

    current = live.cluster.get(CONFIGMAP, ObjectKey(NS, "region-eu"))
    assert current is not None
    live.cluster.update({**current, "data": {"name": "eu-central"}})
    eventually(lambda: any("eu-central" in text for text in drafts(live, "prod")))
    assert len(drafts(live, "prod")) == 1  # the draft was updated in place, no second one


def test_a_newly_labelled_repository_gets_its_variant_and_the_set_reports_each_target(live: Live) -> None:
    live.cluster.create({"apiVersion": "config.porch.kpt.dev/v1alpha2", "kind": "PackageVariantSet",
                         "metadata": {"name": "web", "namespace": NS},
                         "spec": {"upstream": {"repo": "catalog", "package": "web", "revision": 1},
                                  "targets": [{"repositorySelector": {"matchLabels": {"tier": "edge"}}}]}})
    for name in ("prod", "dev"):
        repo = live.cluster.get(Kind("config.porch.kpt.dev/v1alpha1", "Repository"), ObjectKey(NS, name))
        assert repo is not None
        live.cluster.update({**repo, "metadata": {**repo["metadata"], "labels": {"tier": "edge"}}})

    def reported() -> list[dict[str, Any]] | None:
        pvs = live.cluster.get(PACKAGE_VARIANT_SET, ObjectKey(NS, "web"))
        entries = ((pvs or {}).get("status") or {}).get("packageVariants") or []
        return entries if len(entries) == 2 and all(e["ready"] == "True" for e in entries) else None

    entries = eventually(reported)
    assert sorted((e["name"], e["repo"], e["package"], e["reason"]) for e in entries) == [
        ("web-dev-web", "dev", "web", "NoErrors"), ("web-prod-web", "prod", "web", "NoErrors")]
    pv = live.cluster.get(PACKAGE_VARIANT, ObjectKey(NS, "web-prod-web"))
    assert pv is not None and conditions.is_true(pv, "Ready")
    assert [t["name"] for t in pv["status"]["downstreamTargets"]] == ["prod.web.packagevariant-1"]


def test_a_stalled_variant_is_told_once_as_a_warning_event(live: Live) -> None:
    live.cluster.create(package_variant("web-prod", downstream="nowhere"))

    def warnings() -> list[dict[str, Any]]:
        return [e for e in live.cluster.list(Kind("v1", "Event"), namespace=NS).items
                if e["involvedObject"]["name"] == "web-prod" and e["type"] == "Warning"]

    [event] = eventually(warnings)
    assert event["reason"] == "RepositoryNotFound"
    assert event["message"] == 'downstream repository "nowhere" not found in namespace "team"'
    pv = live.cluster.get(PACKAGE_VARIANT, ObjectKey(NS, "web-prod"))
    assert pv is not None
    heard = Heard(live.manager.cache.informer(PACKAGE_VARIANT))
    touched = live.cluster.update({**pv, "metadata": {**pv["metadata"], "labels": {"touched": "yes"}}})
    handled(heard, touched, *live.manager.controllers)  # another pass, and it is over
    assert len(warnings()) == 1 and warnings()[0].get("count", 1) == 1


def test_a_revision_porch_could_never_have_stalls_its_variant_and_set_while_the_others_are_served(
        live: Live) -> None:
    below = "spec.upstream.revision: must be at least -1 (no package revision has a lower number), not {}"
    dev_refs = live.repos.all_refs()[str(live.repos.deployments["dev"])]
    live.cluster.create(package_variant("web-dev", downstream="dev", revision=-3))
    live.cluster.create({"apiVersion": "config.porch.kpt.dev/v1alpha2", "kind": "PackageVariantSet",
                         "metadata": {"name": "web", "namespace": NS},
                         "spec": {"upstream": {"repo": "catalog", "package": "web", "revision": -2},
                                  "targets": [{"repositories": [{"name": "dev"}]}]}})
    live.cluster.create(package_variant("web-prod"))

    def conditions_when_stalled(kind: Kind, name: str) -> dict[str, tuple[str, str, str]] | None:
        obj = live.cluster.get(kind, ObjectKey(NS, name))
        found = {c["type"]: (c["status"], c["reason"], c["message"]) for c in conditions.conditions_of(obj or {})}
        return found if found.get("Stalled", ("",))[0] == "True" else None

    assert eventually(lambda: conditions_when_stalled(PACKAGE_VARIANT, "web-dev")) == {
        "Stalled": ("True", "ValidationError", below.format(-3)),
        "Ready": ("False", "Error", "invalid packagevariant object")}
    assert eventually(lambda: conditions_when_stalled(PACKAGE_VARIANT_SET, "web")) == {
        "Stalled": ("True", "ValidationError", below.format(-2)),
        "Ready": ("False", "ValidationError", below.format(-2))}
    eventually(lambda: conditions.is_true(live.cluster.get(PACKAGE_VARIANT, ObjectKey(NS, "web-prod")) or {}, "Ready"))
    assert [pv["metadata"]["name"] for pv in live.cluster.list(PACKAGE_VARIANT, namespace=NS).items] == [
        "web-dev", "web-prod"]
    assert live.repos.all_refs()[str(live.repos.deployments["dev"])] == dev_refs
