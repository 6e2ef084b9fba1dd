"""The PackageVariant controllers at scale, on the embedded Porch over real git repositories.

One PackageVariantSet fans one package out to REPOSITORIES × PACKAGES downstreams (default
10 × 100 = 1,000), each with a package context. Timed, each as a whole local run
(`porchvariant.local_run.reconcile_manifests`, what `porchkit variants reconcile` runs: start-up,
caches, controllers until idle), in one process:

  * local: every Repository (the upstream catalog and the deployment repositories) a bare git
    repository on disk.
      - the first run, which creates every draft (target: under 60 s for 1,000);
      - a second run with nothing to do (target: under 5 s), which must write nothing to git.
  * remote: the same fan-out with every Repository on a git server: `git http-backend` behind
    apache2 on 127.0.0.1, over TLS with basic auth (tests/gitservers/https.py), the Repositories
    naming it by https URL with a basic-auth Secret and Porch's CA bundle Secret, mirrored in a
    fresh `--git-cache` directory (RemoteSettings.cache).
      - the first run (target: under 2× the local first run);
      - a second run with the same cache and nothing to do, which must push nothing (the server's
        refs unchanged, no receive-pack POST) and fetch each repository at most once. Fetches and
        pushes are counted on the server side, from apache's access log: a fetch is an answered
        `info/refs?service=git-upload-pack` GET (one per `git fetch`), a push a `git-receive-pack`
        POST. Its time is printed, without a target.
    The git commands that talk to the server (fetch, push: `Transport.run`) are also counted and
    timed, by wrapping that method in this process only (how many, ms each, how many at once at
    most, the wall time during which one ran), so that a slow remote run says where its time went.

The remote part needs the test suite's git server binaries (tests/gitservers: apache2,
git-http-backend, openssl and whatever else `require_git_servers()` asks for; install.sh installs
them). Without them it is skipped with the reason (not a failure), unless REQUIRE_GIT_SERVERS=1.

Run: `python bench/variants_bench.py [REPOSITORIES PACKAGES]` from the repository root (or `make
bench`). Exits non-zero if a target is missed, the idle runs write anything or the remote idle
run fetches a repository more than once.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from porchvariant.embedded.git.repository import GitPackageRepository
from porchvariant.embedded.git.transport import Transport
from porchvariant.local_run import LocalRun, RemoteSettings, reconcile_manifests
from porchvariant.manifests import Manifest

# `python bench/variants_bench.py` puts bench/ on sys.path, not the repository root, and the remote
# run borrows the test suite's git server (tests/gitservers): the root goes on the path (last, so
# the installed porchkit packages still win).
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

try:  # the test suite's server, which reports missing binaries as a pytest skip or failure
    import pytest

    from tests.gitservers import require_git_servers
    from tests.gitservers.https import GitRequests, HttpsGitServer, https_git_server
except ImportError as err:  # installed without the test extra, or without the tests directory
    NO_GIT_SERVERS: str | None = f"tests.gitservers cannot be imported ({err})"
else:
    NO_GIT_SERVERS = None

NAMESPACE = "fleet"
SECRET = "git-auth"
ENV = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@example.com",
       "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@example.com"}
PACKAGE = {
    "Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: network\n",
    "config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: network\ndata:\n  mtu: \"1500\"\n",
}
DRAFTS_TARGET, IDLE_TARGET = 60.0, 5.0  # seconds, for 1,000 drafts
REMOTE_RATIO_TARGET = 2.0  # remote first run / local first run
IDLE_FETCHES_PER_REPO = 1


def git(*args: str) -> None:
    subprocess.run(["git", *args], check=True, capture_output=True, env=ENV)


def bare_repository(work: Path, bare: Path) -> Path:
    """A bare repository at `bare` with one commit on main (made in the working directory `work`)."""
    git("init", "-q", "-b", "main", str(work))
    (work / "README.md").write_text(f"{bare.stem}\n")
    git("-C", str(work), "add", "-A")
    git("-C", str(work), "commit", "-q", "-m", "start")
    git("clone", "-q", "--bare", str(work), str(bare))
    return bare


def repository(name: str, url: str, *, deployment: bool, secret: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {"repo": url, "branch": "main", **({"secretRef": {"name": SECRET}} if secret else {})}
    return {"apiVersion": "config.porch.kpt.dev/v1alpha1", "kind": "Repository",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"type": "git", "deployment": deployment, "git": spec}}


def manifests(work: Path, repos: Path, repositories: int, packages: int,
              server: HttpsGitServer | None = None) -> tuple[list[Manifest], list[str]]:
    """The manifests of the fan-out, their repositories made as `repos/<name>.git` (seeded from
    working directories under `work`), and the repository names. With `server` (which serves
    `repos`), the Repositories name it by URL, with the Secret and the CA bundle it needs."""
    names = ["catalog", *(f"edge-{i:02d}" for i in range(repositories))]
    for name in names:
        bare_repository(work / f"{name}-work", repos / f"{name}.git")
    with GitPackageRepository(repos / "catalog.git") as repo:
        repo.approve(repo.create_draft("network", "v1", PACKAGE))
    objects: list[dict[str, Any]] = []
    for name in names:
        url = server.url(f"{name}.git") if server else str(repos / f"{name}.git")
        objects.append(repository(name, url, deployment=name != "catalog", secret=server is not None))
    if server is not None:
        for name in names:
            server.hand_over(repos / f"{name}.git")
        objects += [{"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/basic-auth",
                     "metadata": {"name": SECRET, "namespace": NAMESPACE},
                     "stringData": {"username": server.username, "password": server.password}},
                    {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"{NAMESPACE}-ca-bundle",
                                                                        "namespace": NAMESPACE},
                     "stringData": {"ca.crt": server.ca_pem.decode()}}]
    sites = [f"site-{j:03d}" for j in range(packages)]
    objects.append({
        "apiVersion": "config.porch.kpt.dev/v1alpha2", "kind": "PackageVariantSet",
        "metadata": {"name": "network", "namespace": NAMESPACE},
        "spec": {"upstream": {"repo": "catalog", "package": "network", "revision": 1},
                 "targets": [{"repositories": [{"name": name, "packageNames": sites} for name in names[1:]],
                              "template": {"packageContext": {"dataExprs": [
                                  {"key": "site", "valueExpr": "repoDefault + '/' + packageDefault"}]}}}]}})
    return [Manifest(obj, "bench.yaml") for obj in objects], names


def local_refs(repos: Path) -> str:
    return "".join(subprocess.run(["git", "-C", str(path), "for-each-ref"], capture_output=True, text=True,
                                  check=True).stdout for path in sorted(repos.glob("*.git")))


@dataclass(slots=True)
class GitTime:
    """Calls of one git command that talks to the server, and the seconds they took (summed over
    threads, so it may exceed the wall time when workers push at once)."""

    calls: int = 0
    seconds: float = 0.0


@dataclass(slots=True)
class WireTimes:
    """What `timed_wire` saw: time per git command, how many ran at once at most, and the wall time
    during which at least one ran."""

    by_command: dict[str, GitTime] = field(default_factory=dict)
    most_at_once: int = 0
    busy: float = 0.0
    _running: int = 0
    _busy_since: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def started(self) -> float:
        with self._lock:
            now = time.perf_counter()
            if self._running == 0:
                self._busy_since = now
            self._running += 1
            self.most_at_once = max(self.most_at_once, self._running)
            return now

    def ended(self, command: str, started: float) -> None:
        with self._lock:
            now = time.perf_counter()
            spent = self.by_command.setdefault(command, GitTime())
            spent.calls += 1
            spent.seconds += now - started
            self._running -= 1
            if self._running == 0:
                self.busy += now - self._busy_since

    def describe(self) -> str:
        commands = ", ".join(f"{command} {t.calls} x {1000 * t.seconds / t.calls:.0f} ms = {t.seconds:.1f} s"
                             for command, t in sorted(self.by_command.items()))
        return f"{commands}; at most {self.most_at_once} at once, {self.busy:.1f} s of wall time" if commands else \
            "none"


@contextmanager
def timed_wire() -> Iterator[WireTimes]:
    """Count and time every `Transport.run` (one git fetch or push against the server) meanwhile."""
    times, original = WireTimes(), Transport.run

    def run(self: Transport, git_dir: str, args: Sequence[str]) -> bytes:
        started = times.started()
        try:
            return original(self, git_dir, args)
        finally:
            times.ended(args[0], started)

    Transport.run = run  # type: ignore[method-assign]
    try:
        yield times
    finally:
        Transport.run = original  # type: ignore[method-assign]


@dataclass(slots=True)
class Runs:
    """A first run and an idle run of the same fan-out."""

    first: LocalRun
    first_seconds: float
    idle: LocalRun
    idle_seconds: float
    wrote: bool  # the idle run changed a ref

    def created(self) -> int:
        return sum(1 for change in self.first.changes if change.change == "created")

    def problems(self) -> list[str]:
        return self.first.problems + self.idle.problems


def timed(run: Callable[[], LocalRun]) -> tuple[LocalRun, float]:
    started = time.perf_counter()
    result = run()
    return result, time.perf_counter() - started


def run_local(repositories: int, packages: int) -> Runs:
    with tempfile.TemporaryDirectory(prefix="variants-bench-") as tmp:
        root = Path(tmp)
        (root / "repos").mkdir()
        objects, _ = manifests(root, root / "repos", repositories, packages)
        first, first_seconds = timed(lambda: reconcile_manifests(objects, state=root / "state", timeout=3600))
        before = local_refs(root / "repos")
        idle, idle_seconds = timed(lambda: reconcile_manifests(objects, state=root / "state", timeout=3600))
        return Runs(first, first_seconds, idle, idle_seconds, local_refs(root / "repos") != before)


@dataclass(slots=True)
class RemoteRuns:
    runs: Runs
    first_requests: GitRequests
    idle_requests: GitRequests
    first_wire: WireTimes
    idle_wire: WireTimes
    names: list[str]


def run_remote(repositories: int, packages: int) -> RemoteRuns:
    with tempfile.TemporaryDirectory(prefix="variants-bench-remote-") as tmp, https_git_server() as server:
        root = Path(tmp)
        objects, names = manifests(root, server.repos, repositories, packages, server)
        settings = RemoteSettings(cache=root / "git-cache")

        def reconcile() -> LocalRun:
            return reconcile_manifests(objects, state=root / "state", timeout=3600, remotes=settings)

        def server_refs() -> dict[str, dict[str, str]]:
            return {name: server.refs(f"{name}.git") for name in names}

        mark = server.log_mark()
        with timed_wire() as first_wire:
            first, first_seconds = timed(reconcile)
        first_requests = server.requests(since=mark)
        before, mark = server_refs(), server.log_mark()
        with timed_wire() as idle_wire:
            idle, idle_seconds = timed(reconcile)
        idle_requests = server.requests(since=mark)
        runs = Runs(first, first_seconds, idle, idle_seconds, server_refs() != before)
        return RemoteRuns(runs, first_requests, idle_requests, first_wire, idle_wire, names)


def git_servers_missing() -> tuple[str, bool] | None:
    """Why the git server cannot run here, and whether that is a failure (REQUIRE_GIT_SERVERS=1);
    None when it can."""
    if NO_GIT_SERVERS is not None:
        return NO_GIT_SERVERS, os.environ.get("REQUIRE_GIT_SERVERS") == "1"
    try:
        require_git_servers()
    except pytest.skip.Exception as skipped:
        return str(skipped.msg), False
    except pytest.fail.Exception as failed:
        return str(failed.msg), True
    return None


def per_repo(counts: Counter[str], names: list[str]) -> str:
    return " ".join(f"{name}={counts.get(f'{name}.git', 0)}" for name in names)


def main(repositories: int, packages: int) -> int:
    count = repositories * packages
    local = run_local(repositories, packages)
    print(f"local: {count} drafts ({repositories} repositories x {packages} packages): {local.first_seconds:.1f} s, "
          f"{count / local.first_seconds:.0f} drafts/s (target for 1,000: < {DRAFTS_TARGET:.0f} s)")
    print(f"local idle run: {local.idle_seconds:.2f} s, {len(local.idle.changes)} changes, "
          f"git {'WRITTEN' if local.wrote else 'untouched'} (target for 1,000: < {IDLE_TARGET:.0f} s, nothing written)")
    problems = local.problems()
    ok = (local.created() == count and not local.wrote and not local.idle.changes
          and local.first_seconds < DRAFTS_TARGET and local.idle_seconds < IDLE_TARGET)

    missing = git_servers_missing()
    if missing is not None:
        why, fatal = missing
        print(f"remote: {'FAILED' if fatal else 'skipped'}: {why}")
        ok = ok and not fatal
    else:
        remote = run_remote(repositories, packages)
        runs, first, idle = remote.runs, remote.first_requests, remote.idle_requests
        ratio = runs.first_seconds / local.first_seconds
        print(f"remote (https on 127.0.0.1, fresh git cache): {count} drafts: {runs.first_seconds:.1f} s, "
              f"{count / runs.first_seconds:.0f} drafts/s; remote/local {ratio:.2f}x "
              f"(target: < {REMOTE_RATIO_TARGET:g}x)")
        print(f"  server saw: {sum(first.fetches.values())} fetches, {sum(first.upload_packs.values())} upload-pack "
              f"POSTs, {sum(first.pushes.values())} pushes, {first.refused} refused (401) requests")
        print(f"  git over the wire (summed over threads): {remote.first_wire.describe()}")
        pushes = sum(idle.pushes.values())
        most = max((idle.fetches.get(f"{name}.git", 0) for name in remote.names), default=0)
        print(f"remote idle run: {runs.idle_seconds:.2f} s, {len(runs.idle.changes)} changes, "
              f"server refs {'CHANGED' if runs.wrote else 'unchanged'}, {pushes} pushes, fetches per repository: "
              f"{per_repo(idle.fetches, remote.names)} (target: no push, <= {IDLE_FETCHES_PER_REPO} fetch each)")
        print(f"  git over the wire: {remote.idle_wire.describe()}")
        problems += runs.problems()
        ok = (ok and runs.created() == count and not runs.wrote and not runs.idle.changes and pushes == 0
              and most <= IDLE_FETCHES_PER_REPO and ratio < REMOTE_RATIO_TARGET)
    for problem in problems[:5]:
        print(f"problem: {problem}")
    return 0 if ok and not problems else 1


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:3]] or [10, 100]
    sys.exit(main(*args))
