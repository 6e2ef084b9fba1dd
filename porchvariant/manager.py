"""The PackageVariant controllers for `porchkit manager --controllers packagevariant,packagevariantset`.

In a cluster they talk to the real Porch. On the embedded API server (`porchkit manager
--embedded`) there is no Porch, so the first factory called installs the CRDs and serves Porch's
API from the git repositories the Repository objects name (porchvariant.local.serve_porch), with
Kptfile pipelines rendered through kpt when it is on PATH.
"""

from __future__ import annotations

import threading

from porchvariant.packagevariant_controller import package_variant_controller
from porchvariant.packagevariantset_controller import package_variant_set_controller
from porchvariant.porch_client import PACKAGE_REVISION
from reconcile.controller import Controller
from reconcile.embedded import EmbeddedCluster
from reconcile.errors import NotFound
from reconcile.manager import Manager

__all__ = ["package_variant_controllers", "package_variant_set_controllers"]

ANNOUNCE_EVERY = 5.0  # seconds between the embedded Porch's looks for Repositories come or gone
_serving = threading.Lock()


def package_variant_controllers(manager: Manager) -> Controller:
    _serve_porch_if_embedded(manager)
    return package_variant_controller(manager.cluster, manager.cache, manager.clock)


def package_variant_set_controllers(manager: Manager) -> Controller:
    _serve_porch_if_embedded(manager)
    return package_variant_set_controller(manager.cluster, manager.cache, manager.clock)


def _serve_porch_if_embedded(manager: Manager) -> None:
    cluster = manager.cluster
    if not isinstance(cluster, EmbeddedCluster):
        return
    with _serving:
        try:
            cluster.resource(PACKAGE_REVISION)
            return
        except NotFound:
            pass
        from porchvariant.embedded.render import PipelineRenderer
        from porchvariant.local import serve_porch

        # Lives as long as the process (the manager has no close hook). Repositories come and go
        # while the controllers watch, so the embedded Porch announces them.
        serve_porch(cluster, PipelineRenderer(), announce_every=ANNOUNCE_EVERY)
