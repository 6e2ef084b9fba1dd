"""A small, real HTTP front-end for `EmbeddedCluster` on loopback, for testing `KubeCluster`.

It serves kube-apiserver's REST paths: discovery (/api, /api/v1, /apis, /apis/<group>/<version>),
create, get, list (selectors, limit/continue from a snapshot), watch (newline-delimited JSON,
bookmarks only when asked for, an expired resourceVersion as a 410 ERROR event), update, the
status subresource, merge/JSON patches, server-side apply and delete with DeleteOptions; every
refusal is a `Status` body with its code. It only translates: all semantics come from the
EmbeddedCluster behind it. `fail_next` makes the next request(s) fail with a given Status (429
with Retry-After, say), `on_request` sees each request before it is served, and a bearer token
is required when one is set.

`ApiServer.stop()` ends every watch, closes every connection and joins the handler threads,
each within a bounded time.
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import ssl
import threading
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import parse_qsl, unquote, urlsplit

import yaml

from reconcile.cluster import Obj, ObjectKey, ResourceInfo, WatchEvent
from reconcile.embedded import EmbeddedCluster
from reconcile.errors import (
    ApiError,
    BadRequest,
    Gone,
    MethodNotAllowed,
    NotFound,
    ServerError,
    TooManyRequests,
    Unauthorized,
    make_status,
)

JOIN_TIMEOUT = 5.0


class Request(NamedTuple):
    method: str
    path: str
    query: dict[str, str]


class Fault(NamedTuple):
    status: Obj
    retry_after: str | None
    method: str | None


class ApiServer:
    """An HTTP server on 127.0.0.1 in front of `cluster`; `start()` it, `stop()` it."""

    def __init__(self, cluster: EmbeddedCluster, *, token: str = "", tls: ssl.SSLContext | None = None) -> None:
        """`tls`, a server-side context with its certificate loaded, serves HTTPS instead."""
        self.cluster, self.token, self.scheme = cluster, token, "https" if tls is not None else "http"
        self.requests: list[Request] = []
        self.on_request: Callable[[Request], None] | None = None  # called before each request is served
        self._faults: list[Fault] = []
        self._snapshots: dict[str, tuple[list[Obj], str, int]] = {}  # continue token -> items, rv, offset
        self._lock = threading.Lock()
        self._watches: set[Iterator[WatchEvent]] = set()
        self._connections: dict[socket.socket, threading.Thread] = {}
        self._http = _Server(("127.0.0.1", 0), _Handler, self)
        if tls is not None:
            self._http.socket = tls.wrap_socket(self._http.socket, server_side=True)
        self._thread = threading.Thread(target=self._http.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="test-apiserver", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._http.server_address[:2]
        return f"{self.scheme}://{host!s}:{port}"

    def start(self) -> ApiServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop accepting, end every watch and connection, and join every thread (bounded)."""
        if self._thread.is_alive():
            self._http.shutdown()
            self._thread.join(JOIN_TIMEOUT)
        with self._lock:
            watches, connections = list(self._watches), dict(self._connections)
        for stream in watches:
            stream.close()  # type: ignore[attr-defined]
        for sock in connections:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        for thread in connections.values():
            thread.join(JOIN_TIMEOUT)
        self._http.server_close()

    def __enter__(self) -> ApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def fail_next(self, code: int, reason: str, message: str = "injected failure", *, method: str | None = None,
                  retry_after: str | None = None, times: int = 1) -> None:
        """Answer the next `times` requests (of `method`, when given) with this Status."""
        with self._lock:
            self._faults += [Fault(make_status(code, reason, message), retry_after, method)] * times

    def expire_continue_tokens(self) -> None:
        """Forget every list snapshot, as compaction would: their continue tokens now get 410."""
        with self._lock:
            self._snapshots.clear()

    def watching(self) -> int:
        """How many watch requests are being served."""
        with self._lock:
            return len(self._watches)

    def _take_fault(self, method: str) -> Fault | None:
        with self._lock:
            for index, fault in enumerate(self._faults):
                if fault.method in (None, method):
                    return self._faults.pop(index)
        return None


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # ApiServer.stop joins them itself, with a bound

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], api: ApiServer) -> None:
        self.api = api
        super().__init__(address, handler)


def write_kubeconfig(path: Path, server: str, *, token: str, context: str = "porchkit-test") -> Path:
    """A kubeconfig whose current context reaches `server` with a bearer `token`."""
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": context,
        "clusters": [{"name": "test", "cluster": {"server": server}}],
        "users": [{"name": "tester", "user": {"token": token}}],
        "contexts": [{"name": context, "context": {"cluster": "test", "user": "tester", "namespace": "default"}}],
    }
    path.write_text(yaml.safe_dump(config))
    return path


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 10  # an idle keep-alive connection ends after this many seconds
    server: _Server

    def setup(self) -> None:
        super().setup()
        # as Go's net/http does: without it, headers and body in two writes wait out delayed ACKs
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self.server.api._lock:
            self.server.api._connections[self.connection] = threading.current_thread()

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            with self.server.api._lock:
                self.server.api._connections.pop(self.connection, None)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    # dispatch

    def _handle(self, method: str) -> None:
        api = self.server.api
        url = urlsplit(self.path)
        query = dict(parse_qsl(url.query, keep_blank_values=True))
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        request = Request(method, url.path, query)
        with api._lock:
            api.requests.append(request)
        if api.on_request is not None:
            api.on_request(request)
        try:
            scheme, _, token = (self.headers.get("Authorization") or "").partition(" ")
            if api.token and (scheme.lower() != "bearer" or token != api.token):  # the scheme is case-blind
                raise Unauthorized("Unauthorized")
            fault = api._take_fault(method)
            if fault is not None:
                self._send(int(fault.status["code"]), fault.status, retry_after=fault.retry_after)
                return
            self._route(method, [unquote(p) for p in url.path.strip("/").split("/")], query, body)
        except ApiError as err:
            retry_after = f"{err.retry_after:g}" if isinstance(err, TooManyRequests) else None
            self._send(int(err.status.get("code") or err.code), err.status, retry_after=retry_after)
        except Exception as err:  # a bug here or in the cluster: a 500, as the real server would
            self._send(500, ServerError(f"{type(err).__name__}: {err}").status)

    def _route(self, method: str, parts: list[str], query: dict[str, str], body: bytes) -> None:
        cluster = self.server.api.cluster
        if parts == ["api"] and method == "GET":
            return self._send(200, {"kind": "APIVersions", "versions": ["v1"]})
        if parts == ["apis"] and method == "GET":
            return self._send(200, _group_list(cluster.resources()))
        if parts[0] == "api" and len(parts) >= 2:
            api_version, rest = parts[1], parts[2:]
        elif parts[0] == "apis" and len(parts) >= 3:
            api_version, rest = f"{parts[1]}/{parts[2]}", parts[3:]
        else:
            raise _no_such_path()
        if not rest and method == "GET":
            return self._send(200, _resource_list(api_version, cluster.resources()))
        namespace = ""
        if len(rest) >= 3 and rest[0] == "namespaces" and not (len(rest) == 3 and rest[2] in ("status", "finalize")):
            namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            raise _no_such_path()
        info = next((i for i in cluster.resources() if i.kind.api_version == api_version and i.plural == rest[0]), None)
        if info is None:
            raise _no_such_path()
        name, subresource = (rest[1] if len(rest) > 1 else ""), (rest[2] if len(rest) > 2 else "")
        if subresource and subresource not in info.subresources:
            raise _no_such_path()
        if not name:
            if method == "GET":
                return self._watch(info, namespace, query) if query.get("watch") in ("1", "true") else \
                    self._list(info, namespace, query)
            if method == "POST":
                return self._send(201, cluster.create(_body(body, info, namespace)))
        elif method == "GET":
            return self._get(info, ObjectKey(namespace, name))
        elif method == "PUT":
            obj = _body(body, info, namespace, name)
            return self._send(200, cluster.update_status(obj) if subresource else cluster.update(obj))
        elif method == "PATCH":
            return self._patch(info, ObjectKey(namespace, name), subresource, query, body)
        elif method == "DELETE" and not subresource:
            return self._delete(info, ObjectKey(namespace, name), body)
        raise MethodNotAllowed(f"the server does not allow this method on the requested resource ({method})")

    # operations

    def _get(self, info: ResourceInfo, key: ObjectKey) -> None:
        found = self.server.api.cluster.get(info.kind, key)
        if found is None:
            raise _not_found(info, key.name)
        self._send(200, found)

    def _list(self, info: ResourceInfo, namespace: str, query: dict[str, str]) -> None:
        api = self.server.api
        token, limit = query.get("continue", ""), int(query.get("limit") or 0)
        if token:
            with api._lock:
                snapshot = api._snapshots.pop(token, None)
            if snapshot is None:
                message = "The provided continue parameter is too old to display a consistent list result."
                raise Gone(message, status=make_status(410, "Expired", message))
            items, version, start = snapshot
        else:
            lister = api.cluster.list_metadata if self._metadata_only("List") else api.cluster.list
            result = lister(info.kind, namespace=namespace, labels=query.get("labelSelector") or None,
                            fields=query.get("fieldSelector") or None)
            items, version, start = result.items, result.resource_version, 0
        end = start + limit if limit else len(items)
        meta: Obj = {"resourceVersion": version}
        if end < len(items):
            next_token = uuid.uuid4().hex
            with api._lock:
                api._snapshots[next_token] = (items, version, end)
            meta.update({"continue": next_token, "remainingItemCount": len(items) - end})
        if self._metadata_only("List"):  # PartialObjectMetadata items keep their apiVersion and kind
            self._send(200, {"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadataList", "metadata": meta,
                             "items": items[start:end]})
            return
        page = [{k: v for k, v in obj.items() if k not in ("apiVersion", "kind")} for obj in items[start:end]]
        self._send(200, {"apiVersion": info.kind.api_version, "kind": f"{info.kind.kind}List", "metadata": meta,
                         "items": page})  # like the real server, list items carry no apiVersion and kind

    def _watch(self, info: ResourceInfo, namespace: str, query: dict[str, str]) -> None:
        api = self.server.api
        version = query.get("resourceVersion", "")
        timeout = float(query["timeoutSeconds"]) if query.get("timeoutSeconds") else None
        bookmarks = query.get("allowWatchBookmarks") in ("1", "true")
        try:
            watch = api.cluster.watch_metadata if self._metadata_only("") else api.cluster.watch
            stream: Iterator[WatchEvent] | None = watch(
                info.kind, resource_version="" if version == "0" else version, namespace=namespace,
                labels=query.get("labelSelector") or None, fields=query.get("fieldSelector") or None, timeout=timeout)
        except Gone as err:  # an expired resourceVersion is an ERROR event in a 200 stream, not an HTTP error
            stream, expired = None, err
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if stream is None:
            self._chunk({"type": "ERROR", "object": expired.status})
            self._chunk(None)
            return
        with api._lock:
            api._watches.add(stream)
        try:
            for event in stream:
                if self._client_gone():
                    self.close_connection = True
                    return
                if event.type != "BOOKMARK" or bookmarks:
                    self._chunk({"type": event.type, "object": event.object})
            self._chunk(None)
        except OSError:
            self.close_connection = True
        finally:
            stream.close()  # type: ignore[attr-defined]
            with api._lock:
                api._watches.discard(stream)

    def _patch(self, info: ResourceInfo, key: ObjectKey, subresource: str, query: dict[str, str], body: bytes) -> None:
        cluster = self.server.api.cluster
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        if content_type == "application/apply-patch+yaml":
            if not query.get("fieldManager"):
                raise BadRequest("PATCH requests of type application/apply-patch+yaml must supply a fieldManager")
            obj = yaml.safe_load(body)  # YAML, of which JSON is a part
            if not isinstance(obj, dict):
                raise BadRequest("the apply patch must be an object")
            obj = _named(obj, info, key.namespace, key.name)
            return self._send(200, cluster.apply(obj, field_manager=query["fieldManager"],
                                                 force=query.get("force") == "true", subresource=subresource or None))
        patch_type = {"application/merge-patch+json": "merge", "application/json-patch+json": "json"}.get(content_type)
        if patch_type is None:
            status = make_status(415, "UnsupportedMediaType", "the body of the request was in an unknown format - "
                                 "accepted media types include: application/json-patch+json, "
                                 "application/merge-patch+json, application/apply-patch+yaml")
            return self._send(415, status)
        patched = cluster.patch(info.kind, key, _json(body), patch_type="merge" if patch_type == "merge" else "json",
                                subresource=subresource or None)
        self._send(200, patched)

    def _delete(self, info: ResourceInfo, key: ObjectKey, body: bytes) -> None:
        options = _json(body) if body else {}
        if not isinstance(options, dict):
            raise BadRequest("DeleteOptions must be an object")
        found = self.server.api.cluster.delete(info.kind, key, propagation=options.get("propagationPolicy") or
                                               "Background", preconditions=options.get("preconditions"))
        if found is not None:
            # still there (finalizers, a terminating namespace): kube-apiserver answers 200 with the
            # object; 202 only when the deprecated orphanDependents=false was sent
            return self._send(200, found)
        details = {"name": key.name, "kind": info.plural, **({"group": info.kind.group} if info.kind.group else {})}
        self._send(200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                         "details": details})

    # the wire

    def _metadata_only(self, suffix: str) -> bool:
        """Whether the client asked for PartialObjectMetadata (`suffix` "List" for a list)."""
        return f"as=PartialObjectMetadata{suffix};" in (self.headers.get("Accept") or "")

    def _send(self, code: int, body: Obj, *, retry_after: str | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if retry_after is not None:
            self.send_header("Retry-After", retry_after)
        self.end_headers()
        self.wfile.write(data)

    def _chunk(self, event: Obj | None) -> None:
        """One chunk holding one event line; None: the last (empty) chunk."""
        data = json.dumps(event).encode() + b"\n" if event is not None else b""
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _client_gone(self) -> bool:
        """True when the client closed its end (readable, and a peek finds nothing)."""
        readable, _, _ = select.select([self.connection], [], [], 0)
        if not readable:
            return False
        try:
            return self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True


def _no_such_path() -> NotFound:
    return NotFound("the server could not find the requested resource")


def _not_found(info: ResourceInfo, name: str) -> NotFound:
    what = f"{info.plural}.{info.kind.group}" if info.kind.group else info.plural
    message = f'{what} "{name}" not found'
    details = {"name": name, "kind": info.plural, **({"group": info.kind.group} if info.kind.group else {})}
    return NotFound(message, status=make_status(404, "NotFound", message, details))


def _json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError as err:
        raise BadRequest(f"the request body is not JSON: {err}") from err


def _body(body: bytes, info: ResourceInfo, namespace: str, name: str = "") -> Obj:
    obj = _json(body)
    if not isinstance(obj, dict):
        raise BadRequest("the request body must be an object")
    return _named(obj, info, namespace, name)


def _named(obj: Obj, info: ResourceInfo, namespace: str, name: str) -> Obj:
    """The body with the URL's namespace filled in; BadRequest when body and URL disagree."""
    meta = obj.setdefault("metadata", {})
    if info.namespaced:
        if meta.get("namespace") and meta["namespace"] != namespace:
            raise BadRequest("the namespace of the provided object does not match the namespace sent on the request")
        meta["namespace"] = namespace
    if name and meta.get("name") != name:
        raise BadRequest(f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})")
    return obj


def _resource_list(api_version: str, infos: list[ResourceInfo]) -> Obj:
    served = [i for i in infos if i.kind.api_version == api_version]
    if not served:
        raise _no_such_path()
    resources: list[Obj] = []
    for info in served:
        resources.append({"name": info.plural, "singularName": info.kind.kind.lower(), "namespaced": info.namespaced,
                          "kind": info.kind.kind, "verbs": ["create", "delete", "get", "list", "patch", "update",
                                                            "watch"]})
        resources += [{"name": f"{info.plural}/{sub}", "singularName": "", "namespaced": info.namespaced,
                       "kind": info.kind.kind, "verbs": ["get", "patch", "update"]}
                      for sub in sorted(info.subresources)]
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": api_version, "resources": resources}


def _group_list(infos: list[ResourceInfo]) -> Obj:
    versions: dict[str, list[str]] = {}
    for info in infos:
        if info.kind.group and info.kind.version not in versions.setdefault(info.kind.group, []):
            versions[info.kind.group].append(info.kind.version)
    groups = [{"name": group, "versions": [{"groupVersion": f"{group}/{v}", "version": v} for v in found],
               "preferredVersion": {"groupVersion": f"{group}/{found[0]}", "version": found[0]}}
              for group, found in sorted(versions.items())]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}

