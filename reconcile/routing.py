"""RoutedCluster: one `Cluster` whose API groups are served by different clusters.

The way an API server aggregates APIs, in a client: requests for a routed group go to its
cluster, everything else to the default one. porchkit uses it to run the PackageVariant
controllers against a real API server while `porch.kpt.dev` is served by the embedded Porch from
local git repositories (no Porch installed), and the end-to-end tests use it the same way.

Owner references and garbage collection do not cross clusters: an object in one cluster owned by
an object in another is not deleted with it. Resource versions are each cluster's own, which is
fine because a resourceVersion is only ever compared within one kind.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from reconcile.cluster import (
    Cluster,
    Kind,
    LabelSelector,
    ListResult,
    Obj,
    ObjectKey,
    PatchType,
    Propagation,
    ResourceInfo,
    WatchEvent,
)

__all__ = ["RoutedCluster"]


class RoutedCluster:
    """`routes` maps an API group ("" for the core group) to the cluster serving it."""

    def __init__(self, default: Cluster, routes: Mapping[str, Cluster]) -> None:
        self.default, self.routes = default, dict(routes)

    def _for(self, kind: Kind) -> Cluster:
        return self.routes.get(kind.group, self.default)

    def resource(self, kind: Kind) -> ResourceInfo:
        return self._for(kind).resource(kind)

    def resources(self) -> list[ResourceInfo]:
        routed = [info for group, cluster in self.routes.items()
                  for info in cluster.resources() if info.kind.group == group]
        return [*(info for info in self.default.resources() if info.kind.group not in self.routes), *routed]

    def get(self, kind: Kind, key: ObjectKey) -> Obj | None:
        return self._for(kind).get(kind, key)

    def list(self, kind: Kind, *, namespace: str = "", labels: LabelSelector = None,
             fields: str | None = None) -> ListResult:
        return self._for(kind).list(kind, namespace=namespace, labels=labels, fields=fields)

    def watch(self, kind: Kind, *, resource_version: str, namespace: str = "", labels: LabelSelector = None,
              fields: str | None = None, timeout: float | None = None) -> Iterator[WatchEvent]:
        return self._for(kind).watch(kind, resource_version=resource_version, namespace=namespace, labels=labels,
                                     fields=fields, timeout=timeout)

    # Metadata-only lists and watches, and lists in pages (reconcile.informer's MetadataSource and
    # PagedSource), where the serving cluster offers them; whole objects otherwise (an informer
    # keeps only the metadata of them either way).

    def list_metadata(self, kind: Kind, *, namespace: str = "", labels: LabelSelector = None,
                      fields: str | None = None) -> ListResult:
        cluster = self._for(kind)
        lister = getattr(cluster, "list_metadata", cluster.list)
        result: ListResult = lister(kind, namespace=namespace, labels=labels, fields=fields)
        return result

    def watch_metadata(self, kind: Kind, *, resource_version: str, namespace: str = "",
                       labels: LabelSelector = None, fields: str | None = None,
                       timeout: float | None = None) -> Iterator[WatchEvent]:
        cluster = self._for(kind)
        watcher = getattr(cluster, "watch_metadata", cluster.watch)
        events: Iterator[WatchEvent] = watcher(kind, resource_version=resource_version, namespace=namespace,
                                               labels=labels, fields=fields, timeout=timeout)
        return events

    def pages(self, kind: Kind, *, namespace: str = "", labels: LabelSelector = None, fields: str | None = None,
              metadata_only: bool = False) -> Iterator[ListResult]:
        cluster = self._for(kind)
        if callable(getattr(cluster, "pages", None)):
            yield from cluster.pages(kind, namespace=namespace, labels=labels, fields=fields,  # type: ignore[attr-defined]
                                     metadata_only=metadata_only)
        elif metadata_only:
            yield self.list_metadata(kind, namespace=namespace, labels=labels, fields=fields)
        else:
            yield cluster.list(kind, namespace=namespace, labels=labels, fields=fields)

    def create(self, obj: Obj) -> Obj:
        return self._for(Kind.of(obj)).create(obj)

    def update(self, obj: Obj) -> Obj:
        return self._for(Kind.of(obj)).update(obj)

    def update_status(self, obj: Obj) -> Obj:
        return self._for(Kind.of(obj)).update_status(obj)

    def patch(self, kind: Kind, key: ObjectKey, patch: Any, *, patch_type: PatchType = "merge",
              subresource: str | None = None) -> Obj:
        return self._for(kind).patch(kind, key, patch, patch_type=patch_type, subresource=subresource)

    def apply(self, obj: Obj, *, field_manager: str, force: bool = False, subresource: str | None = None) -> Obj:
        return self._for(Kind.of(obj)).apply(obj, field_manager=field_manager, force=force, subresource=subresource)

    def delete(self, kind: Kind, key: ObjectKey, *, propagation: Propagation = "Background",
               preconditions: Mapping[str, str] | None = None) -> Obj | None:
        return self._for(kind).delete(kind, key, propagation=propagation, preconditions=preconditions)
