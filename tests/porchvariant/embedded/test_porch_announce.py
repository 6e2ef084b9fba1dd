"""Repositories registered or removed while informers watch: `announce_every` tells the watchers."""

from __future__ import annotations

import threading
from pathlib import Path

from porchvariant.embedded.git.repository import GitPackageRepository
from porchvariant.embedded.porch import EmbeddedPorch
from porchvariant.porch_client import PACKAGE_REVISION, REPOSITORY
from reconcile import EmbeddedCluster, ObjectKey
from reconcile.informer import Informer
from tests.porchvariant.embedded.porch_env import CONFIGMAP, KPTFILE, NS, crd, repository, seed
from tests.waiting import eventually


def names(informer: Informer) -> set[str]:
    return {obj["metadata"]["name"] for obj in informer.list()}


def test_a_repository_registered_later_is_announced_and_one_removed_is_taken_back(tmp_path: Path) -> None:
    catalog = seed(tmp_path, "catalog", {"web/Kptfile": KPTFILE, "web/cm.yaml": CONFIGMAP})
    with GitPackageRepository(catalog) as repo:
        repo.approve(repo.create_draft("web", "v1", {"Kptfile": KPTFILE, "cm.yaml": CONFIGMAP}))
    with EmbeddedCluster() as cluster:
        cluster.create(crd("Repository", "repositories", "config.porch.kpt.dev"))
        cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        porch = EmbeddedPorch(cluster, announce_every=0.05)
        informer = Informer(cluster, PACKAGE_REVISION)
        stop = threading.Event()
        thread = threading.Thread(target=informer.run, args=(stop,))
        thread.start()
        try:
            eventually(informer.synced.is_set, 10.0, interval=0.01)
            assert names(informer) == set()
            cluster.create(repository("catalog", str(catalog)))
            eventually(lambda: names(informer) == {"catalog.web.main", "catalog.web.v1"}, 10.0, interval=0.01)
            cluster.delete(REPOSITORY, ObjectKey(NS, "catalog"))
            eventually(lambda: names(informer) == set(), 10.0, interval=0.01)
        finally:
            stop.set()
            informer.wake()
            thread.join(5)
            porch.close()

