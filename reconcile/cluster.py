"""`Cluster`: the one interface every controller uses to talk to Kubernetes.

Two backends implement it: `EmbeddedCluster` (an in-process API server, the embedded default and
the test backend) and `KubeCluster` (a real API server). Objects are plain dicts in and out; a
dict handed out is the caller's own. Errors are the classes of `reconcile.errors`.

Kinds are named by `Kind(api_version, kind)`; `resource(kind)` tells how the server serves it
(plural name, namespaced or not, subresources). Selectors are Kubernetes' string syntax
(`app=web,tier in (a,b)`, `metadata.name=x`) or, for labels, a `matchLabels`/`matchExpressions`
map.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Literal, NamedTuple, Protocol

Obj = dict[str, Any]
LabelSelector = str | Mapping[str, Any] | None
Propagation = Literal["Background", "Foreground", "Orphan"]
PatchType = Literal["merge", "json"]
EventType = Literal["ADDED", "MODIFIED", "DELETED", "BOOKMARK"]


class Kind(NamedTuple):
    """A kind as `apiVersion` and `kind`: `Kind("apps/v1", "Deployment")`."""

    api_version: str
    kind: str

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        return self.api_version.rpartition("/")[2]

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> Kind:
        return cls(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))

    def __str__(self) -> str:
        return f"{self.kind}.{self.group}" if self.group else self.kind


class ObjectKey(NamedTuple):
    """Where an object lives: namespace ("" for cluster-scoped objects) and name."""

    namespace: str
    name: str

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> ObjectKey:
        meta = obj.get("metadata") or {}
        return cls(str(meta.get("namespace") or ""), str(meta.get("name") or ""))

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


class ResourceInfo(NamedTuple):
    """How a kind is served (discovery)."""

    kind: Kind
    plural: str
    namespaced: bool
    subresources: frozenset[str] = frozenset()  # e.g. {"status"}


class ListResult(NamedTuple):
    items: list[Obj]
    resource_version: str  # watch from here to see every change after this list


class WatchEvent(NamedTuple):
    type: EventType
    object: Obj  # for BOOKMARK: only apiVersion, kind and metadata.resourceVersion


class Discovery(Protocol):
    """Which kinds the server serves, and how."""

    def resource(self, kind: Kind) -> ResourceInfo:
        """How `kind` is served; raises NotFound when the server does not serve it."""

    def resources(self) -> list[ResourceInfo]:
        """Every kind served, one entry per version (discovery: from a plural back to its kind)."""


class Reader(Protocol):
    """Reads of objects."""

    def get(self, kind: Kind, key: ObjectKey) -> Obj | None:
        """The object, or None when there is none."""

    def list(self, kind: Kind, *, namespace: str = "", labels: LabelSelector = None,
             fields: str | None = None) -> ListResult:
        """Objects of `kind` (in `namespace`, or all namespaces when ""), filtered by selectors."""


class Watcher(Protocol):
    """Changes to objects, as they happen."""

    def watch(self, kind: Kind, *, resource_version: str, namespace: str = "", labels: LabelSelector = None,
              fields: str | None = None, timeout: float | None = None) -> Iterator[WatchEvent]:
        """Changes after `resource_version`, with BOOKMARK events, until `timeout` seconds pass or
        the caller stops iterating. Raises Gone when that version is too old to resume from."""


class Writer(Protocol):
    """Writes of objects."""

    def create(self, obj: Obj) -> Obj:
        """Create; raises AlreadyExists, Invalid. Returns the stored object."""

    def update(self, obj: Obj) -> Obj:
        """Replace (status excluded when the kind has a status subresource); raises Conflict when
        `metadata.resourceVersion` is stale, NotFound when the object is gone."""

    def update_status(self, obj: Obj) -> Obj:
        """Replace only `status`, through the status subresource; Conflict as for update."""

    def patch(self, kind: Kind, key: ObjectKey, patch: Any, *, patch_type: PatchType = "merge",
              subresource: str | None = None) -> Obj:
        """A JSON merge patch (RFC 7386) or a JSON patch (RFC 6902)."""

    def apply(self, obj: Obj, *, field_manager: str, force: bool = False, subresource: str | None = None) -> Obj:
        """Server-side apply: `obj` is the intent of `field_manager`; raises Conflict when another
        manager owns a field it would change, unless `force`."""

    def delete(self, kind: Kind, key: ObjectKey, *, propagation: Propagation = "Background",
               preconditions: Mapping[str, str] | None = None) -> Obj | None:
        """Delete (or mark for deletion while finalizers remain); returns the object as it stands
        when it still exists, None when it is gone; raises NotFound, Conflict (preconditions)."""


class Cluster(Discovery, Reader, Watcher, Writer, Protocol):
    """Reads, writes, watches and discovery (see the module docstring), composed from the roles a
    caller may need alone, as controller-runtime composes its Reader and Writer into a Client."""
