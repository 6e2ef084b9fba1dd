"""The webhook hook: Metacontroller's HTTP protocol, over the standard library's http.client.

A call POSTs the request as JSON (`Content-Type: application/json`, plus `Authorization` and
`If-None-Match` when configured) to the hook's URL (`url`, or `service` + `path` as
`<protocol>://<name>.<namespace>:<port><path>`) and reads the answer:

    200            the body, decoded and shape-checked (base.decode_response)
    429            HookRetryAfter(seconds from Retry-After: integer seconds or an HTTP date)
    304, 412       in ETag mode, when If-None-Match was sent: the cached body
    anything else  HookError "unsupported status code N from URL: <first 200 characters of the body>"

`timeout` (a Go duration, 10 s by default) bounds the whole call: connecting, the TLS handshake,
sending and reading. Every socket operation waits at most until the call's deadline, so a server
that answers a byte at a time cannot stretch it.

Connections are kept alive and pooled per hook: a call takes the most recently used idle
connection (so each worker thread tends to keep its own) or opens one. Servers that answer
HTTP/1.0 without Content-Length and close the connection (Python's http.server hooks do) are read
to the end and not pooled. A pooled connection the server has closed meanwhile is retried once on
a fresh connection, only when nothing of the response had arrived. `resolve` maps a URL's
"host:port" (or "host") to another address to connect to, like curl's --resolve; the Host header
and the TLS server name stay the URL's.

ETag mode (`etag.enabled`) keeps, per `cache_key`, the last body that came with an ETag and sends
that ETag as If-None-Match; entries expire after `cacheTimeoutSeconds` when it is set, and expired
entries are purged as they are met (every `cacheCleanupSeconds`, or every timeout, at most).

Differences from Metacontroller:
- `cacheTimeoutSeconds` without `cacheCleanupSeconds` works (Metacontroller crashes).
- A body that is JSON `null`, or any non-object, is an error (Go decodes `null` as an empty answer,
  which deletes every attachment).
- NaN and Infinity are refused, as Go's decoder refuses them.
- Metrics are labelled by controller and hook, not by URL (see reconcile.metrics).
- DNS lookups are not bounded by the timeout (use `resolve`, or IP addresses, to avoid them).
- Credentials (authorization, basicAuth, clientTLS) are never sent over plain http, and the
  Secrets and ConfigMaps a webhook names are read only from the namespaces the process's
  HookPolicy allows (tls.py); Metacontroller sends any Secret it can read to any URL.
"""

from __future__ import annotations

import contextlib
import email.utils
import http.client
import json
import math
import re
import socket
import ssl
import threading
import time
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn
from urllib.parse import SplitResult, urlsplit

from reconcile import fencing
from reconcile.clock import SYSTEM_CLOCK, Clock
from reconcile.cluster import Cluster
from reconcile.hooks.base import (
    HookConfigError,
    HookError,
    HookRetryAfter,
    Instruments,
    ResponseShape,
    decode_response,
    format_seconds,
    json_type,
    mapping_at,
    string_at,
    timeout_of,
)
from reconcile.hooks.policy import HookPolicy
from reconcile.hooks.tls import Security, resolve_security

MAX_IDLE_CONNECTIONS = 32
ERROR_BODY_CHARS = 200
NOT_MODIFIED = (304, 412)


def build_webhook(webhook: Mapping[str, Any], *, field: str, version: str, strict: bool, shape: ResponseShape,
                  instruments: Instruments, policy: HookPolicy, cluster: Cluster | None = None,
                  endpoint_configs: Sequence[Mapping[str, Any]] = (), resolve: Mapping[str, str] | None = None,
                  clock: Clock = SYSTEM_CLOCK) -> WebhookHook:
    """A WebhookHook from a `webhook:` spec at `field`; HookConfigError naming the field at fault,
    HookRefused when `policy` does not allow its credentials (see tls.py)."""
    url = webhook_url(webhook, field)
    parts = urlsplit(url)
    address, _ = connect_address(parts, resolve or {})
    security = resolve_security(webhook, scheme=parts.scheme, host=parts.netloc.rpartition("@")[2], address=address,
                                field=field, policy=policy, endpoint_configs=endpoint_configs, cluster=cluster)
    return WebhookHook(url, timeout=timeout_of(webhook, field), security=security,
                       etag=_etag_settings(webhook, field), shape=shape, version=version, strict=strict,
                       instruments=instruments, resolve=resolve, clock=clock)


def webhook_url(webhook: Mapping[str, Any], field: str) -> str:
    """`url` when given, else `<protocol>://<name>.<namespace>:<port><path>` from `service` and `path`."""
    url = string_at(webhook, "url", field)
    if url:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname or any(c <= " " or c == "\x7f" for c in url):
            raise HookConfigError(f"{field}.url", f"{url!r} is not an http:// or https:// URL with a host")
        return url
    service = mapping_at(webhook, "service", field)
    path = string_at(webhook, "path", field)
    if service is None or not path:
        raise HookConfigError(field, "must specify either a full 'url', or both 'service' and 'path'")
    where = f"{field}.service"
    name, namespace = string_at(service, "name", where), string_at(service, "namespace", where)
    if not name:
        raise HookConfigError(f"{where}.name", "required: the Service's name")
    if not namespace:
        raise HookConfigError(f"{where}.namespace", "required: the Service's namespace")
    port = service.get("port", 80)
    if port is None:
        port = 80
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise HookConfigError(f"{where}.port", f"expected a port number, got {json.dumps(port)}")
    protocol = string_at(service, "protocol", where, default="http") or "http"
    if protocol not in ("http", "https"):
        raise HookConfigError(f"{where}.protocol", f"expected http or https, got {protocol!r}")
    return f"{protocol}://{name}.{namespace}:{port}{path if path.startswith('/') else '/' + path}"


@dataclass(frozen=True, slots=True)
class ETagSettings:
    timeout: float | None  # seconds an entry stays valid; None: forever
    cleanup: float | None  # seconds between purges of expired entries; None: the timeout


def _etag_settings(webhook: Mapping[str, Any], field: str) -> ETagSettings | None:
    etag = mapping_at(webhook, "etag", field)
    if etag is None:
        return None
    where = f"{field}.etag"
    enabled = etag.get("enabled", False)
    if not isinstance(enabled, bool):
        raise HookConfigError(f"{where}.enabled", f"expected true or false, got {json_type(enabled)}")
    if not enabled:
        return None
    numbers = []
    for key in ("cacheTimeoutSeconds", "cacheCleanupSeconds"):
        value = etag.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise HookConfigError(f"{where}.{key}", f"expected a number of seconds, got {json_type(value)}")
        numbers.append(float(value) if value is not None and value > 0 else None)
    return ETagSettings(timeout=numbers[0], cleanup=numbers[1])


class WebhookHook:
    """A hook served over HTTP(S); see the module docstring. Thread-safe."""

    kind = "webhook"

    def __init__(self, url: str, *, timeout: float, security: Security, shape: ResponseShape, version: str = "v1",
                 strict: bool = False, etag: ETagSettings | None = None, instruments: Instruments | None = None,
                 resolve: Mapping[str, str] | None = None, clock: Clock = SYSTEM_CLOCK) -> None:
        self.target, self.version, self.strict = url, version, strict
        self.timeout, self.shape = timeout, shape
        self._instruments = instruments or Instruments(None, "", "")
        self._clock = clock
        self._etags = _ETagCache(etag, clock) if etag is not None else None
        parts = urlsplit(url)
        self._path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._headers = {"Content-Type": "application/json"}
        if security.authorization is not None:
            self._headers["Authorization"] = security.authorization
        self._endpoint = _Endpoint.of(parts, security, resolve or {})
        self._lock = threading.Lock()
        self._idle: list[_Connection] = []
        self._busy: set[_Connection] = set()
        self._closed = False

    def call(self, request: Mapping[str, Any], *, cache_key: Hashable | None = None) -> dict[str, Any]:
        body = json.dumps(request, separators=(",", ":"), ensure_ascii=False).encode()
        headers = self._headers
        cached = self._etags.get(cache_key) if self._etags is not None and cache_key is not None else None
        if cached is not None:
            headers = {**headers, "If-None-Match": cached[0]}
        self._instruments.started()
        started, code = time.perf_counter(), "error"
        try:
            status, reply_headers, data = self._exchange(body, headers, time.monotonic() + self.timeout)
            code = str(status)
        except TimeoutError as err:
            code = "timeout"
            raise HookError(f"POST {self.target} timed out after {format_seconds(self.timeout)}") from err
        finally:
            self._instruments.finished(code, time.perf_counter() - started)
        return self._answer(status, reply_headers, data, cached, cache_key)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, busy = self._idle, list(self._busy)
            self._idle = []
        for connection in idle:
            connection.close()
        for connection in busy:
            connection.cancel()

    # --- one exchange ------------------------------------------------------------------------

    def _exchange(self, body: bytes, headers: Mapping[str, str],
                  deadline: float) -> tuple[int, http.client.HTTPMessage, bytes]:
        connection = self._take()
        reused = connection.sock is not None
        try:
            return self._attempt(connection, body, headers, deadline)
        except (OSError, http.client.HTTPException) as err:
            # A kept-alive connection the server closed while it sat in the pool: send again on a
            # fresh one, but only if not a byte of the answer came (the hook never answered).
            stale = reused and isinstance(err, ConnectionError) and connection.received == 0
            if not stale or connection.cancelled or self._closed:
                self._raise(connection, err)
        connection = self._take(fresh=True)
        try:
            return self._attempt(connection, body, headers, deadline)
        except (OSError, http.client.HTTPException) as err:
            self._raise(connection, err)

    def _attempt(self, connection: _Connection, body: bytes, headers: Mapping[str, str],
                 deadline: float) -> tuple[int, http.client.HTTPMessage, bytes]:
        connection.arm(deadline)
        try:
            if connection.sock is None:
                connection.connect()
            fencing.check()  # as late as possible: a replica that lost its Lease sends nothing
            connection.request("POST", self._path, body, dict(headers))
            response = connection.getresponse()
            data = response.read()
        except BaseException:
            self._release(connection, keep=False)
            raise
        self._release(connection, keep=connection.sock is not None and not response.will_close)
        return response.status, response.headers, data

    def _raise(self, connection: _Connection, err: BaseException) -> NoReturn:
        if connection.cancelled or self._closed:
            raise HookError(f"POST {self.target} cancelled: the hook was closed") from None
        if isinstance(err, TimeoutError):
            raise err
        raise HookError(f"POST {self.target} failed: {_describe_error(err)}") from err

    def _answer(self, status: int, headers: http.client.HTTPMessage, data: bytes,
                cached: tuple[str, bytes] | None, cache_key: Hashable | None) -> dict[str, Any]:
        if status == 200:
            answer = decode_response(data, self.shape, strict=self.strict, source=self.target)
            etag = headers.get("ETag")
            if etag and self._etags is not None and cache_key is not None:
                self._etags.put(cache_key, etag, data)
            return answer
        if status == 429:
            seconds = retry_after_seconds(headers.get("Retry-After"), self._clock.time())
            raise HookRetryAfter(f"{self.target} answered 429 Too Many Requests: retry after "
                                 f"{format_seconds(seconds)}", seconds=seconds)
        if status in NOT_MODIFIED and cached is not None:
            return decode_response(cached[1], self.shape, strict=self.strict, source=self.target)
        text = data.decode("utf-8", "replace")
        excerpt = text[:ERROR_BODY_CHARS] + ("..." if len(text) > ERROR_BODY_CHARS else "")
        raise HookError(f"unsupported status code {status} from {self.target}: {excerpt or '(empty body)'}")

    # --- the pool -----------------------------------------------------------------------------

    def _take(self, *, fresh: bool = False) -> _Connection:
        with self._lock:
            if self._closed:
                raise HookError(f"POST {self.target} cancelled: the hook was closed")
            connection = self._idle.pop() if self._idle and not fresh else _Connection(self._endpoint)
            self._busy.add(connection)
        return connection

    def _release(self, connection: _Connection, *, keep: bool) -> None:
        with self._lock:
            self._busy.discard(connection)
            keep = keep and not self._closed and not connection.cancelled and len(self._idle) < MAX_IDLE_CONNECTIONS
            if keep:
                self._idle.append(connection)
        if not keep:
            connection.close()


# ---------------------------------------------------------------------------------------------
# Connections whose every socket operation ends by the call's deadline


@dataclass(frozen=True, slots=True)
class _Endpoint:
    host: str  # as in the URL: the Host header and the TLS server name
    port: int
    address: tuple[str, int]  # where to connect
    ssl_context: ssl.SSLContext | None

    @classmethod
    def of(cls, parts: SplitResult, security: Security, resolve: Mapping[str, str]) -> _Endpoint:
        host, https = parts.hostname or "", parts.scheme == "https"
        port = parts.port or (443 if https else 80)
        context = None
        if https:
            context = security.ssl_context
            context.sslsocket_class = _DeadlineSSLSocket
        return cls(host, port, connect_address(parts, resolve), context)


def connect_address(parts: SplitResult, resolve: Mapping[str, str]) -> tuple[str, int]:
    """Where a call to the URL `parts` connects: its host and port, unless `resolve` maps its
    "host:port" (as written, or with the scheme's default port) or "host" to another address."""
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    netloc = parts.netloc.rpartition("@")[2].lower()
    override = next((resolve[k] for k in (netloc, f"{host}:{port}", host) if k in resolve), None)
    if not override:
        return host, port
    target = urlsplit(f"//{override}")
    return target.hostname or host, target.port or port


class _Connection(http.client.HTTPConnection):
    """An HTTP connection to one endpoint whose socket obeys `arm()`'s deadline and can be shut
    down from another thread (`cancel()`)."""

    def __init__(self, endpoint: _Endpoint) -> None:
        super().__init__(endpoint.host, endpoint.port)
        if endpoint.ssl_context is not None:
            self.default_port = 443  # so that the Host header leaves out an explicit :443
        self.endpoint = endpoint
        self.deadline = math.inf
        self.cancelled = False
        self.live: _DeadlineSocket | _DeadlineSSLSocket | None = None  # http.client forgets it on close

    @property
    def received(self) -> int:
        return self.live.received if self.live is not None else 0

    def arm(self, deadline: float) -> None:
        self.deadline = deadline
        if self.live is not None:
            self.live.deadline, self.live.received = deadline, 0

    def connect(self) -> None:
        last: OSError = OSError(f"cannot resolve {self.endpoint.address[0]}")
        host, port = self.endpoint.address
        for family, kind, proto, _, address in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
            raw = self.live = _DeadlineSocket(family, kind, proto)
            raw.deadline = self.deadline
            try:
                raw.arm()
                raw.connect(address)
            except OSError as err:
                raw.close()
                if isinstance(err, TimeoutError):
                    raise
                last = err
                continue
            break
        else:
            raise last
        if self.cancelled:
            raise ConnectionAbortedError("cancelled")
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock: _DeadlineSocket | _DeadlineSSLSocket = raw
        if self.endpoint.ssl_context is not None:
            raw.arm()  # the handshake inside wrap_socket runs under this timeout
            wrapped = self.endpoint.ssl_context.wrap_socket(raw, server_hostname=self.endpoint.host)
            assert isinstance(wrapped, _DeadlineSSLSocket)
            wrapped.deadline, wrapped.received = self.deadline, 0
            sock = self.live = wrapped
            if self.cancelled:  # cancel() may have met the plain socket as it was being wrapped
                wrapped.close()
                raise ConnectionAbortedError("cancelled")
        self.sock = sock

    def cancel(self) -> None:
        """End the exchange in flight at once, from any thread: its next read sees the end."""
        self.cancelled = True
        live = self.live
        if live is not None:
            # Not connected yet, or already closed: then connect() sees `cancelled` instead.
            with contextlib.suppress(OSError):
                socket.socket.shutdown(live, socket.SHUT_RDWR)


def _arm(sock: socket.socket, deadline: float) -> None:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise TimeoutError("timed out")
    sock.settimeout(remaining)


class _DeadlineSocket(socket.socket):
    deadline = math.inf
    received = 0

    def arm(self) -> None:
        _arm(self, self.deadline)

    def recv_into(self, buffer: Any, nbytes: int = 0, flags: int = 0) -> int:
        _arm(self, self.deadline)
        count = super().recv_into(buffer, nbytes, flags)
        self.received += count
        return count

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        _arm(self, self.deadline)
        data = super().recv(bufsize, flags)
        self.received += len(data)
        return data

    def sendall(self, data: Any, flags: int = 0) -> None:
        _arm(self, self.deadline)
        super().sendall(data, flags)


class _DeadlineSSLSocket(ssl.SSLSocket):
    deadline = math.inf
    received = 0

    def recv_into(self, buffer: Any, nbytes: int | None = None, flags: int = 0) -> int:
        _arm(self, self.deadline)
        count = super().recv_into(buffer, nbytes, flags)
        self.received += count
        return count

    def recv(self, buflen: int = 1024, flags: int = 0) -> bytes:
        _arm(self, self.deadline)
        data = super().recv(buflen, flags)
        self.received += len(data)
        return data

    def send(self, data: Any, flags: int = 0) -> int:
        _arm(self, self.deadline)
        return super().send(data, flags)


def _describe_error(err: BaseException) -> str:
    if isinstance(err, ssl.SSLCertVerificationError):
        return f"TLS: certificate verify failed: {err.verify_message or err.reason}"
    if isinstance(err, ssl.SSLError):
        text = err.reason or (err.args[1] if len(err.args) > 1 else str(err))
        return "TLS: " + re.sub(r"\s*\(_ssl\.c:\d+\)", "", str(text)).lower().replace("_", " ")
    if isinstance(err, http.client.RemoteDisconnected | http.client.IncompleteRead):
        return "the server closed the connection without a complete answer"
    if isinstance(err, OSError) and err.strerror:
        return err.strerror[0].lower() + err.strerror[1:]
    return str(err) or type(err).__name__


# ---------------------------------------------------------------------------------------------
# Retry-After and ETags


def retry_after_seconds(value: str | None, now: float) -> float:
    """Seconds a Retry-After header asks to wait: integer seconds, or an HTTP date (seconds until
    then, rounded up); 0 when absent, past or unreadable."""
    text = (value or "").strip()
    if text.isdigit():
        return float(int(text))
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return 0.0
    return float(max(0, math.ceil(when.timestamp() - now)))


class _ETagCache:
    """(etag, body) per cache key, expiring after `settings.timeout` seconds of `clock`."""

    def __init__(self, settings: ETagSettings, clock: Clock) -> None:
        self._settings, self._clock = settings, clock
        self._entries: dict[Hashable, tuple[str, bytes, float]] = {}
        self._lock = threading.Lock()
        self._last_purge = clock.monotonic()

    def get(self, key: Hashable) -> tuple[str, bytes] | None:
        now = self._clock.monotonic()
        with self._lock:
            self._purge(now)
            entry = self._entries.get(key)
            if entry is None:
                return None
            if self._expired(entry, now):
                del self._entries[key]
                return None
            return entry[0], entry[1]

    def put(self, key: Hashable, etag: str, body: bytes) -> None:
        now = self._clock.monotonic()
        with self._lock:
            self._entries[key] = (etag, body, now)
            self._purge(now)

    def _expired(self, entry: tuple[str, bytes, float], now: float) -> bool:
        timeout = self._settings.timeout
        return timeout is not None and now - entry[2] >= timeout

    def _purge(self, now: float) -> None:
        interval = self._settings.cleanup or self._settings.timeout
        if interval is None or now - self._last_purge < interval:
            return
        self._last_purge = now
        for key in [k for k, entry in self._entries.items() if self._expired(entry, now)]:
            del self._entries[key]
