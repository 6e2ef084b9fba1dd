"""`porchkit manager --porch`: which Porch the PackageVariant controllers get, and what it needs."""

from __future__ import annotations

import threading
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from porchkit import cli
from porchvariant.crds import crds
from porchvariant.manager import PORCH
from porchvariant.porch_client import PACKAGE_REVISION, PorchClient
from reconcile import EmbeddedCluster
from reconcile.errors import NotFound, ReconcileError
from reconcile.routing import RoutedCluster
from tests.porchvariant.variants_support import NS, Repos, eventually


def parse(*argv: str) -> Any:
    return cli.build_parser("manager")[0].parse_args(["manager", *argv])


@pytest.mark.parametrize(("argv", "message"), [
    (["--embedded", "--porch", "cluster"], "--porch cluster: the embedded API server has no Porch server"),
    (["--git-cache", "/tmp/x"], "--git-cache and --git-fetch-period are for the embedded Porch"),
    (["--porch", "cluster", "--git-fetch-period", "5s"], "--git-cache and --git-fetch-period are for the embedded"),
])
def test_flags_that_do_not_go_together_are_one_line_and_status_1(argv: list[str], message: str,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["manager", "--controllers", "packagevariant", *argv]) == 1
    err = capsys.readouterr().err
    assert err.startswith("porchkit: ") and message in err and err.count("\n") == 1


def test_a_bad_fetch_period_is_refused_by_the_parser(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse("--porch", "embedded", "--git-fetch-period", "soon")
    assert "'soon' is not a duration" in capsys.readouterr().err


def test_the_cluster_porch_leaves_the_cluster_as_it_is() -> None:
    with EmbeddedCluster() as server, ExitStack() as stack:
        assert PORCH.extend(parse(), server, stack, lambda: True) is server


def _announcers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "porch-announce"]


def test_the_embedded_porch_serves_porch_beside_the_api_server_and_stops_with_the_manager(tmp_path: Path) -> None:
    repos = Repos(tmp_path)
    with EmbeddedCluster() as server:  # stands in for the real API server: it holds Repositories only
        server.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        for crd in crds():
            server.create(crd)
        for repository in repos.repositories():
            server.create(repository)
        before = len(_announcers())
        with ExitStack() as stack:
            routed = PORCH.extend(parse("--porch", "embedded", "--git-cache", str(tmp_path / "cache")), server,
                                  stack, lambda: True)
            assert isinstance(routed, RoutedCluster)
            names = {pr["metadata"]["name"] for pr in PorchClient(routed).revisions(NS)}
            assert {"catalog.web.v1", "catalog.web.v2"} <= names
            with pytest.raises(NotFound):
                server.list(PACKAGE_REVISION)  # nothing of Porch's reached the API server
            assert len(_announcers()) == before + 1
        assert len(_announcers()) == before  # closed with the manager


def test_on_the_embedded_api_server_the_porch_is_served_there(tmp_path: Path) -> None:
    with EmbeddedCluster() as cluster, ExitStack() as stack:
        assert PORCH.extend(parse("--embedded"), cluster, stack, lambda: True) is cluster
        assert cluster.list(PACKAGE_REVISION).items == []


def test_the_extension_is_what_the_face_gives_every_porch_controller() -> None:
    extensions = parse().controller_extensions
    assert {name: ext is PORCH for name, ext in extensions.items()} == {
        "packagevariant": True, "packagevariantset": True, "approval": True}
    with pytest.raises(ReconcileError):
        PORCH.check(parse("--embedded", "--porch", "cluster"))


class _CountedLists:
    """A cluster that counts the Repository lists asked of it (every other call goes through)."""

    def __init__(self, cluster: EmbeddedCluster) -> None:
        self.cluster, self.repository_lists = cluster, 0

    def list(self, kind: Any, **kwargs: Any) -> Any:
        if kind.kind == "Repository":
            self.repository_lists += 1
        return self.cluster.list(kind, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cluster, name)


def test_the_api_servers_repositories_are_watched_not_listed_on_every_request(tmp_path: Path) -> None:
    repos = Repos(tmp_path)
    with EmbeddedCluster() as server:
        server.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        for crd in crds():
            server.create(crd)
        catalog = repos.repositories()[0]
        server.create(catalog)
        counted = _CountedLists(server)
        with ExitStack() as stack:
            routed = PORCH.extend(parse("--porch", "embedded", "--git-cache", str(tmp_path / "cache")),
                                  counted, stack, lambda: True)  # type: ignore[arg-type]
            porch = PorchClient(routed)
            eventually(lambda: {"catalog.web.v1", "catalog.web.v2"} <= {pr["metadata"]["name"]
                                                                       for pr in porch.revisions(NS)})
            lists = counted.repository_lists
            for _ in range(20):
                porch.revisions(NS)
            assert counted.repository_lists == lists  # the informer's cache answered
            # A Repository made later (the same git repository under another name) is seen through
            # the watch, and served.
            server.create({**catalog, "metadata": {**catalog["metadata"], "name": "mirror"}})
            eventually(lambda: "mirror.web.v2" in {pr["metadata"]["name"] for pr in porch.revisions(NS)})
            assert counted.repository_lists == lists
