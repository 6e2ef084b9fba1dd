"""What the embedded Porch serves follows git and the Repository objects, though it answers from caches.

Changes made behind the server's back (here through a second GitPackageRepository handle or the
git CLI, as another process or a `git push` would make them) are seen by the next get and list;
the server's own writes hand out the resourceVersions later reads give.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from porchvariant.embedded.git.repository import GitPackageRepository
from porchvariant.porch_client import PACKAGE_REVISION, PACKAGE_REVISION_RESOURCES, REPOSITORY
from reconcile import ObjectKey
from reconcile.errors import AlreadyExists
from tests.porchvariant.embedded.porch_env import CONFIGMAP, KPTFILE, NS, Env, git, repository, seed

NAME = "deploy.web.prod"


def names(env: Env) -> list[str]:
    return [r["metadata"]["name"] for r in env.client.revisions(NS, repository="deploy")]


def test_a_draft_written_behind_the_servers_back_is_seen_by_the_next_get(env: Env) -> None:
    draft = env.clone()
    before = env.client.resources(draft)
    assert before is not None
    with GitPackageRepository(env.deploy) as other:
        other.write_resources(other.get_revision("web", "prod"), {**env.files(draft), "new.txt": "new\n"})
    after = env.client.resources(draft)
    assert after is not None and after["spec"]["resources"]["new.txt"] == "new\n"
    assert int(after["metadata"]["resourceVersion"]) > int(before["metadata"]["resourceVersion"])
    again = env.client.revision(NS, NAME)
    assert again is not None and again["metadata"]["resourceVersion"] == after["metadata"]["resourceVersion"]


def test_lifecycle_and_metadata_changed_behind_the_servers_back_are_seen(env: Env) -> None:
    env.clone()
    with GitPackageRepository(env.deploy) as other:
        revision = other.get_revision("web", "prod")
        other.write_metadata(revision, {"labels": {"set": "elsewhere"}})
        other.propose(revision)
    seen = env.client.revision(NS, NAME)
    assert seen is not None
    assert seen["spec"]["lifecycle"] == "Proposed" and seen["metadata"]["labels"] == {"set": "elsewhere"}

    published = env.publish(seen)
    with GitPackageRepository(env.deploy) as other:
        other.propose_deletion(other.get_revision("web", "prod"))
    seen = env.client.revision(NS, NAME)
    assert seen is not None and seen["spec"]["lifecycle"] == "DeletionProposed"
    assert published["spec"]["lifecycle"] == "Published"


def test_revisions_created_and_deleted_behind_the_servers_back_come_and_go(env: Env) -> None:
    env.clone()
    assert names(env) == [NAME]
    with GitPackageRepository(env.deploy) as other:
        other.create_draft("api", "dev", {"Kptfile": KPTFILE.replace("web", "api")})
    assert env.client.revision(NS, "deploy.api.dev") is not None  # a name not known yet: git is asked
    git(env.deploy, "update-ref", "-d", "refs/heads/drafts/web/prod")
    assert env.client.revision(NS, NAME) is None
    assert env.client.resources({"metadata": {"namespace": NS, "name": NAME}}) is None
    assert names(env) == ["deploy.api.dev"]


def test_reads_give_the_resource_versions_the_writes_returned(env: Env) -> None:
    created = env.clone(labels={"a": "b"})
    listed = {r["metadata"]["name"]: r for r in env.client.revisions(NS)}
    assert listed[NAME]["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    resources = env.client.resources(created)
    assert resources is not None
    updated, _ = env.client.update_resources(resources, {**resources["spec"]["resources"], "x.txt": "x\n"})
    assert updated["metadata"]["resourceVersion"] != created["metadata"]["resourceVersion"]
    for kind in (PACKAGE_REVISION, PACKAGE_REVISION_RESOURCES):
        read = env.cluster.get(kind, ObjectKey(NS, NAME))
        assert read is not None and read["metadata"]["resourceVersion"] == updated["metadata"]["resourceVersion"]
    listed = {r["metadata"]["name"]: r for r in env.client.revisions(NS)}
    assert listed[NAME]["metadata"]["resourceVersion"] == updated["metadata"]["resourceVersion"]


def test_objects_handed_out_are_copies(env: Env) -> None:
    created = env.clone(labels={"a": "b"})
    created["metadata"]["labels"]["a"] = "changed"
    created["spec"]["tasks"].clear()
    got = env.client.revision(NS, NAME)
    assert got is not None
    got["status"]["upstreamLock"]["git"]["ref"] = "changed"
    again = env.client.revision(NS, NAME)
    assert again is not None
    assert again["metadata"]["labels"] == {"a": "b"} and len(again["spec"]["tasks"]) == 1
    assert again["status"]["upstreamLock"]["git"]["ref"] == "web/v1"


def test_a_repository_whose_branch_appears_later_is_served_from_then_on(env: Env, tmp_path: Path) -> None:
    empty = seed(tmp_path, "later", {"README.md": "x\n"})
    env.cluster.create(repository("later", str(empty), branch="deployments"))
    assert env.client.revisions(NS, repository="later") == []  # no such branch yet: not served
    git(empty, "branch", "deployments", "main")
    with GitPackageRepository(empty, branch="deployments") as other:
        other.approve(other.create_draft("web", "v1", {"Kptfile": KPTFILE, "cm.yaml": CONFIGMAP}))
    assert [r["metadata"]["name"] for r in env.client.revisions(NS, repository="later")] == [
        "later.web.deployments", "later.web.v1"]


def test_a_deleted_repository_stops_being_served(env: Env) -> None:
    env.clone()
    env.cluster.delete(REPOSITORY, ObjectKey(NS, "deploy"))
    assert env.client.revision(NS, NAME) is None
    assert env.client.revisions(NS, repository="deploy") == []
    env.cluster.create(repository("deploy", str(env.deploy)))
    assert env.client.revision(NS, NAME) is not None


def test_a_create_is_refused_for_a_name_git_holds_though_the_server_never_saw_it(env: Env) -> None:
    with GitPackageRepository(env.deploy) as other:
        other.create_draft("web", "prod", {"Kptfile": KPTFILE})
    with pytest.raises(AlreadyExists, match=f'"{NAME}" already exists'):
        env.clone()


def test_a_create_is_refused_for_the_workspace_of_a_published_revision_after_a_restart(env: Env) -> None:
    published = env.publish(env.clone())
    assert (published["spec"]["revision"], published["spec"]["workspaceName"]) == (1, "prod")
    with pytest.raises(AlreadyExists):
        env.clone()  # the tag web/v1 carries workspace prod
    env.restart()
    with pytest.raises(AlreadyExists):
        env.clone()
    assert env.clone("next")["metadata"]["name"] == "deploy.web.next"
