"""The git layer of the embedded Porch reads and writes repositories exactly as Porch lays them out.

Every test runs on real git repositories under tmp_path. Repositories "written by Porch" are made
with the plain git CLI (a working clone, commits, tags and branches pushed to a bare repository),
so that reading is checked against git, not against porchkit's own writer.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from krmfn.testing import kpt_binary
from porchvariant.embedded.git import messages
from porchvariant.embedded.git.commands import Git
from porchvariant.embedded.git.repository import (
    GitConflict,
    GitInvalidRequest,
    GitNotFound,
    GitPackageRepository,
    Lifecycle,
    Revision,
)

PORCH = "Package Orchestration Service <porch@kpt.dev>"
ENV = {**os.environ, "GIT_AUTHOR_NAME": "Someone", "GIT_AUTHOR_EMAIL": "someone@example.com",
       "GIT_COMMITTER_NAME": "Someone", "GIT_COMMITTER_EMAIL": "someone@example.com"}


def kptfile(name: str) -> str:
    return f"apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: {name}\n"


def git(repo: Path, *args: str, input: str | None = None) -> str:
    run = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, input=input, env=ENV)
    assert run.returncode == 0, run.stderr
    return run.stdout


def refs_of(bare: Path) -> dict[str, str]:
    return {name: sha for sha, name in (line.split() for line in git(bare, "show-ref").splitlines())}


def raw_commit(bare: Path, rev: str) -> bytes:
    return subprocess.run(["git", "-C", str(bare), "cat-file", "commit", rev], capture_output=True, check=True).stdout


def message_of(bare: Path, rev: str) -> bytes:
    return raw_commit(bare, rev).split(b"\n\n", 1)[1]


def header(bare: Path, rev: str, field: str) -> list[str]:
    head = raw_commit(bare, rev).split(b"\n\n", 1)[0].decode()
    return [line[len(field) + 1:] for line in head.splitlines() if line.startswith(field + " ")]


def tree_files(bare: Path, rev: str, path: str = "") -> dict[str, str]:
    out = git(bare, "ls-tree", "-r", rev, *([path] if path else []))
    return {line.split("\t")[1]: line.split()[2] for line in out.splitlines()}


class Workdir:
    """A working clone of a bare repository, for writing history the way any git user (or Porch) would."""

    def __init__(self, bare: Path, path: Path) -> None:
        self.bare, self.path = bare, path
        git(bare.parent, "clone", "-q", str(bare), str(path))

    def commit(self, files: dict[str, str], message: str, *, remove: tuple[str, ...] = ()) -> str:
        for name, text in files.items():
            (self.path / name).parent.mkdir(parents=True, exist_ok=True)
            (self.path / name).write_text(text)
        for name in remove:
            git(self.path, "rm", "-rq", name)
        git(self.path, "add", "-A")
        git(self.path, "commit", "-q", "--allow-empty", "-m", message)
        return git(self.path, "rev-parse", "HEAD").strip()

    def push(self, *refspecs: str) -> None:
        git(self.path, "push", "-q", "origin", *refspecs)


@pytest.fixture
def bare(tmp_path: Path) -> Path:
    path = tmp_path / "repo.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(path))
    return path


@pytest.fixture
def repo(bare: Path) -> Iterator[GitPackageRepository]:
    with GitPackageRepository(bare, create_branch=True) as handle:
        yield handle


@pytest.fixture
def porch_written(bare: Path, tmp_path: Path) -> Path:
    """A repository laid out by Porch: main with two packages, tags, drafts, a deletion proposal."""
    work = Workdir(bare, tmp_path / "work")
    work.commit({"README.md": "hello\n"}, "Initial commit")
    work.push("HEAD:main")
    trailer = messages.trailer("catalog/basens", "first", "1")
    v1 = work.commit({"catalog/basens/Kptfile": kptfile("basens"), "catalog/basens/ns.yaml": "kind: Namespace\n"},
                     f"Approving package revision catalog/basens/1\n\n{trailer}")
    git(work.path, "tag", "catalog/basens/v1", v1)
    v2 = work.commit({"catalog/basens/ns.yaml": "kind: Namespace # 2\n"}, "edited by hand, no trailer")
    git(work.path, "tag", "catalog/basens/v2", v2)
    git(work.path, "tag", "catalog/basens/v2.0.0", v2)   # a Nephio catalog tag
    git(work.path, "tag", "release-1", v2)               # no "/": not a package revision
    git(work.path, "tag", "catalog/nothing/v1", v2)      # no Kptfile there: skipped
    work.commit({"catalog/other/Kptfile": kptfile("other"), "catalog/other/sub/Kptfile": kptfile("sub")},
                "a package with a nested package")
    work.push("HEAD:main", "--tags")
    git(work.path, "checkout", "-q", "-b", "drafts/catalog/basens/third")
    work.commit({"catalog/basens/ns.yaml": "kind: Namespace # 3\n"}, "a draft")
    work.push("drafts/catalog/basens/third")
    git(work.path, "checkout", "-q", "-b", "proposed/catalog/other/next", "main")
    work.push("proposed/catalog/other/next")
    work.push(f"{v1}:refs/heads/deletionProposed/catalog/basens/v1")
    return bare


def summary(revisions: list[Revision]) -> set[tuple[str, str, int, str, str]]:
    return {(r.package, r.workspace, r.revision, r.lifecycle.value, r.ref) for r in revisions}


# Opening --------------------------------------------------------------------------------------


def test_create_branch_writes_porchs_initial_commit(bare: Path) -> None:
    with GitPackageRepository(bare, create_branch=True):
        pass
    raw = raw_commit(bare, "main")
    head, message = raw.split(b"\n\n", 1)
    assert message == b"Initial commit: Creating main branch"       # no newline, as go-git stores it
    assert header(bare, "main", "parent") == []
    assert header(bare, "main", "author")[0].startswith(PORCH + " ")
    assert header(bare, "main", "committer")[0].startswith(PORCH + " ")
    assert git(bare, "show", "main:README.md") == "Created by porch"
    assert list(tree_files(bare, "main")) == ["README.md"]


def test_create_branch_uses_porchs_signature_even_with_a_configured_author(bare: Path) -> None:
    with GitPackageRepository(bare, create_branch=True, author="Jane", email="jane@example.com"):
        pass
    assert header(bare, "main", "author")[0].startswith(PORCH + " ")


def test_a_missing_branch_is_not_found_unless_it_may_be_created(bare: Path) -> None:
    with pytest.raises(GitNotFound, match="branch 'main' does not exist"):
        GitPackageRepository(bare)
    assert refs_of_or_empty(bare) == {}


def refs_of_or_empty(bare: Path) -> dict[str, str]:
    run = subprocess.run(["git", "-C", str(bare), "show-ref"], capture_output=True, text=True)
    return {} if run.returncode else {n: s for s, n in (line.split() for line in run.stdout.splitlines())}


def test_a_directory_that_is_not_a_repository_is_not_found_even_inside_one(tmp_path: Path) -> None:
    outer = tmp_path / "outer"
    git(tmp_path, "init", "-q", str(outer))
    (outer / "plain").mkdir()
    with pytest.raises(GitNotFound, match="not a git repository"):
        GitPackageRepository(outer / "plain", create_branch=True)
    with pytest.raises(GitNotFound, match="no such directory"):
        GitPackageRepository(tmp_path / "missing")


def test_remote_urls_are_refused(tmp_path: Path) -> None:
    with pytest.raises(GitInvalidRequest, match="only local repositories"):
        GitPackageRepository("https://github.com/example/repo.git")


def test_a_file_url_opens_the_repository(porch_written: Path) -> None:
    with GitPackageRepository(f"file://{porch_written}") as handle:
        assert handle.list_packages() == ["catalog/basens", "catalog/other"]


# Reading a repository Porch wrote ---------------------------------------------------------------


def test_every_ref_kind_is_read_as_porch_reads_it(porch_written: Path) -> None:
    with GitPackageRepository(porch_written) as handle:
        revisions = handle.list_revisions()
    assert summary(revisions) == {
        # workspace from the tagged commit's trailer
        ("catalog/basens", "first", 1, "DeletionProposed", "refs/tags/catalog/basens/v1"),
        # no trailer on the tagged commit: workspace v<N>
        ("catalog/basens", "v2", 2, "Published", "refs/tags/catalog/basens/v2"),
        # not v<int>: revision -1, workspace = the tag's last part
        ("catalog/basens", "v2.0.0", -1, "Published", "refs/tags/catalog/basens/v2.0.0"),
        ("catalog/basens", "third", 0, "Draft", "refs/heads/drafts/catalog/basens/third"),
        ("catalog/basens", "main", -1, "Published", "refs/heads/main"),
        ("catalog/other", "next", 0, "Proposed", "refs/heads/proposed/catalog/other/next"),
        ("catalog/other", "main", -1, "Published", "refs/heads/main"),
        # catalog/other/sub is inside a package: no placeholder; release-1 and catalog/nothing skipped
    }


def test_a_revision_carries_its_commit_tree_and_author(porch_written: Path) -> None:
    with GitPackageRepository(porch_written) as handle:
        v1 = handle.get_revision("catalog/basens", "first")
    commit = git(porch_written, "rev-parse", "catalog/basens/v1").strip()
    assert (v1.commit, v1.ref_target, v1.version) == (commit, commit, "v1")
    assert v1.tree == git(porch_written, "rev-parse", f"{commit}:catalog/basens").strip()
    assert v1.author_email == "someone@example.com"
    assert v1.name == "catalog/basens" and not v1.is_placeholder


def test_listing_one_package_gives_the_same_revisions_as_filtering_all(porch_written: Path) -> None:
    with GitPackageRepository(porch_written) as handle:
        every = handle.list_revisions()
        for package in ("catalog/basens", "catalog/other", "catalog/other/sub", "catalog"):
            assert handle.list_revisions(package) == [r for r in every if r.package == package]


def test_a_drafts_branch_for_a_nested_package_is_still_a_draft(porch_written: Path, tmp_path: Path) -> None:
    work = Workdir(porch_written, tmp_path / "w2")
    work.push("main:refs/heads/drafts/catalog/other/sub/ws")
    with GitPackageRepository(porch_written) as handle:
        assert [r.workspace for r in handle.list_revisions("catalog/other/sub")] == ["ws"]


def test_an_annotated_tag_is_read_through_to_its_commit(porch_written: Path) -> None:
    git(porch_written, "tag", "-a", "-m", "annotated", "catalog/basens/v3", "main")
    with GitPackageRepository(porch_written) as handle:
        v3 = handle.get_revision("catalog/basens", "v3")
        assert v3.commit == git(porch_written, "rev-parse", "main").strip()
        assert v3.ref_target == git(porch_written, "rev-parse", "refs/tags/catalog/basens/v3").strip() != v3.commit
        handle.delete(v3)
    assert "refs/tags/catalog/basens/v3" not in refs_of(porch_written)


def test_a_directory_scoped_repository_sees_only_its_directory(porch_written: Path, tmp_path: Path) -> None:
    work = Workdir(porch_written, tmp_path / "w2")
    work.commit({"elsewhere/pkg/Kptfile": kptfile("pkg")}, "outside the directory")
    work.push("HEAD:main")
    with GitPackageRepository(porch_written, directory="/catalog/") as scoped:
        assert scoped.directory == "catalog"
        assert scoped.list_packages() == ["catalog/basens", "catalog/other"]
        assert {r.name for r in scoped.list_revisions()} == {"basens", "other"}
        with pytest.raises(GitInvalidRequest, match="not under the repository's directory"):
            scoped.create_draft("elsewhere/new", "ws", {"Kptfile": kptfile("new")})
        draft = scoped.create_draft("catalog/new", "ws", {"Kptfile": kptfile("new")})
        assert (draft.name, draft.ref) == ("new", "refs/heads/drafts/catalog/new/ws")
    with GitPackageRepository(porch_written) as whole:
        assert "elsewhere/pkg" in whole.list_packages()


def test_read_resources_gives_text_files_and_leaves_binary_ones_out(repo: GitPackageRepository) -> None:
    files = {"Kptfile": kptfile("p"), "deep/dir/cm.yaml": "a: 1\n", "icon.png": b"\x89PNG\r\n\x1a\n\xff"}
    draft = repo.create_draft("p", "ws", files)
    assert repo.read_resources(draft) == {"Kptfile": kptfile("p"), "deep/dir/cm.yaml": "a: 1\n"}
    assert repo.read_files(draft) == {"Kptfile": kptfile("p").encode(), "deep/dir/cm.yaml": b"a: 1\n",
                                      "icon.png": b"\x89PNG\r\n\x1a\n\xff"}


# Writing -------------------------------------------------------------------------------------


def test_a_draft_is_one_commit_on_the_branch_tip_with_porchs_message(repo: GitPackageRepository, bare: Path) -> None:
    tip = git(bare, "rev-parse", "main").strip()
    task = {"clone": {"upstreamRef": {"upstreamRef": {"name": "up<&>"}}}, "type": "clone"}
    draft = repo.create_draft("pkgs/p", "ws1", {"Kptfile": kptfile("p")}, task=task)
    assert refs_of(bare)["refs/heads/drafts/pkgs/p/ws1"] == draft.commit
    assert header(bare, draft.commit, "parent") == [tip]
    assert message_of(bare, draft.commit) == (
        b"Creating new revision by cloning\n\n\n"
        b'kpt:{"package":"pkgs/p","workspaceName":"ws1","revision":"0",'
        b'"task":{"type":"clone","clone":{"upstreamRef":{"upstreamRef":{"name":"up\\u003c\\u0026\\u003e"}}}}}\n'
    )
    assert (draft.revision, draft.lifecycle, draft.workspace) == (0, Lifecycle.DRAFT, "ws1")


@pytest.mark.parametrize(("task", "title"), [
    ({"type": "init"}, "Creating new empty revision"),
    ({"type": "clone"}, "Creating new revision by cloning"),
    ({"type": "edit"}, "Creating new revision by copying previous revision"),
    ({"type": "upgrade"}, "Upgrading revision"),
    ({"type": "render"}, "Rendering package"),
    ({"type": ""}, "Intermediate commit"),
    (None, "Intermediate commit"),
    ({"type": "eval"}, "Intermediate commit: eval"),
])
def test_each_task_type_gets_porchs_title(repo: GitPackageRepository, bare: Path, task: dict | None,
                                          title: str) -> None:
    draft = repo.create_draft("p", "ws", {"Kptfile": kptfile("p")})
    written = repo.write_resources(draft, {"Kptfile": kptfile("p")}, task=task)
    lines = message_of(bare, written.commit).decode().split("\n")
    assert lines[:3] == [title, "", ""]
    note = json.loads(lines[3][4:])
    assert note == {"package": "p", "workspaceName": "ws", "revision": "0", **({"task": task} if task else {})}


def test_commits_are_authored_by_the_repositorys_author_and_committed_by_porch(bare: Path) -> None:
    with GitPackageRepository(bare, create_branch=True, author="Jane Doe", email="jane@example.com") as handle:
        draft = handle.create_draft("p", "ws", {"Kptfile": kptfile("p")})
        assert draft.author_email == "jane@example.com"
    assert header(bare, draft.commit, "author")[0].startswith("Jane Doe <jane@example.com> ")
    assert header(bare, draft.commit, "committer")[0].startswith(PORCH + " ")
    with GitPackageRepository(bare, email="only@example.com") as handle:
        other = handle.create_draft("q", "ws", {"Kptfile": kptfile("q")})
    assert header(bare, other.commit, "author")[0].startswith("only@example.com <only@example.com> ")


def test_a_write_replaces_the_package_and_leaves_the_rest_of_the_tree(porch_written: Path) -> None:
    with GitPackageRepository(porch_written) as handle:
        draft = handle.get_revision("catalog/basens", "third")
        before = tree_files(porch_written, draft.commit)
        written = handle.write_resources(draft, {"Kptfile": kptfile("basens"), "new/cm.yaml": "b: 2\n"})
    after = tree_files(porch_written, written.commit)
    assert {p: s for p, s in after.items() if not p.startswith("catalog/basens/")} == \
           {p: s for p, s in before.items() if not p.startswith("catalog/basens/")}
    assert sorted(p for p in after if p.startswith("catalog/basens/")) == \
           ["catalog/basens/Kptfile", "catalog/basens/new/cm.yaml"]   # ns.yaml is gone
    assert header(porch_written, written.commit, "parent") == [draft.commit]
    assert refs_of(porch_written)["refs/heads/drafts/catalog/basens/third"] == written.commit


def test_a_write_keeps_binary_files_and_the_executable_bit_unless_told_otherwise(
        repo: GitPackageRepository, bare: Path) -> None:
    draft = repo.create_draft("p", "ws", {"Kptfile": kptfile("p"), "run.sh": "echo hi\n", "logo.bin": b"\xff\xfe",
                                          "gone.yaml": "x: 1\n"})
    git(bare, "update-ref", "refs/heads/drafts/p/ws", _with_exec_bit(bare, draft.commit, "p/run.sh"), draft.commit)
    draft = repo.get_revision("p", "ws")
    text = {path: body for path, body in repo.read_resources(draft).items() if path != "gone.yaml"}
    written = repo.write_resources(draft, text | {"run.sh": "echo bye\n"})
    listing = git(bare, "ls-tree", "-r", written.commit, "p").splitlines()
    modes = {line.split("\t")[1]: line.split()[0] for line in listing}
    assert modes == {"p/Kptfile": "100644", "p/logo.bin": "100644", "p/run.sh": "100755"}
    assert repo.read_files(written)["logo.bin"] == b"\xff\xfe"
    dropped = repo.write_resources(written, repo.read_resources(written), keep_binary=False)
    assert sorted(repo.read_files(dropped)) == ["Kptfile", "run.sh"]


def _with_exec_bit(bare: Path, commit: str, path: str) -> str:
    """A commit like `commit` with `path` made executable (as a user's own push would)."""
    index = bare.parent / "exec.index"
    env = {**ENV, "GIT_INDEX_FILE": str(index)}
    subprocess.run(["git", "-C", str(bare), "read-tree", commit], env=env, check=True)
    blob = git(bare, "rev-parse", f"{commit}:{path}").strip()
    subprocess.run(["git", "-C", str(bare), "update-index", "--cacheinfo", f"100755,{blob},{path}"],
                   env=env, check=True)
    tree = subprocess.run(["git", "-C", str(bare), "write-tree"], env=env, check=True, capture_output=True,
                          text=True).stdout.strip()
    return git(bare, "commit-tree", tree, "-p", commit, "-m", "chmod +x").strip()


def test_a_package_without_a_kptfile_is_refused(repo: GitPackageRepository, bare: Path) -> None:
    before = refs_of(bare)
    with pytest.raises(GitInvalidRequest, match="Kptfile"):
        repo.create_draft("p", "ws", {"cm.yaml": "a: 1\n"})
    draft = repo.create_draft("p", "ws", {"Kptfile": kptfile("p")})
    with pytest.raises(GitInvalidRequest, match="Kptfile"):
        repo.write_resources(draft, {"cm.yaml": "a: 1\n"})
    assert refs_of(bare) == before | {"refs/heads/drafts/p/ws": draft.commit}


@pytest.mark.parametrize(("package", "workspace", "path"), [
    ("a/../b", "ws", "Kptfile"), ("p", "w s", "Kptfile"), ("p", "a/b", "Kptfile"), ("p.lock", "ws", "Kptfile"),
    ("p", "ws", "../escape"), ("p", "ws", ".git/config"), ("p", "ws", "/abs"),
])
def test_names_git_cannot_hold_are_refused(repo: GitPackageRepository, package: str, workspace: str,
                                           path: str) -> None:
    with pytest.raises(GitInvalidRequest):
        repo.create_draft(package, workspace, {"Kptfile": kptfile("p"), path: "x"})


def test_a_second_draft_of_the_same_workspace_conflicts(repo: GitPackageRepository) -> None:
    draft = repo.create_draft("p", "ws", {"Kptfile": kptfile("p")})
    with pytest.raises(GitConflict):
        repo.create_draft("p", "ws", {"Kptfile": kptfile("p")})
    repo.propose(draft)
    with pytest.raises(GitConflict):
        repo.create_draft("p", "ws", {"Kptfile": kptfile("p")})


def test_a_write_from_a_stale_revision_conflicts_and_changes_nothing(repo: GitPackageRepository, bare: Path) -> None:
    draft = repo.create_draft("p", "ws", {"Kptfile": kptfile("p")})
    newer = repo.write_resources(draft, {"Kptfile": kptfile("p"), "a.yaml": "a: 1\n"})
    before = refs_of(bare)
    with pytest.raises(GitConflict):
        repo.write_resources(draft, {"Kptfile": kptfile("p"), "b.yaml": "b: 1\n"})
    assert refs_of(bare) == before
    assert repo.read_resources(repo.get_revision("p", "ws")) == repo.read_resources(newer)


# Lifecycle -----------------------------------------------------------------------------------


def test_propose_and_reject_move_the_branch_between_drafts_and_proposed(repo: GitPackageRepository,
                                                                         bare: Path) -> None:
    draft = repo.create_draft("a/p", "ws", {"Kptfile": kptfile("p")})
    proposed = repo.propose(draft)
    assert proposed.lifecycle == Lifecycle.PROPOSED and proposed.commit == draft.commit
    names = refs_of(bare)
    assert names["refs/heads/proposed/a/p/ws"] == draft.commit and "refs/heads/drafts/a/p/ws" not in names
    assert repo.get_revision("a/p", "ws") == proposed
    back = repo.reject(proposed)
    names = refs_of(bare)
    assert names["refs/heads/drafts/a/p/ws"] == draft.commit and "refs/heads/proposed/a/p/ws" not in names
    assert repo.get_revision("a/p", "ws") == back
    with pytest.raises(GitInvalidRequest, match="cannot reject"):
        repo.reject(back)


def test_approval_commits_to_the_branch_and_tags_it(repo: GitPackageRepository, bare: Path, tmp_path: Path) -> None:
    work = Workdir(bare, tmp_path / "work")
    work.commit({"other/file.txt": "keep me\n", "p/stale.yaml": "old: 1\n", "p/Kptfile": kptfile("p")}, "by hand")
    work.push("HEAD:main")
    tip = git(bare, "rev-parse", "main").strip()
    draft = repo.create_draft("p", "ws", {"Kptfile": kptfile("p"), "cm.yaml": "a: 1\n"})
    published = repo.approve(repo.propose(draft))
    commit = published.commit
    assert message_of(bare, commit) == (b"Approving package revision p/1\n\n"
                                        b'kpt:{"package":"p","workspaceName":"ws","revision":"1"}\n')
    assert header(bare, commit, "parent") == [tip, draft.commit]
    assert header(bare, commit, "committer")[0].startswith(PORCH + " ")
    assert tree_files(bare, commit) == {**{k: v for k, v in tree_files(bare, tip).items() if not k.startswith("p/")},
                                        **tree_files(bare, draft.commit, "p")}
    names = refs_of(bare)
    assert names["refs/heads/main"] == names["refs/tags/p/v1"] == commit
    assert git(bare, "cat-file", "-t", "refs/tags/p/v1").strip() == "commit"   # lightweight
    assert not any(name.startswith(("refs/heads/drafts/", "refs/heads/proposed/")) for name in names)
    assert (published.revision, published.workspace, published.lifecycle) == (1, "ws", Lifecycle.PUBLISHED)
    assert repo.get_revision("p", "ws") == published
    assert repo.get_revision("p", "main").tree == published.tree     # the placeholder shows it too


def test_approval_numbers_follow_the_highest_published_revision(repo: GitPackageRepository, bare: Path) -> None:
    first = repo.approve(repo.create_draft("p", "a", {"Kptfile": kptfile("p")}))
    second = repo.approve(repo.create_draft("p", "b", {"Kptfile": kptfile("p")}))
    assert (first.revision, second.revision) == (1, 2)
    git(bare, "tag", "p/v7", first.commit)          # published elsewhere (by Porch, say)
    git(bare, "tag", "p/v9.1.0", first.commit)      # not a number: does not count
    git(bare, "tag", "p/sub/v20", first.commit)     # another package's tag
    third = repo.approve(repo.create_draft("p", "c", {"Kptfile": kptfile("p")}))
    assert third.revision == 8 and third.ref == "refs/tags/p/v8"
    other = repo.approve(repo.create_draft("q", "a", {"Kptfile": kptfile("q")}))
    assert other.revision == 1


def test_published_revisions_read_back_their_workspace_after_a_restart(bare: Path) -> None:
    with GitPackageRepository(bare, create_branch=True) as handle:
        handle.approve(handle.create_draft("p", "my-ws", {"Kptfile": kptfile("p")}))
    with GitPackageRepository(bare) as handle:
        assert summary(handle.list_revisions()) == {("p", "my-ws", 1, "Published", "refs/tags/p/v1"),
                                                   ("p", "main", -1, "Published", "refs/heads/main")}


def test_a_revision_shows_the_first_task_of_its_history_up_to_the_first_clone(bare: Path) -> None:
    # Porch's loadTasks since v1.5.3: the chain of tasks is walked as before, and only its first
    # task is kept (a render after an init is dropped).
    init, render = {"type": "init", "init": {"description": "d"}}, {"type": "render"}
    clone = {"type": "clone", "clone": {"upstreamRef": {"upstreamRef": {"name": "up"}}}}
    with GitPackageRepository(bare, create_branch=True) as handle:
        draft = handle.create_draft("p", "ws", {"Kptfile": kptfile("p")}, task=init)
        draft = handle.write_resources(draft, {"Kptfile": kptfile("p")}, task=render)
        draft = handle.write_resources(draft, {"Kptfile": kptfile("p")})         # no task: nothing recorded
        published = handle.approve(draft)
        edit = {"type": "edit", "edit": {"sourceRef": {"name": "repo-p-ws"}}}
        second = handle.create_draft("p", "second", {"Kptfile": kptfile("p")}, task=edit)
        assert handle.tasks(draft) == [init]
        assert handle.tasks(published) == [init]   # through the approval's second parent
        assert handle.tasks(second) == [edit]
        # The workspace reused after deleting v1: the walk stops at the new clone, and the old
        # init/render (still reachable through B's history) are not picked up.
        handle.delete(published)
        again = handle.create_draft("p", "ws", {"Kptfile": kptfile("p")}, task=clone)
        assert handle.tasks(again) == [clone]
    with GitPackageRepository(bare) as restarted:
        assert restarted.tasks(restarted.get_revision("p", "second")) == [edit]


def test_a_handle_that_did_not_write_a_history_reads_the_same_tasks_as_git_log(bare: Path) -> None:
    init, render = {"type": "init", "init": {"description": "d"}}, {"type": "render"}
    edit = {"type": "edit", "edit": {"sourceRef": {"name": "repo-p-v1"}}}
    with GitPackageRepository(bare, create_branch=True) as writer:
        draft = writer.create_draft("p", "ws", {"Kptfile": kptfile("p")}, task=init)
        draft = writer.write_resources(draft, {"Kptfile": kptfile("p"), "a.txt": "a\n"}, task=render)
        draft = writer.write_resources(draft, {"Kptfile": kptfile("p"), "b.txt": "b\n"})
        published = writer.approve(writer.write_resources(
            writer.create_draft("p", "pub", {"Kptfile": kptfile("p")}, task=init), {"Kptfile": kptfile("p")},
            task=render))
        second = writer.write_resources(writer.create_draft("p", "next", {"Kptfile": kptfile("p")}, task=edit),
                                        {"Kptfile": kptfile("p"), "c.txt": "c\n"})
    for revision, chain in ((draft, [init, render]), (published, [init, render]), (second, [edit])):
        log = [m.lstrip("\n") for m in git(bare, "log", "--no-color", "--format=%B%x00", revision.commit).split("\0")]
        assert messages.task_chain(log, "p", revision.workspace) == chain
        expected = chain[:1]
        assert messages.tasks_from_history(log, "p", revision.workspace) == expected
        with GitPackageRepository(bare) as reader:  # nothing remembered: reads the history itself
            assert reader.tasks(revision) == expected


def test_the_placeholder_is_published_by_the_newest_commit_whose_trailer_names_its_package(
        porch_written: Path, tmp_path: Path) -> None:
    # Porch's buildGitPackageRevision / findLatestPackageCommit (its git test TestAuthor).
    def author(rev: str) -> tuple[str, int]:
        email, when = git(porch_written, "log", "-1", "--format=%ae %at", rev).split()
        return email, int(when)

    with GitPackageRepository(porch_written) as handle:
        placeholder = handle.get_revision("catalog/basens", "main")
        assert handle.publication(placeholder) == author("catalog/basens/v1")  # v2 has no trailer
        assert handle.publication(handle.get_revision("catalog/basens", "v2")) == author("catalog/basens/v2")
        assert handle.publication(handle.get_revision("catalog/other", "main")) is None  # no trailer names it
        assert handle.publication(handle.get_revision("catalog/basens", "third")) is None  # a draft
        before = placeholder.commit

        work = Workdir(porch_written, tmp_path / "more")
        (work.path / "catalog/basens/ns.yaml").write_text("kind: Namespace # 4\n")
        trailer = messages.trailer("catalog/basens", "fourth", "4")
        git(work.path, "commit", "-qam", f"Approving package revision catalog/basens/4\n\n{trailer}",
            "--author", "Other <other@example.com>")
        work.push("HEAD:main")
        moved = handle.get_revision("catalog/basens", "main")
        assert handle.publication(moved) == author("main") and author("main")[0] == "other@example.com"

        git(porch_written, "update-ref", "refs/heads/main", before)  # moved back: not a descendant
        assert handle.publication(handle.get_revision("catalog/basens", "main")) == author("catalog/basens/v1")


def test_deletion_is_proposed_with_a_branch_and_a_published_revision_deleted_by_its_tag(
        repo: GitPackageRepository, bare: Path) -> None:
    published = repo.approve(repo.create_draft("p", "ws", {"Kptfile": kptfile("p")}))
    proposed = repo.propose_deletion(published)
    assert refs_of(bare)["refs/heads/deletionProposed/p/v1"] == published.commit
    assert repo.get_revision("p", "ws") == proposed
    assert proposed.lifecycle == Lifecycle.DELETION_PROPOSED
    assert repo.reject_deletion(proposed) == published
    assert "refs/heads/deletionProposed/p/v1" not in refs_of(bare)
    repo.propose_deletion(published)
    main_before = refs_of(bare)["refs/heads/main"]
    repo.delete(repo.get_revision("p", "ws"))
    names = refs_of(bare)
    assert "refs/tags/p/v1" not in names and "refs/heads/deletionProposed/p/v1" not in names
    assert names["refs/heads/main"] == main_before                        # content on B untouched
    assert summary(repo.list_revisions()) == {("p", "main", -1, "Published", "refs/heads/main")}


def test_deleting_a_draft_or_proposed_revision_deletes_its_branch(repo: GitPackageRepository, bare: Path) -> None:
    repo.delete(repo.create_draft("p", "a", {"Kptfile": kptfile("p")}))
    repo.delete(repo.propose(repo.create_draft("p", "b", {"Kptfile": kptfile("p")})))
    assert [name for name in refs_of(bare) if name != "refs/heads/main"] == []


def test_deleting_the_placeholder_commits_the_package_away(repo: GitPackageRepository, bare: Path) -> None:
    repo.approve(repo.create_draft("deep/dir/p", "ws", {"Kptfile": kptfile("p")}))
    repo.approve(repo.create_draft("deep/q", "ws", {"Kptfile": kptfile("q")}))
    tip = git(bare, "rev-parse", "main").strip()
    placeholder = repo.get_revision("deep/dir/p", "main")
    assert placeholder.is_placeholder
    repo.delete(placeholder)
    commit = git(bare, "rev-parse", "main").strip()
    assert message_of(bare, commit) == b"Delete deep/dir/p"
    assert header(bare, commit, "parent") == [tip]
    assert sorted(tree_files(bare, commit)) == ["README.md", "deep/q/Kptfile"]   # deep/dir pruned
    assert refs_of(bare)["refs/tags/deep/dir/p/v1"]                             # the published one stays
    assert {r.workspace for r in repo.list_revisions("deep/dir/p")} == {"ws"}


# Metadata ------------------------------------------------------------------------------------


def test_metadata_survives_a_restart_and_follows_the_revision_to_published(bare: Path) -> None:
    meta = {"labels": {"app": "x"}, "annotations": {"a": "b"}, "finalizers": ["f"],
            "ownerReferences": [{"apiVersion": "config.porch.kpt.dev/v1alpha1", "kind": "PackageVariant",
                                 "name": "pv", "uid": "1234", "controller": True}]}
    with GitPackageRepository(bare, create_branch=True) as handle:
        draft = handle.create_draft("a/p", "ws", {"Kptfile": kptfile("p")})
        handle.write_metadata(draft, meta)
        assert handle.read_metadata(draft) == meta
    with GitPackageRepository(bare) as restarted:
        draft = restarted.get_revision("a/p", "ws")
        assert restarted.read_metadata(draft) == meta
        published = restarted.approve(restarted.propose(draft))
        assert restarted.read_metadata(published) == meta
        # (a, p) would collide with (a/p, ws) as refs/.../a/p and refs/.../a/p/ws without escaping
        other = restarted.create_draft("a", "p", {"Kptfile": kptfile("a")})
        restarted.write_metadata(other, {"labels": {"who": "other"}})
        assert restarted.read_metadata(other) == {"labels": {"who": "other"}}
        assert restarted.read_metadata(published) == meta
        restarted.write_metadata(published, {"labels": {"app": "y"}})
        assert restarted.read_metadata(published) == {"labels": {"app": "y"}}
        restarted.delete(published)
        assert restarted.read_metadata(published) == {}
    names = refs_of(bare)
    assert [n for n in names if n.startswith("refs/porchkit/")] == ["refs/porchkit/metadata/a/p"]
    assert git(bare, "log", "--all", "--oneline").count("\n") >= 3      # git log --all is undisturbed


def test_a_live_handle_reads_metadata_another_handle_wrote(repo: GitPackageRepository, bare: Path) -> None:
    draft = repo.create_draft("p", "ws", {"Kptfile": kptfile("p")})
    assert repo.read_metadata(draft) == {}                       # the reader's cat-file is now running
    with GitPackageRepository(bare) as other:
        other.write_metadata(draft, {"labels": {"v": "1"}})
        assert repo.read_metadata(draft) == {"labels": {"v": "1"}}
        git(bare, "pack-refs", "--all")
        other.write_metadata(draft, {"labels": {"v": "2"}})
        git(bare, "pack-refs", "--all")
        assert repo.read_metadata(draft) == {"labels": {"v": "2"}}


def test_only_the_kept_metadata_fields_are_accepted(repo: GitPackageRepository) -> None:
    draft = repo.create_draft("p", "ws", {"Kptfile": kptfile("p")})
    with pytest.raises(GitInvalidRequest, match="spec"):
        repo.write_metadata(draft, {"spec": {}})
    repo.write_metadata(draft, {"labels": {"a": "b"}})
    repo.write_metadata(draft, {"labels": {}})
    assert repo.read_metadata(draft) == {}


# Pure parts --------------------------------------------------------------------------------


def test_trailer_json_is_escaped_as_go_escapes_it() -> None:
    assert messages.go_json({"a": "<\u2028>&\u00e9\n"}) == '{"a":"\\u003c\\u2028\\u003e\\u0026\u00e9\\n"}'
    assert messages.trailer("p", "", "0", {"edit": {}, "type": "edit", "zzz": 1}) == \
        'kpt:{"package":"p","revision":"0","task":{"type":"edit","edit":{},"zzz":1}}'


def test_trailers_written_before_workspaces_match_by_revision() -> None:
    legacy = 'Intermediate commit\n\nkpt:{"package":"p","revision":"v1","task":{"type":"init"}}\n'
    broken = "kpt:{not json\nkpt:[1]\n"
    other = 'x\n\nkpt:{"package":"q","workspaceName":"v1","task":{"type":"render"}}\n'
    assert messages.tasks_from_history([broken, other, legacy], "p", "v1") == [{"type": "init"}]


def test_a_sha256_repository_works_the_same(tmp_path: Path) -> None:
    bare = tmp_path / "sha256.git"
    git(tmp_path, "init", "-q", "--bare", "--object-format=sha256", "-b", "main", str(bare))
    with GitPackageRepository(bare, create_branch=True) as handle:
        published = handle.approve(handle.create_draft("p", "ws", {"Kptfile": kptfile("p"), "a/b.yaml": "x: 1\n"}))
        handle.write_metadata(published, {"labels": {"a": "b"}})
        assert len(published.commit) == 64
        assert handle.read_resources(handle.get_revision("p", "ws")) == {"Kptfile": kptfile("p"), "a/b.yaml": "x: 1\n"}
        assert handle.read_metadata(published) == {"labels": {"a": "b"}}
    assert subprocess.run(["git", "-C", str(bare), "fsck", "--strict"], capture_output=True).returncode == 0


# Interoperability ----------------------------------------------------------------------------


@pytest.mark.kpt
def test_kpt_pkg_get_reads_a_revision_porchkit_published(repo: GitPackageRepository, bare: Path,
                                                          tmp_path: Path) -> None:
    kpt = kpt_binary()
    files = {"Kptfile": kptfile("basens"), "ns.yaml": "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: x\n"}
    published = repo.approve(repo.create_draft("catalog/basens", "ws", files))
    repo.write_metadata(published, {"labels": {"a": "b"}})
    run = subprocess.run([kpt, "pkg", "get", f"file://{bare}/catalog/basens@catalog/basens/v1",
                          str(tmp_path / "got")], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert sorted(p.name for p in (tmp_path / "got").iterdir()) == ["Kptfile", "ns.yaml"]
    assert "kind: Namespace" in (tmp_path / "got" / "ns.yaml").read_text()   # kpt adds its merge comments
    assert f"commit: {published.commit}" in (tmp_path / "got" / "Kptfile").read_text()


def test_git_fsck_finds_nothing_wrong_after_a_full_lifecycle(repo: GitPackageRepository, bare: Path) -> None:
    draft = repo.create_draft("p", "ws", {"Kptfile": kptfile("p"), "a/b/c.yaml": "x: 1\n"}, task={"type": "init"})
    published = repo.approve(repo.propose(repo.write_resources(draft, {"Kptfile": kptfile("p")})))
    repo.write_metadata(published, {"labels": {"a": "b"}})
    repo.delete(repo.get_revision("p", "main"))
    run = subprocess.run(["git", "-C", str(bare), "fsck", "--strict", "--no-dangling"], capture_output=True,
                         text=True)
    assert run.returncode == 0 and "error" not in run.stderr, run.stderr


def test_a_non_bare_repository_keeps_its_checked_out_branch_unless_configured(tmp_path: Path) -> None:
    work = tmp_path / "work"
    git(tmp_path, "init", "-q", "-b", "main", str(work))
    (work / "p").mkdir()
    (work / "p" / "Kptfile").write_text(kptfile("p"))
    git(work, "add", "-A")
    git(work, "commit", "-qm", "a package")
    with GitPackageRepository(f"file://{work}") as handle:
        assert not handle.bare
        assert summary(handle.list_revisions()) == {("p", "main", -1, "Published", "refs/heads/main")}
        draft = handle.create_draft("p", "ws", {"Kptfile": kptfile("p"), "cm.yaml": "a: 1\n"})
        with pytest.raises(GitInvalidRequest, match="checked out"):
            handle.approve(draft)
        git(work, "config", "receive.denyCurrentBranch", "ignore")
        handle.approve(draft)
    assert sorted(p.name for p in (work / "p").iterdir()) == ["Kptfile"]   # the working tree is untouched
    assert git(work, "show", "main:p/cm.yaml") == "a: 1\n"


# Crash safety, locking, processes ---------------------------------------------------------------


CRASH_SCRIPT = textwrap.dedent("""
    import os, sys
    from porchvariant.embedded.git.repository import GitPackageRepository
    GitPackageRepository._move_refs = lambda self, lines, **_: os._exit(17)   # killed before any ref moves
    with GitPackageRepository(sys.argv[1]) as repo:
        if sys.argv[2] == "create":
            repo.create_draft("p", "new", {"Kptfile": "kind: Kptfile\\n", "big.yaml": "x: 1\\n" * 1000})
        else:
            repo.approve(repo.get_revision("p", "ws"))
""")


@pytest.mark.parametrize("operation", ["create", "approve"])
def test_a_process_killed_between_objects_and_refs_leaves_nothing_visible(bare: Path, operation: str) -> None:
    with GitPackageRepository(bare, create_branch=True) as handle:
        handle.create_draft("p", "ws", {"Kptfile": kptfile("p")})
        before_revisions = handle.list_revisions()
    before_refs, before_objects = refs_of(bare), git(bare, "count-objects")
    run = subprocess.run([sys.executable, "-c", CRASH_SCRIPT, str(bare), operation], capture_output=True,
                         text=True, cwd=Path(__file__).resolve().parents[3])
    assert run.returncode == 17, run.stderr
    assert git(bare, "count-objects") != before_objects          # objects were written ...
    assert refs_of(bare) == before_refs                          # ... but no ref moved
    with GitPackageRepository(bare) as handle:
        assert handle.list_revisions() == before_revisions
    assert subprocess.run(["git", "-C", str(bare), "fsck", "--strict"], capture_output=True).returncode == 0


def test_a_failure_before_the_refs_move_releases_the_lock(repo: GitPackageRepository, bare: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    draft = repo.create_draft("p", "ws", {"Kptfile": kptfile("p")})

    def boom(self: GitPackageRepository, lines: list[str]) -> None:
        raise OSError("disk full")

    with monkeypatch.context() as patch:
        patch.setattr(GitPackageRepository, "_move_refs", boom)
        with pytest.raises(OSError, match="disk full"):
            repo.approve(draft)
    assert repo.get_revision("p", "ws") == draft
    with GitPackageRepository(bare) as other:                   # another handle is not locked out
        assert other.approve(draft).revision == 1


def test_two_handles_in_one_process_approve_concurrently_without_losing_a_revision(bare: Path) -> None:
    first = GitPackageRepository(bare, create_branch=True)
    second = GitPackageRepository(bare)
    drafts = [first.create_draft("p", f"ws{i}", {"Kptfile": kptfile("p"), "n.yaml": f"n: {i}\n"}) for i in range(8)]
    errors: list[BaseException] = []

    def approve(handle: GitPackageRepository, draft: Revision) -> None:
        try:
            handle.approve(draft)
        except BaseException as err:  # noqa: BLE001 - collected and asserted below
            errors.append(err)

    threads = [threading.Thread(target=approve, args=(first if i % 2 else second, d)) for i, d in enumerate(drafts)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    first.close()
    second.close()
    assert errors == []
    assert sorted(int(n.rsplit("/v", 1)[1]) for n in refs_of(bare) if n.startswith("refs/tags/")) == list(range(1, 9))
    approvals = git(bare, "log", "--first-parent", "--format=%s", "main").splitlines()
    assert sorted(approvals[:8]) == sorted(f"Approving package revision p/{n}" for n in range(1, 9))


def git_children() -> list[int]:
    """Live `git` processes whose parent is this test process."""
    proc = Path("/proc")
    if not proc.is_dir():
        pytest.skip("needs /proc to see child processes")
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        name, rest = stat[stat.index("(") + 1: stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
        if int(rest[1]) == os.getpid() and name.startswith("git") and rest[0] != "Z":
            found.append(int(entry.name))
    return found


def test_no_git_process_outlives_the_handle(bare: Path) -> None:
    assert git_children() == []
    with GitPackageRepository(bare, create_branch=True) as handle:
        draft = handle.create_draft("p", "ws", {"Kptfile": kptfile("p")})
        handle.read_resources(handle.approve(draft))
        handle.tasks(handle.get_revision("p", "ws"))
        assert len(git_children()) == 3          # two cat-files and an update-ref, reused by every call
    assert git_children() == []
    forgotten = GitPackageRepository(bare)       # never closed: reaped when collected
    forgotten.list_revisions()
    assert git_children() != []
    del forgotten
    gc.collect()
    assert git_children() == []


def test_listing_a_thousand_refs_is_one_for_each_ref_and_fast(bare: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    count = 500
    stream = ["commit refs/heads/main", "committer A <a@example.com> 0 +0000", "data 4", "many"]
    for i in range(count):
        text = kptfile(f"p{i}")
        stream += [f"M 100644 inline pkgs/p{i:04d}/Kptfile", f"data {len(text)}", text.rstrip("\n")]
    subprocess.run(["git", "-C", str(bare), "fast-import", "--quiet"], input="\n".join(stream) + "\n",
                   text=True, check=True)
    tip = git(bare, "rev-parse", "main").strip()
    lines = [f"create refs/tags/pkgs/p{i:04d}/v1 {tip}" for i in range(count)]
    lines += [f"create refs/heads/drafts/pkgs/p{i:04d}/ws {tip}" for i in range(count)]
    git(bare, "update-ref", "--stdin", input="\n".join(lines) + "\n")
    git(bare, "pack-refs", "--all")
    runs: list[tuple[str, ...]] = []
    original = Git.run

    def counting(self: Git, *args: str, **kwargs: object) -> bytes:
        runs.append(args)
        return original(self, *args, **kwargs)  # type: ignore[arg-type]

    with GitPackageRepository(bare) as handle:
        monkeypatch.setattr(Git, "run", counting)
        started = time.perf_counter()
        revisions = handle.list_revisions()
        elapsed = time.perf_counter() - started
        again = time.perf_counter()
        handle.list_revisions()
        cached = time.perf_counter() - again
    assert len(revisions) == 3 * count                  # tag, draft and placeholder of each package
    assert [args[0] for args in runs] == ["for-each-ref", "ls-tree", "for-each-ref"]
    print(f"\nlist {len(revisions)} revisions over {2 * count} refs: {elapsed * 1000:.0f} ms, "
          f"again {cached * 1000:.0f} ms")
    assert elapsed < 3.0
