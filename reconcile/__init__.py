"""reconcile: the runtime every porchkit controller runs on.

The `Cluster` interface (cluster.py) with an embedded in-process API server (embedded/) and, to
come, a real-API-server backend; the errors both raise (errors.py); an injected clock
(clock.py). Informers, the work queue, controllers, the manager with leader election, health
and metrics, and the hook clients build on these.
"""

from reconcile.clock import SYSTEM_CLOCK, Clock, FakeClock, SystemClock
from reconcile.cluster import Cluster, Kind, ListResult, Obj, ObjectKey, ResourceInfo, WatchEvent
from reconcile.errors import (
    AlreadyExists,
    ApiError,
    Conflict,
    Gone,
    Invalid,
    NotFound,
    ReconcileError,
    Terminal,
    TooManyRequests,
)

__all__ = [
    "SYSTEM_CLOCK",
    "AlreadyExists",
    "ApiError",
    "Clock",
    "Cluster",
    "Conflict",
    "FakeClock",
    "Gone",
    "Invalid",
    "Kind",
    "ListResult",
    "NotFound",
    "Obj",
    "ObjectKey",
    "ReconcileError",
    "ResourceInfo",
    "SystemClock",
    "Terminal",
    "TooManyRequests",
    "WatchEvent",
]
