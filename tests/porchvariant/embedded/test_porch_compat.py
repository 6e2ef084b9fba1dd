"""The embedded Porch answers as Porch does, where Porch's own tests and source say how.

Each test names the Porch test or source it follows (nephio-project/porch at 74d82d56, the
revision docs/variants.md says porchkit follows): deletion of published revisions and of
referenced upstreams, the one task
a revision shows, who published the placeholder, the `kpt.dev/latest-revision` label, UIDs, and
the words of an edit's refusal.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from porchvariant.embedded._porch_objects import porch_uid, timestamp
from porchvariant.embedded.git.repository import GitPackageRepository
from porchvariant.porch_client import PACKAGE_REVISION, PACKAGE_REVISION_RESOURCES, edit_task
from reconcile import ObjectKey
from reconcile.errors import BadRequest, Forbidden, Invalid
from tests.porchvariant.embedded.porch_env import KPTFILE, NS, Env, git

LATEST = "kpt.dev/latest-revision"
MUST_PROPOSE = ("published PackageRevisions must be proposed for deletion by setting spec.lifecycle to "
                "'DeletionProposed' prior to deletion")


def revision(env: Env, name: str) -> dict[str, Any]:
    found = env.client.revision(NS, name)
    assert found is not None, name
    return found


def set_approval(env: Env, obj: dict[str, Any], lifecycle: str) -> dict[str, Any]:
    return env.cluster.patch(PACKAGE_REVISION, ObjectKey.of(obj), {"spec": {"lifecycle": lifecycle}},
                             subresource="approval")


def publish_v2(env: Env) -> dict[str, Any]:
    return env.publish(env.client.create_revision(NS, repository="catalog", package="web", workspace="v2",
                                                  task=edit_task("catalog.web.v1")))


# --- deleting published revisions (Porch: pkg/registry/porch/packagecommon.go validateDelete) ----


@pytest.mark.parametrize("name", ["catalog.web.main", "catalog.web.v1"])
def test_a_published_revision_is_deleted_only_once_its_deletion_is_proposed(env: Env, name: str) -> None:
    # Porch's e2e TestProposeDeleteAndUndo, for every published revision, the placeholder included.
    main_before = git(env.catalog, "rev-parse", "main")
    published = set_approval(env, set_approval(env, revision(env, name), "DeletionProposed"), "Published")
    with pytest.raises(Forbidden) as refused:
        env.client.delete(published)
    assert str(refused.value) == f'packagerevisions.porch.kpt.dev "{name}" is forbidden: {MUST_PROPOSE}'
    assert refused.value.status["code"] == 403 and refused.value.status["reason"] == "Forbidden"
    assert refused.value.status["details"] == {"name": name, "group": "porch.kpt.dev", "kind": "packagerevisions"}
    assert revision(env, name)["spec"]["lifecycle"] == "Published"
    assert git(env.catalog, "rev-parse", "main") == main_before  # nothing was committed

    env.client.delete(set_approval(env, revision(env, name), "DeletionProposed"))
    assert env.client.revision(NS, name) is None


def test_deleting_the_placeholder_once_proposed_commits_the_removal_to_the_branch(env: Env) -> None:
    # Porch's e2e TestDeleteAndRecreate: the main revision, proposed for deletion, is deleted.
    env.client.delete(env.client.propose_deletion(revision(env, "catalog.web.main")))
    assert git(env.catalog, "log", "-1", "--format=%s", "main").strip() == "Delete web"
    assert git(env.catalog, "ls-tree", "--name-only", "main").split() == []
    assert env.client.revision(NS, "catalog.web.main") is None
    assert env.client.revision(NS, "catalog.web.v1") is not None  # the tag is another revision


def test_an_upstream_that_a_revision_was_cloned_from_is_not_deleted(env: Env) -> None:
    # Porch v1.5.8 (PR #453, pkg/registry/porch/packagerevision.go checkIfUpstreamIsReferenced).
    downstream = env.clone()
    upstream = env.client.propose_deletion(revision(env, "catalog.web.v1"))
    with pytest.raises(Forbidden) as refused:
        env.client.delete(upstream)
    name = downstream["metadata"]["name"]
    assert str(refused.value) == ('packagerevisions.porch.kpt.dev "catalog.web.v1" is forbidden: cannot delete '
                                  f"package revision, it is referenced as upstream by: {name}")
    assert refused.value.status["code"] == 403
    assert revision(env, "catalog.web.v1")["spec"]["lifecycle"] == "DeletionProposed"

    env.client.delete(downstream)  # the reference goes with the downstream draft
    env.client.delete(revision(env, "catalog.web.v1"))
    assert env.client.revision(NS, "catalog.web.v1") is None


# --- spec.tasks (Porch: pkg/externalrepo/git/git.go loadTasks, since v1.5.3 / PR #252) -------------


def test_a_revision_shows_only_its_first_task(env: Env) -> None:
    # Porch's TestApproveDraftWithHistory: a draft whose history has several tasks (as Porch
    # before v1.5.3 wrote them) shows one, and so does the revision once published.
    init = {"type": "init", "init": {"description": "with history"}}
    with GitPackageRepository(env.deploy) as repo:
        draft = repo.create_draft("history", "v1", {"Kptfile": KPTFILE}, task=init)
        draft = repo.write_resources(draft, {"Kptfile": KPTFILE, "a.txt": "a\n"},
                                     task={"type": "patch", "patch": {"patches": []}})
        repo.write_resources(draft, {"Kptfile": KPTFILE, "a.txt": "b\n"}, task={"type": "render"})
    assert revision(env, "deploy.history.v1")["spec"]["tasks"] == [init]
    published = env.publish(revision(env, "deploy.history.v1"))
    assert published["spec"]["tasks"] == [init]
    assert revision(env, "deploy.history.main")["spec"]["tasks"] == []

    copied = env.client.create_revision(NS, repository="deploy", package="history", workspace="v2",
                                        task=edit_task("deploy.history.v1"))
    env.write(copied, lambda files: files.update({"b.txt": "b\n"}))
    assert revision(env, "deploy.history.v2")["spec"]["tasks"] == [edit_task("deploy.history.v1")]


# --- publishedBy / publishTimestamp (Porch: package_tree.go buildGitPackageRevision, TestAuthor) ---


def author_time(repo: Any, ref: str) -> str:
    return timestamp(int(git(repo, "log", "-1", "--format=%at", ref)))


def test_the_placeholder_shows_who_published_the_package_last(env: Env) -> None:
    approval = "web/v1"
    # An unrelated commit on main afterwards does not count: Porch looks for the newest commit
    # whose kpt: trailer names the package.
    work = env.tmp / "catalog-more"
    git(env.tmp, "clone", "-q", str(env.catalog), str(work))
    (work / "README.md").write_text("later\n")
    (work / "raw").mkdir()
    (work / "raw" / "Kptfile").write_text(KPTFILE)
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "unrelated")  # by someone@example.com
    git(work, "push", "-q", "origin", "main")

    placeholder = revision(env, "catalog.web.main")
    expected = {"publishedBy": "porch@kpt.dev", "publishTimestamp": author_time(env.catalog, approval)}
    assert {k: placeholder["status"].get(k) for k in expected} == expected
    assert {k: revision(env, "catalog.web.v1")["status"].get(k) for k in expected} == expected
    # A package no trailer names has no publisher, as in Porch.
    raw = revision(env, "catalog.raw.main")["status"]
    assert "publishedBy" not in raw and "publishTimestamp" not in raw
    assert "publishedBy" not in env.clone()["status"]

    # A published revision on a tag that is not v<N> (revision -1) shows its tag's commit.
    git(env.catalog, "tag", "web/v2.0.0", "main")
    catalog_tag = revision(env, "catalog.web.v2.0.0")
    assert catalog_tag["spec"]["revision"] == -1
    assert catalog_tag["status"]["publishedBy"] == "someone@example.com"


def test_the_placeholder_follows_each_new_approval(env: Env) -> None:
    v2 = publish_v2(env)
    placeholder = revision(env, "catalog.web.main")
    assert placeholder["status"]["publishTimestamp"] == v2["status"]["publishTimestamp"]
    assert placeholder["status"]["publishedBy"] == v2["status"]["publishedBy"] == "porch@kpt.dev"


# --- the kpt.dev/latest-revision label (Porch: pkg/cache/crcache/util.go identifyLatestRevisions, ----
# --- pkg/registry/porch/strategy.go Validate / ValidateUpdate) --------------------------------------


def labelled_latest(env: Env) -> list[str]:
    listed = env.cluster.list(PACKAGE_REVISION, namespace=NS, labels=f"{LATEST}=true")
    return [r["metadata"]["name"] for r in listed.items]


def test_the_highest_published_revision_of_each_package_is_labelled_latest(env: Env) -> None:
    assert labelled_latest(env) == ["catalog.web.v1"]
    assert revision(env, "catalog.web.v1")["metadata"]["labels"] == {LATEST: "true"}
    assert "labels" not in revision(env, "catalog.web.main")["metadata"]
    start = env.cluster.list(PACKAGE_REVISION, namespace=NS).resource_version

    v2 = publish_v2(env)
    assert v2["metadata"]["labels"] == {LATEST: "true"}
    assert labelled_latest(env) == ["catalog.web.v2"]
    v1 = revision(env, "catalog.web.v1")
    assert "labels" not in v1["metadata"]
    # The revision that lost the label is announced, so informers do not keep it.
    events = env.cluster.watch(PACKAGE_REVISION, namespace=NS, resource_version=start, timeout=0.2)
    modified = [e.object for e in events if e.type == "MODIFIED" and e.object["metadata"]["name"] == "catalog.web.v1"]
    assert modified and modified[-1] == v1

    proposed = env.client.propose_deletion(v2)
    assert proposed["metadata"]["labels"] == {LATEST: "true"}  # DeletionProposed is still published
    start = env.cluster.list(PACKAGE_REVISION, namespace=NS).resource_version
    env.client.delete(proposed)
    assert labelled_latest(env) == ["catalog.web.v1"]
    events = env.cluster.watch(PACKAGE_REVISION, namespace=NS, resource_version=start, timeout=0.2)
    assert [(e.type, e.object["metadata"]["name"]) for e in events] == [
        ("DELETED", "catalog.web.v2"), ("MODIFIED", "catalog.web.v1")]
    assert revision(env, "catalog.web.v1")["metadata"]["labels"] == {LATEST: "true"}


def test_the_latest_revision_label_is_porchs_to_set(env: Env) -> None:
    v1 = revision(env, "catalog.web.v1")
    with pytest.raises(Invalid) as refused:
        env.client.update_revision({**v1, "metadata": {**v1["metadata"], "labels": {}}})
    assert str(refused.value) == ('PackageRevision.porch.kpt.dev "catalog.web.v1" is invalid: '
                                  f"metadata.labels.{LATEST}: Forbidden: label is managed by porch and cannot "
                                  "be modified by users")
    with pytest.raises(Invalid, match="label is managed by porch and cannot be set by users"):
        env.clone(labels={LATEST: "true"})

    # Kept as it is, it is never stored: the label only ever shows where Porch computes it.
    labelled = env.client.update_revision({**v1, "metadata": {**v1["metadata"],
                                                              "labels": {LATEST: "true", "team": "a"}}})
    assert labelled["metadata"]["labels"] == {LATEST: "true", "team": "a"}
    assert LATEST not in git(env.catalog, "cat-file", "-p", "refs/porchkit/metadata/web/v1")
    publish_v2(env)
    assert revision(env, "catalog.web.v1")["metadata"]["labels"] == {"team": "a"}


# --- UIDs (Porch: pkg/util/util.go GenerateUid, pkg/externalrepo/git/package.go UID) ----------------


def test_uids_are_porchs_for_the_same_namespace_and_name(env: Env) -> None:
    space = uuid.UUID("aac71d91-5c67-456f-8fd2-902ef6da820e")
    for name in ("catalog.web.v1", "catalog.web.main"):
        expected = str(uuid.uuid5(space, f"packagerevision:porch.kpt.dev/v1alpha1/{NS}/{name}"))
        assert revision(env, name)["metadata"]["uid"] == expected
        resources = env.cluster.get(PACKAGE_REVISION_RESOURCES, ObjectKey(NS, name))
        assert resources is not None and resources["metadata"]["uid"] == expected


def test_the_uid_scheme_gives_porchs_own_test_vector() -> None:
    # pkg/util/util_test.go TestGenerateUid
    assert porch_uid("my-prefix", "my-namespace", "my.kube.name.of-something") == "272983f7-a30d-58e0-a809-c38e8638666d"


# --- an edit's source (Porch: pkg/task/edit.go editPackageMutation.apply) ---------------------------


@pytest.mark.parametrize("source", ["deploy.web.prod", "deploy.web.main"])
def test_an_edit_from_another_packages_revision_is_refused_in_porchs_words(env: Env, source: str) -> None:
    env.publish(env.clone())
    with pytest.raises(BadRequest) as refused:
        env.client.create_revision(NS, repository="deploy", package="other", workspace="ws", task=edit_task(source))
    # Porch checks the package before the placeholder, so the placeholder of another package
    # gets the same answer.
    assert str(refused.value) == "source revision must be from same package deploy/other"
