"""What a DecoratorController's pass over a target remembers, so that the echo of its own writes asks no hook.

After a pass that called the sync (or finalize) hook, `Memory` keeps, per target key, a `Seen`:
the target's uid and resourceVersion as the pass left it (after its own finalizer, label,
annotation and status writes), every attachment's resourceVersion as the pass left it (the ones
it created or updated at the version the server stored, the ones it deleted gone), the related
objects' resourceVersions the hook was shown, and when a resync is due. `verdict` compares that
with what a later pass finds in the cache:

* "unchanged": everything the hook would be shown is what the last call saw or wrote, and no
  resync is due: the pass is the echo of its own writes, and asks no hook (the MapController's
  rule, mapctl/inputs.py);
* "behind": the cache has not caught up with the last pass's writes yet (the target at an older
  resourceVersion, an attachment it wrote missing or older, one it deleted still there): wait for
  the watch events, at most CATCH_UP seconds, instead of asking the hook about a state that is
  gone (and writing what is already written). This holds even when something else changed too
  (the target edited meanwhile): the watches drop the echoes of the last pass's writes, so a pass
  that asked before seeing them would leave a memory that never learns of them;
* "ask": anything else. Someone else's change shows as a resourceVersion that is not the one we
  stored, even when it happened between our write and its watch event. A pass whose echo is to
  ask the hook once more (`Seen.again`: decorators.sync.again says when) asks once the cache has
  caught up with its writes, not before: the hook then sees them.

`Memory.wrote_target` and `Memory.wrote_attachment` let the watches drop such echoes before they
queue a pass at all. resourceVersions are compared as numbers only to tell "older" (etcd's are
integers); equality is all "unchanged" needs. Pure but for Memory's lock; thread-safe.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from reconcile import objects
from reconcile.cluster import Kind, Obj, ObjectKey

CATCH_UP = 2.0  # seconds after a pass during which a cache that lacks its writes is waited for...
CATCH_UP_POLL = 0.02  # ...looking again this often

Version = tuple[str, str, str, str]  # group/kind, namespace, name, resourceVersion


@dataclass(frozen=True, slots=True)
class Seen:
    """A target's state as a pass left it (see the module docstring)."""

    target: str  # "uid/resourceVersion"
    attachments: frozenset[Version]
    related: frozenset[Version]
    due: float | None = None  # clock.monotonic() of the next resync; None: none
    at: float = 0.0  # clock.monotonic() when the pass ended
    again: bool = False  # the echo asks the hook once more, once the cache shows these writes


def target_version(target: Obj) -> str:
    meta = objects.metadata(target)
    return f"{meta.get('uid') or ''}/{meta.get('resourceVersion') or ''}"


def identity(kind: Kind, obj: Obj) -> tuple[str, str, str]:
    key = ObjectKey.of(obj)
    return f"{kind.group}/{kind.kind}", key.namespace, key.name


def versions(groups: Mapping[Kind, Iterable[Obj]]) -> frozenset[Version]:
    """(group/kind, namespace, name, resourceVersion) of every object, by the kind it is grouped under."""
    return frozenset((*identity(kind, obj), str(objects.metadata(obj).get("resourceVersion") or ""))
                     for kind, objs in groups.items() for obj in objs)


def related_versions(related: Mapping[str, Iterable[Obj]]) -> frozenset[Version]:
    """(group key, namespace, name, resourceVersion) of every related object (group key -> objects)."""
    return frozenset((group, *ObjectKey.of(obj), str(objects.metadata(obj).get("resourceVersion") or ""))
                     for group, objs in related.items() for obj in objs)


def verdict(last: Seen | None, now: Seen, monotonic: float) -> Literal["unchanged", "behind", "ask"]:
    """Whether a pass may skip the hook (see the module docstring); `now.due` is not read."""
    if last is None:
        return "ask"
    if last.target == now.target and last.attachments == now.attachments and last.related == now.related:
        return "unchanged" if not last.again and (last.due is None or monotonic < last.due) else "ask"
    return "behind" if monotonic - last.at < CATCH_UP and lagging(last, now) else "ask"


def _older(found: str, wrote: str) -> bool:
    return found.isdigit() and wrote.isdigit() and int(found) < int(wrote)


def lagging(last: Seen, now: Seen) -> bool:
    """Whether the cache lacks some write of the last pass to the same target (not one recreated
    under its name): the target at an older resourceVersion, an attachment it wrote or kept
    missing or older, or one it did not leave present (one it deleted, not yet gone; someone
    else's create looks the same, and is waited for at most CATCH_UP seconds)."""
    uid, _, wrote = last.target.partition("/")
    now_uid, _, found = now.target.partition("/")
    if uid != now_uid:
        return False  # another object of that name: nothing of ours to wait for
    if _older(found, wrote):
        return True
    seen = {version[:3]: version[3] for version in now.attachments}
    for version in last.attachments:
        present = seen.pop(version[:3], None)
        if present is None or _older(present, version[3]):
            return True
    return bool(seen)


class Memory:
    """Seen per target key, shared by a target kind's pass and its watches. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: dict[ObjectKey, Seen] = {}

    def get(self, key: ObjectKey) -> Seen | None:
        with self._lock:
            return self._seen.get(key)

    def put(self, key: ObjectKey, seen: Seen) -> None:
        with self._lock:
            self._seen[key] = seen

    def forget(self, key: ObjectKey) -> None:
        with self._lock:
            self._seen.pop(key, None)

    def wrote_target(self, target: Obj) -> bool:
        """Whether `target` is, to the resourceVersion, what its last pass left (and its echo asks nothing)."""
        last = self.get(ObjectKey.of(target))
        return last is not None and not last.again and last.target == target_version(target)

    def wrote_attachment(self, key: ObjectKey, kind: Kind, obj: Obj) -> bool:
        """Whether `obj` (an attachment of the target `key`, grouped under `kind`) is, to the
        resourceVersion, what the target's last pass left (and its echo asks nothing)."""
        last = self.get(key)
        version = (*identity(kind, obj), str(objects.metadata(obj).get("resourceVersion") or ""))
        return last is not None and not last.again and version in last.attachments
