"""reconcile.embedded: an in-process Kubernetes API server, one backend of `reconcile.Cluster`.

`EmbeddedCluster` is the face (cluster.py); `Storage` (storage.py) is the seam through which a
kind is served by code instead of the generic store, as the embedded Porch serves
PackageRevisions from git. Everything else is private: `_engine` (the request path), `_store`
(objects, revisions, change log), `_watch`, `_gc`, `_namespaces`, `_crds`, `_defaults`, `_fields`,
`_apply`, `_lifecycle`, `_validation`, `_kinds`, `_persist` and `_errors`. See
docs/embedded-cluster.md.
"""

from reconcile.embedded.cluster import EmbeddedCluster as EmbeddedCluster
from reconcile.embedded.storage import Storage as Storage

__all__ = ["EmbeddedCluster", "Storage"]
