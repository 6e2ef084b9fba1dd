"""reconcile.kube: `KubeCluster`, the `reconcile.Cluster` backend for a real API server.

`cluster.py` holds `KubeCluster` (discovery, URLs, the verbs) and `KubeOptions`; `_transport.py`
the request path over the `kubernetes` client (credentials, timeouts, decoding, error mapping);
`_watch.py` the `WatchStream` a watch returns. Importing this package imports `kubernetes`
(about 250 ms), which is why `reconcile/__init__.py` does not.
"""

from reconcile.kube._watch import WatchStream as WatchStream
from reconcile.kube.cluster import DEFAULT_OPTIONS as DEFAULT_OPTIONS
from reconcile.kube.cluster import KubeCluster as KubeCluster
from reconcile.kube.cluster import KubeOptions as KubeOptions

__all__ = ["DEFAULT_OPTIONS", "KubeCluster", "KubeOptions", "WatchStream"]
