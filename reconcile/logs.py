"""Structured logs: every line written during a reconcile names the controller, the key and the reconcile.

`Controller.process` runs each reconcile inside `reconcile_context(controller, key, reconcile_id)`,
a context variable, so it is per thread (each worker has its own). `ContextFilter` copies those
three fields onto every log record that passes a handler, whichever logger wrote it (the user's
reconcile function included). `configure()` installs one handler on the root logger, with the
filter, writing either readable text or JSON lines:

    2024-05-01T10:00:00.123Z INFO  porchkit.controller  retrying  controller=cm key=default/a reconcile_id=1f2e3d4c
    {"time": "2024-05-01T10:00:00.123Z", "level": "info", "logger": "porchkit.controller", "message": "retrying",
     "controller": "cm", "key": "default/a", "reconcile_id": "1f2e3d4c"}

An application with its own handlers adds `ContextFilter()` to them to get the same fields.
Does not: decide what is logged, or touch any logger but the root one (and only in `configure`).
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import sys
import time
from collections.abc import Iterator
from typing import IO, Any, Literal, NamedTuple

FIELDS = ("controller", "key", "reconcile_id")
LEVELS = ("debug", "info", "warning", "error", "critical")
Format = Literal["text", "json"]


class ReconcileContext(NamedTuple):
    controller: str
    key: str  # namespace/name, or name for a cluster-scoped object
    reconcile_id: str


# The reconcile running on this thread, if any (a context variable is per thread and per task).
_current: contextvars.ContextVar[ReconcileContext | None] = contextvars.ContextVar("porchkit_reconcile",
                                                                                     default=None)


@contextlib.contextmanager
def reconcile_context(controller: str, key: str, reconcile_id: str) -> Iterator[ReconcileContext]:
    """Within the block, log records on this thread carry these three fields (see ContextFilter)."""
    context = ReconcileContext(controller, key, reconcile_id)
    token = _current.set(context)
    try:
        yield context
    finally:
        _current.reset(token)


def current() -> ReconcileContext | None:
    """The reconcile running on this thread, or None outside any."""
    return _current.get()


class ContextFilter(logging.Filter):
    """Adds `controller`, `key` and `reconcile_id` to each record from the running reconcile (fields
    given with `extra=` win). Never drops a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        context = _current.get()
        if context is not None:
            for name, value in zip(FIELDS, context, strict=True):
                if not hasattr(record, name):
                    setattr(record, name, value)
        return True


def _timestamp(record: logging.LogRecord) -> str:
    seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
    return f"{seconds}.{int(record.msecs):03d}Z"


class TextFormatter(logging.Formatter):
    """`time LEVEL logger  message  controller=... key=... reconcile_id=...`, then any traceback."""

    def format(self, record: logging.LogRecord) -> str:
        line = f"{_timestamp(record)} {record.levelname:<7} {record.name}  {record.getMessage()}"
        fields = [f"{name}={getattr(record, name)}" for name in FIELDS if getattr(record, name, None)]
        if fields:
            line += "  " + " ".join(fields)
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        elif record.exc_text:
            line += "\n" + record.exc_text
        return line


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, the reconcile fields when present,
    and `exception` (the formatted traceback) when the record carries one."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {"time": _timestamp(record), "level": record.levelname.lower(),
                                 "logger": record.name, "message": record.getMessage()}
        for name in FIELDS:
            value = getattr(record, name, None)
            if value:
                entry[name] = str(value)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def parse_level(level: str | int) -> int:
    """A logging level from a name (`info`, `DEBUG`) or a number; ValueError names the valid ones."""
    if isinstance(level, int):
        return level
    if level.lower() not in LEVELS:
        raise ValueError(f"unknown log level {level!r} (use one of {', '.join(LEVELS)})")
    return int(getattr(logging, level.upper()))


def configure(format: Format = "text", level: str | int = "info", *,
              stream: IO[str] | None = None) -> logging.Handler:
    """Send every log record to `stream` (stderr by default) in `format`, at `level` and above.

    Installs one handler on the root logger and sets its level; calling again replaces the handler
    this function installed before (other handlers are left alone). Returns the handler, so that a
    caller (a test) can remove it. Raises ValueError for an unknown format or level."""
    if format not in ("text", "json"):
        raise ValueError(f"unknown log format {format!r} (use text or json)")
    numeric = parse_level(level)
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter() if format == "json" else TextFormatter())
    handler.addFilter(ContextFilter())
    handler.set_name("porchkit")
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == "porchkit"]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(numeric)
    # urllib3 warns on every connection retry; the informer says it once per failed attempt, with
    # its back-off. Its retries show at debug level.
    logging.getLogger("urllib3").setLevel(logging.DEBUG if numeric <= logging.DEBUG else logging.ERROR)
    return handler
