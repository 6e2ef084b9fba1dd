"""Helpers of the contract suite: kinds, object builders, polling, and a backend's knobs.

Every test must hold on a real API server as well as on the embedded one. Three things differ
between them, and this module hides them behind one spelling:

- Controllers run asynchronously on a real cluster (garbage collector, namespace controller,
  CRD establishment), but have finished when the embedded server's call returns. `eventually()`
  polls until a check passes, and passes at once when it already does.
- Watch time is an injected FakeClock on the embedded server and the wall clock on a real one.
  `Backend.advance()` moves the fake clock and does nothing on a real server, where waiting for
  the next event lets the time pass by itself.
- A real cluster puts objects of its own into every namespace (`kube-root-ca.crt`); `names()`
  and the watch helpers leave them out.
"""

from __future__ import annotations

import contextlib
import secrets
import string
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from reconcile.clock import FakeClock
from reconcile.cluster import Cluster, Kind, Obj, ObjectKey, WatchEvent
from reconcile.errors import ApiError, NotFound
from tests import waiting

T = TypeVar("T")

CONFIGMAP = Kind("v1", "ConfigMap")
NAMESPACE = Kind("v1", "Namespace")
DEPLOYMENT = Kind("apps/v1", "Deployment")
CRD = Kind("apiextensions.k8s.io/v1", "CustomResourceDefinition")

HOLD = "contract.porchkit.dev/hold"  # a finalizer nobody acts on: the test that sets it removes it
TEST_LABEL = "contract.porchkit.dev/test"  # marks a test's objects where a query spans namespaces
SERVER_MADE = frozenset({"kube-root-ca.crt"})  # what a real cluster creates in every namespace

EVENTUALLY = 60.0  # seconds a real cluster's controllers get to catch up (GC, namespaces, CRDs)
WATCH_TIMEOUT = 10.0  # the timeout every test watch carries, so a missing event cannot hang a test
GUARD = 5.0  # real seconds after which an embedded test watch is closed (the fake clock never times out)


def token(length: int = 6) -> str:
    """A random lowercase name part, so tests on a shared cluster never collide."""
    return "".join(secrets.choice(string.ascii_lowercase) for _ in range(length))


def configmap(name: str, namespace: str, *, data: Mapping[str, str] | None = None,
              labels: Mapping[str, str] | None = None, **metadata: Any) -> Obj:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, **metadata}
    if labels:
        meta["labels"] = dict(labels)
    body: Obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}
    if data is not None:
        body["data"] = dict(data)
    return body


def deployment(name: str, namespace: str) -> Obj:
    """A Deployment a real server accepts, with no replicas (so no pods are ever scheduled)."""
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9"}]}}}}


def reference(owner: Obj, *, block: bool = True, controller: bool = False) -> dict[str, Any]:
    """An ownerReference to `owner` as read from the server."""
    return {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"], "blockOwnerDeletion": block, "controller": controller}


def version(obj: Obj) -> int:
    """An object's resourceVersion as a number (both backends hand out etcd-style revisions)."""
    return int(obj["metadata"]["resourceVersion"])


def names(items: Iterable[Obj]) -> list[str]:
    """The sorted names of `items`, without the objects a real cluster makes on its own."""
    return sorted(n for n in (o["metadata"]["name"] for o in items) if n not in SERVER_MADE)


def owners(obj: Obj, *path: str) -> set[str]:
    """The managers whose managedFields entry holds the field at `path` (e.g. "data", "k")."""
    found = set()
    for entry in obj["metadata"].get("managedFields") or []:
        node: Any = entry.get("fieldsV1") or {}
        for part in path:
            node = node.get(f"f:{part}") if isinstance(node, dict) else None
        if node is not None:
            found.add(entry["manager"])
    return found


def with_meta(obj: Obj, **changes: Any) -> Obj:
    """A copy of `obj` with metadata keys replaced (None removes one)."""
    meta = {**obj["metadata"], **changes}
    return {**obj, "metadata": {k: v for k, v in meta.items() if v is not None}}


def eventually(check: Callable[[], T], timeout: float = EVENTUALLY) -> T:
    """What `check` returns once it holds: something truthy, or None from a check that asserts
    (an AssertionError is "not yet"), polled every 0.1 s. On the embedded server the first call
    passes: its controllers are done when a request returns."""
    return waiting.eventually(check, timeout, interval=0.1, asserts=True)


@dataclass
class Backend:
    """One backend under test, and the knobs that make the same test hold on it."""

    name: str  # "embedded" or "kube"
    cluster: Cluster
    clock: FakeClock | None = None  # the embedded server's clock; None on a real server
    history: int = 0  # how many changes the embedded server keeps for watches to resume from
    bookmark_interval: float = 0.0  # clock-seconds of quiet before the embedded server sends a BOOKMARK

    def advance(self, seconds: float) -> None:
        """Let `seconds` of watch time pass: the fake clock moves; a real server's passes by itself."""
        if self.clock is not None:
            self.clock.advance(seconds)

    def take(self, stream: Iterator[WatchEvent], count: int) -> list[WatchEvent]:
        """The first `count` events other than BOOKMARKs and those about objects the server made
        on its own (fewer if the stream ends), then close it."""
        out: list[WatchEvent] = []
        with self._guarded(stream):
            for event in stream:
                if _ours(event):
                    out.append(event)
                if len(out) == count:
                    break
        return out

    def rest(self, stream: Iterator[WatchEvent], timeout: float) -> list[WatchEvent]:
        """Every event `take` would keep, until the stream's `timeout` ends it."""
        self.advance(timeout)
        with self._guarded(stream):
            return [event for event in stream if _ours(event)]

    def first_bookmark(self, stream: Iterator[WatchEvent]) -> WatchEvent | None:
        """The first BOOKMARK, once a bookmark's worth of quiet has passed; None if the stream ends."""
        self.advance(self.bookmark_interval)
        with self._guarded(stream):
            return next((event for event in stream if event.type == "BOOKMARK"), None)

    @contextlib.contextmanager
    def _guarded(self, stream: Iterator[WatchEvent]) -> Iterator[None]:
        """Close the stream afterwards; on the embedded server also after GUARD real seconds, since a
        fake clock nobody advances never times a watch out (a failing test then fails, not hangs)."""
        close: Callable[[], None] | None = getattr(stream, "close", None)
        timer = threading.Timer(GUARD, close) if close is not None and self.clock is not None else None
        if timer is not None:
            timer.daemon = True
            timer.start()
        try:
            yield
        finally:
            if timer is not None:
                timer.cancel()
            if close is not None:
                close()


def _ours(event: WatchEvent) -> bool:
    return event.type != "BOOKMARK" and event.object["metadata"].get("name") not in SERVER_MADE


@dataclass(frozen=True)
class CustomKind:
    """A kind a test installed with a CRD: its Kind and the CRD's (cluster-wide, unique) name."""

    kind: Kind
    crd_name: str


def crd(group: str, *, scope: str = "Namespaced", status: bool = True, selectable: Iterable[str] = ()) -> Obj:
    """A CRD for kind Widget (plural widgets) in `group`, version v1, with a structural schema
    that keeps any field (a real server requires a schema; selectable fields must be in it)."""
    fields = list(selectable)
    spec_schema: dict[str, Any] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    if fields:
        spec_schema["properties"] = {f.removeprefix("spec."): {"type": "string"} for f in fields}
    version: dict[str, Any] = {
        "name": "v1", "served": True, "storage": True,
        "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {
            "spec": spec_schema, "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}}
    if status:
        version["subresources"] = {"status": {}}
    if fields:
        version["selectableFields"] = [{"jsonPath": f".{f}"} for f in fields]
    return {"apiVersion": CRD.api_version, "kind": CRD.kind, "metadata": {"name": f"widgets.{group}"},
            "spec": {"group": group, "scope": scope, "versions": [version],
                     "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"}}}


def widget(custom: CustomKind, name: str, namespace: str = "", **body: Any) -> Obj:
    """An object of an installed CRD's kind (`namespace` "" for a cluster-scoped one)."""
    meta: dict[str, Any] = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": custom.kind.api_version, "kind": custom.kind.kind, "metadata": meta, **body}


def release(cluster: Cluster, kind: Kind, namespace: str = "") -> None:
    """Remove every finalizer from the objects of `kind`, so nothing a test left behind blocks the
    deletion of its namespace or CRD on a shared cluster."""
    try:
        items = cluster.list(kind, namespace=namespace).items
    except ApiError:
        return
    for obj in items:
        if obj["metadata"].get("finalizers"):
            with contextlib.suppress(ApiError):
                cluster.patch(kind, ObjectKey.of(obj), {"metadata": {"finalizers": None}})


def served(cluster: Cluster, kind: Kind) -> bool:
    """True once discovery lists `kind` and its endpoint answers (for `eventually`)."""
    try:
        cluster.resource(kind)
        cluster.list(kind)
    except NotFound as err:
        raise AssertionError(f"{kind} is not served yet: {err}") from err
    return True


def marked(cluster: Cluster, kind: Kind, key: ObjectKey) -> Obj:
    """The object at `key`, asserting that it exists and is being deleted (for `eventually`)."""
    found = cluster.get(kind, key)
    assert found is not None, f"{key} is gone"
    assert found["metadata"].get("deletionTimestamp"), f"{key} is not being deleted"
    return found
