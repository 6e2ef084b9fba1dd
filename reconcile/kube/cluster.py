"""`KubeCluster`: the `Cluster` backend for a real API server.

The official `kubernetes` client serves for configuration, authentication and transport only:
`kubernetes.config` reads a kubeconfig or the in-cluster service account, and requests go
through `ApiClient`'s REST layer (_transport.py). Bodies are decoded with `json.loads` into plain
dicts, never into the client's typed models (about 4x the memory and 10x the CPU).

Promises:
  * every refusal of the server is the `reconcile.errors` class of its `Status` (429 carries
    `Retry-After` as `TooManyRequests.retry_after`); an unreachable server or a broken or silent
    connection is `ServerError` (reason ServiceUnavailable); no urllib3 or kubernetes exception
    type reaches a caller. Nothing is retried once the server answered.
  * `resource()` caches discovery per group-version and fetches it again on a miss (a kind a CRD
    adds after start is usable at once), after `discovery_ttl`, after this cluster wrote a CRD,
    and after a request for the kind got a 404 naming no object (its resource is gone).
  * `list` pages with `limit`/`continue` (starting over once, still in pages, when a continue
    token expires); list items carry apiVersion and kind.
  * `list_metadata` and `watch_metadata` ask for PartialObjectMetadata (the `Accept` header
    controller-runtime's metadata informers send) and hand its objects on as the server sends
    them: apiVersion meta.k8s.io/v1, kind PartialObjectMetadata.
  * `watch` asks for bookmarks. `resource_version` "" or "0" starts with the current objects as
    ADDED, as in EmbeddedCluster, because that is what the API server itself does: "" is sent as
    no resourceVersion (the current state, read consistently), "0" as resourceVersion=0 (the
    state in the server's watch cache, perhaps slightly older). See _watch.py for the stream.
  * every write verb passes `reconcile.fencing.write` first: during a reconcile of a replica that
    cannot prove it still holds its Lease, NotLeading, and nothing is sent; a Conflict is counted.
Leaves: caching, relisting and back-off to informer.py; retrying conflicts to the callers.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import urllib3
from kubernetes import config as kube_config
from kubernetes.client import Configuration
from kubernetes.config import incluster_config

from reconcile import fencing
from reconcile.clock import SYSTEM_CLOCK, Clock
from reconcile.cluster import (
    Kind,
    LabelSelector,
    ListResult,
    Obj,
    ObjectKey,
    PatchType,
    Propagation,
    ResourceInfo,
)
from reconcile.errors import ApiError, BadRequest, Gone, NotFound, ReconcileError
from reconcile.kube._transport import JSON, Transport, with_kind
from reconcile.kube._watch import WatchStream
from reconcile.selectors import parse_fields, parse_labels

PATCH_CONTENT_TYPES: dict[str, str] = {"merge": "application/merge-patch+json", "json": "application/json-patch+json"}
APPLY_CONTENT_TYPE = "application/apply-patch+yaml"  # JSON is YAML: the body is sent as JSON
CRD = Kind("apiextensions.k8s.io/v1", "CustomResourceDefinition")
# What controller-runtime's metadata informers ask for (kube-apiserver serves it since 1.15): the
# server strips everything but metadata before encoding, so the rest never crosses the wire.
METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
METADATA_OBJECT = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"


@dataclass(frozen=True, slots=True)
class KubeOptions:
    """Timeouts (seconds), sizes and the clock of a `KubeCluster`.

    `watch_idle_timeout`: a watch that receives nothing at all (not even a bookmark, which a real
    server sends about once a minute) for this long is taken as broken and raises ServerError."""

    connect_timeout: float = 10.0
    request_timeout: float = 30.0
    watch_idle_timeout: float = 90.0
    page_size: int = 500
    discovery_ttl: float = 60.0  # a group-version's cached resource list is fetched again after this
    clock: Clock = SYSTEM_CLOCK  # reads discovery_ttl


DEFAULT_OPTIONS = KubeOptions()


class KubeCluster:
    """`reconcile.Cluster` over a real API server; see the module docstring.

    Build it from a `kubernetes.client.Configuration` (copied: later changes to it are not seen)
    or with `from_kubeconfig`, `in_cluster` or `auto`. Thread-safe; `close()` (or `with`) releases
    the connection pool."""

    def __init__(self, configuration: Configuration, *, options: KubeOptions = DEFAULT_OPTIONS) -> None:
        self.options = options
        self._transport = Transport(configuration, timeout=(options.connect_timeout, options.request_timeout))
        self._lock = threading.Lock()
        self._discovery: dict[str, tuple[float, dict[str, ResourceInfo]]] = {}  # apiVersion -> (when, kind -> info)

    @classmethod
    def from_kubeconfig(cls, path: str | os.PathLike[str] | None = None, context: str | None = None, *,
                        options: KubeOptions = DEFAULT_OPTIONS) -> KubeCluster:
        """From a kubeconfig file: `path`, else $KUBECONFIG, else ~/.kube/config; `context`, else
        its current context. Refreshed tokens are not written back to the file. Raises
        ReconcileError when the file is missing or unusable."""
        where = os.fspath(path) if path is not None else os.environ.get("KUBECONFIG", "~/.kube/config")
        if not os.path.exists(os.path.expanduser(where.split(os.pathsep)[0])):
            raise ReconcileError(f"kubeconfig {where}: no such file")
        config = Configuration()
        try:
            kube_config.load_kube_config(config_file=where, context=context, client_configuration=config,
                                         persist_config=False)
        except (kube_config.ConfigException, OSError) as err:
            raise ReconcileError(f"kubeconfig {where}: {err}") from err
        return cls(config, options=options)

    @classmethod
    def in_cluster(cls, *, options: KubeOptions = DEFAULT_OPTIONS) -> KubeCluster:
        """From the pod's service account (token re-read as it rotates). Raises ReconcileError
        outside a pod."""
        config = Configuration()
        try:
            kube_config.load_incluster_config(client_configuration=config)
        except (kube_config.ConfigException, OSError) as err:
            raise ReconcileError(f"in-cluster configuration: {err}") from err
        return cls(config, options=options)

    @classmethod
    def auto(cls, *, options: KubeOptions = DEFAULT_OPTIONS) -> KubeCluster:
        """`in_cluster()` when running in a pod (service host set, token mounted), else the
        default kubeconfig."""
        if (os.environ.get(incluster_config.SERVICE_HOST_ENV_NAME)
                and os.path.exists(incluster_config.SERVICE_TOKEN_FILENAME)):
            return cls.in_cluster(options=options)
        return cls.from_kubeconfig(options=options)

    @property
    def host(self) -> str:
        """The API server's URL."""
        return self._transport.host

    def close(self) -> None:
        """Close the pooled connections (open watches keep theirs until closed). Idempotent."""
        self._transport.close()

    def __enter__(self) -> KubeCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # discovery

    def resource(self, kind: Kind) -> ResourceInfo:
        """How `kind` is served; raises NotFound. Its group-version's resource list is fetched
        again on a miss, after `discovery_ttl`, after a write to a CRD through this cluster and
        after a request for the kind found no such resource."""
        with self._lock:
            cached = self._discovery.get(kind.api_version)
        fresh = cached is not None and self.options.clock.monotonic() - cached[0] < self.options.discovery_ttl
        found = cached[1].get(kind.kind) if cached is not None and fresh else None
        if found is None:
            found = self._discover(kind.api_version).get(kind.kind)
        if found is None:
            raise NotFound(f"the server could not find the requested resource ({kind.kind} in "
                           f"{kind.api_version or '?'} is not served)")
        return found

    def resources(self) -> list[ResourceInfo]:
        """Every served kind (one entry per version), fetched afresh from /api and /apis. A group
        version whose discovery fails (an aggregated API that is down) is left out."""
        versions = [str(v) for v in self._transport.request("GET", "/api")[1].get("versions") or []]
        for group in self._transport.request("GET", "/apis")[1].get("groups") or []:
            versions += [str(v["groupVersion"]) for v in group.get("versions") or [] if v.get("groupVersion")]
        infos: list[ResourceInfo] = []
        for api_version in versions:
            try:
                infos += self._discover(api_version).values()
            except ApiError:
                continue
        return sorted(infos, key=lambda i: (i.kind.group, i.kind.kind, i.kind.version))

    # reads

    def get(self, kind: Kind, key: ObjectKey) -> Obj | None:
        """The object, or None when there is none; NotFound when the kind is not served."""
        info = self.resource(kind)
        if info.namespaced and not key.namespace:
            return None
        try:
            return self._object("GET", kind, _path(info, key.namespace, key.name))
        except NotFound as err:
            if (err.status.get("details") or {}).get("name") == key.name:
                return None  # the object is absent; a 404 for the kind itself propagates
            raise

    def list(self, kind: Kind, *, namespace: str = "", labels: LabelSelector = None,
             fields: str | None = None) -> ListResult:
        """Objects of `kind` in `namespace` (or everywhere), fetched in pages of `page_size`."""
        return self._list(kind, namespace, labels, fields, accept=JSON)

    def list_metadata(self, kind: Kind, *, namespace: str = "", labels: LabelSelector = None,
                      fields: str | None = None) -> ListResult:
        """As `list`, asking the server for metadata alone: items are PartialObjectMetadata
        (apiVersion meta.k8s.io/v1), as the server sends them."""
        return self._list(kind, namespace, labels, fields, accept=METADATA_LIST)

    def pages(self, kind: Kind, *, namespace: str = "", labels: LabelSelector = None, fields: str | None = None,
              metadata_only: bool = False) -> Iterator[ListResult]:
        """`list` (or `list_metadata`) one page at a time, as the server sends them: the caller
        keeps what it wants of each page, and no more than one page is decoded at once. Every
        page carries the list's resourceVersion. Raises Gone when a continue token expires
        before the last page (list from the start again)."""
        accept = METADATA_LIST if metadata_only else JSON
        info = self.resource(kind)
        path, base = _path(info, namespace), _selectors(labels, fields)
        token = ""
        while True:
            query = [*base, ("limit", str(self.options.page_size))] + ([("continue", token)] if token else [])
            page = self._call(kind, "GET", path, query=query, accept=accept)[1]
            meta = page.get("metadata") or {}
            yield ListResult([with_kind(item, kind) for item in page.get("items") or []],
                             str(meta.get("resourceVersion") or ""))
            token = str(meta.get("continue") or "")
            if not token:
                return

    def _list(self, kind: Kind, namespace: str, labels: LabelSelector, fields: str | None, *,
              accept: str) -> ListResult:
        metadata_only = accept == METADATA_LIST
        for attempt in (1, 2):
            items: list[Obj] = []
            version, pages = "", 0
            try:
                for page in self.pages(kind, namespace=namespace, labels=labels, fields=fields,
                                       metadata_only=metadata_only):
                    items += page.items
                    version, pages = page.resource_version, pages + 1
            except Gone:
                if not pages or attempt == 2:  # Gone for the first page is no expired continue token
                    raise
                # the continue token outlived the server's history (compaction): list again from
                # the start, still in pages (client-go's pager lists in one piece here, which is
                # the one giant answer paging is there to avoid)
                continue
            return ListResult(items, version)
        raise AssertionError("unreachable")  # pragma: no cover

    def watch(self, kind: Kind, *, resource_version: str, namespace: str = "", labels: LabelSelector = None,
              fields: str | None = None, timeout: float | None = None) -> WatchStream:
        """Changes after `resource_version` ("" or "0": the current objects as ADDED first), with
        BOOKMARKs, until the server ends the stream after `timeout` seconds (`timeoutSeconds`,
        rounded up to whole seconds; None: the server's default) or `close()`. Raises Gone (an
        ERROR event) when that version is too old."""
        return self._watch(kind, resource_version, namespace, labels, fields, timeout, accept=JSON)

    def watch_metadata(self, kind: Kind, *, resource_version: str, namespace: str = "", labels: LabelSelector = None,
                       fields: str | None = None, timeout: float | None = None) -> WatchStream:
        """As `watch`, asking the server for metadata alone: objects are PartialObjectMetadata."""
        return self._watch(kind, resource_version, namespace, labels, fields, timeout, accept=METADATA_OBJECT)

    def _watch(self, kind: Kind, resource_version: str, namespace: str, labels: LabelSelector, fields: str | None,
               timeout: float | None, *, accept: str) -> WatchStream:
        info = self.resource(kind)
        query = [("watch", "true"), ("allowWatchBookmarks", "true"), *_selectors(labels, fields)]
        if resource_version:
            query.append(("resourceVersion", resource_version))
        if timeout is not None:
            query.append(("timeoutSeconds", str(max(1, math.ceil(timeout)))))
        idle = self.options.watch_idle_timeout
        path = _path(info, namespace)
        response = self._transport.send("GET", path, query=query, timeout=(self.options.connect_timeout, idle),
                                        accept=accept)
        if response.status >= 400:
            self._call(kind, "GET", path, response=response)  # raises
        return WatchStream(response, kind, idle_timeout=idle, host=self.host)

    # writes

    def create(self, obj: Obj) -> Obj:
        """Create; AlreadyExists, Invalid, NotFound (kind or namespace), Forbidden."""
        kind, info, key = self._target(obj, need_name=False)
        with fencing.write(kind, key):
            return self._object("POST", kind, _path(info, key.namespace), body=obj)

    def update(self, obj: Obj) -> Obj:
        """Replace (the server keeps status when the kind has a status subresource); Conflict,
        NotFound."""
        kind, info, key = self._target(obj)
        with fencing.write(kind, key):
            return self._object("PUT", kind, _path(info, key.namespace, key.name), body=obj)

    def update_status(self, obj: Obj) -> Obj:
        """Replace only `status` (PUT .../status); Conflict, NotFound."""
        kind, info, key = self._target(obj)
        with fencing.write(kind, key):
            return self._object("PUT", kind, _path(info, key.namespace, key.name, "status"), body=obj)

    def patch(self, kind: Kind, key: ObjectKey, patch: Any, *, patch_type: PatchType = "merge",
              subresource: str | None = None) -> Obj:
        """A JSON merge patch or a JSON patch; BadRequest, NotFound, Conflict, Invalid."""
        content_type = PATCH_CONTENT_TYPES.get(patch_type)
        if content_type is None:
            raise BadRequest(f"unsupported patch type {patch_type!r} (merge, json)")
        # checked here because the client's REST layer would quietly send any other JSON patch
        # body as a strategic merge patch
        if patch_type == "json" and not isinstance(patch, list):
            raise BadRequest(f"a JSON patch must be a list of operation objects, not {type(patch).__name__}")
        if patch_type == "merge" and not isinstance(patch, Mapping):
            raise BadRequest(f"a JSON merge patch to an object must itself be an object, not {type(patch).__name__}")
        info = self.resource(kind)
        _check_namespace(info, key)
        path = _path(info, key.namespace, key.name, subresource or "")
        with fencing.write(kind, key):
            return self._object("PATCH", kind, path, body=patch, content_type=content_type)

    def apply(self, obj: Obj, *, field_manager: str, force: bool = False, subresource: str | None = None) -> Obj:
        """Server-side apply (PATCH application/apply-patch+yaml) as `field_manager`; Conflict when
        another manager owns a field it changes, unless `force`."""
        kind, info, key = self._target(obj)
        query = [("fieldManager", field_manager)] + ([("force", "true")] if force else [])
        path = _path(info, key.namespace, key.name, subresource or "")
        with fencing.write(kind, key):
            return self._object("PATCH", kind, path, query=query, body=obj, content_type=APPLY_CONTENT_TYPE)

    def delete(self, kind: Kind, key: ObjectKey, *, propagation: Propagation = "Background",
               preconditions: Mapping[str, str] | None = None) -> Obj | None:
        """Delete; the object while finalizers (or a grace period) hold it, None once it is gone.
        NotFound, Conflict (preconditions)."""
        info = self.resource(kind)
        _check_namespace(info, key)
        options: Obj = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": propagation}
        if preconditions:
            options["preconditions"] = dict(preconditions)
        with fencing.write(kind, key):
            code, answer = self._call(kind, "DELETE", _path(info, key.namespace, key.name), body=options)
        if answer.get("kind") == "Status":
            return None  # Success: the object is gone
        meta = answer.get("metadata") or {}
        # 202 Accepted: the deletion is not complete. Some resources answer 200 with the object
        # even when it is gone at once; only pending finalizers or a grace period keep it. A
        # Namespace answers 200 while it terminates, held by spec.finalizers (its contents).
        status, spec = answer.get("status"), answer.get("spec")
        status = status if isinstance(status, Mapping) else {}
        spec = spec if isinstance(spec, Mapping) else {}
        terminating = bool(meta.get("deletionTimestamp")) and (
            bool(spec.get("finalizers")) or status.get("phase") == "Terminating")
        if code == 202 or meta.get("finalizers") or (meta.get("deletionGracePeriodSeconds") or 0) > 0 or terminating:
            return with_kind(answer, kind)
        return None

    def server_version(self) -> tuple[int, int]:
        """The API server's (major, minor) version, from /version (`1.20+` reads as (1, 20))."""
        _, found = self._transport.request("GET", "/version")
        try:
            return int(str(found["major"]).rstrip("+")), int(str(found["minor"]).rstrip("+"))
        except (KeyError, ValueError) as err:
            raise ReconcileError(f"{self.host}/version: no major and minor version in {found!r}") from err

    # helpers

    def _target(self, obj: Obj, *, need_name: bool = True) -> tuple[Kind, ResourceInfo, ObjectKey]:
        """The kind, how it is served and the key of a request body; BadRequest when incomplete."""
        if not isinstance(obj, Mapping):
            raise BadRequest(f"the object must be a JSON object, not {type(obj).__name__}")
        kind = Kind.of(obj)
        if not kind.api_version or not kind.kind:
            raise BadRequest(f"Object '{'Kind' if not kind.kind else 'apiVersion'}' is missing in the request")
        info, key = self.resource(kind), ObjectKey.of(obj)
        if info.namespaced and not key.namespace:
            what = f"{info.plural}.{kind.group}" if kind.group else info.plural
            raise BadRequest(f"{what} are namespaced: metadata.namespace is required")
        if need_name and not key.name:
            raise BadRequest("metadata.name is required")
        return kind, info, key

    def _object(self, method: str, kind: Kind, path: str, **request: Any) -> Obj:
        """The object a request answers with, with its apiVersion and kind."""
        return with_kind(self._call(kind, method, path, **request)[1], kind)

    def _call(self, kind: Kind, method: str, path: str, *, response: urllib3.BaseHTTPResponse | None = None,
              **request: Any) -> tuple[int, Obj]:
        """A request for `kind` (or the `response` of one), keeping discovery honest: a write to
        a CRD may change what is served, and a 404 that names no object means the kind's
        resource is gone from the server."""
        try:
            if response is not None:
                return self._transport.finish(response)
            return self._transport.request(method, path, **request)
        except NotFound as err:
            if not (err.status.get("details") or {}).get("name"):
                self._forget(kind.api_version)
            raise
        finally:
            if kind == CRD and method != "GET":
                self._forget()

    def _forget(self, api_version: str | None = None) -> None:
        """Drop one group-version's cached discovery (all of it for None)."""
        with self._lock:
            if api_version is None:
                self._discovery.clear()
            else:
                self._discovery.pop(api_version, None)

    def _discover(self, api_version: str) -> dict[str, ResourceInfo]:
        """Fetch one group-version's resource list into the cache; {} when it is not served."""
        if not api_version or api_version.count("/") > 1:
            return {}
        try:
            body = self._transport.request("GET", _base(api_version))[1]
        except NotFound:
            body = {}
        infos = _resource_infos(api_version, body)
        with self._lock:
            self._discovery[api_version] = (self.options.clock.monotonic(), infos)
        return infos


def _base(api_version: str) -> str:
    """/api/v1 for the core group, /apis/<group>/<version> for the others."""
    return f"/apis/{quote(api_version, safe='/')}" if "/" in api_version else f"/api/{quote(api_version, safe='')}"


def _check_namespace(info: ResourceInfo, key: ObjectKey) -> None:
    """A namespaced object without a namespace is not there (as in EmbeddedCluster)."""
    if info.namespaced and not key.namespace:
        what = f"{info.plural}.{info.kind.group}" if info.kind.group else info.plural
        raise NotFound(f'{what} "{key.name}" not found')


def _path(info: ResourceInfo, namespace: str, name: str = "", subresource: str = "") -> str:
    """The URL path of a collection (no name) or an object, e.g. /apis/apps/v1/namespaces/a/deployments/web."""
    parts = [_base(info.kind.api_version)]
    if info.namespaced and namespace:
        parts += ["namespaces", quote(namespace, safe="")]
    parts.append(info.plural)
    parts += [quote(p, safe="") for p in (name, subresource) if p]
    return "/".join(parts)


def _selectors(labels: LabelSelector, fields: str | None) -> list[tuple[str, str]]:
    """Query parameters of the selectors, parsed here first (BadRequest) and sent in string form."""
    query = []
    label_selector, field_selector = parse_labels(labels), parse_fields(fields)
    if not label_selector.empty:
        query.append(("labelSelector", str(label_selector)))
    if not field_selector.empty:
        query.append(("fieldSelector", str(field_selector)))
    return query


def _resource_infos(api_version: str, body: Obj) -> dict[str, ResourceInfo]:
    """An APIResourceList as ResourceInfos by kind; `pods/status` entries become subresources."""
    resources = [r for r in body.get("resources") or [] if isinstance(r, dict) and r.get("name")]
    subresources: dict[str, set[str]] = {}
    for r in resources:
        plural, _, sub = str(r["name"]).partition("/")
        if sub:
            subresources.setdefault(plural, set()).add(sub)
    infos: dict[str, ResourceInfo] = {}
    for r in resources:
        name = str(r["name"])
        if "/" not in name and r.get("kind") and str(r["kind"]) not in infos:
            infos[str(r["kind"])] = ResourceInfo(Kind(api_version, str(r["kind"])), name, bool(r.get("namespaced")),
                                                 frozenset(subresources.get(name, ())))
    return infos
