"""Fixtures of the end-to-end tests: a real API server named by PORCHKIT_TEST_KUBECONFIG (`make e2e`
starts one), a namespace of each test's own, and a skip with the reason when there is none; and
the CRDs the controllers under test need, installed (or already there) and served."""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from decorators.spec import DECORATOR_CONTROLLER
from porchvariant.crds import crds
from porchvariant.packagevariant_controller import PACKAGE_VARIANT
from porchvariant.packagevariantset_controller import PACKAGE_VARIANT_SET
from reconcile import ApiError, Cluster, Kind, ObjectKey
from tests.e2e.support import eventually, served

ROOT = Path(__file__).resolve().parents[2]
CRD = Kind("apiextensions.k8s.io/v1", "CustomResourceDefinition")
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


@pytest.fixture(scope="module")
def decorator_crd(kubeconfig: str) -> None:
    """deploy/crds' DecoratorController CRD, installed (or already there) and served."""
    from reconcile.kube import KubeCluster

    cluster = KubeCluster.from_kubeconfig(kubeconfig)
    try:
        [crd] = [doc for doc in yaml.safe_load_all(
            (ROOT / "deploy" / "crds" / "metacontroller.k8s.io_decoratorcontrollers.yaml").read_text()) if doc]
        if cluster.get(CRD, ObjectKey("", crd["metadata"]["name"])) is None:
            cluster.create(crd)
        eventually(lambda: served(cluster, DECORATOR_CONTROLLER))
    finally:
        cluster.close()


@pytest.fixture
def variant_crds(cluster: Cluster) -> None:
    """deploy/crds and a Repository CRD (Porch's, standing in for Porch), installed (or already there) and served."""
    shipped = [yaml.safe_load_all(path.read_text()) for path in sorted((ROOT / "deploy" / "crds").glob("*_*.yaml"))]
    wanted = [doc for docs in shipped for doc in docs if doc]
    wanted += [crd for crd in crds() if crd["spec"]["names"]["kind"] == "Repository"]
    for crd in wanted:
        if cluster.get(CRD, ObjectKey("", crd["metadata"]["name"])) is None:
            cluster.create(crd)
    eventually(lambda: all(served(cluster, kind) for kind in (PACKAGE_VARIANT, PACKAGE_VARIANT_SET)))
