"""Health probes and metrics over HTTP: /healthz, /readyz and /metrics, as controller-runtime serves them.

A check is a function returning None when all is well, or one line saying what is wrong. The
server answers `/healthz` and `/readyz` with 200 "ok" when every check of the endpoint passes,
and 500 with one line per check (`[+]name ok` / `[-]name failed: reason`) when any fails, like
the Kubernetes API server; `?verbose` lists the checks on success too, and `/healthz/<name>`
runs one check. `/metrics` is the Prometheus text of a `Metrics`.

`for_manager()` wires the manager's checks:
  * /healthz `watches`: an informer that has synced, then heard nothing (no event, no bookmark,
    no relist) for longer than `silence` clock-seconds names its kind; a watch that went silent
    without breaking (kopf #1276, load balancers that drop idle streams) is only cured by a
    restart, which is what a failing liveness probe gets. The default is twice the API server's
    bookmark interval (60 s) plus 30 s of slack; 0 turns the check off.
  * /readyz `informers` (every cache synced) and `manager` (leading, or standing by as a
    candidate that can read the Lease; not while shutting down).

The server runs on its own thread (`start()`/`stop()`, or `with`); port 0 picks a free port
(`server.port` tells which). Does not: decide what is healthy (the checks do).
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable, Iterable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlsplit

from reconcile.clock import Clock
from reconcile.informer import Informer
from reconcile.metrics import CONTENT_TYPE, Metrics

if TYPE_CHECKING:
    from reconcile.manager import Manager

Check = Callable[[], str | None]

BOOKMARK_INTERVAL = 60.0  # seconds: how often kube-apiserver (and EmbeddedCluster) send a quiet watch a bookmark
DEFAULT_SILENCE = 2 * BOOKMARK_INTERVAL + 30.0
DEFAULT_ADDRESS = ":8081"

log = logging.getLogger("porchkit.health")


def parse_address(address: str) -> tuple[str, int]:
    """`host:port`, `:port` (every interface) or `[v6]:port` → (host, port); ValueError otherwise."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"bad address {address!r}: expected host:port or :port")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


def watches_fresh(informers: Callable[[], Iterable[Informer]], clock: Clock, silence: float) -> Check:
    """A check failing when a synced informer has heard nothing for more than `silence` clock-seconds
    (0 or less: never fails). The failure names each silent kind and for how long it has been quiet."""
    def check() -> str | None:
        if silence <= 0:
            return None
        now = clock.monotonic()
        quiet: dict[str, float] = {}
        for informer in informers():
            age = now - informer.last_activity
            if informer.synced.is_set() and age > silence:
                kind = str(informer.kind)
                quiet[kind] = max(quiet.get(kind, 0.0), age)
        if not quiet:
            return None
        kinds = ", ".join(f"{kind} (silent for {age:.0f}s)" for kind, age in sorted(quiet.items()))
        return f"watch silent for more than {silence:g}s: {kinds}"
    return check


def caches_synced(informers: Callable[[], Iterable[Informer]]) -> Check:
    """A check failing, with the kinds, while any informer has not finished its first list."""
    def check() -> str | None:
        waiting = sorted({str(i.kind) for i in informers() if not i.synced.is_set()})
        return f"informer caches not synced yet: {', '.join(waiting)}" if waiting else None
    return check


class HealthServer:
    """An HTTP server for health checks and metrics on its own thread; see the module docstring."""

    def __init__(self, address: str | tuple[str, int] = DEFAULT_ADDRESS, *, healthz: Mapping[str, Check] | None = None,
                 readyz: Mapping[str, Check] | None = None, metrics: Metrics | None = None) -> None:
        self.host, self._port = parse_address(address) if isinstance(address, str) else address
        self.checks = {"healthz": {"ping": _ok, **(healthz or {})}, "readyz": {"ping": _ok, **(readyz or {})}}
        self.metrics = metrics
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The port served (the one picked, when asked for port 0 and started)."""
        return self._server.server_address[1] if self._server is not None else self._port

    def start(self) -> None:
        """Bind and serve on a new thread; raises OSError when the address cannot be bound."""
        if self._server is not None:
            raise RuntimeError("the health server is already started")
        server_class = _Server6 if ":" in self.host else ThreadingHTTPServer
        self._server = server_class((self.host, self._port), _handler(self))
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.1},
                                        name="health-server", daemon=True)
        self._thread.start()
        log.info("serving /healthz, /readyz and /metrics on %s:%d", self.host or "*", self.port)

    def stop(self) -> None:
        """Stop serving and close the socket; waits for the server thread. Idempotent."""
        server, thread, self._server, self._thread = self._server, self._thread, None, None
        if server is None or thread is None:
            return
        server.shutdown()
        server.server_close()
        thread.join()

    def __enter__(self) -> HealthServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def report(self, endpoint: str, only: str = "", verbose: bool = False) -> tuple[int, str]:
        """The status code and body of `/endpoint` (or `/endpoint/only`), as served."""
        checks = self.checks.get(endpoint, {})
        if only:
            if only not in checks:
                return 404, f"no check named {only!r} in /{endpoint}\n"
            checks = {only: checks[only]}
        lines, failed = [], False
        for name, check in checks.items():
            reason = _run(name, check)
            failed = failed or reason is not None
            lines.append(f"[+]{name} ok" if reason is None else f"[-]{name} failed: {reason}")
        if failed:
            return 500, "\n".join([*lines, f"{endpoint} check failed"]) + "\n"
        if verbose:
            return 200, "\n".join([*lines, f"{endpoint} check passed"]) + "\n"
        return 200, "ok"


def for_manager(manager: Manager, address: str | tuple[str, int] = DEFAULT_ADDRESS, *,
                silence: float = DEFAULT_SILENCE) -> HealthServer:
    """A (not yet started) server with the manager's checks and metrics; see the module docstring."""
    informers = lambda: manager.cache.informers  # noqa: E731 - read at each probe: informers come and go
    return HealthServer(address, healthz={"watches": watches_fresh(informers, manager.clock, silence)},
                        readyz={"informers": caches_synced(informers), "manager": manager.ready},
                        metrics=manager.metrics)


def _ok() -> None:
    return None


def _run(name: str, check: Check) -> str | None:
    try:
        return check()
    except Exception as err:  # a broken check fails its probe instead of the server
        log.warning("health check %s raised", name, exc_info=True)
        return f"{type(err).__name__}: {err}"


class _Server6(ThreadingHTTPServer):
    address_family = socket.AF_INET6


def _handler(owner: HealthServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "porchkit"

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            url = urlsplit(self.path)
            endpoint, _, only = url.path.strip("/").partition("/")
            if endpoint in owner.checks:
                verbose = "verbose" in parse_qs(url.query, keep_blank_values=True)
                code, body = owner.report(endpoint, only, verbose)
                self._send(code, body, "text/plain; charset=utf-8")
            elif endpoint == "metrics" and not only and owner.metrics is not None:
                self._send(200, owner.metrics.render(), CONTENT_TYPE)
            else:
                self._send(404, "not found\n", "text/plain; charset=utf-8")

        def _send(self, code: int, body: str, content_type: str) -> None:
            data = body.encode()
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("X-Content-Type-Options", "nosniff")
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            log.debug("%s - " + format, self.address_string(), *args)

    return Handler
