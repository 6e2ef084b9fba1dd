"""The PackageVariant and PackageVariantSet controllers end to end on real git repositories.

Each test runs `reconcile_manifests` (what `porchkit variants reconcile` runs) over manifests and
bare git repositories in Porch's layout, with a state directory, and checks what is in git
afterwards. A second run with the same state is a restart: a new process that knows only what
the state directory and the repositories hold.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from porchvariant.embedded.git.repository import GitPackageRepository, Lifecycle, Revision
from porchvariant.errors import PorchVariantError
from porchvariant.local_run import LocalRun, RemoteSettings, reconcile_manifests
from porchvariant.packagevariant_controller import MUTATIONS_CONDITION
from tests.porchvariant.variants_support import NS, Repos, configmap, manifests, package_variant


@pytest.fixture(name="repos")
def repos_fixture(tmp_path: Path) -> Repos:
    return Repos(tmp_path, deployments=("prod", "staging", "dev"))


def run(repos: Repos, *objects: dict[str, Any], approve: bool = False) -> LocalRun:
    return reconcile_manifests(manifests(*objects), state=repos.tmp / "state", approve=approve, timeout=60)


def revisions(path: Path, package: str | None = None) -> list[Revision]:
    with GitPackageRepository(path) as repo:
        return [r for r in repo.list_revisions(package) if not r.is_placeholder]


def files(path: Path, revision: Revision) -> dict[str, str]:
    with GitPackageRepository(path) as repo:
        return repo.read_resources(revision)


def context_data(path: Path, revision: Revision) -> dict[str, str]:
    return dict(yaml.safe_load(files(path, revision)["package-context.yaml"])["data"])


def test_a_variant_clones_its_upstream_revision_once_and_a_rerun_changes_nothing(repos: Repos) -> None:
    pv = package_variant("web-prod", packageContext={"data": {"env": "prod"}})
    first = run(repos, *repos.repositories(), pv)
    assert first.problems == []
    assert [(c.repository, c.package, c.workspace, c.lifecycle, c.change, c.ready) for c in first.changes] == [
        ("prod", "web", "packagevariant-1", "Draft", "created", True)]
    [draft] = revisions(repos.deployments["prod"], "web")
    assert (draft.lifecycle, draft.workspace) == (Lifecycle.DRAFT, "packagevariant-1")
    assert context_data(repos.deployments["prod"], draft) == {"name": "web", "package-path": "web", "env": "prod"}
    assert "size: small" in files(repos.deployments["prod"], draft)["app.yaml"]  # revision 1, as asked

    before = repos.all_refs()
    second = run(repos, *repos.repositories(), pv)
    assert (second.changes, second.problems) == ([], [])
    assert repos.all_refs() == before


def test_approve_publishes_and_a_new_upstream_revision_drafts_an_upgrade(repos: Repos) -> None:
    pv = package_variant("web-prod")
    published = run(repos, *repos.repositories(), pv, approve=True)
    assert [c.change for c in published.changes] == ["created"]  # created and published in one run
    assert [(r.lifecycle, r.revision) for r in revisions(repos.deployments["prod"], "web")] == [
        (Lifecycle.PUBLISHED, 1)]
    assert run(repos, *repos.repositories(), pv, approve=True).changes == []

    upgraded = run(repos, *repos.repositories(), package_variant("web-prod", revision=2))
    assert upgraded.problems == []
    assert [(c.workspace, c.lifecycle, c.change) for c in upgraded.changes] == [
        ("packagevariant-2", "Draft", "created")]
    draft = next(r for r in revisions(repos.deployments["prod"], "web") if r.lifecycle == Lifecycle.DRAFT)
    assert "size: large" in files(repos.deployments["prod"], draft)["app.yaml"]
    assert "web/v2" in yaml.safe_load(files(repos.deployments["prod"], draft)["Kptfile"])["upstreamLock"]["git"]["ref"]


def test_a_changed_mutation_of_a_published_downstream_makes_one_edit_draft(repos: Repos) -> None:
    run(repos, *repos.repositories(), package_variant("web-prod", packageContext={"data": {"tier": "1"}}),
        approve=True)
    changed = package_variant("web-prod", packageContext={"data": {"tier": "2"}})
    first = run(repos, *repos.repositories(), changed)
    second = run(repos, *repos.repositories(), changed)
    assert [(c.workspace, c.change) for c in first.changes] == [("packagevariant-2", "created")]
    assert second.changes == []
    drafts = [r for r in revisions(repos.deployments["prod"], "web") if r.lifecycle == Lifecycle.DRAFT]
    assert len(drafts) == 1
    assert context_data(repos.deployments["prod"], drafts[0])["tier"] == "2"


def test_injected_objects_fill_the_package_and_a_change_to_them_drafts_an_edit(repos: Repos) -> None:
    pv = package_variant("web-prod", injectors=[{"kind": "ConfigMap", "name": "region-eu"}])
    run(repos, *repos.repositories(), pv, configmap("region-eu", name="eu-west"), approve=True)
    [published] = revisions(repos.deployments["prod"], "web")
    assert "name: eu-west" in files(repos.deployments["prod"], published)["region.yaml"]

    edited = run(repos, *repos.repositories(), pv, configmap("region-eu", name="eu-central"))
    assert [(c.workspace, c.change) for c in edited.changes] == [("packagevariant-2", "created")]
    draft = next(r for r in revisions(repos.deployments["prod"], "web") if r.lifecycle == Lifecycle.DRAFT)
    assert "name: eu-central" in files(repos.deployments["prod"], draft)["region.yaml"]


@pytest.mark.parametrize(("spec", "reason", "words"), [
    ({"downstream": {"repo": "nowhere", "package": "web"}}, "RepositoryNotFound", 'downstream repository "nowhere"'),
    ({"upstream": {"repo": "catalog", "package": "missing", "revision": 1}}, "UpstreamNotFound", 'Package:"missing"'),
    ({"upstream": {"repo": "catalog", "package": "web", "revision": 7}}, "UpstreamNotFound", "Revision:7"),
    ({"upstream": {"repo": "catalog"}}, "ValidationError", "spec.upstream.package"),
])
def test_a_variant_that_cannot_be_reconciled_is_stalled_and_writes_nothing(
        repos: Repos, spec: dict[str, Any], reason: str, words: str) -> None:
    pv = package_variant("web-prod")
    pv["spec"].update(spec)
    before = repos.all_refs()
    result = run(repos, *repos.repositories(), pv)
    assert result.changes == []
    [problem] = result.problems
    assert problem.startswith(f"PackageVariant {NS}/web-prod is Stalled ({reason}): ")
    assert words in problem
    assert repos.all_refs() == before


def test_a_draft_whose_mutations_failed_is_marked_not_ready_and_is_not_approved(repos: Repos) -> None:
    # A blueprint repository is not a deployment repository: its clones get no package-context.yaml,
    # so a packageContext cannot be applied.
    catalog_as_target = repos.repository("staging", deployment=False)
    pv = package_variant("web-staging", downstream="staging", packageContext={"data": {"env": "staging"}})
    result = run(repos, repos.repository("catalog"), catalog_as_target, pv, approve=True)
    [draft] = revisions(repos.deployments["staging"], "web")
    assert draft.lifecycle == Lifecycle.DRAFT  # not approved
    kptfile = yaml.safe_load(files(repos.deployments["staging"], draft)["Kptfile"])
    assert {"conditionType": MUTATIONS_CONDITION} in kptfile["info"]["readinessGates"]
    condition = next(c for c in kptfile["status"]["conditions"] if c["type"] == MUTATIONS_CONDITION)
    assert condition["status"] == "False" and "package-context.yaml" in condition["message"]
    assert [c.ready for c in result.changes] == [False]
    assert any("is not Ready" in p and "package-context.yaml" in p for p in result.problems)


@pytest.mark.parametrize(("policy", "expected"), [
    ("delete", [(Lifecycle.DELETION_PROPOSED, 1)]),  # the draft is deleted; the published one waits
    ("orphan", [(Lifecycle.PUBLISHED, 1), (Lifecycle.DRAFT, 0)]),
])
def test_removing_a_variant_carries_out_its_deletion_policy(repos: Repos, policy: str,
                                                            expected: list[tuple[Lifecycle, int]]) -> None:
    pv = package_variant("web-prod", deletionPolicy=policy)
    run(repos, *repos.repositories(), pv, approve=True)
    run(repos, *repos.repositories(), package_variant("web-prod", deletionPolicy=policy, revision=2))
    result = run(repos, *repos.repositories())  # the PackageVariant is gone from the manifests
    assert result.problems == []
    assert sorted((r.lifecycle, r.revision) for r in revisions(repos.deployments["prod"], "web")) == sorted(expected)


def test_a_set_fans_out_by_repository_label_and_follows_label_and_template_changes(repos: Repos) -> None:
    pvs = {"apiVersion": "config.porch.kpt.dev/v1alpha2", "kind": "PackageVariantSet",
           "metadata": {"name": "web", "namespace": NS},
           "spec": {"upstream": {"repo": "catalog", "package": "web", "revision": 1},
                    "targets": [{"repositorySelector": {"matchLabels": {"tier": "edge"}},
                                 "template": {"labelExprs": [{"key": "region",
                                                              "valueExpr": "repository.labels['region']"}]}}]}}
    edge = {"prod": {"tier": "edge", "region": "eu"}, "staging": {"tier": "edge", "region": "us"}}
    first = run(repos, *repos.repositories(**edge), pvs)
    assert first.problems == []
    assert sorted((c.repository, c.variant) for c in first.changes) == [("prod", "web-prod-web"),
                                                                         ("staging", "web-staging-web")]
    assert revisions(repos.deployments["dev"]) == []

    edge["dev"] = {"tier": "edge", "region": "ap"}
    second = run(repos, *repos.repositories(**edge), pvs)
    assert [(c.repository, c.change) for c in second.changes] == [("dev", "created")]

    del edge["staging"]
    third = run(repos, *repos.repositories(**edge), pvs)
    assert [(c.repository, c.change) for c in third.changes] == [("staging", "removed")]
    assert revisions(repos.deployments["staging"]) == []
    assert len(revisions(repos.deployments["prod"])) == 1  # untouched: no delete-and-recreate


def test_a_variant_removed_with_its_downstream_repository_still_deletes_its_draft(repos: Repos) -> None:
    run(repos, *repos.repositories(), package_variant("web-prod"))
    assert len(revisions(repos.deployments["prod"])) == 1
    result = run(repos, repos.repository("catalog"))  # the variant and the prod Repository both gone
    assert result.problems == []
    assert [(c.repository, c.change, c.variant) for c in result.changes] == [("prod", "removed", "web-prod")]
    assert revisions(repos.deployments["prod"]) == []


def test_a_set_blocked_by_a_foreign_variant_of_its_name_recovers_once_that_is_removed(repos: Repos) -> None:
    pvs = {"apiVersion": "config.porch.kpt.dev/v1alpha2", "kind": "PackageVariantSet",
           "metadata": {"name": "web", "namespace": NS},
           "spec": {"upstream": {"repo": "catalog", "package": "web", "revision": 1},
                    "targets": [{"repositories": [{"name": "prod"}]}]}}
    squatter = package_variant("web-prod-web", downstream="dev")
    first = run(repos, *repos.repositories(), pvs, squatter)
    assert any(p.startswith(f"PackageVariantSet {NS}/web is Stalled (UnexpectedError)") and "does not belong" in p
               for p in first.problems)
    second = run(repos, *repos.repositories(), pvs)
    assert second.problems == []
    assert sorted((c.repository, c.change) for c in second.changes) == [("dev", "removed"), ("prod", "created")]


@pytest.mark.parametrize(("metadata", "words"), [
    ("hello", "metadata must be a mapping, not str"),
    ({"name": "x", "annotations": ["a"]}, "metadata.annotations must be a mapping, not list"),
])
def test_malformed_metadata_is_one_clear_error_naming_the_file(repos: Repos, metadata: Any, words: str) -> None:
    broken = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata}
    with pytest.raises(PorchVariantError) as caught:
        run(repos, *repos.repositories(), broken)
    assert "manifest-" in str(caught.value) and words in str(caught.value)


def test_a_run_leaves_no_git_process_behind(repos: Repos) -> None:
    from tests.porchvariant.embedded.test_gitrepo import git_children

    run(repos, *repos.repositories(), package_variant("web-prod"), approve=True)
    assert git_children() == []


def test_a_variant_whose_spec_is_not_a_mapping_is_stalled_not_a_stuck_watch(repos: Repos) -> None:
    pv = package_variant("web-prod")
    pv["spec"] = "hello"  # stored: the embedded server does not check a CRD schema's types
    result = run(repos, *repos.repositories(), pv)
    assert result.problems == [f"PackageVariant {NS}/web-prod is Stalled (ValidationError): "
                               "spec: must be an object, not a string"]


def test_a_set_whose_upstream_repository_is_unreachable_is_stalled_naming_it(repos: Repos, tmp_path: Path) -> None:
    unreachable = {**repos.repository("catalog"), "spec": {"type": "git", "git": {
        "repo": "https://127.0.0.1:1/catalog.git", "branch": "main"}}}  # nothing listens on port 1
    pvs = {"apiVersion": "config.porch.kpt.dev/v1alpha2", "kind": "PackageVariantSet",
           "metadata": {"name": "web", "namespace": NS},
           "spec": {"upstream": {"repo": "catalog", "package": "web", "revision": 1},
                    "targets": [{"repositories": [{"name": "prod"}]}]}}
    result = reconcile_manifests(manifests(unreachable, repos.repository("prod"), pvs), timeout=60,
                                 remotes=RemoteSettings(cache=tmp_path / "cache"))
    [problem] = [p for p in result.problems if "PackageVariantSet" in p]
    assert problem.startswith(f'PackageVariantSet {NS}/web is Stalled (RepositoryNotReady): upstream repository '
                              f'"catalog" is not ready: https://127.0.0.1:1/catalog.git: ')
    assert result.changes == []


def test_approve_says_which_readiness_gate_held_a_draft_back_and_exits_with_a_problem(tmp_path: Path) -> None:
    gated = tmp_path / "gated"
    gated.mkdir()
    repos = Repos(gated)
    kptfile = ("apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: web\ninfo:\n  readinessGates:\n"
               "  - conditionType: example.com/reviewed\n")
    with GitPackageRepository(repos.catalog) as repo:
        repo.approve(repo.create_draft("web", "v3", {"Kptfile": kptfile}))
    result = run(repos, *repos.repositories(), package_variant("web-prod", revision=3), approve=True)
    [draft] = revisions(repos.deployments["prod"], "web")
    assert draft.lifecycle == Lifecycle.DRAFT
    [problem] = result.problems
    assert problem.startswith(f"PackageRevision {NS}/prod.web.") and "of PackageVariant web-prod was not approved" \
        in problem and problem.endswith("readiness gate example.com/reviewed is not True")
