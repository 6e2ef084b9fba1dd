"""`Storage`: the seam through which a kind is served by code instead of the generic store.

Kubernetes serves some APIs from somewhere other than etcd (aggregated API servers, e.g. Porch
serving `porch.kpt.dev` PackageRevisions from git). `EmbeddedCluster.serve(kind, storage)` does
the same in-process: from then on every `Cluster` call for that kind (get, list, watch, create,
update, update_status, patch, apply, delete) is routed to the storage, unchanged, and what it
returns or raises is what the caller gets. The storage owns the semantics of its kind:
resourceVersions, watch history, validation. `reconcile.selectors` and `reconcile.patching` are
there to help.

What the cluster still does for a served kind: discovery (`resource()`), refusing writes into a
namespace that does not exist or is being deleted, deleting the kind's objects when their
namespace is deleted, and garbage-collecting dependents of an object the storage deleted
through the cluster.

The cluster calls a storage without holding its own lock, except while it deletes a namespace's
contents; a storage may call back into the cluster from the calling thread.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from reconcile.cluster import Kind, LabelSelector, ListResult, Obj, ObjectKey, PatchType, Propagation, WatchEvent


class Storage(Protocol):
    """The read and write half of `Cluster`, for the kinds one handler serves."""

    def get(self, kind: Kind, key: ObjectKey) -> Obj | None: ...

    def list(self, kind: Kind, *, namespace: str = "", labels: LabelSelector = None,
             fields: str | None = None) -> ListResult: ...

    def watch(self, kind: Kind, *, resource_version: str, namespace: str = "", labels: LabelSelector = None,
              fields: str | None = None, timeout: float | None = None) -> Iterator[WatchEvent]: ...

    def create(self, obj: Obj) -> Obj: ...

    def update(self, obj: Obj) -> Obj: ...

    def update_status(self, obj: Obj) -> Obj: ...

    def patch(self, kind: Kind, key: ObjectKey, patch: Any, *, patch_type: PatchType = "merge",
              subresource: str | None = None) -> Obj: ...

    def apply(self, obj: Obj, *, field_manager: str, force: bool = False, subresource: str | None = None) -> Obj: ...

    def delete(self, kind: Kind, key: ObjectKey, *, propagation: Propagation = "Background",
               preconditions: Mapping[str, str] | None = None) -> Obj | None: ...
