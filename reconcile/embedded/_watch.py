"""Watches: a queue per watcher, so writers never wait for readers.

The hub hands every stored change to the watchers of its group-kind (and namespace): an append
to the watcher's queue and a notify, nothing more, under the cluster's lock, so the order of
events is the order of revisions. Everything else happens in the consumer's thread when it
asks for the next event (`WatchStream.__next__`): selector filtering, turning a change into the
event a real server would send, copying the object, bookmarks and the timeout.

Selector semantics are the watch cache's: a MODIFIED object that starts matching arrives as
ADDED, one that stops matching as DELETED (with its previous state at the new
resourceVersion); a DELETED event carries the object's final state.

BOOKMARK events (apiVersion, kind and metadata.resourceVersion only) come when nothing else has
been sent for `bookmark_interval` clock-seconds; their resourceVersion is the store's revision at
a moment the watcher had nothing pending, so resuming from it misses nothing. The stream ends
after `timeout` clock-seconds, on `close()`, when the cluster closes, or when its consumer falls
more than `MAX_PENDING` events behind (as the real server drops a watcher too slow to keep up;
the client resumes from the last version it saw).

A stream nobody references any more is unregistered: a finalizer marks its watcher abandoned,
and the hub drops abandoned watchers as it meets them. No thread runs for a watch.
"""

from __future__ import annotations

import threading
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from reconcile.clock import Clock
from reconcile.cluster import Kind, Obj, WatchEvent
from reconcile.embedded._kinds import GroupKind
from reconcile.embedded._store import Change
from reconcile.selectors import FieldSelector, LabelSelector

MAX_PENDING = 100_000


class Watcher:
    """What the hub holds of one watch: its filter and its queue, never the stream."""

    __slots__ = ("abandoned", "condition", "group_kind", "namespace", "overflowed", "queue")

    def __init__(self, gk: GroupKind, namespace: str, backlog: Iterable[Change] = ()) -> None:
        self.group_kind, self.namespace = gk, namespace
        self.queue: deque[Change] = deque(backlog)
        self.condition = threading.Condition(threading.Lock())
        self.abandoned = self.overflowed = False

    def offer(self, change: Change) -> None:
        if self.overflowed or self.abandoned:
            return
        with self.condition:  # the consumer checks for an empty queue under it before it waits
            if len(self.queue) >= MAX_PENDING:
                self.overflowed = True
            else:
                self.queue.append(change)
            self.condition.notify()

    def abandon(self) -> None:
        """Stop receiving; safe from a finalizer (takes no lock)."""
        self.abandoned = True
        self.queue.clear()


class WatchHub:
    """The registered watchers, by group-kind; a listener of the store."""

    def __init__(self) -> None:
        self._watchers: dict[GroupKind, tuple[Watcher, ...]] = {}

    def publish(self, change: Change) -> None:
        watchers = self._watchers.get(change.group_kind)
        if not watchers:
            return
        namespace = change.object["metadata"].get("namespace") or ""
        stale = False
        for watcher in watchers:
            if watcher.abandoned:
                stale = True
            elif not watcher.namespace or watcher.namespace == namespace:
                watcher.offer(change)
        if stale:
            self._purge(change.group_kind)

    def add(self, watcher: Watcher) -> None:
        self._purge(watcher.group_kind)
        self._watchers[watcher.group_kind] = (*self._watchers.get(watcher.group_kind, ()), watcher)

    def count(self) -> int:
        for gk in list(self._watchers):
            self._purge(gk)
        return sum(len(w) for w in self._watchers.values())

    def close(self) -> None:
        for watchers in self._watchers.values():
            for watcher in watchers:
                watcher.abandon()
                with watcher.condition:
                    watcher.condition.notify_all()
        self._watchers.clear()

    def _purge(self, gk: GroupKind) -> None:
        live = tuple(w for w in self._watchers.get(gk, ()) if not w.abandoned)
        if live:
            self._watchers[gk] = live
        else:
            self._watchers.pop(gk, None)


class WatchStream(Iterator[WatchEvent]):
    """The iterator `watch()` returns; `close()` it (or use `with`) to stop early."""

    def __init__(self, watcher: Watcher, *, kind: Kind, labels: LabelSelector, fields: FieldSelector, clock: Clock,
                 bookmark_interval: float, timeout: float | None, revision: Callable[[], int],
                 render: Callable[[Obj], Obj]) -> None:
        self._watcher, self._kind, self._clock = watcher, kind, clock
        self._labels, self._fields = labels, fields
        self._everything = labels.empty and fields.empty
        self._interval, self._revision, self._render = bookmark_interval, revision, render
        now = clock.monotonic()
        self._deadline = now + timeout if timeout is not None else None
        self._next_bookmark = now + bookmark_interval
        self._finalizer = weakref.finalize(self, watcher.abandon)

    def __iter__(self) -> WatchStream:
        return self

    def __enter__(self) -> WatchStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the watch and unregister it; iteration then ends."""
        self._finalizer()
        with self._watcher.condition:
            self._watcher.condition.notify_all()

    def __next__(self) -> WatchEvent:
        watcher, clock = self._watcher, self._clock
        while True:
            if watcher.abandoned:
                raise StopIteration
            while watcher.queue:
                event = self._event(watcher.queue.popleft())
                if event is not None:
                    self._next_bookmark = clock.monotonic() + self._interval
                    return event
            if watcher.overflowed:
                self.close()
                raise StopIteration
            now = clock.monotonic()
            if self._deadline is not None and now >= self._deadline:
                self.close()
                raise StopIteration
            if now >= self._next_bookmark:
                revision = self._revision()  # every change up to it is already in the queue
                if not watcher.queue:
                    self._next_bookmark = now + self._interval
                    return WatchEvent("BOOKMARK", {"apiVersion": self._kind.api_version, "kind": self._kind.kind,
                                                   "metadata": {"resourceVersion": str(revision)}})
                continue
            wake = self._next_bookmark if self._deadline is None else min(self._deadline, self._next_bookmark)
            with watcher.condition:
                if not watcher.queue and not watcher.abandoned:
                    clock.wait(watcher.condition, wake - now)

    def _event(self, change: Change) -> WatchEvent | None:
        new, old = change.object, change.old
        if self._everything:
            return WatchEvent(change.type, self._render(new))
        if change.type == "DELETED":
            return WatchEvent("DELETED", self._render(new)) if self._matches(new) else None
        now_matches = self._matches(new)
        matched = old is not None and self._matches(old)
        if now_matches:
            return WatchEvent("MODIFIED" if matched else "ADDED", self._render(new))
        if matched and old is not None:
            gone = {**old, "metadata": {**old["metadata"], "resourceVersion": str(change.revision)}}
            return WatchEvent("DELETED", self._render(gone))
        return None

    def _matches(self, obj: Obj) -> bool:
        meta: Any = obj.get("metadata") or {}
        return self._labels.matches(meta.get("labels")) and self._fields.matches(obj)
