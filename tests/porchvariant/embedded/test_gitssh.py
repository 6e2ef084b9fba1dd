"""Git repositories over ssh: the URL forms, the key and known hosts handed to ssh, and its refusals.

The server tests run their own sshd on 127.0.0.1 (tests/gitservers/ssh.py) with a host key and a
client key made for the test, and drive the git layer directly (a Transport, or `open_remote`
over an embedded cluster holding the Secret and the known-hosts ConfigMap). The URL tests need
no server.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from porchvariant.embedded._porch_remotes import RemoteSettings, open_remote
from porchvariant.embedded.git.repository import GitConflict, GitPackageRepository, RemoteError
from porchvariant.embedded.git.ssh import SshAuth, SshUrl, parse_ssh_url, ssh_command
from porchvariant.embedded.git.transport import BasicAuth, Transport, is_remote, url_problem
from reconcile import EmbeddedCluster
from reconcile.cluster import Kind, ObjectKey
from tests.gitservers.ssh import SshGitServer
from tests.porchvariant.embedded.ssh_support import SECRET, KeyWatch, SshServed, files_holding
from tests.porchvariant.variants_support import NS, V1

SECRET_KIND = Kind("v1", "Secret")


def draft_files(text: str) -> dict[str, str]:
    return {**V1, "note.txt": text}


# --- URLs (no server) ------------------------------------------------------------------------------


@pytest.mark.parametrize(("url", "parsed"), [
    ("ssh://git@git.example.com/org/r.git", SshUrl("git", "git.example.com", None, "/org/r.git")),
    ("ssh://git.example.com:2222/srv/r.git", SshUrl("", "git.example.com", 2222, "/srv/r.git")),
    ("git+ssh://git@git.example.com:2222/r.git", SshUrl("git", "git.example.com", 2222, "/r.git")),
    ("ssh://git@[::1]:2222/~/r.git", SshUrl("git", "::1", 2222, "/~/r.git")),
    ("git@git.example.com:org/r.git", SshUrl("git", "git.example.com", None, "org/r.git")),
    ("git@git.example.com:/srv/git/r.git", SshUrl("git", "git.example.com", None, "/srv/git/r.git")),
    ("git@git.example.com:~/r.git", SshUrl("git", "git.example.com", None, "~/r.git")),
    # git's rule: the scp-like form has no port, so this is the path "2222/r.git" on port 22.
    ("git@git.example.com:2222/r.git", SshUrl("git", "git.example.com", None, "2222/r.git")),
    ("git@[::1]:r.git", SshUrl("git", "::1", None, "r.git")),
])
def test_ssh_and_scp_like_urls_are_accepted_and_parsed_as_git_reads_them(url: str, parsed: SshUrl) -> None:
    assert parse_ssh_url(url) == parsed
    assert url_problem(url) is None and is_remote(url)


@pytest.mark.parametrize(("url", "problem"), [
    ("ssh://git:secret@git.example.com/r.git", "must not carry credentials"),
    ("git:secret@git.example.com:r.git", "must not carry credentials"),
    ("ssh://git.example.com", "names no repository path"),
    ("ssh://git.example.com/", "names no repository path"),
    ("git@git.example.com:", "names no repository path"),
    ("ssh://git@/r.git", "names no host"),
    ("ssh://git.example.com:port/r.git", "is not a valid URL"),
    ("ssh://-oProxyCommand=touch%20x/r.git", "starting with '-'"),
    ("-oProxyCommand=x@git.example.com:r.git", "starting with '-'"),
    ("ssh://git.example.com/r.git?x=1", "no query or fragment"),
])
def test_ssh_urls_porchkit_will_not_use_are_refused_with_the_reason(url: str, problem: str) -> None:
    assert problem in (url_problem(url) or "")
    with pytest.raises(RemoteError) as refused:
        Transport(url)
    assert refused.value.reason == "InvalidURL"


def test_the_ssh_command_names_descriptors_checks_hosts_strictly_and_never_the_key() -> None:
    command = ssh_command(7, 8, connect_timeout=30)
    assert command.startswith("ssh -F /dev/null ")
    for option in ("BatchMode=yes", "IdentitiesOnly=yes", "IdentityFile=/proc/$PPID/fd/7",
                   "UserKnownHostsFile=/proc/$PPID/fd/8", "GlobalKnownHostsFile=/dev/null",
                   "StrictHostKeyChecking=yes", "UpdateHostKeys=no", "ConnectTimeout=30"):
        assert f"-o {option}" in command
    assert "PRIVATE KEY" not in command


def test_the_private_key_is_not_in_the_repr() -> None:
    auth = SshAuth(b"-----BEGIN OPENSSH PRIVATE KEY-----\nsecret-key-body\n", b"host ssh-ed25519 AAAA")
    assert "secret-key-body" not in repr(auth) and "host ssh-ed25519" in repr(auth)


def test_credentials_of_the_wrong_kind_are_refused_before_connecting(tmp_path: Path) -> None:
    ssh = Transport("ssh://git@127.0.0.1:1/r.git", credentials=lambda: BasicAuth("u", "p"))
    with pytest.raises(RemoteError, match="needs a private key and known hosts") as refused:
        ssh.run(str(tmp_path), ["fetch", ssh.url])
    assert refused.value.reason == "SecretError"
    https = Transport("https://127.0.0.1:1/r.git", credentials=lambda: SshAuth(b"k", b"h"))
    with pytest.raises(RemoteError, match="ssh key was given for an https URL"):
        https.run(str(tmp_path), ["fetch", https.url])


# --- Secrets and ConfigMaps (no server needed for the refusals) -------------------------------------


class _Cluster:
    """An embedded cluster holding namespace NS and the given objects, for `open_remote`; the
    Secret SECRET can be replaced while a handle is open."""

    def __init__(self, *objects: dict[str, Any]) -> None:
        self.cluster = EmbeddedCluster()
        self.cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        for obj in objects:
            self.cluster.create(obj)

    def open(self, repository: dict[str, Any], cache: Path) -> GitPackageRepository:
        return open_remote(self.cluster, repository, RemoteSettings(cache=cache))

    def set_secret(self, **string_data: str) -> None:
        secret = self.cluster.get(SECRET_KIND, ObjectKey(NS, SECRET))
        assert secret is not None
        self.cluster.update({**secret, "data": {}, "stringData": string_data})


Clusters = Callable[..., _Cluster]


@pytest.fixture(name="cluster")
def cluster_fixture() -> Iterator[Clusters]:
    """Makes _Clusters, closed after the test."""
    made: list[_Cluster] = []

    def make(*objects: dict[str, Any]) -> _Cluster:
        made.append(_Cluster(*objects))
        return made[-1]

    yield make
    for each in made:
        each.cluster.close()


def _repository(url: str, secret: str | None = SECRET) -> dict[str, Any]:
    git: dict[str, Any] = {"repo": url, "branch": "main"}
    if secret:
        git["secretRef"] = {"name": secret}
    return {"apiVersion": "config.porch.kpt.dev/v1alpha1", "kind": "Repository",
            "metadata": {"name": "prod", "namespace": NS}, "spec": {"type": "git", "git": git}}


def _secret(type_: str, **string_data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "type": type_, "metadata": {"name": SECRET, "namespace": NS},
            "stringData": string_data}


def test_a_basic_auth_secret_for_ssh_and_an_ssh_auth_secret_for_https_name_the_secret_and_the_type(
        cluster: Clusters, tmp_path: Path) -> None:
    basic = cluster(_secret("kubernetes.io/basic-auth", username="u", password="p"))
    with pytest.raises(RemoteError) as refused:
        basic.open(_repository("ssh://git@127.0.0.1:1/r.git"), tmp_path / "cache")
    assert str(refused.value) == (f"Secret {NS}/{SECRET} (spec.git.secretRef) is of type kubernetes.io/basic-auth, "
                                  "not kubernetes.io/ssh-auth (an ssh repository needs kubernetes.io/ssh-auth, "
                                  "key ssh-privatekey)")
    ssh = cluster(_secret("kubernetes.io/ssh-auth", **{"ssh-privatekey": "k"}))
    with pytest.raises(RemoteError) as wrong_way:
        ssh.open(_repository("https://127.0.0.1:1/r.git"), tmp_path / "cache")
    assert "is of type kubernetes.io/ssh-auth, not kubernetes.io/basic-auth (an https repository" \
        in str(wrong_way.value)


def test_an_ssh_repository_without_a_secret_or_without_known_hosts_is_refused_in_one_line(
        cluster: Clusters, tmp_path: Path) -> None:
    without_secret = cluster()
    with pytest.raises(RemoteError, match="needs spec.git.secretRef naming a Secret of type kubernetes.io/ssh-auth"):
        without_secret.open(_repository("ssh://git@127.0.0.1:1/r.git", secret=None), tmp_path / "cache")
    without_hosts = cluster(_secret("kubernetes.io/ssh-auth", **{"ssh-privatekey": "k"}))
    with pytest.raises(RemoteError) as refused:
        without_hosts.open(_repository("ssh://git@127.0.0.1:1/r.git"), tmp_path / "cache")
    assert refused.value.reason == "HostKeyUnknown" and "\n" not in str(refused.value)
    assert f"ConfigMap {NS}/ssh-known-hosts key ssh_known_hosts" in str(refused.value)


# --- against a real sshd ---------------------------------------------------------------------------

@pytest.fixture(name="served")
def served_fixture(ssh_server: SshGitServer, tmp_path: Path) -> SshServed:
    return SshServed(ssh_server, tmp_path)


@pytest.mark.gitserver
@pytest.mark.parametrize("scheme", ["ssh://", "git+ssh://"])
def test_opening_fetches_over_ssh_and_a_draft_is_a_branch_on_the_server(served: SshServed, tmp_path: Path,
                                                                         scheme: str) -> None:
    url = served.server.url("catalog.git").replace("ssh://", scheme, 1)
    with served.open("catalog", tmp_path / "cache", url=url) as repo:
        assert [(r.package, r.workspace) for r in repo.list_revisions() if not r.is_placeholder] == [
            ("web", "v1"), ("web", "v2")]
        draft = repo.create_draft("web", "ws", draft_files("one"))
        published = repo.approve(draft)
    refs = served.server.refs("catalog.git")
    assert refs["refs/heads/main"] == refs["refs/tags/web/v3"] == published.commit
    assert "refs/heads/drafts/web/ws" not in refs


@pytest.mark.gitserver
def test_a_write_from_a_stale_draft_is_a_conflict_over_ssh_and_changes_nothing(served: SshServed,
                                                                               tmp_path: Path) -> None:
    with served.open("prod", tmp_path / "cache") as repo:
        draft = repo.create_draft("web", "ws", draft_files("mine"))
        theirs = served.push_commit("prod", "web/note.txt", "theirs\n", branch="drafts/web/ws")
        with pytest.raises(GitConflict):
            repo.write_resources(draft, draft_files("mine, again"))
        assert repo.get_revision("web", "ws").commit == theirs  # the mirror followed the server
    assert served.server.refs("prod.git")["refs/heads/drafts/web/ws"] == theirs


@pytest.mark.gitserver
def test_a_key_as_secrets_often_hold_it_loads_without_its_final_newline_and_with_crlf(served: SshServed,
                                                                                     tmp_path: Path) -> None:
    mangled = served.server.private_key.rstrip(b"\n").replace(b"\n", b"\r\n")
    with served.open("catalog", tmp_path / "cache", lambda: SshAuth(mangled, served.server.known_hosts)) as repo:
        assert {r.package for r in repo.list_revisions()} == {"web"}


@pytest.mark.gitserver
def test_a_changed_host_key_is_refused_in_one_line_and_nothing_is_pushed(served: SshServed, tmp_path: Path) -> None:
    server = served.server
    impostor = f"[127.0.0.1]:{server.port} {server.new_key('impostor')[1]}\n".encode()
    known_hosts = [server.known_hosts]
    with served.open("prod", tmp_path / "cache", lambda: SshAuth(server.private_key, known_hosts[0])) as repo:
        before = server.refs("prod.git")
        known_hosts[0] = impostor  # read before every command: the next one checks against it
        with pytest.raises(RemoteError) as refused:
            repo.create_draft("web", "ws", draft_files("mine"))
        assert server.refs("prod.git") == before
        assert not [name for name in _mirror_refs(repo) if name.startswith("refs/heads/drafts/")]
    error = refused.value
    assert error.reason == "HostKeyUnknown" and "\n" not in str(error)
    assert str(error).startswith(server.url("prod.git") + ": ") and "Host key verification failed" in str(error)


@pytest.mark.gitserver
def test_a_host_key_of_another_host_only_is_unknown(served: SshServed, tmp_path: Path) -> None:
    server = served.server
    elsewhere = f"[127.0.0.1]:{server.port + 1} {server.host_public}\n".encode()
    with pytest.raises(RemoteError) as refused:
        served.open("prod", tmp_path / "cache", lambda: SshAuth(server.private_key, elsewhere))
    assert refused.value.reason == "HostKeyUnknown"
    assert f"No ED25519 host key is known for [127.0.0.1]:{server.port}" in str(refused.value)


@pytest.mark.gitserver
def test_no_known_hosts_at_all_is_refused_before_connecting(served: SshServed, tmp_path: Path) -> None:
    served.server.stop()  # connecting would say Unreachable: the refusal comes first
    with pytest.raises(RemoteError) as refused:
        served.open("prod", tmp_path / "cache", lambda: SshAuth(served.server.private_key, b"# none yet\n\n"))
    assert refused.value.reason == "HostKeyUnknown" and "no known host keys were given" in str(refused.value)
    served.server.start()


@pytest.mark.gitserver
def test_a_wrong_private_key_is_authentication_failed_in_one_line_without_the_key(served: SshServed,
                                                                                  tmp_path: Path) -> None:
    wrong, _ = served.server.new_key("wrong")
    with pytest.raises(RemoteError) as refused:
        served.open("prod", tmp_path / "cache", lambda: SshAuth(wrong, served.server.known_hosts))
    error = refused.value
    assert error.reason == "AuthenticationFailed" and "\n" not in str(error)
    assert "Permission denied (publickey)" in str(error)
    assert not [line for line in served.key_lines(wrong) if line.decode() in str(error)]


@pytest.mark.gitserver
def test_a_dead_server_is_unreachable(served: SshServed, tmp_path: Path) -> None:
    with served.open("prod", tmp_path / "cache") as repo:
        served.server.stop()
        with pytest.raises(RemoteError) as refused:
            repo.fetch()
        served.server.start()
        repo.fetch()
    assert refused.value.reason == "Unreachable" and "Connection refused" in str(refused.value)


@pytest.mark.gitserver
def test_a_rotated_key_in_the_secret_is_used_from_the_next_command(served: SshServed, cluster: Clusters,
                                                                   tmp_path: Path) -> None:
    server = served.server
    live = cluster(served.secret(), served.known_hosts())
    with live.open(served.repository("prod"), tmp_path / "cache") as repo:
        draft = repo.create_draft("web", "ws", draft_files("one"))
        rotated, public = server.new_key("rotated")
        server.authorize(public)  # the server takes only the new key from now on
        with pytest.raises(RemoteError) as stale:
            repo.write_resources(draft, draft_files("two"))
        assert stale.value.reason == "AuthenticationFailed"
        live.set_secret(**{"ssh-privatekey": rotated.decode()})
        written = repo.write_resources(draft, draft_files("two"))
    assert server.refs("prod.git")["refs/heads/drafts/web/ws"] == written.commit != draft.commit


@pytest.mark.gitserver
def test_known_hosts_in_the_secret_come_before_the_configmap(served: SshServed, cluster: Clusters,
                                                             tmp_path: Path) -> None:
    server = served.server
    impostor = f"[127.0.0.1]:{server.port} {server.new_key('impostor')[1]}\n".encode()
    live = cluster(served.secret(known_hosts=server.known_hosts), served.known_hosts(impostor))
    with live.open(served.repository("prod"), tmp_path / "cache") as repo:
        repo.create_draft("web", "ws", draft_files("one"))
        live.set_secret(**{"ssh-privatekey": server.private_key.decode()})  # no known_hosts: the ConfigMap's
        with pytest.raises(RemoteError) as refused:
            repo.fetch()
    assert refused.value.reason == "HostKeyUnknown"


@pytest.mark.gitserver
def test_the_key_is_in_no_process_arguments_environment_or_file_left_behind(
        served: SshServed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    server, cache, home = served.server, tmp_path / "cache", tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))  # ssh must not write a known_hosts (or anything) there
    hook = server.repos / "prod.git" / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\nsleep 1\n")  # a push slow enough to see every process it starts
    hook.chmod(0o755)
    started = time.time()
    with KeyWatch(served.key_lines()) as watch, served.open("prod", cache) as repo:
        draft = repo.create_draft("web", "ws", draft_files("mine"))
    assert server.refs("prod.git")["refs/heads/drafts/web/ws"] == draft.commit
    assert watch.ssh, "the watch saw no ssh client"
    assert all("IdentityFile=/proc/" in argv and "StrictHostKeyChecking=yes" in argv for argv in watch.ssh)
    assert watch.leaks == []
    assert files_holding(served.key_lines(), cache) == []
    assert files_holding(served.key_lines(), Path(tempfile.gettempdir()), since=started) == []
    assert [path for path in home.rglob("*") if path.is_file()] == []


def _mirror_refs(repo: GitPackageRepository) -> list[str]:
    out = subprocess.run(["git", "--git-dir", repo.git_dir, "for-each-ref", "--format=%(refname)"],
                         capture_output=True, text=True, check=True).stdout
    return out.split()
