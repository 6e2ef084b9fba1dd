"""/healthz, /readyz and /metrics over HTTP: silent watches, sync, standby readiness, the server itself."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Callable, Iterator

import pytest

from reconcile import FakeClock, Kind
from reconcile.controller import Controller
from reconcile.embedded import EmbeddedCluster
from reconcile.health import DEFAULT_SILENCE, HealthServer, for_manager, parse_address
from reconcile.manager import LeaderElection, Manager
from reconcile.outcome import Done
from tests.reconcile.support import GatedLists, Partitioned, Running, configmap
from tests.waiting import eventually, step_until

CONFIGMAP = Kind("v1", "ConfigMap")
SECRET = Kind("v1", "Secret")


def get(server: HealthServer, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}{path}", timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        with err:
            return err.code, err.read().decode()


def controller(clock: FakeClock, kind: Kind = CONFIGMAP, name: str = "cm") -> Controller:
    return Controller(name, kind, lambda key: Done(), clock=clock)


@pytest.fixture
def quiet(clock: FakeClock) -> Iterator[EmbeddedCluster]:
    """A cluster whose watches send no bookmarks within any test's time: a quiet watch is silent."""
    with EmbeddedCluster(clock=clock, bookmark_interval=10_000) as embedded:
        yield embedded


def test_healthz_fails_naming_the_kind_once_a_watch_is_silent_past_the_threshold(
        quiet: EmbeddedCluster, clock: FakeClock, run: Callable[[Manager], Running]) -> None:
    manager = Manager(quiet, clock=clock)
    manager.add(controller(clock))
    manager.add(controller(clock, SECRET, "secrets"))
    run(manager)
    eventually(lambda: manager.state == "running")
    with for_manager(manager, ("127.0.0.1", 0), silence=150) as server:
        assert get(server, "/healthz") == (200, "ok")
        clock.advance(100)
        quiet.create(configmap("news"))  # ConfigMaps speak; Secrets stay quiet
        (configmaps,) = [i for i in manager.cache.informers if i.kind == CONFIGMAP]
        eventually(lambda: configmaps.last_activity == clock.monotonic())
        assert get(server, "/healthz") == (200, "ok")
        clock.advance(51)
        code, body = get(server, "/healthz")
        assert code == 500
        assert "[-]watches failed: watch silent for more than 150s: Secret (silent for 151s)" in body
        assert "ConfigMap" not in body and body.endswith("healthz check failed\n")


def test_a_quiet_watch_kept_alive_by_bookmarks_stays_healthy(cluster: EmbeddedCluster, clock: FakeClock,
                                                             run: Callable[[Manager], Running]) -> None:
    manager = Manager(cluster, clock=clock)  # bookmarks every 60 s, the API server's rhythm
    manager.add(controller(clock))
    run(manager)
    eventually(lambda: manager.state == "running")
    with for_manager(manager, ("127.0.0.1", 0)) as server:
        start = clock.monotonic()
        step_until(clock, lambda: clock.monotonic() >= start + 2 * DEFAULT_SILENCE, limit=2 * DEFAULT_SILENCE,
                   step=5)
        assert get(server, "/healthz") == (200, "ok")
        (informer,) = manager.cache.informers
        assert clock.monotonic() - informer.last_activity <= 60


def test_readyz_fails_until_the_caches_have_synced_then_passes(cluster: EmbeddedCluster, clock: FakeClock,
                                                               run: Callable[[Manager], Running]) -> None:
    gated = GatedLists(cluster)
    manager = Manager(gated, clock=clock)  # type: ignore[arg-type]
    manager.add(controller(clock))
    with for_manager(manager, ("127.0.0.1", 0)) as server:
        code, body = get(server, "/readyz")
        assert code == 500 and "[-]manager failed: the manager has not started" in body
        run(manager)
        eventually(lambda: manager.state == "syncing")
        code, body = get(server, "/readyz")
        assert code == 500
        assert "[-]informers failed: informer caches not synced yet: ConfigMap" in body
        assert get(server, "/healthz") == (200, "ok")  # a slow first list fails readiness, not liveness
        gated.release()
        eventually(lambda: get(server, "/readyz") == (200, "ok"))


def test_readyz_verbose_lists_every_check_and_a_single_check_has_its_own_path(
        cluster: EmbeddedCluster, clock: FakeClock, run: Callable[[Manager], Running]) -> None:
    manager = Manager(cluster, clock=clock)
    manager.add(controller(clock))
    run(manager)
    eventually(lambda: manager.state == "running")
    with for_manager(manager, ("127.0.0.1", 0)) as server:
        assert get(server, "/readyz?verbose") == (
            200, "[+]ping ok\n[+]informers ok\n[+]manager ok\nreadyz check passed\n")
        assert get(server, "/healthz/watches") == (200, "ok")
        assert get(server, "/healthz/nope")[0] == 404
        assert get(server, "/elsewhere")[0] == 404


def test_readyz_fails_while_the_manager_shuts_down(cluster: EmbeddedCluster, clock: FakeClock,
                                                   run: Callable[[Manager], Running]) -> None:
    manager = Manager(cluster, clock=clock)
    manager.add(controller(clock))
    running = run(manager)
    eventually(lambda: manager.state == "running")
    with for_manager(manager, ("127.0.0.1", 0)) as server:
        assert running.stop() == 0
        code, body = get(server, "/readyz")
        assert code == 500 and "the manager is shutting down" in body


def test_a_standby_is_ready_while_it_can_read_the_lease_and_not_after(cluster: EmbeddedCluster,
                                                                      clock: FakeClock,
                                                                      run: Callable[[Manager], Running]) -> None:
    election = LeaderElection("default", "health-test")
    leader = Manager(cluster, clock=clock, leader_election=LeaderElection("default", "health-test", identity="a"))
    leader.add(controller(clock))
    run(leader)
    eventually(lambda: leader.state == "running")
    partitioned = Partitioned(cluster)
    standby = Manager(partitioned, clock=clock, leader_election=election)  # type: ignore[arg-type]
    standby.add(controller(clock))
    run(standby)
    eventually(lambda: standby.state == "standby")
    with for_manager(standby, ("127.0.0.1", 0)) as server:
        assert get(server, "/readyz") == (200, "ok")
        partitioned.cut()
        step_until(clock, lambda: get(server, "/readyz")[0] == 500, limit=election.lease_duration + 3)
        assert "the Lease default/health-test could not be read for 15s" in get(server, "/readyz")[1]


def test_a_failing_check_fails_its_probe_instead_of_the_server() -> None:
    def broken() -> str | None:
        raise KeyError("oops")

    with HealthServer(("127.0.0.1", 0), healthz={"broken": broken}) as server:
        code, body = get(server, "/healthz")
    assert code == 500 and "[-]broken failed: KeyError: 'oops'" in body


def test_metrics_is_404_without_metrics_and_the_server_stops_listening_when_stopped() -> None:
    server = HealthServer(("127.0.0.1", 0))
    server.start()
    port = server.port
    assert port != 0 and get(server, "/metrics")[0] == 404
    server.stop()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1)
    server.stop()  # idempotent


@pytest.mark.parametrize(("text", "expected"), [
    (":8081", ("", 8081)), ("127.0.0.1:0", ("127.0.0.1", 0)), ("[::1]:9000", ("::1", 9000)),
    ("localhost:8081", ("localhost", 8081)),
])
def test_addresses_parse_as_host_and_port(text: str, expected: tuple[str, int]) -> None:
    assert parse_address(text) == expected


@pytest.mark.parametrize("text", ["8081", "localhost", ":http", ":70000"])
def test_a_bad_address_is_refused_by_name(text: str) -> None:
    with pytest.raises(ValueError, match="expected host:port"):
        parse_address(text)

