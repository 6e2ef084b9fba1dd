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

from typing import Protocol

from reconcile.cluster import Reader, Watcher, Writer


class Storage(Reader, Watcher, Writer, Protocol):
    """The read, watch and write roles of `Cluster`, for the kinds one handler serves (discovery
    stays with the cluster)."""
