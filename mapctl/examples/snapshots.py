"""The SnapshotSchedule example of the MapController proposal, as two python hooks.

    hooks:
      map:       {python: {function: "mapctl.examples.snapshots:map_snapshots"}}
      tombstone: {python: {function: "mapctl.examples.snapshots:tombstone_snapshots"}}

A SnapshotSchedule (`examples.porchkit.dev/v1alpha1`, testdata/mapctl/snapshotschedule/) selects
PVCs with `spec.selector` (the controller applies it, not these hooks) and says how often to take
a VolumeSnapshot of each (`spec.snapshotInterval`) and how long to keep one (`spec.snapshotTTL`).
Durations are digits-and-unit sequences in s, m, h and d: "90s", "1h30m", "10d".

`map_snapshots`, for one PVC: keeps the observed snapshots that have not expired (taken-at + TTL
is still ahead), adds a snapshot `<pvc>-<unix seconds>` when there is none or the newest is at
least one interval old, and asks to be called again (`resyncAfterSeconds`) when the next snapshot
is due or the next one expires, whichever comes first.
`tombstone_snapshots`, for the snapshots of a PVC that is gone: keeps those that have not expired.
Its answer cannot ask for a resync, so the rest go on the controller's next periodic resync
(`resyncPeriodSeconds`, 60 in the example).

When a snapshot was taken is the annotation `examples.porchkit.dev/taken-at` (RFC 3339, UTC) the
map hook writes on it, not its `creationTimestamp`: the API server stamps that with its own time,
which a test's FakeClock does not move. A snapshot without the annotation is dated by its
`creationTimestamp`; one that cannot be dated at all is kept and never counts as the newest (a
backup nobody can date is not deleted).

Answers are clean desired objects (apiVersion, kind, metadata name and annotations, spec), never
uid, resourceVersion or status. A VolumeSnapshot's source cannot change, so the example's rule
leaves the update strategy at OnDelete and a kept snapshot is answered with its observed spec.

Time: the hooks read the module attribute `clock` (a reconcile.clock.Clock, SYSTEM_CLOCK by
default). A python hook is named by "module:function" and has no other way in, so a test swaps
it, and moves time with FakeClock.advance():

    monkeypatch.setattr(mapctl.examples.snapshots, "clock", FakeClock())

The decisions themselves (`schedule_of`, `desired_snapshots`, `unexpired_snapshots`) are pure
functions taking `now`. An invalid schedule or input is a ValueError naming the field
(`spec.snapshotInterval: "6x" is not a duration ...`), which the hook client reports as the
hook's error.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from reconcile.clock import SYSTEM_CLOCK, Clock
from reconcile.cluster import Obj

clock: Clock = SYSTEM_CLOCK  # replaced by tests; see the module docstring

SNAPSHOT_API_VERSION = "snapshot.storage.k8s.io/v1"
SNAPSHOT_KIND = "VolumeSnapshot"
SNAPSHOT_GROUP = f"{SNAPSHOT_KIND}.{SNAPSHOT_API_VERSION}"  # the snapshots' key in a request's `outputs`
TAKEN_AT_ANNOTATION = "examples.porchkit.dev/taken-at"
MAX_NAME_LENGTH = 253  # a DNS-1123 subdomain, as VolumeSnapshot names are

_DURATION = re.compile(r"(?:[0-9]+[smhd])+")
_DURATION_PART = re.compile(r"([0-9]+)([smhd])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
_HASH_LENGTH = 10


@dataclass(frozen=True, slots=True)
class Schedule:
    """A SnapshotSchedule's spec, checked; both in whole seconds, and ttl >= interval > 0."""

    interval: int
    ttl: int


# ---------------------------------------------------------------------------------------------
# The hooks


def map_snapshots(request: Mapping[str, Any]) -> dict[str, Any]:
    """The map hook: the snapshots one PVC should have now, and when to look again.
    Raises ValueError for an invalid schedule or an input that is not a PVC."""
    schedule = schedule_of(request.get("parent") or {})
    pvc = _pvc_name(request.get("input"))
    outputs, resync = desired_snapshots(schedule, pvc, _observed(request), _now())
    return {"outputs": outputs, "resyncAfterSeconds": resync}


def tombstone_snapshots(request: Mapping[str, Any]) -> dict[str, Any]:
    """The tombstone hook: of a vanished PVC's snapshots, those to keep (the unexpired ones).
    Raises ValueError for an invalid schedule."""
    schedule = schedule_of(request.get("parent") or {})
    return {"outputs": unexpired_snapshots(schedule, _observed(request), _now())}


def _now() -> int:
    return int(clock.time())


def _observed(request: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    group = (request.get("outputs") or {}).get(SNAPSHOT_GROUP) or {}
    return [group[name] for name in sorted(group)]


def _pvc_name(pvc: Any) -> str:
    if not isinstance(pvc, Mapping) or pvc.get("kind") != "PersistentVolumeClaim":
        found = pvc.get("kind") if isinstance(pvc, Mapping) else type(pvc).__name__
        raise ValueError(f"input: expected a PersistentVolumeClaim, got {json.dumps(found)} "
                         f"(list only persistentvolumeclaims in spec.inputResources)")
    name = (pvc.get("metadata") or {}).get("name")
    if not isinstance(name, str) or not name:
        raise ValueError("input.metadata.name: required")
    return name


# ---------------------------------------------------------------------------------------------
# The schedule


def schedule_of(parent: Mapping[str, Any]) -> Schedule:
    """The checked schedule of a SnapshotSchedule. Raises ValueError naming the field at fault:
    a missing or invalid duration, a zero one, or a TTL shorter than the interval (whose
    snapshots would all be gone before the next one is due, so that one would be taken at once)."""
    spec = parent.get("spec")
    if not isinstance(spec, Mapping):
        raise ValueError("spec: required, with snapshotInterval and snapshotTTL")
    interval = _positive_duration(spec, "snapshotInterval")
    ttl = _positive_duration(spec, "snapshotTTL")
    if ttl < interval:
        raise ValueError(f"spec.snapshotTTL: {json.dumps(spec['snapshotTTL'])} is shorter than spec.snapshotInterval "
                         f"{json.dumps(spec['snapshotInterval'])}: every snapshot would expire before the next")
    return Schedule(interval=interval, ttl=ttl)


def parse_duration(text: Any, field: str) -> int:
    """Whole seconds in a duration such as "90s", "1h30m" or "10d" (digits and a unit, s, m, h or
    d, repeated); ValueError naming `field` for anything else (signs, fractions, spaces)."""
    if not isinstance(text, str) or not _DURATION.fullmatch(text):
        raise ValueError(f"{field}: {json.dumps(text)} is not a duration (digits and a unit, s, m, h or d, "
                         f"as in \"6h\", \"1h30m\" or \"10d\")")
    return sum(int(number) * _UNIT_SECONDS[unit] for number, unit in _DURATION_PART.findall(text))


def _positive_duration(spec: Mapping[str, Any], key: str) -> int:
    field = f"spec.{key}"
    if spec.get(key) is None:
        raise ValueError(f"{field}: required (a duration such as \"6h\")")
    seconds = parse_duration(spec[key], field)
    if seconds <= 0:
        raise ValueError(f"{field}: {json.dumps(spec[key])} must be longer than zero")
    return seconds


# ---------------------------------------------------------------------------------------------
# The decisions (pure)


def desired_snapshots(schedule: Schedule, pvc: str, observed: Iterable[Mapping[str, Any]],
                      now: int) -> tuple[list[Obj], int]:
    """The snapshots PVC `pvc` should have at `now` (unix seconds), and the seconds until the
    answer changes by itself (a snapshot due or expiring; always > 0). `observed` is not changed
    and shares nothing with the result."""
    kept = unexpired_snapshots(schedule, observed, now)
    dated = [taken for snapshot in kept if (taken := taken_at(snapshot)) is not None]
    newest = max(dated, default=None)
    if newest is None or now - newest >= schedule.interval:
        kept.append(new_snapshot(pvc, now))
        dated.append(now)
        newest = now
    next_change = min(newest + schedule.interval, min(taken + schedule.ttl for taken in dated))
    return kept, next_change - now


def unexpired_snapshots(schedule: Schedule, observed: Iterable[Mapping[str, Any]], now: int) -> list[Obj]:
    """Clean copies of the observed snapshots that have not expired at `now` (taken-at + TTL is
    later), and of those that cannot be dated; in the order given."""
    kept = []
    for snapshot in observed:
        taken = taken_at(snapshot)
        if taken is None or taken + schedule.ttl > now:
            kept.append(_clean(snapshot, taken))
    return kept


def new_snapshot(pvc: str, now: int) -> Obj:
    """A VolumeSnapshot of PVC `pvc` taken at `now` (unix seconds), as a desired object."""
    return {
        "apiVersion": SNAPSHOT_API_VERSION,
        "kind": SNAPSHOT_KIND,
        "metadata": {"name": snapshot_name(pvc, now), "annotations": {TAKEN_AT_ANNOTATION: format_time(now)}},
        "spec": {"source": {"persistentVolumeClaimName": pvc}},
    }


def snapshot_name(pvc: str, taken: int) -> str:
    """`<pvc>-<unix seconds>`. When that passes 253 characters, the PVC's name is cut and a hash
    of all of it put after (`<prefix>-<10 hex digits>-<seconds>`), so that two long names sharing
    a prefix still give distinct names. A valid PVC name gives a valid DNS-1123 subdomain."""
    suffix = f"-{taken}"
    if len(pvc) + len(suffix) <= MAX_NAME_LENGTH:
        return pvc + suffix
    digest = hashlib.sha256(pvc.encode()).hexdigest()[:_HASH_LENGTH]
    room = MAX_NAME_LENGTH - len(suffix) - 1 - len(digest)
    # The cut may fall just after a ".", and ".-" is not allowed: a DNS-1123 label ends in a letter or digit.
    return f"{pvc[:room].rstrip('.')}-{digest}{suffix}"


def taken_at(snapshot: Mapping[str, Any]) -> int | None:
    """When a snapshot was taken (unix seconds): its taken-at annotation, else its
    creationTimestamp, else None."""
    meta = snapshot.get("metadata")
    if not isinstance(meta, Mapping):
        return None
    annotations = meta.get("annotations")
    written = annotations.get(TAKEN_AT_ANNOTATION) if isinstance(annotations, Mapping) else None
    for text in (written, meta.get("creationTimestamp")):
        if (seconds := parse_time(text)) is not None:
            return seconds
    return None


def format_time(seconds: int) -> str:
    """Unix seconds as RFC 3339 in UTC: 1700000000 -> "2023-11-14T22:13:20Z"."""
    return datetime.fromtimestamp(seconds, tz=UTC).strftime(_TIME_FORMAT)


def parse_time(text: Any) -> int | None:
    """format_time's inverse; None for anything it did not write."""
    if not isinstance(text, str):
        return None
    try:
        return int(datetime.strptime(text, _TIME_FORMAT).replace(tzinfo=UTC).timestamp())
    except ValueError:
        return None


def _clean(snapshot: Mapping[str, Any], taken: int | None) -> Obj:
    """What the hook asks for, of an observed snapshot: its name, its date and its spec. The
    controller's own labels and annotations are its business, and status is the snapshotter's."""
    meta = snapshot.get("metadata") or {}
    clean: Obj = {"apiVersion": SNAPSHOT_API_VERSION, "kind": SNAPSHOT_KIND, "metadata": {"name": meta.get("name")}}
    if taken is not None:
        clean["metadata"]["annotations"] = {TAKEN_AT_ANNOTATION: format_time(taken)}
    if snapshot.get("spec") is not None:
        clean["spec"] = copy.deepcopy(snapshot["spec"])
    return clean
