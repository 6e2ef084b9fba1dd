"""The embedded Porch's resourceVersions and watch history.

Owns: the monotonic integer resourceVersions of PackageRevisions and PackageRevisionResources,
and a bounded history of the changes made through one `EmbeddedPorch`, which watches replay and
then follow. A resourceVersion is given per object name from a fingerprint of what git holds for it
(commit, ref, lifecycle, metadata): the same fingerprint keeps its version, a new one gets the next
number, so a change made behind Porch's back (a `git push`) still shows up as a new version on the
next read, though without a watch event.

Promises: versions only grow, and so do the versions of the changes recorded as long as each
writer, under the EmbeddedPorch's lock, `renew`s an object's version before it records it (a read
may have handed that version out before a change recorded since); a watch from a version older
than the history kept, or newer than any handed out (a version from before a restart), raises
`Gone`, as kube-apiserver's watch cache does, so an informer relists. Does not: know about git
or the API shapes (see porch.py).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from reconcile.cluster import Kind, Obj, WatchEvent
from reconcile.errors import BadRequest, Gone
from reconcile.patching import clone


class Change(NamedTuple):
    sequence: int  # the order of recording (a PackageRevision and its resources share versions)
    version: int
    kind: Kind
    type: str  # ADDED, MODIFIED, DELETED
    object: Obj


class History:
    """Versions by fingerprint, and the last `size` changes; thread-safe."""

    def __init__(self, size: int = 1000) -> None:
        self._condition = threading.Condition()
        self._counter = 0
        self._seen: dict[tuple[str, str], tuple[Any, int]] = {}  # (namespace, name) -> (fingerprint, version)
        self._changes: deque[Change] = deque(maxlen=size)
        self._closed = False
        self._sequence = 0
        self._last: dict[tuple[Kind, str, str], tuple[str, int]] = {}  # (kind, ns, name) -> (type, version)
        self._recorded = 0  # the highest version recorded

    @property
    def current(self) -> int:
        with self._condition:
            return self._counter

    def version(self, namespace: str, name: str, fingerprint: Any) -> int:
        """The resourceVersion of the object named so whose git state is `fingerprint`."""
        with self._condition:
            known = self._seen.get((namespace, name))
            if known is not None and known[0] == fingerprint:
                return known[1]
            self._counter += 1
            self._seen[(namespace, name)] = (fingerprint, self._counter)
            return self._counter

    def bump(self) -> int:
        """A fresh version for a change that has no fingerprint of its own (a deletion)."""
        with self._condition:
            self._counter += 1
            return self._counter

    def forget(self, namespace: str, name: str) -> None:
        with self._condition:
            self._seen.pop((namespace, name), None)

    def renew(self, namespace: str, name: str) -> bool:
        """Forget the object's version if it is lower than one recorded since (it was handed out
        by a read before the change it shows was recorded), so that the next `version` gives a
        fresh one and a watch, which skips what is older than the last version it saw, does not
        skip the change. Whether it was forgotten."""
        with self._condition:
            known = self._seen.get((namespace, name))
            if known is None or known[1] >= self._recorded:
                return False
            del self._seen[(namespace, name)]
            return True

    def record(self, kind: Kind, event_type: str, obj: Obj) -> None:
        with self._condition:
            version = int(obj["metadata"]["resourceVersion"])
            self._recorded = max(self._recorded, version)
            self._sequence += 1
            self._changes.append(Change(self._sequence, version, kind, event_type, obj))
            meta = obj["metadata"]
            self._last[(kind, str(meta.get("namespace") or ""), str(meta["name"]))] = (event_type, version)
            self._condition.notify_all()

    def last(self, kind: Kind, namespace: str, name: str) -> tuple[str, int] | None:
        """The type and version of the last change recorded for the object, None if there was none."""
        with self._condition:
            return self._last.get((kind, namespace, name))

    def close(self) -> None:
        with self._condition:
            self._closed = True
            self._condition.notify_all()

    def start(self, resource_version: str) -> int:
        """Check that a watch can resume after `resource_version`; returns it as a number."""
        if not str(resource_version).isdigit():
            raise BadRequest(f"invalid resource version {resource_version!r}: not a number")
        wanted = int(resource_version)
        with self._condition:
            if wanted > self._counter:
                raise Gone(f"too large resource version: {wanted}, current: {self._counter}")
            oldest = self._changes[0].version if self._changes else self._counter + 1
            if len(self._changes) == self._changes.maxlen and wanted < oldest - 1:
                raise Gone(f"too old resource version: {wanted} ({oldest - 1})")
            return wanted

    def stream(self, after: int, backlog: list[WatchEvent], accept: Callable[[Change], bool],
               timeout: float | None) -> WatchStream:
        return WatchStream(self, after, backlog, accept, timeout)

    def _next(self, after: int, accept: Callable[[Change], bool], deadline: float | None,
              stream: WatchStream) -> Change | None:
        with self._condition:
            while True:
                if self._closed or stream.closed:
                    return None
                # Sequences are consecutive, so the first change not yet looked at is found by
                # position, not by scanning the whole history on every wake-up.
                first = self._changes[0].sequence if self._changes else 0
                for index in range(max(0, stream.sequence + 1 - first), len(self._changes)):
                    change = self._changes[index]
                    stream.sequence = change.sequence
                    if change.version > after and accept(change):
                        return change
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return None
                self._condition.wait(remaining)


class WatchStream:
    """One watch: the backlog first, then every accepted change; `close()` ends it from any thread."""

    def __init__(self, history: History, after: int, backlog: list[WatchEvent],
                 accept: Callable[[Change], bool], timeout: float | None) -> None:
        self._history, self.cursor, self._backlog, self._accept = history, after, deque(backlog), accept
        self._deadline = None if timeout is None else time.monotonic() + timeout
        self.closed = False
        self.sequence = 0  # the last change looked at

    def __iter__(self) -> Iterator[WatchEvent]:
        return self

    def __next__(self) -> WatchEvent:
        if self._backlog and not self.closed:
            return self._backlog.popleft()
        change = self._history._next(self.cursor, self._accept, self._deadline, self)
        if change is None:
            raise StopIteration
        self.cursor = change.version
        return WatchEvent(change.type, clone(change.object))  # type: ignore[arg-type]

    def close(self) -> None:
        with self._history._condition:
            self.closed = True
            self._history._condition.notify_all()
