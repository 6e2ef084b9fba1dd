"""PackageVariants over Repositories on an https git server with a basic-auth Secret, end to end.

Each test starts its own apache2 + `git http-backend` on 127.0.0.1 (tests/gitservers). The
manifests hold the Repositories (https URLs), the Secret they name and Porch's CA bundle Secret,
as `porchkit variants reconcile -f` reads them; what the server holds afterwards is checked with
git on the server's own directories.
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from porchkit.cli import main
from porchvariant.embedded._porch_remotes import RemoteSettings
from porchvariant.embedded._secret_scope import SERVERS_ANNOTATION
from porchvariant.local_run import serve_porch
from porchvariant.manager import package_variant_controllers
from porchvariant.packagevariant_controller import PACKAGE_VARIANT
from porchvariant.porch_client import PACKAGE_REVISION, REPOSITORY
from reconcile import EmbeddedCluster, conditions
from reconcile.cluster import Kind, ObjectKey
from reconcile.events import EventRecorder
from reconcile.manager import Manager
from tests.gitservers.https import HttpsGitServer
from tests.porchvariant.embedded.remote_support import SECRET, Served
from tests.porchvariant.embedded.ssh_support import files_holding
from tests.porchvariant.variants_support import NS, eventually, package_variant
from tests.reconcile import support

pytestmark = pytest.mark.gitserver

EVENT = Kind("v1", "Event")
SECRET_KIND = Kind("v1", "Secret")


@pytest.fixture(name="served")
def served_fixture(server: HttpsGitServer, tmp_path: Path) -> Served:
    return Served(server, tmp_path, deployments=("prod", "staging"))


def write_manifests(directory: Path, objects: list[dict[str, Any]]) -> Path:
    import yaml

    directory.mkdir(parents=True, exist_ok=True)
    (directory / "all.yaml").write_text(yaml.safe_dump_all(objects, sort_keys=False))
    return directory


def test_a_fan_out_pushes_drafts_then_approval_and_never_leaks_the_password(
        served: Served, tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
    server, cache = served.server, tmp_path / "cache"
    objects = [*served.objects(), package_variant("web-prod", downstream="prod"),
               package_variant("web-staging", downstream="staging")]
    directory = write_manifests(tmp_path / "manifests", objects)
    args = ["variants", "reconcile", "-f", str(directory), "--state", str(tmp_path / "state"),
            "--git-cache", str(cache), "-v"]
    caplog.set_level(logging.DEBUG)
    started = time.time()
    with _CommandLines(server.password) as seen:
        assert main(args) == 0
        for name in ("prod", "staging"):
            assert "refs/heads/drafts/web/packagevariant-1" in server.refs(f"{name}.git")
        assert main([*args, "--approve"]) == 0
    for name in ("prod", "staging"):
        refs = server.refs(f"{name}.git")
        assert refs["refs/tags/web/v1"] == refs["refs/heads/main"]
        assert not [ref for ref in refs if ref.startswith("refs/heads/drafts/")]
    out, err = capsys.readouterr()
    assert "Published" in out
    # The password: nowhere in git's arguments or environment while it ran, the output, the logs,
    # the commit messages on the server, or any file in the cache or the temp directory.
    assert seen.processes > 0 and seen.leaks == []
    assert server.password not in out + err + caplog.text
    for name in ("prod", "staging", "catalog"):
        assert server.password not in server.git(f"{name}.git", "log", "--all", "--format=%B%n%an%n%ae")
    assert files_holding([server.password.encode()], cache) == []
    # (The manifests hold it, and --state keeps the Secret as an API server's store would.)
    assert files_holding([server.password.encode()], Path(tempfile.gettempdir()), since=started,
                          skip=(tmp_path / "manifests", tmp_path / "state")) == []


def test_reconcile_with_a_wrong_password_says_so_in_one_line_and_exits_1(
        served: Served, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    server = served.server
    objects = [*served.repositories(), served.secret("wrong-" + server.password), served.ca_bundle(),
               package_variant("web-prod", downstream="prod")]
    directory = write_manifests(tmp_path / "manifests", objects)
    before = server.refs("prod.git")
    assert main(["variants", "reconcile", "-f", str(directory), "--git-cache", str(tmp_path / "cache")]) == 1
    _, err = capsys.readouterr()
    [line] = [line for line in err.splitlines() if "web-prod" in line]
    assert "is Stalled (RepositoryNotReady)" in line and "Authentication failed" in line
    assert server.password not in err
    assert server.refs("prod.git") == before


def test_a_wrong_password_makes_the_repository_not_ready_and_a_fixed_secret_recovers(served: Served,
                                                                                      tmp_path: Path) -> None:
    server = served.server
    with _Live(served, tmp_path, password="wrong-" + server.password) as live:
        live.cluster.create(package_variant("web-prod", downstream="prod"))
        ready = eventually(lambda: live.ready_condition("prod", "False"))
        message = ready["message"]
        assert ready["reason"] == "Error" and "Authentication failed" in message and "\n" not in message
        stalled = eventually(lambda: live.condition(PACKAGE_VARIANT, "web-prod", "Stalled", "True"))
        assert stalled["reason"] == "RepositoryNotReady"
        assert '"catalog" is not ready' in stalled["message"] or '"prod" is not ready' in stalled["message"]
        live.set_password(server.password)  # the Secret fixed while it runs: retried with back-off
        eventually(lambda: live.ready_condition("prod", "True"), timeout=30)
        eventually(lambda: "refs/heads/drafts/web/packagevariant-1" in server.refs("prod.git"), timeout=30)
        leaks = [text for text in live.texts() if "wrong-" + server.password in text or server.password in text]
        assert leaks == []


def test_a_rotated_password_is_used_from_the_next_push(served: Served, tmp_path: Path) -> None:
    server = served.server
    with _Live(served, tmp_path) as live:
        live.cluster.create(package_variant("web-prod", downstream="prod"))
        eventually(lambda: "refs/heads/drafts/web/packagevariant-1" in server.refs("prod.git"), timeout=30)
        draft_before = server.refs("prod.git")["refs/heads/drafts/web/packagevariant-1"]
        server.set_password("rotated-" + server.password)
        live.set_password(server.password)  # the Secret follows the server, as an operator would
        pv = live.cluster.get(PACKAGE_VARIANT, ObjectKey(NS, "web-prod"))
        assert pv is not None
        pv["spec"]["packageContext"] = {"data": {"env": "prod"}}
        live.cluster.update(pv)  # a change that must be pushed, with the new password
        eventually(lambda: server.refs("prod.git")["refs/heads/drafts/web/packagevariant-1"] != draft_before,
                   timeout=30)


def test_changes_pushed_by_others_arrive_as_watch_events(served: Served, tmp_path: Path) -> None:
    with _Live(served, tmp_path, controllers=False) as live:
        listing = live.cluster.list(PACKAGE_REVISION, namespace=NS)
        events: list[tuple[str, str]] = []
        stream = live.cluster.watch(PACKAGE_REVISION, resource_version=listing.resource_version, namespace=NS)
        watcher = threading.Thread(target=lambda: events.extend((e.type, e.object["metadata"]["name"])
                                                                for e in stream), daemon=True)
        watcher.start()
        with served.open("prod", tmp_path / "other-writer") as other:
            draft = other.create_draft("web", "theirs", {"Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\n"})
            eventually(lambda: ("ADDED", "prod.web.theirs") in events, timeout=20)
            other.delete(draft)
            eventually(lambda: ("DELETED", "prod.web.theirs") in events, timeout=20)
        stream.close()


def test_in_a_shared_cluster_a_secret_goes_only_to_the_servers_it_names(served: Served, tmp_path: Path) -> None:
    server = served.server
    before = {name: server.refs(f"{name}.git") for name in ("catalog", "prod")}
    with _Live(served, tmp_path, secrets_name_servers=True) as live:
        live.cluster.create(package_variant("web-prod", downstream="prod"))
        message = eventually(lambda: live.ready_condition("prod", "False"))["message"]
        assert message.startswith(f"Secret {NS}/{SECRET} does not name the git servers it may be sent to")
        assert SERVERS_ANNOTATION in message
        eventually(lambda: live.condition(PACKAGE_VARIANT, "web-prod", "Stalled", "True"))
        assert {name: server.refs(f"{name}.git") for name in before} == before
        live.annotate_secret(server.url("elsewhere/"))  # a prefix that is not the repositories' folder
        eventually(lambda: SERVERS_ANNOTATION in str(live.ready_condition("prod", "False")) and
                   "may not be sent to" in str(live.ready_condition("prod", "False")), timeout=30)
        live.annotate_secret(server.url(""))
        eventually(lambda: live.ready_condition("prod", "True"), timeout=30)
        eventually(lambda: "refs/heads/drafts/web/packagevariant-1" in server.refs("prod.git"), timeout=30)


def test_a_standby_writes_no_ready_condition_and_a_new_leader_writes_it_at_once(served: Served,
                                                                              tmp_path: Path) -> None:
    leading = threading.Event()
    with _Live(served, tmp_path, password="wrong-" + served.server.password, controllers=False, announce=None,
               writes_status=leading.is_set) as live:
        live.porch.announce_repositories()  # opens (fetches) every Repository: all fail
        live.porch.announce_repositories()  # within the back-off: the same failure, from memory
        assert [live.ready_condition(name, status) for name in ("catalog", "prod") for status in ("True", "False")] \
            == [None] * 4
        leading.set()
        live.porch.announce_repositories()  # still within the back-off: written without going to the server
        ready = live.ready_condition("prod", "False")
        assert ready is not None and "Authentication failed" in ready["message"]


class _Live:
    """The embedded cluster and Porch over the served repositories (mirrors in tmp/cache, fetched
    every 0.2 s, announced every `announce` s), the PackageVariant controller running, until the
    block ends. `settings`: more RemoteSettings."""

    def __init__(self, served: Served, tmp: Path, *, password: str | None = None, controllers: bool = True,
                 announce: float | None = 0.1, **settings: Any) -> None:
        self.served, self.cluster = served, EmbeddedCluster()
        remotes = RemoteSettings(cache=tmp / "cache", fetch_period=0.2, **settings)
        self.porch = serve_porch(self.cluster, remotes=remotes, announce_every=announce)
        self.cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        for obj in [served.secret(password), served.ca_bundle(), *served.repositories()]:
            self.cluster.create(obj)
        self.running: support.Running | None = None
        if controllers:
            manager = Manager(self.cluster, events=EventRecorder(self.cluster, "porchkit-test"))
            manager.add(package_variant_controllers(manager))
            self.running = support.Running(manager)

    def __enter__(self) -> _Live:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.running is not None:
            self.running.stop()
        self.porch.close()
        self.cluster.close()

    def annotate_secret(self, servers: str) -> None:
        secret = self.cluster.get(SECRET_KIND, ObjectKey(NS, SECRET))
        assert secret is not None
        annotations = {SERVERS_ANNOTATION: servers}
        self.cluster.update({**secret, "metadata": {**secret["metadata"], "annotations": annotations}})

    def set_password(self, password: str) -> None:
        secret = self.cluster.get(SECRET_KIND, ObjectKey(NS, SECRET))
        assert secret is not None
        self.cluster.update({**secret, "stringData": {"password": password}})

    def condition(self, kind: Kind, name: str, type_: str, status: str) -> dict[str, Any] | None:
        obj = self.cluster.get(kind, ObjectKey(NS, name))
        found = conditions.find(conditions.conditions_of(obj or {}), type_)
        return dict(found) if found is not None and found.get("status") == status else None

    def ready_condition(self, name: str, status: str) -> dict[str, Any] | None:
        return self.condition(REPOSITORY, name, "Ready", status)

    def texts(self) -> list[str]:
        """Everything a person could read: Events, and every Repository's and variant's status."""
        found = [f"{e.get('reason')} {e.get('message')}" for e in self.cluster.list(EVENT).items]
        for kind in (REPOSITORY, PACKAGE_VARIANT):
            found += [str(obj.get("status")) for obj in self.cluster.list(kind).items]
        return found


class _CommandLines:
    """Polls /proc while the block runs: every git process's arguments and environment, checked
    for `secret` (`processes` counts the git processes seen)."""

    def __init__(self, secret: str) -> None:
        self.secret, self.leaks, self.processes = secret.encode(), [], 0
        self._seen: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> _CommandLines:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _poll(self) -> None:
        while not self._stop.is_set():
            for entry in Path("/proc").iterdir():
                if not entry.name.isdigit() or int(entry.name) == os.getpid():
                    continue
                try:
                    cmdline = (entry / "cmdline").read_bytes()
                    environ = (entry / "environ").read_bytes()
                except OSError:
                    continue
                if b"git" not in cmdline.split(b"\0", 1)[0]:
                    continue
                if int(entry.name) not in self._seen:
                    self._seen.add(int(entry.name))
                    self.processes += 1
                if self.secret in cmdline or self.secret in environ:
                    self.leaks.append(cmdline.replace(b"\0", b" ").decode(errors="replace"))
            self._stop.wait(0.002)  # git processes live for tens of milliseconds at least

