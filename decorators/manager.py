"""The DecoratorControllers for `porchkit manager --controllers decorator`.

One controller watches DecoratorController objects and runs each (decorators.supervisor), their
hooks within the manager's HookPolicy (built from --python-hooks and --secret-namespaces). On
the embedded API server (`porchkit manager --embedded`) the DecoratorController CRD is
installed first if it is missing; in a cluster it comes from deploy/crds. When the manager
stops, so does every DecoratorController it runs (`Manager.on_stop`), hook threads included.
"""

from __future__ import annotations

import contextlib

from decorators.crds import decorator_controller_crd
from decorators.instance import Options
from decorators.spec import DECORATOR_CONTROLLER
from decorators.supervisor import Decorators
from reconcile.controller import Controller
from reconcile.embedded import EmbeddedCluster
from reconcile.errors import AlreadyExists, NotFound
from reconcile.hooks import HookPolicy
from reconcile.manager import Manager

__all__ = ["decorator_controllers"]


def decorator_controllers(manager: Manager, *, hook_policy: HookPolicy) -> Controller:
    if isinstance(manager.cluster, EmbeddedCluster):
        try:
            manager.cluster.resource(DECORATOR_CONTROLLER)
        except NotFound:
            with contextlib.suppress(AlreadyExists):
                manager.cluster.create(decorator_controller_crd())
    decorators = Decorators(manager, Options(hook_policy=hook_policy))
    manager.on_stop(decorators.stop_all)
    return decorators.controller()
