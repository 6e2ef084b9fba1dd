"""Discovery: which kinds the embedded server serves, and how.

The `Registry` holds one `ResourceInfo` per served `Kind` and where it came from: built in
(the table below), defined by a CustomResourceDefinition (one entry per served version, added and
removed by the CRD controller), registered in code (`EmbeddedCluster.register`), or served by a
custom `Storage`. It also holds each kind's name rule (what `metadata.name` must look like).

Objects of one group and kind are stored together whatever version they were written in (a CRD
with versions v1beta1 and v1 is one set of objects, as in etcd); the store is keyed by
`group_kind(kind)` and objects are handed out in the version asked for.
"""

from __future__ import annotations

from reconcile.cluster import Kind, ResourceInfo
from reconcile.embedded import _errors
from reconcile.embedded._validation import NameRule
from reconcile.embedded.storage import Storage

GroupKind = tuple[str, str]

NAMESPACE = Kind("v1", "Namespace")
CRD = Kind("apiextensions.k8s.io/v1", "CustomResourceDefinition")
BUILTIN = "builtin"
REGISTERED = "registered"
SERVED = "served"

# apiVersion, kind, plural, namespaced, has a status subresource, name rule
_BUILTIN_TABLE: tuple[tuple[str, str, str, bool, bool, NameRule], ...] = (
    ("v1", "Namespace", "namespaces", False, True, "label"),
    ("v1", "ConfigMap", "configmaps", True, False, "subdomain"),
    ("v1", "Secret", "secrets", True, False, "subdomain"),
    ("v1", "Service", "services", True, True, "dns1035"),
    ("v1", "Pod", "pods", True, True, "subdomain"),
    ("v1", "ServiceAccount", "serviceaccounts", True, False, "subdomain"),
    ("v1", "Event", "events", True, False, "subdomain"),
    ("v1", "Endpoints", "endpoints", True, False, "subdomain"),
    ("v1", "PersistentVolumeClaim", "persistentvolumeclaims", True, True, "subdomain"),
    ("v1", "PersistentVolume", "persistentvolumes", False, True, "subdomain"),
    ("v1", "Node", "nodes", False, True, "subdomain"),
    ("v1", "ResourceQuota", "resourcequotas", True, True, "subdomain"),
    ("v1", "LimitRange", "limitranges", True, False, "subdomain"),
    ("apps/v1", "Deployment", "deployments", True, True, "subdomain"),
    ("apps/v1", "StatefulSet", "statefulsets", True, True, "subdomain"),
    ("apps/v1", "DaemonSet", "daemonsets", True, True, "subdomain"),
    ("apps/v1", "ReplicaSet", "replicasets", True, True, "subdomain"),
    ("apps/v1", "ControllerRevision", "controllerrevisions", True, False, "subdomain"),
    ("batch/v1", "Job", "jobs", True, True, "subdomain"),
    ("batch/v1", "CronJob", "cronjobs", True, True, "subdomain"),
    ("coordination.k8s.io/v1", "Lease", "leases", True, False, "subdomain"),
    ("rbac.authorization.k8s.io/v1", "Role", "roles", True, False, "segment"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding", "rolebindings", True, False, "segment"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole", "clusterroles", False, False, "segment"),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "clusterrolebindings", False, False, "segment"),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition", "customresourcedefinitions", False, True, "subdomain"),
    ("events.k8s.io/v1", "Event", "events", True, False, "subdomain"),
    ("discovery.k8s.io/v1", "EndpointSlice", "endpointslices", True, False, "subdomain"),
    ("networking.k8s.io/v1", "Ingress", "ingresses", True, True, "subdomain"),
    ("networking.k8s.io/v1", "NetworkPolicy", "networkpolicies", True, False, "subdomain"),
    ("policy/v1", "PodDisruptionBudget", "poddisruptionbudgets", True, True, "subdomain"),
    ("autoscaling/v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers", True, True, "subdomain"),
)


def group_kind(kind: Kind) -> GroupKind:
    return (kind.group, kind.kind)


class Registry:
    """The served kinds, their origin, their name rule and any custom storage."""

    def __init__(self) -> None:
        self._infos: dict[Kind, ResourceInfo] = {}
        self._origins: dict[Kind, str] = {}
        self._rules: dict[Kind, NameRule] = {}
        self._handlers: dict[Kind, Storage] = {}
        for api_version, kind, plural, namespaced, status, rule in _BUILTIN_TABLE:
            subresources = frozenset({"status"}) if status else frozenset()
            self.add(ResourceInfo(Kind(api_version, kind), plural, namespaced, subresources), origin=BUILTIN,
                     rule=rule)

    def info(self, kind: Kind) -> ResourceInfo:
        """How `kind` is served; raises NotFound when it is not."""
        found = self._infos.get(kind)
        if found is None:
            raise _errors.unknown_kind(kind)
        return found

    def find(self, kind: Kind) -> ResourceInfo | None:
        return self._infos.get(kind)

    def infos(self) -> list[ResourceInfo]:
        return sorted(self._infos.values(), key=lambda i: (i.kind.group, i.kind.kind, i.kind.version))

    def origin(self, kind: Kind) -> str:
        return self._origins.get(kind, "")

    def name_rule(self, kind: Kind) -> NameRule:
        return self._rules.get(kind, "subdomain")

    def handler(self, kind: Kind) -> Storage | None:
        return self._handlers.get(kind)

    def handlers(self) -> list[tuple[Kind, Storage]]:
        return list(self._handlers.items())

    def registered(self) -> list[ResourceInfo]:
        """Kinds added by `register` (not built in, not from a CRD): what persistence keeps."""
        return [self._infos[k] for k, origin in self._origins.items() if origin == REGISTERED and k in self._infos]

    def add(self, info: ResourceInfo, *, origin: str, rule: NameRule = "subdomain") -> None:
        """Serve `info`; a kind served before is replaced (a CRD update, a re-registration)."""
        if self._origins.get(info.kind) == BUILTIN and origin != BUILTIN:
            return  # like the real server, a CRD or a registration never shadows a built-in kind
        self._infos[info.kind] = info
        self._origins[info.kind] = origin
        self._rules[info.kind] = rule

    def set_origin(self, origin: str, infos: list[ResourceInfo]) -> None:
        """Serve exactly `infos` for `origin` (a CRD's served versions), keeping the custom
        storage of kinds that stay."""
        wanted = {info.kind for info in infos}
        for kind in [k for k, o in self._origins.items() if o == origin and k not in wanted]:
            self._forget(kind)
        for info in infos:
            self.add(info, origin=origin)

    def remove(self, origin: str) -> list[Kind]:
        """Stop serving every kind that came from `origin`; returns them."""
        gone = [kind for kind, o in self._origins.items() if o == origin]
        for kind in gone:
            self._forget(kind)
        return gone

    def _forget(self, kind: Kind) -> None:
        self._infos.pop(kind, None)
        self._origins.pop(kind, None)
        self._rules.pop(kind, None)
        self._handlers.pop(kind, None)

    def serve(self, info: ResourceInfo, handler: Storage) -> None:
        if info.kind not in self._infos:
            self.add(info, origin=SERVED)
        self._handlers[info.kind] = handler

    def kinds_of(self, gk: GroupKind) -> list[Kind]:
        """Every served version of one group and kind."""
        return [kind for kind in self._infos if group_kind(kind) == gk]
