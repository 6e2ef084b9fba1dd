"""The PackageVariant and PackageVariantSet controllers on a real API server, for the e2e tests.

Porch itself is not installed on the e2e server (it needs container images this machine cannot
fetch), so `porch.kpt.dev` is served by porchkit's embedded Porch from git repositories in a
temporary folder, joined to the real server by a RoutedCluster, the way an aggregated API joins a
real one. Shared by test_variants_e2e.py and test_security_variants_e2e.py.
"""

from __future__ import annotations

from typing import Any

from porchvariant.embedded.porch import EmbeddedPorch
from porchvariant.manager import package_variant_controllers, package_variant_set_controllers
from porchvariant.packagevariantset_controller import PACKAGE_VARIANT_SET
from reconcile import Cluster, EmbeddedCluster, Kind, ObjectKey
from reconcile.events import EventRecorder
from reconcile.manager import LeaderElection, Manager
from reconcile.routing import RoutedCluster
from tests.e2e.support import eventually
from tests.porchvariant.variants_support import Repos
from tests.reconcile.support import Running

REPOSITORY = Kind("config.porch.kpt.dev/v1alpha1", "Repository")


class Controllers:
    """Both controllers on a thread, reaching the real server through `kube`, with porch.kpt.dev
    served from git next to it, and the Repositories of `repos` registered in `namespace`. The test
    reads and writes through `admin`: `kube` itself, unless the controllers run as someone else.
    Events are recorded when `events` names their component."""

    def __init__(self, kube: Cluster, repos: Repos, namespace: str, *, admin: Cluster | None = None,
                 events: str | None = None, leader_election: LeaderElection | None = None) -> None:
        self.kube, self.admin, self.repos, self.namespace = kube, admin or kube, repos, namespace
        self.embedded = EmbeddedCluster()
        # the embedded server checks namespaces like any other: the test's must exist there too
        self.embedded.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        # Repositories are registered after the controllers started watching: the embedded Porch
        # announces their revisions (announce_every), as Porch does.
        self.porch = EmbeddedPorch(self.embedded, repositories_from=self.admin, announce_every=0.2)
        routed = RoutedCluster(kube, {"porch.kpt.dev": self.embedded})
        self.manager = Manager(routed, events=EventRecorder(routed, events) if events else None,
                               leader_election=leader_election)
        self.manager.add(package_variant_controllers(self.manager))
        self.manager.add(package_variant_set_controllers(self.manager))
        self.running = Running(self.manager)
        for repository in repos.repositories():
            self.admin.create({**repository, "metadata": {**repository["metadata"], "namespace": namespace}})

    def stop(self) -> None:
        self.running.stop(30)
        self.porch.close()
        self.embedded.close()

    def get(self, kind: Kind, name: str) -> dict[str, Any] | None:
        return self.admin.get(kind, ObjectKey(self.namespace, name))

    def fan_out(self) -> list[dict[str, Any]]:
        """Label Repositories prod and dev `tier: edge` and create the PackageVariantSet `web` selecting
        them; its status entries, once it reports both variants Ready."""
        for repo in ("prod", "dev"):
            live = self.admin.get(REPOSITORY, ObjectKey(self.namespace, repo))
            assert live is not None
            self.admin.update({**live, "metadata": {**live["metadata"], "labels": {"tier": "edge"}}})
        self.admin.create({"apiVersion": "config.porch.kpt.dev/v1alpha2", "kind": "PackageVariantSet",
                           "metadata": {"name": "web", "namespace": self.namespace},
                           "spec": {"upstream": {"repo": "catalog", "package": "web", "revision": 1},
                                    "targets": [{"repositorySelector": {"matchLabels": {"tier": "edge"}}}]}})

        def reported() -> list[dict[str, Any]] | None:
            pvs = self.get(PACKAGE_VARIANT_SET, "web")
            entries = ((pvs or {}).get("status") or {}).get("packageVariants") or []
            return entries if len(entries) == 2 and all(e["ready"] == "True" for e in entries) else None

        found: list[dict[str, Any]] = eventually(reported)
        return found
