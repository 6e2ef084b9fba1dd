"""A GitPackageRepository on an https git server: every write pushed atomically with leases.

Each test runs its own apache2 + `git http-backend` on 127.0.0.1 (tests/gitservers), with TLS
from a test CA and basic auth, and drives the git layer directly, so that what another writer does
can be put exactly between porchkit's fetch and its push.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from porchvariant.embedded.git.mirror import Mirror, mirror_path
from porchvariant.embedded.git.repository import GitConflict, GitNotFound, GitPackageRepository, Lifecycle, RemoteError
from porchvariant.embedded.git.transport import BasicAuth, Transport
from tests.gitservers.https import HttpsGitServer
from tests.porchvariant.embedded.remote_support import Served
from tests.porchvariant.variants_support import V1
from tests.waiting import eventually

pytestmark = pytest.mark.gitserver


@pytest.fixture(name="served")
def served_fixture(server: HttpsGitServer, tmp_path: Path) -> Served:
    return Served(server, tmp_path)


def draft_files(text: str) -> dict[str, str]:
    return {**V1, "note.txt": text}


def test_opening_fetches_the_mirror_and_a_draft_is_a_branch_on_the_server(served: Served, tmp_path: Path) -> None:
    with served.open("catalog", tmp_path / "cache") as repo:
        assert [(r.package, r.workspace, r.lifecycle) for r in repo.list_revisions() if not r.is_placeholder] == [
            ("web", "v1", Lifecycle.PUBLISHED), ("web", "v2", Lifecycle.PUBLISHED)]
        draft = repo.create_draft("web", "ws", draft_files("one"))
    assert served.server.refs("catalog.git")["refs/heads/drafts/web/ws"] == draft.commit
    assert (mirror_path(tmp_path / "cache", served.server.url("catalog.git"), "main") / "HEAD").is_file()


def test_an_approval_retries_on_a_fresh_fetch_when_someone_pushed_to_main_in_between(served: Served,
                                                                                       tmp_path: Path) -> None:
    with served.open("prod", tmp_path / "cache") as repo:
        draft = repo.create_draft("web", "ws", draft_files("mine"))
        theirs = served.push_commit("prod", "theirs.txt", "theirs\n")  # after porchkit's fetch, before its push
        published = repo.approve(draft)
    refs = served.server.refs("prod.git")
    assert refs["refs/heads/main"] == refs["refs/tags/web/v1"] == published.commit
    parents = served.server.git("prod.git", "log", "-1", "--format=%P", published.commit).split()
    assert parents == [theirs, draft.commit]  # built on their commit, nothing overwritten
    assert "refs/heads/drafts/web/ws" not in refs


def test_a_write_from_a_stale_draft_is_a_conflict_and_changes_nothing(served: Served, tmp_path: Path) -> None:
    with served.open("prod", tmp_path / "cache") as repo:
        draft = repo.create_draft("web", "ws", draft_files("mine"))
        theirs = served.push_commit("prod", "web/note.txt", "theirs\n", branch="drafts/web/ws")
        with pytest.raises(GitConflict):
            repo.write_resources(draft, draft_files("mine, again"))
        assert repo.get_revision("web", "ws").commit == theirs  # the mirror followed the server
    assert served.server.refs("prod.git")["refs/heads/drafts/web/ws"] == theirs


def test_two_processes_approving_at_once_both_publish_with_distinct_numbers(served: Served, tmp_path: Path) -> None:
    with served.open("prod", tmp_path / "setup") as repo:
        for workspace in ("a", "b"):
            repo.create_draft("web", workspace, draft_files(workspace))
    script = tmp_path / "approve.py"
    script.write_text(
        "import sys, time\n"
        "from pathlib import Path\n"
        "from tests.porchvariant.embedded.remote_support import Served\n"
        "from tests.gitservers.https import HttpsGitServer\n"
        "server = HttpsGitServer.__new__(HttpsGitServer)\n"
        "server.root, server.repos = Path(sys.argv[1]), Path(sys.argv[1]) / 'repos'\n"
        "server.port, server.username, server.password = int(sys.argv[2]), sys.argv[3], sys.argv[4]\n"
        "server.ca_pem = (server.root / 'ca.crt').read_bytes()\n"
        "served = Served.__new__(Served)\n"
        "served.server = server\n"
        "with served.open('prod', Path(sys.argv[5])) as repo:\n"
        "    draft = repo.get_revision('web', sys.argv[6])\n"
        "    while not Path(sys.argv[7]).exists(): time.sleep(0.001)\n"
        "    print(repo.approve(draft).revision)\n")
    go = tmp_path / "go"
    server = served.server
    root = Path(__file__).resolve().parents[3]
    procs = [subprocess.Popen([sys.executable, str(script), str(server.root), str(server.port), server.username,
                               server.password, str(tmp_path / f"cache-{ws}"), ws, str(go)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=root,
                              # the script imports the tests package, whatever the install mode
                              env={**os.environ, "PYTHONPATH": str(root)})
             for ws in ("a", "b")]
    go.touch()
    answers = [proc.communicate(timeout=60) for proc in procs]
    assert all(proc.returncode == 0 for proc in procs), answers
    assert sorted(int(out) for out, _ in answers) == [1, 2]
    refs = served.server.refs("prod.git")
    assert {"refs/tags/web/v1", "refs/tags/web/v2"} <= set(refs)
    assert not [ref for ref in refs if ref.startswith("refs/heads/drafts/")]


def test_a_server_that_dies_mid_push_leaves_nothing_half_written(served: Served, tmp_path: Path) -> None:
    server = served.server
    hook = server.repos / "prod.git" / "hooks" / "pre-receive"
    marker = server.root / "in-pre-receive"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\nsleep 30\n")
    hook.chmod(0o755)
    server.hand_over(server.repos / "prod.git")
    marker.parent.chmod(0o777)
    with served.open("prod", tmp_path / "cache") as repo:
        hook.rename(hook.with_suffix(".off"))
        draft = repo.create_draft("web", "ws", draft_files("mine"))
        hook.with_suffix(".off").rename(hook)
        before_server, before_mirror = server.refs("prod.git"), _refs(repo.git_dir)
        failure: list[BaseException] = []
        approving = threading.Thread(target=lambda: _capture(failure, repo.approve, draft))
        approving.start()
        eventually(marker.exists, 30.0, interval=0.01)
        server.stop()
        approving.join(60)
        assert not approving.is_alive()
        [error] = failure
        assert isinstance(error, RemoteError) and "\n" not in str(error)
        assert str(error).startswith(server.url("prod.git"))
        assert server.refs("prod.git") == before_server  # no tag, main and the draft as they were
        assert _refs(repo.git_dir) == before_mirror
        hook.unlink()
        server.start()
        assert repo.approve(draft).revision == 1


def test_a_force_pushed_branch_is_followed_by_the_next_fetch(served: Served, tmp_path: Path) -> None:
    with served.open("catalog", tmp_path / "cache") as repo:
        assert {r.package for r in repo.list_revisions() if r.is_placeholder} == {"web"}
        rewritten = served.push_commit("catalog", "other/Kptfile", V1["Kptfile"], force_root=True)
        repo.fetch()
        assert _refs(repo.git_dir)["refs/heads/main"] == rewritten
        listed = repo.list_revisions()
    # The placeholder follows main: web's is gone, other's is new; the tags of web stay published.
    assert {r.package for r in listed if r.is_placeholder} == {"other"}
    assert {(r.package, r.workspace) for r in listed if not r.is_placeholder} == {("web", "v1"), ("web", "v2")}


def test_a_missing_branch_is_not_found_unless_it_is_to_be_created(served: Served, tmp_path: Path) -> None:
    server = served.server
    server.create_repo("empty.git")
    transport = Transport(server.url("empty.git"), ca_bundle=lambda: server.ca_pem,
                          credentials=lambda: BasicAuth(server.username, server.password))
    with pytest.raises(GitNotFound, match="branch 'main' does not exist"):
        GitPackageRepository("", remote=Mirror(tmp_path / "cache", transport, "main"))
    with GitPackageRepository("", remote=Mirror(tmp_path / "cache", transport, "main"), create_branch=True):
        pass
    assert "refs/heads/main" in server.refs("empty.git")


def test_a_wrong_password_and_an_unknown_ca_are_one_line_errors_without_the_password(served: Served,
                                                                                     tmp_path: Path) -> None:
    server = served.server
    wrong = Transport(server.url("prod.git"), ca_bundle=lambda: server.ca_pem,
                      credentials=lambda: BasicAuth(server.username, "not-" + server.password))
    with pytest.raises(RemoteError) as refused:
        GitPackageRepository("", remote=Mirror(tmp_path / "cache", wrong, "main"))
    assert refused.value.reason == "AuthenticationFailed" and "\n" not in str(refused.value)
    assert server.password not in str(refused.value)
    untrusted = Transport(server.url("prod.git"), credentials=lambda: BasicAuth(server.username, server.password))
    with pytest.raises(RemoteError) as tls:
        GitPackageRepository("", remote=Mirror(tmp_path / "cache", untrusted, "main"))
    assert tls.value.reason == "TLSError"


def _refs(git_dir: str) -> dict[str, str]:
    out = subprocess.run(["git", "--git-dir", git_dir, "for-each-ref", "--format=%(refname) %(objectname)"],
                         capture_output=True, text=True, check=True).stdout
    return dict(line.split(" ") for line in out.splitlines())  # type: ignore[misc]


def _capture(into: list[BaseException], call: object, *args: object) -> None:
    try:
        call(*args)  # type: ignore[operator]
    except BaseException as err:  # noqa: BLE001 (handed to the test thread)
        into.append(err)
