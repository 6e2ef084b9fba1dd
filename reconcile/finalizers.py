"""Finalizers: a controller's hold on an object's deletion, and the ways to let go of it.

Owns adding and removing one finalizer safely (`ensure`, `release`), telling when an object is
being deleted (`is_deleting`) or has been for too long (`overdue`), and the escape hatches an
operator needs when the controller that owns a finalizer is gone (`should_release`,
`release_all`).

Promises: a write happens only when the finalizer list really changes; a lost race (409 Conflict,
someone else wrote the object after we read it) is retried on a fresh read, a bounded number of
times; a finalizer is never added to an object that is being deleted (the API server refuses it
anyway); the object passed in is never changed (it may be a shared cache entry).

Why the escape hatches: a finalizer outlives the controller that set it. kopf users (kopf #75,
#944, #1104) and Metacontroller users (finalizers left behind when a DecoratorController is
deleted, metacontroller #1062) find objects wedged in `Terminating` once the operator is scaled
down or uninstalled, and the usual fix is a hand-written `kubectl patch` per object. Here:
- the annotation `porchkit.dev/release-finalizers` (`"true"` or `"*"` for every finalizer, or a
  comma-separated list of finalizer names) tells a running controller to drop its finalizer
  without running its cleanup (`should_release`), and keeps `ensure` from adding it back;
- `release_all` removes one finalizer from every object of a kind, for uninstall and cleanup;
- `overdue` lets a controller give up on a cleanup that has been failing for too long.

Does not: run cleanup, decide when to release (the controller does), or know about owners and
garbage collection (the API server handles `orphan`/`foregroundDeletion`).
"""

from __future__ import annotations

import calendar
import logging
import time
from collections.abc import Mapping
from typing import Any

from reconcile import objects
from reconcile.cluster import Cluster, Kind, Obj, ObjectKey
from reconcile.errors import Conflict, NotFound, ReconcileError

log = logging.getLogger(__name__)

RELEASE_ANNOTATION = "porchkit.dev/release-finalizers"
"""Set on an object to let go of finalizers without cleanup: "true"/"*" (all) or "a.io/x,b.io/y"."""

ATTEMPTS = 5
"""How many writes `ensure` and `release` try before a Conflict is handed to the caller."""

_EVERY = frozenset({"true", "*"})


def is_deleting(obj: Mapping[str, Any]) -> bool:
    """True once the object has a deletionTimestamp: it is waiting for its finalizers to go."""
    return objects.is_deleting(obj)


def has(obj: Mapping[str, Any], finalizer: str) -> bool:
    """True when `finalizer` is among the object's finalizers."""
    return finalizer in objects.finalizers_of(obj)


def should_release(obj: Mapping[str, Any], finalizer: str) -> bool:
    """True when an operator asked (RELEASE_ANNOTATION) that `finalizer` be dropped without
    cleanup and the object still carries it. Reads the object only; never raises."""
    if not has(obj, finalizer):
        return False
    return _released_by_annotation(obj, finalizer)


def overdue(obj: Mapping[str, Any], timeout: float, now: float) -> bool:
    """True when the object has been deleting for at least `timeout` seconds at `now` (epoch
    seconds, e.g. `clock.time()`). False for an object not being deleted or with an unreadable
    deletionTimestamp."""
    deleted_at = _epoch(objects.metadata(obj).get("deletionTimestamp"))
    return deleted_at is not None and now - deleted_at >= timeout


def ensure(cluster: Cluster, kind: Kind, obj: Obj, finalizer: str, *, attempts: int = ATTEMPTS) -> Obj:
    """The object carrying `finalizer`, added with an update when missing.

    No write when the finalizer is already there, when the object is being deleted (a finalizer
    cannot be added then), or when RELEASE_ANNOTATION names the finalizer. On Conflict the object
    is read again and the decision made afresh, up to `attempts` writes; then the Conflict is
    raised. Raises NotFound when the object is gone. `obj` itself is never changed.
    """
    current = obj
    for attempt in range(1, attempts + 1):
        if has(current, finalizer) or is_deleting(current) or _released_by_annotation(current, finalizer):
            return current
        wanted = _with_finalizers(current, [*objects.finalizers_of(current), finalizer])
        try:
            return cluster.update(wanted)
        except Conflict:
            if attempt == attempts:
                raise
            fresh = _reread(cluster, kind, current, same_uid=False)
            if fresh is None:
                raise NotFound(f"{kind} {ObjectKey.of(obj)} is gone: cannot add finalizer {finalizer}") from None
            current = fresh
    raise AssertionError("unreachable")  # the loop returns or raises


def release(cluster: Cluster, kind: Kind, obj: Obj, finalizer: str, *, attempts: int = ATTEMPTS) -> Obj | None:
    """The object without `finalizer`, removed with an update when present; None once it is gone.

    No write when the finalizer is absent. When it was the last finalizer of a deleting object,
    the API server deletes the object and this returns None. On Conflict the object is read
    again (and left alone if it is gone or was re-created under the same name: a new uid), up to
    `attempts` writes; then the Conflict is raised. `obj` itself is never changed.
    """
    current: Obj | None = obj
    for attempt in range(1, attempts + 1):
        if current is None or not has(current, finalizer):
            return current
        kept = [f for f in objects.finalizers_of(current) if f != finalizer]
        try:
            updated = cluster.update(_with_finalizers(current, kept))
        except NotFound:
            return None
        except Conflict:
            if attempt == attempts:
                raise
            current = _reread(cluster, kind, current, same_uid=True)
            continue
        # Removing the last finalizer of a deleting object deletes it; what the update returns
        # then is the last stored state, not a live object.
        return None if is_deleting(current) and not kept else updated
    raise AssertionError("unreachable")  # the loop returns or raises


def release_all(cluster: Cluster, kind: Kind, finalizer: str, namespace: str = "") -> int:
    """Remove `finalizer` from every object of `kind` (in `namespace`, or everywhere when "")
    that carries it, for uninstall and cleanup; returns how many objects were released.

    Objects that vanish meanwhile are skipped. Every object is tried even when some fail; then
    the first failure is raised as a ReconcileError saying how many could not be released.
    """
    held = [o for o in cluster.list(kind, namespace=namespace).items if has(o, finalizer)]
    released, failures = 0, []
    for obj in held:
        try:
            release(cluster, kind, obj, finalizer)
            released += 1
        except NotFound:
            continue
        except Exception as err:  # keep going: one stuck object must not block the rest
            log.debug("could not release %s from %s %s", finalizer, kind, ObjectKey.of(obj), exc_info=True)
            failures.append(err)
    if failures:
        raise ReconcileError(f"could not release finalizer {finalizer} from {len(failures)} of {len(held)} "
                             f"{kind} objects: {failures[0]}") from failures[0]
    return released


def _released_by_annotation(obj: Mapping[str, Any], finalizer: str) -> bool:
    value = objects.annotations_of(obj).get(RELEASE_ANNOTATION)
    if not isinstance(value, str):
        return False
    names = {part.strip() for part in value.split(",")}
    return bool(names & _EVERY) or finalizer in names


def _with_finalizers(obj: Obj, finalizers: list[str]) -> Obj:
    out = dict(obj)
    meta = dict(objects.metadata(obj))
    if finalizers:
        meta["finalizers"] = finalizers
    else:
        meta.pop("finalizers", None)
    out["metadata"] = meta
    return out


def _reread(cluster: Cluster, kind: Kind, obj: Obj, *, same_uid: bool) -> Obj | None:
    fresh = cluster.get(kind, ObjectKey.of(obj))
    if fresh is None:
        return None
    uid = objects.metadata(obj).get("uid")
    if same_uid and uid and objects.metadata(fresh).get("uid") != uid:
        return None  # a new object under the old name: not the one we were asked about
    return fresh


def _epoch(timestamp: Any) -> float | None:
    """Seconds since the epoch of an RFC 3339 UTC timestamp (`2024-01-01T00:00:00Z`, maybe with
    fractional seconds), or None."""
    if not isinstance(timestamp, str) or not timestamp.endswith("Z"):
        return None
    whole, _, fraction = timestamp[:-1].partition(".")
    try:
        seconds = calendar.timegm(time.strptime(whole, "%Y-%m-%dT%H:%M:%S"))
        return seconds + (float(f"0.{fraction}") if fraction else 0.0)
    except ValueError:
        return None
