"""reconcile: the runtime every porchkit controller runs on.

The face holds what a controller author needs every day; the rest is in public modules named
after what they hold (docs/runtime.md is the guide):

* `Cluster` (cluster.py), the one interface to Kubernetes, over plain dicts, with two backends:
  `EmbeddedCluster` (embedded/, an in-process API server) and `reconcile.kube.KubeCluster` (a
  real one; imported only when used, as the `kubernetes` package is slow to import);
* the errors both raise (errors.py) and the outcomes a reconcile returns (outcome.py);
* `Controller` with its watches `For`, `Owns`, `Watches` (controller.py) over informers
  (informer.py, cache.py) and a work queue (workqueue.py, ratelimit.py);
* `reconcile.manager` (with leader election, fencing.py, health.py, metrics.py), and the helpers
  `conditions`, `finalizers`, `apply`, `events`, `logs`, `objects`;
* an injected `Clock` (clock.py) that every timeout, back-off and lease reads.
"""

from reconcile.clock import SYSTEM_CLOCK, Clock, FakeClock, SystemClock
from reconcile.cluster import Cluster, Kind, ListResult, Obj, ObjectKey, ResourceInfo, WatchEvent
from reconcile.controller import Controller, For, Owns, Watches
from reconcile.embedded import EmbeddedCluster
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
from reconcile.outcome import Done, Outcome, RequeueAfter

__all__ = [
    "SYSTEM_CLOCK",
    "AlreadyExists",
    "ApiError",
    "Clock",
    "Cluster",
    "Conflict",
    "Controller",
    "Done",
    "EmbeddedCluster",
    "FakeClock",
    "For",
    "Gone",
    "Invalid",
    "Kind",
    "ListResult",
    "NotFound",
    "Obj",
    "ObjectKey",
    "Outcome",
    "Owns",
    "ReconcileError",
    "RequeueAfter",
    "ResourceInfo",
    "SystemClock",
    "Terminal",
    "TooManyRequests",
    "WatchEvent",
    "Watches",
]
