"""The MapControllers for `porchkit manager --controllers map`.

One controller watches MapController objects and runs each (mapctl.supervisor), their hooks
within the manager's HookPolicy (built from --python-hooks and --secret-namespaces). On the
embedded API server (`porchkit manager --embedded`) the MapController CRD is installed first if
it is missing; in a cluster it comes from deploy/crds. When the manager stops, so does every
MapController it runs (`Manager.on_stop`), hook threads included.
"""

from __future__ import annotations

import contextlib

from mapctl.crds import map_controller_crd
from mapctl.instance import Options
from mapctl.spec import MAP_CONTROLLER
from mapctl.supervisor import MapControllers
from reconcile.cluster import ObjectKey
from reconcile.controller import Controller
from reconcile.embedded import EmbeddedCluster
from reconcile.errors import AlreadyExists, NotFound
from reconcile.hooks import HookPolicy
from reconcile.manager import Manager

__all__ = ["map_controllers"]


def map_controllers(manager: Manager, *, hook_policy: HookPolicy) -> Controller[ObjectKey]:
    if isinstance(manager.cluster, EmbeddedCluster):
        try:
            manager.cluster.resource(MAP_CONTROLLER)
        except NotFound:
            with contextlib.suppress(AlreadyExists):
                manager.cluster.create(map_controller_crd())
    maps = MapControllers(manager, Options(hook_policy=hook_policy))
    manager.on_stop(maps.stop_all)
    return maps.controller()
