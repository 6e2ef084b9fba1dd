"""The embedded Porch serves PackageRevisions from real git repositories, driven through PorchClient.

Each test has an upstream repository `catalog` (package `web`, published as `web/v1`) and an
empty downstream repository `deploy` (the `env` fixture, porch_env.py).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import pytest

from porchvariant.embedded.porch import PUSH_ON_RENDER_FAILURE, EmbeddedPorch, RenderContext
from porchvariant.porch_client import (
    PACKAGE_REVISION,
    PACKAGE_REVISION_RESOURCES,
    PorchClient,
    clone_git_task,
    clone_task,
    edit_task,
    upgrade_task,
)
from reconcile import EmbeddedCluster, ObjectKey
from reconcile.errors import AlreadyExists, BadRequest, Conflict, Forbidden, Gone, Invalid
from reconcile.informer import Informer
from tests.porchvariant.embedded.porch_env import (
    CONFIGMAP,
    NS,
    Env,
    configmap_data,
    crd,
    git,
    kptfile_of,
    repository,
)
from tests.waiting import eventually


def test_lists_the_placeholder_and_published_revisions_of_local_repositories(env: Env) -> None:
    revisions = {r["metadata"]["name"]: r for r in env.client.revisions(NS)}
    assert sorted(revisions) == ["catalog.web.main", "catalog.web.v1"]  # the remote repository is not served
    placeholder, v1 = revisions["catalog.web.main"], revisions["catalog.web.v1"]
    assert placeholder["spec"] == {"packageName": "web", "workspaceName": "main", "revision": -1,
                                   "repository": "catalog", "lifecycle": "Published", "tasks": []}
    assert (v1["spec"]["revision"], v1["spec"]["lifecycle"], v1["spec"]["workspaceName"]) == (1, "Published", "v1")
    assert v1["metadata"]["namespace"] == NS and v1["metadata"]["uid"] != placeholder["metadata"]["uid"]
    assert env.client.revision(NS, "catalog.web.v1") == v1
    assert env.client.revision("default", "catalog.web.v1") is None


def test_clone_from_an_upstream_revision_writes_porchs_upstream_bookkeeping(env: Env) -> None:
    draft = env.clone(labels={"team": "a"})
    assert draft["metadata"]["name"] == "deploy.web.prod"
    assert draft["spec"]["lifecycle"] == "Draft" and draft["spec"]["revision"] == 0
    assert draft["spec"]["tasks"] == [clone_task("catalog.web.v1")]
    files = env.files(draft)
    commit = git(env.catalog, "rev-parse", "web/v1").strip()
    git_ref = {"repo": str(env.catalog), "directory": "web", "ref": "web/v1"}
    kptfile = kptfile_of(files)
    assert kptfile["upstream"] == {"type": "git", "git": git_ref}
    assert kptfile["upstreamLock"] == {"type": "git", "git": {**git_ref, "commit": commit}}
    assert "# the web package" in files["Kptfile"]  # edited in place, comments kept
    assert files["cm.yaml"] == CONFIGMAP
    assert draft["status"]["upstreamLock"] == kptfile["upstreamLock"]
    assert "refs/heads/drafts/web/prod" in git(env.deploy, "show-ref")
    with pytest.raises(AlreadyExists):
        env.clone()


def test_clone_of_the_placeholder_is_refused_with_porchs_message(env: Env) -> None:
    with pytest.raises(BadRequest, match="^upstream revision may not be the placeholder package revision "
                                         "catalog/catalog.web.main$"):
        env.clone(upstream="catalog.web.main")


def test_clone_from_a_git_url(env: Env) -> None:
    draft = env.client.create_revision(NS, repository="deploy", package="web", workspace="raw",
                                       task=clone_git_task(str(env.catalog), "web/v1", "/web"))
    kptfile = kptfile_of(env.files(draft))
    assert kptfile["upstreamLock"]["git"] == {"repo": str(env.catalog), "directory": "web", "ref": "web/v1",
                                              "commit": git(env.catalog, "rev-parse", "web/v1").strip()}


def test_write_propose_approve_publishes_revision_1_as_a_tag(env: Env) -> None:
    draft = env.clone()

    def recolor(files: dict[str, str]) -> None:
        files["cm.yaml"] = files["cm.yaml"].replace("blue", "red")
        files["extra.txt"] = "hello\n"

    assert env.write(draft, recolor) == {}
    with pytest.raises(BadRequest, match="approval subresource"):
        env.client.update_revision({**env.client.revision(NS, "deploy.web.prod"),  # type: ignore[dict-item]
                                    "spec": {**draft["spec"], "lifecycle": "Published"}})
    proposed = env.client.propose(env.client.revision(NS, "deploy.web.prod"))  # type: ignore[arg-type]
    assert proposed["spec"]["lifecycle"] == "Proposed"
    assert "refs/heads/proposed/web/prod" in git(env.deploy, "show-ref")
    published = env.client.approve(proposed)
    assert (published["spec"]["lifecycle"], published["spec"]["revision"]) == ("Published", 1)
    assert published["metadata"]["name"] == "deploy.web.prod"
    refs = git(env.deploy, "show-ref")
    assert "refs/tags/web/v1" in refs and "drafts/web" not in refs and "proposed/web" not in refs
    assert git(env.deploy, "show", "web/v1:web/extra.txt") == "hello\n"
    assert "color: red" in env.files(published)["cm.yaml"]
    with pytest.raises(BadRequest, match="package must be Draft"):
        env.write(published, lambda files: None)


def test_approval_needs_a_proposed_revision(env: Env) -> None:
    draft = env.clone()
    with pytest.raises(BadRequest, match="cannot change approval from Draft to Published"):
        env.client.approve(draft)


def test_edit_copies_a_published_revision_of_the_same_package(env: Env) -> None:
    published = env.publish(env.clone())
    edited = env.client.create_revision(NS, repository="deploy", package="web", workspace="next",
                                        task=edit_task(published["metadata"]["name"]))
    assert edited["metadata"]["name"] == "deploy.web.next"
    assert env.files(edited) == env.files(published)
    with pytest.raises(BadRequest, match="source revision must be published"):
        env.client.create_revision(NS, repository="deploy", package="web", workspace="again",
                                   task=edit_task("deploy.web.next"))


def test_upgrade_merges_three_ways_and_points_at_the_new_upstream(env: Env) -> None:
    local = env.publish(env.clone())
    local_edit = env.client.create_revision(NS, repository="deploy", package="web", workspace="local",
                                            task=edit_task(local["metadata"]["name"]))
    env.write(local_edit, lambda f: f.update({"cm.yaml": f["cm.yaml"].replace("color: blue", "color: red")}))
    local = env.publish(env.client.revision(NS, "deploy.web.local"))  # type: ignore[arg-type]
    v2 = env.client.create_revision(NS, repository="catalog", package="web", workspace="v2",
                                    task=edit_task("catalog.web.v1"))
    env.write(v2, lambda f: f.update({"cm.yaml": f["cm.yaml"].replace("size: small", "size: large")}))
    v2 = env.publish(env.client.revision(NS, "catalog.web.v2"))  # type: ignore[arg-type]
    assert v2["spec"]["revision"] == 2

    upgraded = env.client.create_revision(NS, repository="deploy", package="web", workspace="upgrade",
                                          task=upgrade_task("catalog.web.v1", "catalog.web.v2", "deploy.web.local"))
    files = env.files(upgraded)
    assert configmap_data(files) == {"color": "red", "size": "large"}
    kptfile = kptfile_of(files)
    assert kptfile["upstream"]["git"]["ref"] == "web/v2"
    assert kptfile["upstreamLock"]["git"]["commit"] == git(env.catalog, "rev-parse", "web/v2").strip()
    assert upgraded["spec"]["tasks"][0]["type"] == "upgrade"


def test_delete_drafts_at_once_and_published_only_after_deletion_is_proposed(env: Env) -> None:
    draft = env.clone("scratch")
    env.client.delete(draft)
    assert env.client.revision(NS, "deploy.web.scratch") is None
    assert "scratch" not in git(env.deploy, "show-ref")

    published = env.publish(env.clone())
    with pytest.raises(Forbidden, match="must be proposed for deletion"):
        env.client.delete(published)
    proposed = env.client.propose_deletion(published)
    assert proposed["spec"]["lifecycle"] == "DeletionProposed"
    env.client.delete(proposed)
    assert env.client.revision(NS, "deploy.web.prod") is None
    assert "refs/tags/web/v1" not in git(env.deploy, "show-ref")


def test_a_delete_waits_for_finalizers(env: Env) -> None:
    draft = env.clone(labels={"a": "b"})
    draft["metadata"]["finalizers"] = ["example.com/hold"]
    draft = env.client.update_revision(draft)
    env.client.delete(draft)
    held = env.client.revision(NS, "deploy.web.prod")
    assert held is not None and "deletionTimestamp" in held["metadata"]
    held["metadata"]["finalizers"] = []
    env.client.update_revision(held)
    assert env.client.revision(NS, "deploy.web.prod") is None


def test_metadata_and_lifecycles_survive_a_restart(env: Env) -> None:
    owner = {"apiVersion": "config.porch.kpt.dev/v1alpha1", "kind": "PackageVariant", "name": "pv",
             "uid": "1234", "controller": True}
    published = env.publish(env.clone(labels={"team": "a"}, annotations={"note": "x"}, owner_references=[owner]))
    env.clone("second")
    before = {r["metadata"]["name"]: r for r in env.client.revisions(NS, repository="deploy")}
    env.close()
    env.cluster, env.porch, env.client = env.start()
    after = {r["metadata"]["name"]: r for r in env.client.revisions(NS, repository="deploy")}
    assert sorted(after) == ["deploy.web.main", "deploy.web.prod", "deploy.web.second"]
    again = after["deploy.web.prod"]
    assert again["metadata"]["ownerReferences"] == [owner]
    assert again["metadata"]["labels"] == {"team": "a", "kpt.dev/latest-revision": "true"}
    assert again["metadata"]["annotations"] == {"note": "x"}
    for name in after:
        assert after[name]["spec"] == before[name]["spec"]
        assert after[name]["metadata"]["uid"] == before[name]["metadata"]["uid"]
    assert again["spec"]["lifecycle"] == published["spec"]["lifecycle"] == "Published"


def test_a_stale_update_is_a_conflict(env: Env) -> None:
    draft = env.clone()
    env.client.update_revision({**draft, "metadata": {**draft["metadata"], "labels": {"x": "1"}}})
    with pytest.raises(Conflict, match="the object has been modified"):
        env.client.update_revision({**draft, "metadata": {**draft["metadata"], "labels": {"x": "2"}}})
    resources = env.client.resources(draft)
    assert resources is not None
    env.client.update_resources(resources, {**resources["spec"]["resources"], "a.txt": "a\n"})
    with pytest.raises(Conflict):
        env.client.update_resources(resources, {**resources["spec"]["resources"], "b.txt": "b\n"})


def test_label_selectors_filter_lists(env: Env) -> None:
    env.clone(labels={"tier": "gold"})
    env.clone("other")
    names = [r["metadata"]["name"] for r in env.cluster.list(PACKAGE_REVISION, namespace=NS, labels="tier=gold").items]
    assert names == ["deploy.web.prod"]


def test_the_renderer_runs_on_writes_and_its_failures_refuse_them(env: Env) -> None:
    seen: list[RenderContext] = []

    def renderer(files: Mapping[str, str], context: RenderContext) -> tuple[dict[str, str], dict[str, Any]]:
        seen.append(context)
        if "broken.yaml" in files:
            return dict(files), {"error": "function failed", "result": {"exitCode": 1}}
        return {**files, "rendered.txt": "yes\n"}, {"result": {"exitCode": 0}}

    env.close()
    env.cluster, env.porch, env.client = env.start(renderer)
    draft = env.clone()
    assert env.files(draft)["rendered.txt"] == "yes\n"  # rendered after the clone
    assert seen[-1] == RenderContext(NS, "deploy.web.prod", "deploy", "web", "prod")
    assert env.write(draft, lambda f: f.pop("rendered.txt")) == {"result": {"exitCode": 0}}
    with pytest.raises(Invalid, match="function failed"):
        env.write(draft, lambda f: f.update({"broken.yaml": "x: 1\n"}))
    assert "broken.yaml" not in env.files(draft)

    pushed = env.clone("push", annotations={PUSH_ON_RENDER_FAILURE: "true"})
    status = env.write(pushed, lambda f: f.update({"broken.yaml": "x: 1\n"}))
    assert status["error"] == "function failed"
    assert "broken.yaml" in env.files(pushed)


def test_an_informer_sees_creates_updates_and_deletes(env: Env) -> None:
    informer = Informer(env.cluster, PACKAGE_REVISION, namespace=NS, watch_timeout=30)
    stop = threading.Event()
    thread = threading.Thread(target=informer.run, args=(stop,), daemon=True)
    thread.start()
    try:
        assert informer.synced.wait(10)
        assert informer.get(ObjectKey(NS, "catalog.web.v1")) is not None

        draft = env.clone()
        eventually(lambda: informer.get(ObjectKey(NS, "deploy.web.prod")) is not None, 10.0, interval=0.01)
        env.client.propose(draft)
        eventually(lambda: (informer.get(ObjectKey(NS, "deploy.web.prod")) or {})
                   .get("spec", {}).get("lifecycle") == "Proposed", 10.0, interval=0.01)
        env.client.delete(env.client.revision(NS, "deploy.web.prod"))  # type: ignore[arg-type]
        eventually(lambda: informer.get(ObjectKey(NS, "deploy.web.prod")) is None, 10.0, interval=0.01)
        assert informer.relists == 1
    finally:
        stop.set()
        informer.wake()
        thread.join(10)
    assert not thread.is_alive()


def test_watch_replays_changes_after_a_version_and_refuses_forgotten_ones(env: Env) -> None:
    start = env.cluster.list(PACKAGE_REVISION_RESOURCES, namespace=NS).resource_version
    draft = env.clone()
    env.write(draft, lambda f: f.update({"a.txt": "a\n"}))
    events = env.cluster.watch(PACKAGE_REVISION_RESOURCES, namespace=NS, resource_version=start, timeout=0.2)
    seen = [(e.type, e.object["metadata"]["name"]) for e in events]
    assert seen == [("ADDED", "deploy.web.prod"), ("MODIFIED", "deploy.web.prod")]
    with pytest.raises(Gone):
        next(iter(env.cluster.watch(PACKAGE_REVISION, resource_version="999999")))
    env.close()
    env.cluster = EmbeddedCluster()
    env.cluster.create(crd("Repository", "repositories", "config.porch.kpt.dev"))
    env.cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    env.cluster.create(repository("deploy", str(env.deploy)))
    env.porch = EmbeddedPorch(env.cluster, history=2)
    env.client = PorchClient(env.cluster)
    first = env.cluster.list(PACKAGE_REVISION, namespace=NS).resource_version
    for package in ("a", "b"):
        made = env.client.create_revision(NS, repository="deploy", package=package, workspace="ws",
                                          task={"type": "init", "init": {"description": "new"}})
        assert kptfile_of(env.files(made))["info"] == {"description": "new"}
    with pytest.raises(Gone):
        env.cluster.watch(PACKAGE_REVISION, namespace=NS, resource_version=first)
