"""Fixtures of the end-to-end tests: a real API server named by PORCHKIT_TEST_KUBECONFIG (`make e2e`
starts one), a namespace of each test's own, and a skip with the reason when there is none."""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Callable, Iterator

import pytest

from reconcile import ApiError, Cluster, Kind, ObjectKey

KUBECONFIG = "PORCHKIT_TEST_KUBECONFIG"
NO_SERVER = "no real API server: run `make e2e`, or set PORCHKIT_TEST_KUBECONFIG to a kubeconfig"
NAMESPACE = Kind("v1", "Namespace")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/e2e/" in str(item.path).replace(os.sep, "/"):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def kubeconfig() -> str:
    path = os.environ.get(KUBECONFIG)
    if not path:
        pytest.skip(NO_SERVER)
    return path


@pytest.fixture
def connect(kubeconfig: str) -> Iterator[Callable[[], Cluster]]:
    """New KubeClusters on the server (a manager each, as separate processes would have); all
    closed after the test."""
    from reconcile.kube import KubeCluster

    made: list[KubeCluster] = []

    def make() -> Cluster:
        made.append(KubeCluster.from_kubeconfig(kubeconfig))
        return made[-1]

    yield make
    for cluster in made:
        cluster.close()


@pytest.fixture
def cluster(connect: Callable[[], Cluster]) -> Cluster:
    return connect()


@pytest.fixture
def namespace(cluster: Cluster) -> Iterator[str]:
    """A namespace of this test's own, deleted afterwards."""
    name = f"e2e-{secrets.token_hex(4)}"
    cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name
    with contextlib.suppress(ApiError):
        cluster.delete(NAMESPACE, ObjectKey("", name))
