"""The `Ready` condition of an object that starts controllers of its own (a DecoratorController,
a MapController): whether they run, and when not, why.

`record(cluster, obj, problem, now=...)` sets `status.conditions[type=Ready]`: with no problem,
True (reason `Started`); with one, False, with the problem's `event_reason` (`CreateError`) as
reason and its message, the same words as the Warning Event, so that `kubectl get -o yaml` says
why a controller does not run without a search through Events (which expire).

The condition is written with a merge patch of the status subresource, and only when it changes:
asserting it again writes nothing, so the write does not wake its own writer in a loop. A write
that fails is logged and dropped: the Event says the same, and the next change of the object
writes it again (a ClusterRole without `<plural>/status` costs the condition, not the controller).
"""

from __future__ import annotations

import logging

from reconcile import conditions, objects
from reconcile.cluster import Cluster, Kind, Obj, ObjectKey
from reconcile.errors import ApiError

log = logging.getLogger("porchkit.readiness")

READY = "Ready"
STARTED = "Started"


def record(cluster: Cluster, obj: Obj, problem: Exception | None, *, now: float) -> None:
    """Set the Ready condition of `obj` (as cached) from `problem` (None: its controllers run)."""
    before = conditions.conditions_of(obj)
    generation = objects.metadata(obj).get("generation")
    observed = generation if isinstance(generation, int) else None
    if problem is None:
        after = conditions.set_condition(before, READY, "True", STARTED, now=now, observed_generation=observed)
    else:
        reason = str(getattr(problem, "event_reason", type(problem).__name__))
        after = conditions.set_condition(before, READY, "False", reason, " ".join(str(problem).split()), now=now,
                                         observed_generation=observed)
    if after == before:
        return
    key = ObjectKey.of(obj)
    try:
        cluster.patch(Kind.of(obj), key, {"status": {"conditions": after}}, subresource="status")
    except ApiError as err:
        log.warning("cannot write the %s condition of %s %s: %s", READY, obj.get("kind"), key, err)
