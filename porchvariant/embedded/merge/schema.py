"""Which lists the 3-way merge treats as associative, and by which keys.

kpt's resource-merge (kyaml's merge3 walker) merges a list element by element only where it knows
a merge key; every other list is atomic: the upstream list replaces the local one whenever
upstream changed it. Two sources of keys, as kpt has them:

* Resources: the Kubernetes OpenAPI schema kyaml embeds (Kubernetes 1.21), i.e. the
  `x-kubernetes-patch-merge-key` / `x-kubernetes-list-map-keys` of built-in types, looked up by
  exact apiVersion and kind. `kubernetes_list_keys` holds the lists that matter in packages: pod
  templates (containers, initContainers, ephemeralContainers, volumes, imagePullSecrets,
  hostAliases, topologySpreadConstraints; a container's ports, env, volumeMounts, volumeDevices),
  Service ports, ServiceAccount secrets, webhooks, and ObjectMeta's finalizers and ownerReferences
  on every built-in kind. Custom resources have no schema, so all their lists are atomic (checked
  against kpt 1.0.0-beta.56: `apps/v1beta1` and `autoscaling/v2` are unknown to it as well).
* The Kptfile: kyaml infers keys from the data (`inferred_list_keys`), the first of
  `ASSOCIATIVE_KEYS` that every element has.

A key function gets the list's path (map keys, `"[]"` for "any element") and returns the key
names, `()` for a list of scalars merged as a set (finalizers), or None for an atomic list.
A missing `protocol` in a port key counts as TCP, Kubernetes' default (kyaml instead matches on
the other keys alone).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

__all__ = ["ASSOCIATIVE_KEYS", "Keys", "ListKeys", "Path", "element_key", "inferred_list_keys",
           "kubernetes_list_keys"]

Path = tuple[str, ...]
Keys = tuple[str, ...] | None
ListKeys = Callable[[Path, Sequence[list[Any]]], Keys]

ANY = "[]"
ASSOCIATIVE_KEYS = ("mountPath", "devicePath", "ip", "type", "topologyKey", "name", "containerPort")
_KEY_DEFAULTS = {"protocol": "TCP"}

_OBJECT_META: dict[Path, tuple[str, ...]] = {("finalizers",): (), ("ownerReferences",): ("uid",)}
_CONTAINER: dict[Path, tuple[str, ...]] = {
    ("ports",): ("containerPort", "protocol"), ("env",): ("name",),
    ("volumeMounts",): ("mountPath",), ("volumeDevices",): ("devicePath",),
}
_POD_SPEC: dict[Path, tuple[str, ...]] = {
    ("volumes",): ("name",), ("imagePullSecrets",): ("name",), ("hostAliases",): ("ip",),
    ("topologySpreadConstraints",): ("topologyKey", "whenUnsatisfiable"),
}
for _containers in ("containers", "initContainers", "ephemeralContainers"):
    _POD_SPEC[(_containers,)] = ("name",)
    _POD_SPEC.update({(_containers, ANY, *path): keys for path, keys in _CONTAINER.items()})

# Where a kind keeps its pod template: (template metadata, pod spec), or the pod's own.
_WORKLOAD_TEMPLATE = (("spec", "template", "metadata"), ("spec", "template", "spec"))
_POD_TEMPLATES: dict[tuple[str, str], tuple[Path, Path]] = {
    ("v1", "Pod"): (("metadata",), ("spec",)),
    ("v1", "PodTemplate"): (("template", "metadata"), ("template", "spec")),
    ("v1", "ReplicationController"): _WORKLOAD_TEMPLATE,
    **{("apps/v1", kind): _WORKLOAD_TEMPLATE for kind in ("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet")},
    ("batch/v1", "Job"): _WORKLOAD_TEMPLATE,
    **{(version, "CronJob"): (("spec", "jobTemplate", "spec", "template", "metadata"),
                              ("spec", "jobTemplate", "spec", "template", "spec"))
       for version in ("batch/v1", "batch/v1beta1")},
}
_WEBHOOKS: dict[tuple[str, str], dict[Path, tuple[str, ...]]] = {(version, kind): {("webhooks",): ("name",)}
             for version in ("admissionregistration.k8s.io/v1", "admissionregistration.k8s.io/v1beta1")
             for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")}
_OTHER_LISTS: dict[tuple[str, str], dict[Path, tuple[str, ...]]] = {
    ("v1", "Service"): {("spec", "ports"): ("port", "protocol")},
    ("v1", "ServiceAccount"): {("secrets",): ("name",)},
    ("apps/v1", "StatefulSet"): {("spec", "volumeClaimTemplates", ANY, "metadata", *path): keys
                                 for path, keys in _OBJECT_META.items()},
    ("batch/v1", "CronJob"): {("spec", "jobTemplate", "metadata", *p): k for p, k in _OBJECT_META.items()},
    ("batch/v1beta1", "CronJob"): {("spec", "jobTemplate", "metadata", *p): k for p, k in _OBJECT_META.items()},
    **_WEBHOOKS,
}


def _kinds(group_versions: str, kinds: str) -> set[tuple[str, str]]:
    return {(gv, kind) for gv in group_versions.split() for kind in kinds.split()}


# The built-in kinds of the schema kpt 1.0.0-beta.56 merges with (Kubernetes 1.21, alpha versions left out).
_BUILT_IN = (
    _kinds("v1", "Binding ComponentStatus ConfigMap Endpoints Event LimitRange Namespace Node PersistentVolume "
                 "PersistentVolumeClaim Pod PodTemplate ReplicationController ResourceQuota Secret Service "
                 "ServiceAccount")
    | _kinds("admissionregistration.k8s.io/v1 admissionregistration.k8s.io/v1beta1",
             "MutatingWebhookConfiguration ValidatingWebhookConfiguration")
    | _kinds("apiextensions.k8s.io/v1 apiextensions.k8s.io/v1beta1", "CustomResourceDefinition")
    | _kinds("apiregistration.k8s.io/v1 apiregistration.k8s.io/v1beta1", "APIService")
    | _kinds("apps/v1", "ControllerRevision DaemonSet Deployment ReplicaSet StatefulSet")
    | _kinds("authentication.k8s.io/v1 authentication.k8s.io/v1beta1", "TokenRequest TokenReview")
    | _kinds("authorization.k8s.io/v1 authorization.k8s.io/v1beta1",
             "LocalSubjectAccessReview SelfSubjectAccessReview SelfSubjectRulesReview SubjectAccessReview")
    | _kinds("autoscaling/v1 autoscaling/v2beta1 autoscaling/v2beta2", "HorizontalPodAutoscaler")
    | _kinds("batch/v1", "Job CronJob") | _kinds("batch/v1beta1", "CronJob")
    | _kinds("certificates.k8s.io/v1 certificates.k8s.io/v1beta1", "CertificateSigningRequest")
    | _kinds("coordination.k8s.io/v1 coordination.k8s.io/v1beta1", "Lease")
    | _kinds("discovery.k8s.io/v1 discovery.k8s.io/v1beta1", "EndpointSlice")
    | _kinds("events.k8s.io/v1 events.k8s.io/v1beta1", "Event")
    | _kinds("extensions/v1beta1", "Ingress")
    | _kinds("flowcontrol.apiserver.k8s.io/v1beta1", "FlowSchema PriorityLevelConfiguration")
    | _kinds("networking.k8s.io/v1", "Ingress IngressClass NetworkPolicy")
    | _kinds("networking.k8s.io/v1beta1", "Ingress IngressClass")
    | _kinds("node.k8s.io/v1 node.k8s.io/v1beta1", "RuntimeClass")
    | _kinds("policy/v1", "PodDisruptionBudget") | _kinds("policy/v1beta1", "PodDisruptionBudget PodSecurityPolicy")
    | _kinds("rbac.authorization.k8s.io/v1 rbac.authorization.k8s.io/v1beta1",
             "ClusterRole ClusterRoleBinding Role RoleBinding")
    | _kinds("scheduling.k8s.io/v1 scheduling.k8s.io/v1beta1", "PriorityClass")
    | _kinds("storage.k8s.io/v1", "CSIDriver CSINode StorageClass VolumeAttachment")
    | _kinds("storage.k8s.io/v1beta1", "CSIDriver CSINode CSIStorageCapacity StorageClass VolumeAttachment")
)


def _table(api_version: str, kind: str) -> dict[Path, tuple[str, ...]]:
    if (api_version, kind) not in _BUILT_IN:
        return {}
    table = {("metadata", *path): keys for path, keys in _OBJECT_META.items()}
    if (api_version, kind) in _POD_TEMPLATES:
        meta, spec = _POD_TEMPLATES[api_version, kind]
        table.update({(*meta, *path): keys for path, keys in _OBJECT_META.items()})
        table.update({(*spec, *path): keys for path, keys in _POD_SPEC.items()})
    table.update(_OTHER_LISTS.get((api_version, kind), {}))
    return table


def kubernetes_list_keys(api_version: Any, kind: Any) -> ListKeys:
    """The key function for a resource of this apiVersion and kind (atomic lists only if not built in)."""
    table = _table(api_version, kind) if isinstance(api_version, str) and isinstance(kind, str) else {}

    def keys(path: Path, _lists: Sequence[list[Any]]) -> Keys:
        return table.get(path)

    return keys


def inferred_list_keys(path: Path, lists: Sequence[list[Any]]) -> Keys:
    """kyaml's inference: the first of ASSOCIATIVE_KEYS that all elements of a list have, if the
    lists that have elements agree on it; None (atomic) otherwise, and for lists of scalars."""
    found = {_inferred_key(items) for items in lists if items}
    if len(found) != 1:
        return None
    key = found.pop()
    return (key,) if key else None


def _inferred_key(items: Iterable[Any]) -> str:
    items = list(items)
    if not all(isinstance(item, Mapping) for item in items):
        return ""
    return next((key for key in ASSOCIATIVE_KEYS if all(key in item for item in items)), "")


def element_key(element: Any, keys: tuple[str, ...]) -> tuple[Any, ...] | None:
    """An element's identity in an associative list; None when it has none (not a map with the
    first key, or a value that cannot be compared as a key). With `keys == ()` the scalar itself."""
    if not keys:
        return _scalar_key(element)
    if not isinstance(element, Mapping) or keys[0] not in element:
        return None
    values = []
    for key in keys:
        value = _scalar_key(element.get(key, _KEY_DEFAULTS.get(key)))
        if value is None:
            return None
        values.append(value)
    return tuple(values)


def _scalar_key(value: Any) -> tuple[Any, ...] | None:
    if value is None or isinstance(value, str | int | float | bool):
        return (type(value).__name__, value)  # the type keeps true and 1 apart
    return None
