"""Fixtures of the contract suite: every test runs once per backend.

- `embedded`: a fresh `EmbeddedCluster` per test, on a FakeClock, with a short watch history and
  bookmark interval (the embedded-only knobs; see support.Backend).
- `kube-http`: `KubeCluster` over real HTTP against an EmbeddedCluster behind the loopback
  front-end of tests/reconcile/apiserver.py, shared like a real server. It proves KubeCluster's
  side of the wire (URLs, bodies, watch streams, errors) on every contract test, in every run;
  it proves nothing about a real server's semantics, which is what `kube` is for.
- `kube`: a real API server through `KubeCluster.from_kubeconfig($PORCHKIT_TEST_KUBECONFIG)`,
  skipped when that variable is unset. The cluster is shared, so each test gets its own
  namespace (random suffix, deleted afterwards) and CRDs with unique groups, and finalizers a
  test leaves behind are removed on the way out. GC, namespace deletion and CRD establishment
  need kube-controller-manager (a bare envtest apiserver has none).

Tests marked `min_server("1.N", why)` assert what current servers do and older ones did not (the
embedded server follows current Kubernetes); on a real server older than 1.N they are skipped.
Tests marked `embedded_only(why)` assert a real-server behaviour that only the embedded server
can be made to show on demand (Gone from a tiny history, say); on kube they are skipped.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator

import pytest

from reconcile.clock import FakeClock
from reconcile.cluster import Cluster, Kind, ObjectKey
from reconcile.embedded import EmbeddedCluster
from reconcile.errors import ApiError
from tests.reconcile.contract.support import (
    CONFIGMAP,
    CRD,
    NAMESPACE,
    Backend,
    CustomKind,
    crd,
    eventually,
    release,
    served,
    token,
)

KUBECONFIG = "PORCHKIT_TEST_KUBECONFIG"
NO_KUBE = "no real API server: set PORCHKIT_TEST_KUBECONFIG to a kubeconfig to run the contract suite against one"
HISTORY = 64  # changes the embedded server keeps for watches: enough for any test, small enough to outrun
BOOKMARK_INTERVAL = 1.0  # fake seconds
HTTP_BOOKMARK_INTERVAL = 0.5  # real seconds, behind the HTTP front-end (a real server's is about 60)


@pytest.fixture(scope="session")
def kube_cluster() -> Iterator[Cluster]:
    path = os.environ.get(KUBECONFIG)
    if not path:
        pytest.skip(NO_KUBE)
    from reconcile.kube import KubeCluster  # only when a real server is there to talk to

    cluster = KubeCluster.from_kubeconfig(path)
    yield cluster
    close: Callable[[], None] | None = getattr(cluster, "close", None)
    if close is not None:
        close()


@pytest.fixture(scope="session")
def kube_version(kube_cluster: Cluster) -> tuple[int, int]:
    return kube_cluster.server_version()  # type: ignore[attr-defined, no-any-return]


def skip_if_older(node: pytest.Item, version: tuple[int, int]) -> None:
    """Skip a test marked `min_server("1.N", why)` on a real server older than 1.N."""
    marker = node.get_closest_marker("min_server")
    if marker is None:
        return
    major, minor = (int(part) for part in marker.args[0].split("."))
    if version < (major, minor):
        pytest.skip(f"needs Kubernetes {marker.args[0]} or later (the server is {version[0]}.{version[1]}): "
                    f"{marker.args[1]}")


@pytest.fixture(scope="session")
def kube_http_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    from reconcile.kube import KubeCluster
    from tests.reconcile.apiserver import ApiServer, write_kubeconfig

    with EmbeddedCluster(bookmark_interval=HTTP_BOOKMARK_INTERVAL) as embedded, ApiServer(embedded, token="t") as api:
        kubeconfig = write_kubeconfig(tmp_path_factory.mktemp("kube-http") / "kubeconfig", api.url, token="t")
        with KubeCluster.from_kubeconfig(kubeconfig) as cluster:
            yield cluster


@pytest.fixture(params=["embedded", "kube-http", "kube"])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    if request.param in ("kube", "kube-http"):
        marker = request.node.get_closest_marker("embedded_only")
        if marker is not None:
            pytest.skip(f"embedded only: {marker.args[0] if marker.args else 'see the test'}")
        fixture = "kube_cluster" if request.param == "kube" else "kube_http_cluster"
        cluster = request.getfixturevalue(fixture)
        if request.param == "kube":
            skip_if_older(request.node, request.getfixturevalue("kube_version"))
        yield Backend("kube", cluster)
        return
    clock = FakeClock()
    with EmbeddedCluster(clock=clock, history=HISTORY, bookmark_interval=BOOKMARK_INTERVAL) as cluster:
        yield Backend("embedded", cluster, clock, history=HISTORY, bookmark_interval=BOOKMARK_INTERVAL)


@pytest.fixture
def cluster(backend: Backend) -> Cluster:
    return backend.cluster


@pytest.fixture
def new_namespace(cluster: Cluster) -> Iterator[Callable[[], str]]:
    """Make namespaces for this test (`ct-` and a random suffix); they are deleted afterwards."""
    made: list[str] = []

    def make() -> str:
        name = f"ct-{token(8)}"
        cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        made.append(name)
        return name

    yield make
    for name in made:
        release(cluster, CONFIGMAP, name)
        with contextlib.suppress(ApiError):
            cluster.delete(NAMESPACE, ObjectKey("", name))


@pytest.fixture
def namespace(new_namespace: Callable[[], str]) -> str:
    """This test's own namespace."""
    return new_namespace()


@pytest.fixture
def install_crd(cluster: Cluster) -> Iterator[Callable[..., CustomKind]]:
    """Install a CRD for kind Widget in a group of its own and wait until the kind is served;
    takes crd()'s options. The CRDs are deleted afterwards."""
    installed: list[CustomKind] = []

    def install(**options: object) -> CustomKind:
        group = f"{token(8)}.contract.porchkit.dev"
        made = cluster.create(crd(group, **options))  # type: ignore[arg-type]
        custom = CustomKind(Kind(f"{group}/v1", "Widget"), made["metadata"]["name"])
        installed.append(custom)
        eventually(lambda: served(cluster, custom.kind))
        return custom

    yield install
    for custom in installed:
        release(cluster, custom.kind)
        with contextlib.suppress(ApiError):
            cluster.delete(CRD, ObjectKey("", custom.crd_name))



@pytest.fixture(name="no_leaked_threads")
def no_leak_check_fixture() -> None:
    """The contract suite shares a server between tests (`kube-http`): its threads outlive a test
    by design, so the runtime's leak check does not apply here."""
