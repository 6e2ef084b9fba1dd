"""`WatchStream`: the events of one watch request, read from its connection as they arrive.

The API server sends one JSON object per line (`{"type": ..., "object": ...}`), in chunks that
need not end at a line's end. Promises: events in the order sent; BOOKMARKs passed on; an ERROR
event raises its Status' error (410 -> Gone) and ends the stream; a connection that breaks, or
sends nothing for the idle timeout, raises ServerError; `close()` from any thread wakes a thread
blocked reading and the connection goes back to the pool exactly once.
Does not: resume, relist or back off (informer.py does).
"""

from __future__ import annotations

import contextlib
import json
import threading
import weakref
from collections.abc import Iterator

import urllib3

from reconcile.cluster import EventType, Kind, WatchEvent
from reconcile.errors import ServerError
from reconcile.kube._transport import TRANSPORT_ERRORS, status_error, unreachable, with_kind

EVENT_TYPES: frozenset[str] = frozenset(("ADDED", "MODIFIED", "DELETED", "BOOKMARK"))
READ_SIZE = 65536


class WatchStream(Iterator[WatchEvent]):
    """The iterator `KubeCluster.watch` returns; see the module docstring.

    Ends when the server ends the stream (its timeoutSeconds) or on `close()` (or leaving `with`).
    Iterate it from one thread; close it from any."""

    def __init__(self, response: urllib3.BaseHTTPResponse, kind: Kind, *, idle_timeout: float, host: str) -> None:
        self._response, self._kind = response, kind
        self._idle, self._host = idle_timeout, host
        self._buffer = bytearray()
        self._scanned = 0  # bytes at the buffer's start known to hold no newline
        self._closed = False
        self._reading = threading.Lock()  # held by the iterating thread while it reads the socket
        self._finalizer = weakref.finalize(self, _release, response)

    def __iter__(self) -> WatchStream:
        return self

    def __enter__(self) -> WatchStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the watch and release its connection; safe from another thread. Idempotent."""
        self._closed = True
        if self._reading.acquire(blocking=False):
            try:
                self._finalizer()
            finally:
                self._reading.release()
        else:
            # another thread is blocked reading: shutting the socket down wakes it, and that
            # thread releases the connection itself (the pool must not get it back twice)
            with contextlib.suppress(Exception):
                self._response.shutdown()

    def __next__(self) -> WatchEvent:
        while not self._closed:
            line = self._line()
            if line is None:
                break
            if not line.strip():
                continue
            try:
                event = json.loads(line)
                kind, obj = event["type"], event["object"]
            except (ValueError, KeyError, TypeError) as err:
                self.close()
                raise ServerError(f"the API server at {self._host} sent a watch event that is not valid: "
                                  f"{line[:200]!r}") from err
            if kind == "ERROR":
                self.close()
                raise status_error(obj if isinstance(obj, dict) else {})
            if kind not in EVENT_TYPES or not isinstance(obj, dict):
                continue  # an event type from a newer server: skipped, as client-go does
            event_type: EventType = kind
            return WatchEvent(event_type, with_kind(obj, self._kind))
        self.close()
        raise StopIteration

    def _line(self) -> bytes | None:
        """The next line; None at the stream's end. A partial last line is returned as it is."""
        while True:
            end = self._buffer.find(b"\n", self._scanned)
            if end >= 0:
                line = bytes(self._buffer[:end])
                del self._buffer[:end + 1]
                self._scanned = 0
                return line
            self._scanned = len(self._buffer)
            chunk = self._read()
            if chunk is None:
                line, self._buffer = bytes(self._buffer), bytearray()
                return line or None
            self._buffer += chunk

    def _read(self) -> bytes | None:
        """The bytes that have arrived (waiting for some); None when the stream ended or closed."""
        chunk: bytes | None = None
        failure: Exception | None = None
        with self._reading:
            if not self._closed:
                try:
                    chunk = self._response.read1(READ_SIZE)
                except Exception as err:  # sorted out below, once the lock is released
                    failure = err
            if self._closed:  # before the read or, during it, by another thread
                self._finalizer()
                return None
        if failure is None:
            return chunk or None
        self.close()
        if isinstance(failure, urllib3.exceptions.ReadTimeoutError):
            raise ServerError(f"the watch of {self._kind} at {self._host} received nothing for "
                              f"{self._idle:g}s") from failure
        if isinstance(failure, TRANSPORT_ERRORS):
            raise unreachable(self._host, failure) from failure
        raise failure


def _release(response: urllib3.BaseHTTPResponse) -> None:
    """Close a streaming response's connection and give its slot back to the pool (a closed
    connection reconnects when it is next used)."""
    response.close()
    response.release_conn()
