"""PackageVariants over Repositories on an ssh git server, end to end through `reconcile_manifests`.

Each test starts its own sshd on 127.0.0.1 (tests/gitservers/ssh.py). The manifests hold the
Repositories (ssh:// URLs), the `kubernetes.io/ssh-auth` Secret they name and the
`ssh-known-hosts` ConfigMap, as `porchkit variants reconcile -f` reads them; what the server holds
afterwards is checked with git on the server's own directories.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from porchvariant.embedded._porch_remotes import RemoteSettings
from porchvariant.local_run import reconcile_manifests
from porchvariant.porch_client import REPOSITORY
from reconcile import EmbeddedCluster, conditions
from reconcile.cluster import ObjectKey
from tests.gitservers.ssh import SshGitServer
from tests.porchvariant.embedded.ssh_support import SECRET, SshServed, files_holding
from tests.porchvariant.variants_support import NS, manifests, package_variant

pytestmark = pytest.mark.gitserver

DRAFT = "refs/heads/drafts/web/packagevariant-1"


@pytest.fixture(name="served")
def served_fixture(ssh_server: SshGitServer, tmp_path: Path) -> SshServed:
    return SshServed(ssh_server, tmp_path, deployments=("prod", "staging"))


def reconcile(served: SshServed, tmp: Path, objects: list[dict[str, Any]], *, approve: bool = False) -> list[str]:
    """One local run over `objects` and the variants of web for prod and staging; its problems."""
    variants = [package_variant("web-prod", downstream="prod"), package_variant("web-staging", downstream="staging")]
    run = reconcile_manifests(manifests(*objects, *variants), state=tmp / "state", approve=approve, timeout=60,
                              remotes=RemoteSettings(cache=tmp / "cache"))
    return run.problems


def test_drafts_are_pushed_as_branches_on_the_ssh_server_and_approval_publishes_them(served: SshServed,
                                                                                      tmp_path: Path) -> None:
    server = served.server
    started = time.time()
    assert reconcile(served, tmp_path, served.objects()) == []
    drafts = {name: server.refs(f"{name}.git").get(DRAFT) for name in ("prod", "staging")}
    assert all(drafts.values()), drafts
    assert server.git("prod.git", "show", f"{DRAFT}:web/Kptfile").startswith("apiVersion: kpt.dev/v1")
    assert reconcile(served, tmp_path, served.objects(), approve=True) == []
    for name in ("prod", "staging"):
        refs = server.refs(f"{name}.git")
        assert refs["refs/tags/web/v1"] == refs["refs/heads/main"] and DRAFT not in refs
    # The key: in no mirror, and in no file written under the temp directory but the state
    # directory (which keeps the Secret, as an API server's store would).
    assert files_holding(served.key_lines(), tmp_path / "cache") == []
    assert files_holding(served.key_lines(), Path(tempfile.gettempdir()), since=started,
                         skip=(tmp_path / "state",)) == []


@pytest.mark.parametrize(("objects", "says"), [
    (lambda served: [*served.repositories(), served.secret(), served.known_hosts(_impostor(served))],
     "Host key verification failed"),
    (lambda served: [*served.repositories(), _basic_auth_secret(), served.known_hosts()],
     "is of type kubernetes.io/basic-auth, not kubernetes.io/ssh-auth"),
], ids=["wrong-known-hosts", "basic-auth-secret"])
def test_a_repository_that_cannot_be_used_is_not_ready_and_the_run_names_it(
        served: SshServed, tmp_path: Path, objects: Any, says: str) -> None:
    server = served.server
    before = {name: server.refs(f"{name}.git") for name in ("catalog", "prod", "staging")}
    problems = reconcile(served, tmp_path, objects(served))
    assert len(problems) == 2, problems
    for problem in problems:
        assert "is Stalled (RepositoryNotReady)" in problem and says in problem and "\n" not in problem
    with EmbeddedCluster(persist_to=tmp_path / "state") as cluster:
        for name in ("catalog", "prod", "staging"):
            repository = cluster.get(REPOSITORY, ObjectKey(NS, name))
            assert repository is not None
            ready = conditions.find(conditions.conditions_of(repository), "Ready")
            assert ready is not None and (ready["status"], ready["reason"]) == ("False", "Error")
            assert says in ready["message"] and "\n" not in ready["message"]
    assert {name: server.refs(f"{name}.git") for name in ("catalog", "prod", "staging")} == before


def _impostor(served: SshServed) -> bytes:
    """Known hosts that hold another key for the server's address."""
    return f"[127.0.0.1]:{served.server.port} {served.server.new_key('impostor')[1]}\n".encode()


def _basic_auth_secret() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/basic-auth",
            "metadata": {"name": SECRET, "namespace": NS}, "stringData": {"username": "git", "password": "pw"}}
