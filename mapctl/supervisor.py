"""The controller of MapControllers: starts, restarts and stops one MapInstance per object.

`MapControllers(manager).controller()` is a reconcile.Controller over MapController objects (the
shape every hook controller shares: reconcile.supervisor). A MapController's instance
(mapctl.instance) has two controllers, which start on every cached parent and input at once. An
invalid spec, or one asking for what the manager's HookPolicy refuses, is not retried; a resource
not served yet or a missing Secret is. Deleting a MapController stops its instance; outputs stay
with their parents (they are the parents' children, not the MapController's), as a
DecoratorController's attachments stay with their targets.
"""

from __future__ import annotations

from mapctl.instance import MapInstance, Options, fingerprint
from mapctl.spec import MAP_CONTROLLER, SpecError
from reconcile.cluster import Obj
from reconcile.hooks import HookConfigError, HookRefused
from reconcile.manager import Manager
from reconcile.supervisor import Supervisor, UnknownResource

CONTROLLER_NAME = "mapcontroller"


class MapControllers(Supervisor[MapInstance]):
    """Runs the MapControllers of one manager (see the module docstring)."""

    invalid = (SpecError, HookRefused)
    unavailable = (UnknownResource, HookConfigError)

    def __init__(self, manager: Manager, options: Options | None = None) -> None:
        super().__init__(manager, MAP_CONTROLLER, CONTROLLER_NAME)
        self.options = options or Options()

    def new_instance(self, obj: Obj) -> MapInstance:
        return MapInstance(obj, cluster=self.manager.cluster, cache=self.manager.cache, clock=self.manager.clock,
                           metrics=self.manager.metrics, options=self.options)

    def fingerprint(self, obj: Obj) -> str:
        return fingerprint(obj)
