"""Discovery: which kinds the embedded server serves, and how.

The `Registry` holds one `ResourceInfo` per served `Kind` and where it came from: built in
(the table below), defined by a CustomResourceDefinition (one entry per served version, added and
removed by the CRD controller), registered in code (`EmbeddedCluster.register`), or served by a
custom `Storage`. It also holds, per kind, the rules its registry strategy would apply: what
`metadata.name` must look like, whether and when `metadata.generation` moves, and which field
labels a field selector may use.

Objects of one group and kind are stored together whatever version they were written in (a CRD
with versions v1beta1 and v1 is one set of objects, as in etcd); the store is keyed by
`group_kind(kind)` and objects are handed out in the version asked for.
"""

from __future__ import annotations

from collections.abc import Mapping

from reconcile.cluster import Kind, ResourceInfo
from reconcile.embedded import _errors
from reconcile.embedded.storage import Storage
from reconcile.names import NameRule

GroupKind = tuple[str, str]

NAMESPACE = Kind("v1", "Namespace")
CRD = Kind("apiextensions.k8s.io/v1", "CustomResourceDefinition")
BUILTIN = "builtin"
REGISTERED = "registered"
SERVED = "served"

# What moves `metadata.generation`, per built-in kind: None when the kind has none at all (its
# strategy never sets it: ConfigMaps, Secrets, Namespaces, Services, Leases, Events, RBAC, ...);
# otherwise the metadata keys that count as desired state besides the body (spec), which for
# Deployments are the annotations (copied to their ReplicaSets) and for EndpointSlices the
# labels, as their registry strategies say. Kinds defined by CRDs or registered in code track
# any change outside metadata (and status, when it is a subresource).
Generation = tuple[str, ...] | None
_NO: Generation = None
_SPEC: Generation = ()

# apiVersion, kind, plural, namespaced, has a status subresource, name rule, generation
_BUILTIN_TABLE: tuple[tuple[str, str, str, bool, bool, NameRule, Generation], ...] = (
    ("v1", "Namespace", "namespaces", False, True, "label", _NO),
    ("v1", "ConfigMap", "configmaps", True, False, "subdomain", _NO),
    ("v1", "Secret", "secrets", True, False, "subdomain", _NO),
    ("v1", "Service", "services", True, True, "dns1035", _NO),
    ("v1", "Pod", "pods", True, True, "subdomain", _SPEC),
    ("v1", "ServiceAccount", "serviceaccounts", True, False, "subdomain", _NO),
    ("v1", "Event", "events", True, False, "subdomain", _NO),
    ("v1", "Endpoints", "endpoints", True, False, "subdomain", _NO),
    ("v1", "PersistentVolumeClaim", "persistentvolumeclaims", True, True, "subdomain", _NO),
    ("v1", "PersistentVolume", "persistentvolumes", False, True, "subdomain", _NO),
    ("v1", "Node", "nodes", False, True, "subdomain", _NO),
    ("v1", "ResourceQuota", "resourcequotas", True, True, "subdomain", _NO),
    ("v1", "LimitRange", "limitranges", True, False, "subdomain", _NO),
    ("apps/v1", "Deployment", "deployments", True, True, "subdomain", ("annotations",)),
    ("apps/v1", "StatefulSet", "statefulsets", True, True, "subdomain", _SPEC),
    ("apps/v1", "DaemonSet", "daemonsets", True, True, "subdomain", _SPEC),
    ("apps/v1", "ReplicaSet", "replicasets", True, True, "subdomain", _SPEC),
    ("apps/v1", "ControllerRevision", "controllerrevisions", True, False, "subdomain", _NO),
    ("batch/v1", "Job", "jobs", True, True, "subdomain", _SPEC),
    ("batch/v1", "CronJob", "cronjobs", True, True, "subdomain", _SPEC),
    ("coordination.k8s.io/v1", "Lease", "leases", True, False, "subdomain", _NO),
    ("rbac.authorization.k8s.io/v1", "Role", "roles", True, False, "segment", _NO),
    ("rbac.authorization.k8s.io/v1", "RoleBinding", "rolebindings", True, False, "segment", _NO),
    ("rbac.authorization.k8s.io/v1", "ClusterRole", "clusterroles", False, False, "segment", _NO),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "clusterrolebindings", False, False, "segment", _NO),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition", "customresourcedefinitions", False, True, "subdomain",
     _SPEC),
    ("events.k8s.io/v1", "Event", "events", True, False, "subdomain", _NO),
    ("discovery.k8s.io/v1", "EndpointSlice", "endpointslices", True, False, "subdomain", ("labels",)),
    ("networking.k8s.io/v1", "Ingress", "ingresses", True, True, "subdomain", _SPEC),
    ("networking.k8s.io/v1", "NetworkPolicy", "networkpolicies", True, False, "subdomain", _SPEC),
    ("policy/v1", "PodDisruptionBudget", "poddisruptionbudgets", True, True, "subdomain", _SPEC),
    ("autoscaling/v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers", True, True, "subdomain", _SPEC),
)

# Field selectors: kube-apiserver accepts only the field labels a kind's conversion functions
# know ("field label not supported" otherwise). Every kind has these two; the table adds the
# built-in extras; a CRD adds its `selectableFields`.
META_FIELD_LABELS = frozenset({"metadata.name", "metadata.namespace"})
_FIELD_LABELS: dict[tuple[str, str], frozenset[str]] = {
    ("", "Pod"): frozenset({"spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
                            "spec.hostNetwork", "status.phase", "status.podIP", "status.podIPs",
                            "status.nominatedNodeName"}),
    ("", "Event"): frozenset({"involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
                              "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
                              "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type"}),
    ("", "Secret"): frozenset({"type"}),
    ("", "Namespace"): frozenset({"status.phase"}),
    ("", "Node"): frozenset({"spec.unschedulable"}),
    ("", "Service"): frozenset({"spec.clusterIP", "spec.type"}),
    ("apps", "ReplicaSet"): frozenset({"status.replicas"}),
    ("batch", "Job"): frozenset({"status.successful"}),
}


def group_kind(kind: Kind) -> GroupKind:
    return (kind.group, kind.kind)


class Registry:
    """The served kinds, their origin, their name rule and any custom storage."""

    def __init__(self) -> None:
        self._infos: dict[Kind, ResourceInfo] = {}
        self._by_group_kind: dict[GroupKind, list[Kind]] | None = None  # kinds_of's index, rebuilt on change
        self._origins: dict[Kind, str] = {}
        self._rules: dict[Kind, NameRule] = {}
        self._handlers: dict[Kind, Storage] = {}
        self._generations: dict[Kind, Generation] = {}
        self._fields: dict[Kind, frozenset[str]] = {}
        for api_version, name, plural, namespaced, status, rule, generation in _BUILTIN_TABLE:
            kind = Kind(api_version, name)
            subresources = frozenset({"status"}) if status else frozenset()
            self.add(ResourceInfo(kind, plural, namespaced, subresources), origin=BUILTIN, rule=rule,
                     generation=generation, fields=_FIELD_LABELS.get(group_kind(kind)))

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

    def generation(self, kind: Kind) -> Generation:
        """None when objects of `kind` have no generation; else the metadata keys whose change
        moves it besides any change to the body outside status (see the table above)."""
        return self._generations.get(kind, _SPEC)

    def field_labels(self, kind: Kind) -> frozenset[str]:
        """The fields a field selector over `kind` may name."""
        return META_FIELD_LABELS | self._fields.get(kind, frozenset())

    def handler(self, kind: Kind) -> Storage | None:
        return self._handlers.get(kind)

    def handlers(self) -> list[tuple[Kind, Storage]]:
        return list(self._handlers.items())

    def registered(self) -> list[ResourceInfo]:
        """Kinds added by `register` (not built in, not from a CRD): what persistence keeps."""
        return [self._infos[k] for k, origin in self._origins.items() if origin == REGISTERED and k in self._infos]

    def add(self, info: ResourceInfo, *, origin: str, rule: NameRule = "subdomain", generation: Generation = _SPEC,
            fields: frozenset[str] | None = None) -> None:
        """Serve `info`; a kind served before is replaced (a CRD update, a re-registration).
        `fields`: the field labels it supports besides metadata.name and metadata.namespace."""
        if self._origins.get(info.kind) == BUILTIN and origin != BUILTIN:
            return  # like the real server, a CRD or a registration never shadows a built-in kind
        self._infos[info.kind] = info
        self._by_group_kind = None
        self._origins[info.kind] = origin
        self._rules[info.kind] = rule
        self._generations[info.kind] = generation
        self._fields[info.kind] = fields or frozenset()

    def set_origin(self, origin: str, infos: list[ResourceInfo],
                   fields: Mapping[Kind, frozenset[str]] | None = None) -> None:
        """Serve exactly `infos` for `origin` (a CRD's served versions, with their selectable
        fields), keeping the custom storage of kinds that stay."""
        wanted = {info.kind for info in infos}
        for kind in [k for k, o in self._origins.items() if o == origin and k not in wanted]:
            self._forget(kind)
        for info in infos:
            self.add(info, origin=origin, fields=(fields or {}).get(info.kind))

    def remove(self, origin: str) -> list[Kind]:
        """Stop serving every kind that came from `origin`; returns them."""
        gone = [kind for kind, o in self._origins.items() if o == origin]
        for kind in gone:
            self._forget(kind)
        return gone

    def _forget(self, kind: Kind) -> None:
        self._infos.pop(kind, None)
        self._by_group_kind = None
        self._origins.pop(kind, None)
        self._rules.pop(kind, None)
        self._generations.pop(kind, None)
        self._fields.pop(kind, None)
        self._handlers.pop(kind, None)

    def serve(self, info: ResourceInfo, handler: Storage) -> None:
        if info.kind not in self._infos:
            self.add(info, origin=SERVED)
        self._handlers[info.kind] = handler

    def kinds_of(self, gk: GroupKind) -> list[Kind]:
        """Every served version of one group and kind."""
        index = self._by_group_kind
        if index is None:
            index = {}
            for kind in self._infos:
                index.setdefault(group_kind(kind), []).append(kind)
            self._by_group_kind = index
        return list(index.get(gk, ()))
