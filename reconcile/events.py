"""Kubernetes Events about objects, written the way client-go's recorder writes them.

`EventRecorder` implements the protocol in controller.py: `record(kind, key, type, reason,
message)` writes a core/v1 `Event` into the object's namespace ("default" for a cluster-scoped
object, as the API server requires), with `involvedObject` (apiVersion, kind, name, namespace, and
the uid read from the cluster, which `kubectl describe` matches on), `source.component`,
`reportingComponent`, first/last timestamps and a count.

Promises, after client-go's EventCorrelator:
- aggregation: the same object, type, reason and message again bumps `count` and `lastTimestamp`
  of the Event already written (a merge patch) instead of writing a new one; if that Event is
  gone (Events expire, one hour by default), a new one carries the count on;
- rate limit: a token bucket per object, `burst` events at once, then one per `refill_seconds`
  (client-go's 25 and 5 minutes); repeats count too. Time is the injected clock's;
- `record` never raises: a failure is logged at debug level and the event dropped. Events are
  best effort, and a reconcile must never fail over one.
Memory is bounded: at most `EventLimits.tracked` objects and repeat keys are remembered (least
recently used are forgotten first).
Threads: events about one object are written one at a time, in order (so repeats aggregate);
events about different objects are written in parallel, and no lock is held across a request
except that object's own.
Does not: send asynchronously (`record` makes at most one read and one write), or
write events.k8s.io/v1 Events (the same objects, served at another version by a real server).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, TypeVar

from reconcile import objects
from reconcile.clock import SYSTEM_CLOCK, Clock
from reconcile.cluster import Cluster, Kind, ObjectKey
from reconcile.errors import NotFound

log = logging.getLogger(__name__)

EVENT = Kind("v1", "Event")
NORMAL, WARNING = "Normal", "Warning"
MAX_MESSAGE = 1024
"""Longest message written, in characters (the Event API's 1 kB note limit)."""
CLUSTER_SCOPED_NAMESPACE = "default"
"""Where Events about cluster-scoped objects go (the API server accepts only "default" or "")."""

_MAX_NAME = 253
K = TypeVar("K")
V = TypeVar("V")


@dataclass(frozen=True, slots=True)
class EventLimits:
    """Per-object token bucket (`burst`, one more token each `refill_seconds`) and how many
    objects and repeat keys to remember; the defaults are client-go's."""

    burst: int = 25
    refill_seconds: float = 300.0
    tracked: int = 4096

    def __post_init__(self) -> None:
        if self.burst < 1 or self.refill_seconds <= 0 or self.tracked < 1:
            raise ValueError(f"EventLimits needs burst >= 1, refill_seconds > 0, tracked >= 1, got {self}")


@dataclass(slots=True)
class _Written:
    namespace: str
    name: str
    count: int
    first_timestamp: str


@dataclass(slots=True)
class _Tokens:
    """An object's token bucket, and the lock its events are written under."""

    tokens: float
    at: float
    writing: threading.Lock = field(default_factory=threading.Lock)


class EventRecorder:
    """Writes Events about objects for `component` (e.g. "porchkit-packagevariant"); see the module
    docstring. `instance` (e.g. the pod name) fills `source.host` and `reportingInstance`."""

    def __init__(self, cluster: Cluster, component: str, *, clock: Clock = SYSTEM_CLOCK, instance: str = "",
                 limits: EventLimits = EventLimits()) -> None:
        self.cluster, self.component, self.instance = cluster, component, instance
        self.clock, self.limits = clock, limits
        self._lock = threading.Lock()
        self._written: OrderedDict[tuple[Kind, ObjectKey, str, str, str], _Written] = OrderedDict()
        self._buckets: OrderedDict[tuple[Kind, ObjectKey], _Tokens] = OrderedDict()
        self._last_nanos = 0

    def record(self, kind: Kind, key: ObjectKey, event_type: str, reason: str, message: str) -> None:
        """Record an event (`Normal` or `Warning`) about the object; never raises."""
        if event_type not in (NORMAL, WARNING):
            log.debug("dropped event %s on %s %s: type %r is not Normal or Warning", reason, kind, key, event_type)
            return
        try:
            with self._lock:
                bucket = self._take_token(kind, key)
            if bucket is None:
                log.debug("dropped event %s on %s %s: rate limited", reason, kind, key)
                return
            with bucket.writing:
                self._write(kind, key, event_type, reason, message)
        except Exception:
            log.debug("dropped event %s %s on %s %s", event_type, reason, kind, key, exc_info=True)

    def _write(self, kind: Kind, key: ObjectKey, event_type: str, reason: str, message: str) -> None:
        """Patch the Event of an earlier repeat, or create one; holds only the object's own lock
        across requests (self._lock only around the bookkeeping)."""
        message = message if len(message) <= MAX_MESSAGE else message[:MAX_MESSAGE - 3] + "..."
        now = objects.rfc3339(self.clock.time())
        repeat = (kind, key, event_type, reason, message)
        with self._lock:
            seen = _lru_get(self._written, repeat)
        if seen is not None:
            try:
                self.cluster.patch(EVENT, ObjectKey(seen.namespace, seen.name),
                                   {"count": seen.count + 1, "lastTimestamp": now})
                seen.count += 1
                return
            except NotFound:
                pass  # the Event expired: write a new one that carries the count on
        count, first = (seen.count + 1, seen.first_timestamp) if seen is not None else (1, now)
        created = self.cluster.create(self._event(kind, key, event_type, reason, message, count, first, now))
        meta = objects.metadata(created)
        with self._lock:
            _lru_put(self._written, repeat, _Written(str(meta.get("namespace")), str(meta.get("name")), count, first),
                     self.limits.tracked)

    def _event(self, kind: Kind, key: ObjectKey, event_type: str, reason: str, message: str, count: int,
               first: str, now: str) -> dict[str, Any]:
        involved = {"apiVersion": kind.api_version, "kind": kind.kind, "name": key.name}
        if key.namespace:
            involved["namespace"] = key.namespace
        uid = self._uid(kind, key)
        if uid:
            involved["uid"] = uid
        source = {"component": self.component, **({"host": self.instance} if self.instance else {})}
        event: dict[str, Any] = {
            "apiVersion": EVENT.api_version, "kind": EVENT.kind,
            "metadata": {"name": self._name(key.name), "namespace": key.namespace or CLUSTER_SCOPED_NAMESPACE},
            "involvedObject": involved, "reason": reason, "message": message, "type": event_type,
            "source": source, "firstTimestamp": first, "lastTimestamp": now, "count": count,
            "reportingComponent": self.component,
        }
        if self.instance:
            event["reportingInstance"] = self.instance
        return event

    def _uid(self, kind: Kind, key: ObjectKey) -> str:
        try:
            found = self.cluster.get(kind, key)
        except Exception:  # the uid is nice to have; the event is still worth writing
            log.debug("could not read %s %s for its uid", kind, key, exc_info=True)
            return ""
        return str(objects.metadata(found).get("uid") or "") if found is not None else ""

    def _name(self, object_name: str) -> str:
        # client-go: "<object name>.<unix nanoseconds in hex>"; kept unique within this recorder
        # even when the (fake) clock stands still.
        with self._lock:
            nanos = max(int(self.clock.time() * 1e9), self._last_nanos + 1)
            self._last_nanos = nanos
        suffix = f".{nanos:x}"
        return object_name[:_MAX_NAME - len(suffix)] + suffix

    def _take_token(self, kind: Kind, key: ObjectKey) -> _Tokens | None:
        """The object's bucket with one token spent, or None when it has none left (lock held)."""
        now = self.clock.monotonic()
        limits = self.limits
        bucket = _lru_get(self._buckets, (kind, key))
        if bucket is None:
            bucket = _lru_put(self._buckets, (kind, key), _Tokens(float(limits.burst), now), limits.tracked)
        bucket.tokens = min(float(limits.burst), bucket.tokens + (now - bucket.at) / limits.refill_seconds)
        bucket.at = now
        if bucket.tokens < 1:
            return None
        bucket.tokens -= 1
        return bucket


def _lru_get(table: OrderedDict[K, V], key: K) -> V | None:
    """table[key], marked most recently used; None when absent."""
    found = table.get(key)
    if found is not None:
        table.move_to_end(key)
    return found


def _lru_put(table: OrderedDict[K, V], key: K, value: V, limit: int) -> V:
    """Store value as the most recently used entry, forgetting the least recently used beyond limit."""
    table[key] = value
    table.move_to_end(key)
    while len(table) > limit:
        table.popitem(last=False)
    return value
