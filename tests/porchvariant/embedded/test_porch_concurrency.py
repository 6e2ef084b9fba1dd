"""The embedded Porch under concurrent writers: renders and git writes (a remote's push included)
run outside its lock, so these check what that must not break, on local bare repositories and on
an https git server: one winner per revision, each change announced once with growing versions,
and readers that never fail nor miss what existed before they asked."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from porchvariant.embedded._porch_remotes import RemoteSettings
from porchvariant.embedded.git.mirror import PUSHES_AT_ONCE, Mirror, RefUpdate
from porchvariant.embedded.git.repository import GitConflict, GitPackageRepository
from porchvariant.embedded.git.transport import BasicAuth, Transport
from porchvariant.embedded.porch import EmbeddedPorch
from porchvariant.porch_client import PACKAGE_REVISION, PACKAGE_REVISION_RESOURCES, PorchClient, clone_task
from reconcile import EmbeddedCluster
from reconcile.cluster import Obj, ObjectKey, WatchEvent
from reconcile.errors import Conflict
from tests.gitservers.https import HttpsGitServer
from tests.porchvariant.embedded.porch_env import crd
from tests.porchvariant.embedded.remote_support import Served
from tests.porchvariant.variants_support import NS, Repos
from tests.waiting import eventually

DEPLOYMENTS = ("d0", "d1", "d2")


class Setup:
    """An EmbeddedPorch over a catalog (`web` v1 published) and DEPLOYMENTS, local or on a server."""

    def __init__(self, tmp: Path, server: HttpsGitServer | None, renderer: Any = None) -> None:
        self.tmp, self.served = tmp, None
        self.cluster = EmbeddedCluster()
        self.cluster.create(crd("Repository", "repositories", "config.porch.kpt.dev"))
        self.cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        if server is None:
            self.local: Repos | None = Repos(tmp, DEPLOYMENTS)
            objects = self.local.repositories()
            remotes = None
        else:
            self.local = None
            self.served = Served(server, tmp, DEPLOYMENTS)
            objects = self.served.objects()
            remotes = RemoteSettings(cache=tmp / "cache")
        for obj in objects:
            self.cluster.create(obj)
        self.porch = EmbeddedPorch(self.cluster, renderer=renderer, remotes=remotes, announce_every=0.02)
        self.client = PorchClient(self.cluster)

    def close(self) -> None:
        self.porch.close()
        self.cluster.close()

    def open(self, name: str) -> GitPackageRepository:
        """A new handle on repository `name` (through a mirror of its own, for a server)."""
        if self.served is not None:
            return self.served.open(name, self.tmp / f"reader-{time.monotonic_ns()}")
        assert self.local is not None
        return GitPackageRepository(self.local.deployments[name])

    def clone(self, repository: str, workspace: str, package: str = "web") -> Obj:
        return self.client.create_revision(NS, repository=repository, package=package, workspace=workspace,
                                           task=clone_task("catalog.web.v1"))


@pytest.fixture(params=["local", "remote"])
def setup(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Setup]:
    server = request.getfixturevalue("server") if request.param == "remote" else None
    made = Setup(tmp_path, server)
    yield made
    made.close()


def run_at_once(calls: list[Callable[[], Any]]) -> list[Any]:
    """Run every call in its own thread, all released together; each one's result or exception."""
    barrier = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)

    def run(index: int) -> None:
        barrier.wait()
        try:
            results[index] = calls[index]()
        except Exception as err:  # noqa: BLE001 - handed back to the test
            results[index] = err

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    return results


class Watched:
    """Every event of a watch on PackageRevisions from `resource_version`, collected by a thread."""

    def __init__(self, porch: EmbeddedPorch, resource_version: str) -> None:
        self.stream = porch.watch(PACKAGE_REVISION, resource_version=resource_version, namespace=NS)
        self.events: list[WatchEvent] = []
        self.thread = threading.Thread(target=lambda: self.events.extend(self.stream), daemon=True)
        self.thread.start()

    def until(self, done: Callable[[list[WatchEvent]], bool], timeout: float = 30) -> list[WatchEvent]:
        """The events seen so far, once `done` accepts them; fails past `timeout` s."""
        @functools.wraps(done)  # a failure names `done`
        def seen() -> bool:
            return done(list(self.events))
        eventually(seen, timeout, interval=0.02,
                   show=lambda: [(e.type, e.object["metadata"]["name"]) for e in self.events])
        return list(self.events)

    def stop(self) -> None:
        self.stream.close()  # type: ignore[attr-defined]
        self.thread.join(5)


def versions_grow(events: list[WatchEvent]) -> bool:
    versions = [int(e.object["metadata"]["resourceVersion"]) for e in events]
    return all(a < b for a, b in zip(versions, versions[1:], strict=False))


def test_two_updates_of_one_draft_at_once_end_in_one_success_and_one_conflict(setup: Setup) -> None:
    draft = setup.clone("d0", "ws")
    resources = setup.client.resources(draft)
    assert resources is not None
    files = dict(resources["spec"]["resources"])

    def write(color: str) -> Callable[[], Any]:
        return lambda: setup.client.update_resources(resources, {**files, "color.txt": f"{color}\n"})

    results = run_at_once([write("red"), write("blue")])
    conflicts = [r for r in results if isinstance(r, Conflict)]
    winners = [r for r in results if not isinstance(r, Exception)]
    assert len(conflicts) == 1 and len(winners) == 1, results
    winner = winners[0][0]["spec"]["resources"]["color.txt"]
    with setup.open("d0") as repo:  # what git (the server, for a remote) holds: the winner's files
        assert repo.read_resources(repo.get_revision("web", "ws"))["color.txt"] == winner
    served = setup.client.resources(draft)
    assert served is not None and served["spec"]["resources"]["color.txt"] == winner


def test_two_threads_writing_one_revision_through_the_git_layer_one_wins(setup: Setup) -> None:
    """Below the embedded Porch's per-revision writer lock: the git layer's own compare-and-swap
    (the mirror's old values, then the server's leases) lets exactly one of two writers through."""
    setup.clone("d1", "ws")
    with setup.open("d1") as one, setup.open("d1") as other:
        revision = one.get_revision("web", "ws")
        files = one.read_resources(revision)
        calls = [lambda: one.write_resources(revision, {**files, "who.txt": "one\n"}),
                 lambda: one.write_resources(revision, {**files, "who.txt": "one again\n"}),
                 lambda: other.write_resources(revision, {**files, "who.txt": "other\n"})]
        results = run_at_once(calls)
        winners = [r for r in results if not isinstance(r, Exception)]
        assert len(winners) == 1 and all(isinstance(r, GitConflict) for r in results if r not in winners), results
        other.fetch()
        for handle in (one, other):
            assert handle.read_resources(handle.get_revision("web", "ws")) == handle.read_resources(winners[0])


def test_many_creates_at_once_all_succeed_and_each_is_added_once_with_growing_versions(setup: Setup) -> None:
    listed = setup.client.cluster.list(PACKAGE_REVISION, namespace=NS)
    watched = Watched(setup.porch, listed.resource_version)
    stop = threading.Event()
    errors: list[BaseException] = []

    def read() -> None:  # reads hand versions out while the writes are in flight
        while not stop.is_set():
            try:
                setup.client.cluster.list(PACKAGE_REVISION, namespace=NS)
            except BaseException as err:  # noqa: BLE001 - reported by the test
                errors.append(err)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    wanted = [(repo, f"ws{i}") for repo in DEPLOYMENTS for i in range(4)]  # three repositories, four each
    try:
        results = run_at_once([functools.partial(setup.clone, repo, ws) for repo, ws in wanted])
    finally:
        stop.set()
        reader.join(10)
    assert not errors, errors
    assert all(not isinstance(r, Exception) for r in results), results
    names = {f"{repo}.web.{ws}" for repo, ws in wanted}
    assert {r["metadata"]["name"] for r in results} == names

    watched.until(lambda seen: names <= {e.object["metadata"]["name"] for e in seen})
    setup.porch.announce_repositories()  # a whole announce pass since the creates: it must add nothing
    setup.clone("d0", "last")  # announced after whatever that pass added, so seen after it too
    events = watched.until(lambda seen: any(e.object["metadata"]["name"] == "d0.web.last" for e in seen))
    watched.stop()
    events = events[:[e.object["metadata"]["name"] for e in events].index("d0.web.last")]
    added = [e.object["metadata"]["name"] for e in events if e.type == "ADDED"]
    assert sorted(added) == sorted(names), added  # each exactly once
    assert versions_grow(events), [(e.type, e.object["metadata"]["resourceVersion"]) for e in events]
    # What the watch says last of each is what is served now.
    final = {o["metadata"]["name"]: o["metadata"]["resourceVersion"]
             for o in setup.client.cluster.list(PACKAGE_REVISION, namespace=NS).items if o["metadata"]["name"] in names}
    last = {e.object["metadata"]["name"]: e.object["metadata"]["resourceVersion"] for e in events}
    assert final == {name: last[name] for name in names}
    with setup.open("d2") as repo:
        assert {r.workspace for r in repo.list_revisions() if r.package == "web"} >= {f"ws{i}" for i in range(4)}


def test_a_reader_listing_while_writers_write_never_fails_nor_misses_an_older_revision(setup: Setup) -> None:
    created: list[str] = []  # names whose create returned
    lock = threading.Lock()
    stop = threading.Event()
    errors: list[BaseException] = []
    lists = 0

    def read() -> None:
        nonlocal lists
        while not stop.is_set():
            with lock:
                before = set(created)
            try:
                for kind in (PACKAGE_REVISION, PACKAGE_REVISION_RESOURCES):
                    names = {o["metadata"]["name"] for o in setup.client.cluster.list(kind, namespace=NS).items}
                    missing = before - names
                    assert not missing, f"{kind.kind}: {sorted(missing)} missing"
            except BaseException as err:  # noqa: BLE001 - reported by the test
                errors.append(err)
                return
            lists += 1

    def write(repository: str, index: int) -> None:
        draft = setup.clone(repository, f"w{index}")
        with lock:
            created.append(draft["metadata"]["name"])
        resources = setup.client.resources(draft)
        assert resources is not None
        setup.client.update_resources(resources, {**resources["spec"]["resources"], "n.txt": f"{index}\n"})

    readers = [threading.Thread(target=read, daemon=True) for _ in range(2)]
    for reader in readers:
        reader.start()
    try:
        results = run_at_once([functools.partial(write, repo, i) for repo in DEPLOYMENTS[:2] for i in range(3)])
    finally:
        stop.set()
        for reader in readers:
            reader.join(10)
    assert all(r is None for r in results), results
    assert not errors, errors
    assert lists > 0
    for name in created:
        resources = setup.client.cluster.get(PACKAGE_REVISION_RESOURCES, ObjectKey(NS, name))
        assert resources is not None and "n.txt" in resources["spec"]["resources"]


# --- group commit: concurrent writers to one mirror share a push ------------------------------------


def _mirror(served: Served, cache: Path, name: str) -> Mirror:
    transport = Transport(served.server.url(f"{name}.git"), ca_bundle=lambda: served.server.ca_pem,
                          credentials=lambda: BasicAuth(served.server.username, served.server.password))
    mirror = Mirror(cache, transport, "main")
    mirror.fetch()
    return mirror


def _counted_pushes(mirror: Mirror, monkeypatch: pytest.MonkeyPatch) -> list[list[RefUpdate]]:
    pushed: list[list[RefUpdate]] = []
    original = mirror.push

    def push(updates: Sequence[RefUpdate]) -> None:
        pushed.append(list(updates))
        original(updates)

    monkeypatch.setattr(mirror, "push", push)
    return pushed


def test_writers_to_one_mirror_at_once_share_pushes(server: HttpsGitServer, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    served = Served(server, tmp_path, ("d0",))
    with served.open("d0", tmp_path / "cache") as repo:
        assert repo._remote is not None
        pushed = _counted_pushes(repo._remote, monkeypatch)
        kptfile = "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: p\n"
        results = run_at_once([functools.partial(repo.create_draft, f"p{i}", "ws", {"Kptfile": kptfile})
                               for i in range(8)])
    assert all(not isinstance(r, Exception) for r in results), results
    assert len(pushed) < 8, [len(p) for p in pushed]  # some went out together
    on_server = server.refs("d0.git")
    for result in results:
        assert on_server[result.ref] == result.commit


def test_a_lost_lease_in_a_shared_push_fails_only_its_writer(server: HttpsGitServer, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    served = Served(server, tmp_path, ("d0",))
    mirror = _mirror(served, tmp_path / "cache", "d0")
    tip = server.refs("d0.git")["refs/heads/main"]
    mirror.push([RefUpdate("refs/heads/drafts/taken/ws", tip, None)])  # someone else's, since
    pushed = _counted_pushes(mirror, monkeypatch)
    good = [[RefUpdate(f"refs/heads/drafts/p{i}/ws", tip, None)] for i in range(3)]
    stale = [RefUpdate("refs/heads/drafts/taken/ws", None, "1" * len(tip))]  # a delete from a value it never had
    with mirror._group:  # hold the group until all four wait, so that one push takes them all
        mirror._pushing = PUSHES_AT_ONCE
    results: list[Any] = []
    threads = [threading.Thread(target=lambda u=updates: results.append(_outcome(mirror.push_together, u)))
               for updates in [*good, stale]]
    for thread in threads:
        thread.start()
    eventually(lambda: len(mirror._queued) >= 4, 10.0, interval=0.01)
    with mirror._group:
        mirror._pushing = PUSHES_AT_ONCE - 1
        mirror._group.notify_all()
    for thread in threads:
        thread.join(60)
    assert sorted(type(r).__name__ for r in results) == ["NoneType", "NoneType", "NoneType", "PushRejected"]
    assert len(pushed[0]) == 4 and len(pushed) == 5  # together, rejected; then each on its own
    on_server = server.refs("d0.git")
    assert all(on_server[updates[0].ref] == tip for updates in good)
    assert on_server["refs/heads/drafts/taken/ws"] == tip


def _outcome(call: Callable[..., Any], *args: Any) -> Any:
    try:
        return call(*args)
    except Exception as err:  # noqa: BLE001 - handed back to the test
        return err
