"""The RBAC that deploy/ ships, as data: its documents, what each ServiceAccount must and must not
be able to do, and a small evaluator of Kubernetes' RBAC rules over those documents.

Two tests share this: test_rbac_least_privilege.py asks the evaluator here (no server; runs in
`make test`), and tests/e2e/test_security_rbac_e2e.py asks a real API server the same questions
with SubjectAccessReviews. The questions are one list, so the two cannot drift apart.

The evaluator follows the RBAC authorizer (k8s.io/kubernetes plugin/pkg/auth/authorizer/rbac):
a rule matches when its apiGroups, resources (`<plural>` or `<plural>/<subresource>`) and verbs
contain the request's (or "*"), and its resourceNames, when given, contain the request's name (a
request without a name, such as list or create, never matches a rule with resourceNames). A
ClusterRoleBinding grants its role everywhere; a RoleBinding only in its own namespace. An
aggregated ClusterRole's rules are those of the ClusterRoles its clusterRoleSelectors match, as
kube-controller-manager's clusterrole-aggregation controller fills them in. Only the bindings in
the documents given count: Kubernetes' own defaults (discovery for every account) are not modelled.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
NAMESPACE = "porchkit-system"
RBAC_FILES = ("variants/rbac.yaml", "decorators-rbac.yaml", "mapctl-rbac.yaml")
AGGREGATION_LABELS = {  # the bound ClusterRole of each account, and the label that adds to it
    "porchkit": ("porchkit-variants", ("porchkit.dev/aggregate-to-packagevariantset",
                                       "porchkit.dev/aggregate-to-packagevariant")),
    "porchkit-decorators": ("porchkit-decorators", ("porchkit.dev/aggregate-to-decorator",)),
    "porchkit-mapctl": ("porchkit-mapctl", ("porchkit.dev/aggregate-to-map",)),
}
Doc = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Access:
    """One request: `verb` on `resource` (`plural` or `plural/subresource`) of API group `group`,
    in `namespace` ("" for cluster-wide, or a cluster-scoped kind), optionally of the object `name`."""

    verb: str
    group: str
    resource: str
    namespace: str = ""
    name: str = ""

    def __str__(self) -> str:
        where = f" in {self.namespace}" if self.namespace else " cluster-wide"
        named = f" {self.name!r}" if self.name else ""
        return f"{self.verb} {self.resource}{'.' + self.group if self.group else ''}{named}{where}"


def user_of(account: str, namespace: str = NAMESPACE) -> str:
    """The user name a ServiceAccount authenticates as (what `kubectl auth can-i --as` takes)."""
    return f"system:serviceaccount:{namespace}:{account}"


# --- what no shipped account may do ---------------------------------------------------------

_ELSEWHERE = ("", "kube-system", "default")
FORBIDDEN_FOR_EVERY_ACCOUNT: tuple[Access, ...] = (
    *(Access(verb, "", "secrets", ns) for verb in ("get", "list", "watch") for ns in _ELSEWHERE),
    *(Access(verb, "", "secrets", NAMESPACE) for verb in ("list", "watch", "create", "update", "delete")),
    *(Access("create", "", resource, ns) for resource in ("pods", "pods/exec", "pods/attach")
      for ns in ("kube-system", "default", NAMESPACE)),
    *(Access("create", "", "serviceaccounts/token", ns, "default") for ns in ("kube-system", NAMESPACE)),
    Access("create", "", "serviceaccounts", "kube-system"),
    *(Access(verb, "rbac.authorization.k8s.io", resource)
      for verb in ("create", "update", "patch", "delete") for resource in ("clusterroles", "clusterrolebindings")),
    *(Access(verb, "rbac.authorization.k8s.io", resource, ns)
      for verb in ("create", "update", "patch") for resource in ("roles", "rolebindings")
      for ns in ("kube-system", NAMESPACE)),
    *(Access(verb, "rbac.authorization.k8s.io", resource)
      for verb in ("escalate", "bind") for resource in ("clusterroles", "roles")),
    *(Access("impersonate", "", resource) for resource in ("users", "groups", "serviceaccounts")),
    *(Access(verb, "", "nodes", "", "node-1") for verb in ("patch", "update", "delete")),
    Access("get", "", "nodes/proxy", "", "node-1"),
    *(Access(verb, "admissionregistration.k8s.io", resource)
      for verb in ("create", "update", "patch", "delete")
      for resource in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations")),
    *(Access(verb, "apiextensions.k8s.io", "customresourcedefinitions") for verb in ("create", "update", "delete")),
    *(Access("create", "apps", resource, "kube-system") for resource in ("deployments", "daemonsets")),
    Access("create", "certificates.k8s.io", "certificatesigningrequests"),
    Access("update", "", "namespaces", "", "kube-system"),
    *(Access("update", "coordination.k8s.io", "leases", "kube-system", name)
      for name in ("kube-controller-manager", "kube-scheduler")),
)

# --- per account: what it needs, and what it must not do besides ------------------------------

_ANY = "team-a"  # a namespace where users keep their objects
_PV, _PORCH = "config.porch.kpt.dev", "porch.kpt.dev"


def _lease(account_lease: str) -> tuple[Access, ...]:
    return (Access("create", "coordination.k8s.io", "leases", NAMESPACE),
            *(Access(verb, "coordination.k8s.io", "leases", NAMESPACE, account_lease) for verb in ("get", "update")))


def _events() -> tuple[Access, ...]:
    return tuple(Access(verb, "", "events", _ANY) for verb in ("create", "patch"))


def _watch(group: str, resource: str) -> tuple[Access, ...]:
    return tuple(Access(verb, group, resource) for verb in ("get", "list", "watch"))


REQUIRED: dict[str, tuple[Access, ...]] = {
    "porchkit": (
        *_watch(_PV, "packagevariants"),
        *(Access(verb, _PV, "packagevariants", _ANY, "web") for verb in ("create", "update", "delete")),
        *_watch(_PV, "packagevariantsets"),
        *(Access("update", _PV, f"{plural}/status", _ANY, "web")
          for plural in ("packagevariants", "packagevariantsets")),
        *_watch(_PV, "repositories"),
        *_watch(_PORCH, "packagerevisions"),
        *(Access(verb, _PORCH, "packagerevisions", _ANY, "prod.web.v1") for verb in ("create", "update", "delete")),
        *(Access(verb, _PORCH, "packagerevisionresources", _ANY, "prod.web.v1") for verb in ("get", "update")),
        *_events(), *_lease("porchkit-variants"),
    ),
    "porchkit-decorators": (
        *_watch("metacontroller.k8s.io", "decoratorcontrollers"),
        Access("update", "metacontroller.k8s.io", "decoratorcontrollers", "", "service-per-pod"),
        Access("patch", "metacontroller.k8s.io", "decoratorcontrollers/status", "", "service-per-pod"),
        *_events(), *_lease("porchkit-decorators"),
        *(Access("get", "", resource, NAMESPACE, "hook-tls") for resource in ("secrets", "configmaps")),
    ),
    "porchkit-mapctl": (
        *_watch("porchkit.dev", "mapcontrollers"),
        Access("patch", "porchkit.dev", "mapcontrollers/status", "", "snapshots"),
        *_events(), *_lease("porchkit-mapctl"),
        *(Access("get", "", resource, NAMESPACE, "hook-tls") for resource in ("secrets", "configmaps")),
    ),
}

FORBIDDEN: dict[str, tuple[Access, ...]] = {
    "porchkit": (
        Access("get", "", "secrets", NAMESPACE, "hook-tls"),  # no Secret at all: Porch holds git credentials
        Access("update", _PORCH, "packagerevisions/approval", _ANY, "prod.web.v1"),  # a person approves
        Access("patch", _PORCH, "packagerevisions/approval", _ANY, "prod.web.v1"),
        Access("update", _PV, "packagevariantsets", _ANY, "web"),
        Access("list", "", "configmaps"),  # injection is granted by the administrator (deploy/examples)
        Access("update", "coordination.k8s.io", "leases", NAMESPACE, "porchkit-decorators"),
        Access("update", "coordination.k8s.io", "leases", "default", "porchkit-variants"),
    ),
    "porchkit-decorators": (
        Access("list", "apps", "statefulsets"), Access("create", "", "services", _ANY),  # until granted
        Access("get", "", "secrets", _ANY, "hook-tls"),  # credentials from its own namespace only
        Access("delete", "metacontroller.k8s.io", "decoratorcontrollers", "", "service-per-pod"),
        Access("update", "coordination.k8s.io", "leases", NAMESPACE, "porchkit-variants"),
    ),
    "porchkit-mapctl": (
        Access("list", "", "persistentvolumeclaims"), Access("create", "snapshot.storage.k8s.io", "volumesnapshots",
                                                               _ANY),
        Access("get", "", "secrets", _ANY, "hook-tls"),
        Access("update", "porchkit.dev", "mapcontrollers", "", "snapshots"),
        Access("update", "coordination.k8s.io", "leases", NAMESPACE, "porchkit-variants"),
    ),
}

# What deploy/examples/decorators-service-per-pod.yaml adds to the decorators' account.
SERVICE_PER_POD_EXAMPLE = "examples/decorators-service-per-pod.yaml"
SERVICE_PER_POD_GRANTS = (*_watch("apps", "statefulsets"),
                          *(Access(verb, "", "services", _ANY, "kafka-0")
                            for verb in ("create", "update", "patch", "delete")))


# --- the documents ----------------------------------------------------------------------------


def load(name: str) -> list[Doc]:
    """The objects of deploy/<name>."""
    return [doc for doc in yaml.safe_load_all((DEPLOY / name).read_text(encoding="utf-8")) if doc]


def shipped() -> list[Doc]:
    """Every RBAC object `kubectl apply -k deploy/` installs."""
    return [doc for name in RBAC_FILES for doc in load(name)]


def examples() -> list[Doc]:
    """The example ClusterRoles of deploy/examples/."""
    return [doc for path in sorted((DEPLOY / "examples").glob("*.yaml")) for doc in load(f"examples/{path.name}")]


def service_accounts(docs: Iterable[Doc]) -> list[str]:
    return sorted(doc["metadata"]["name"] for doc in docs if doc["kind"] == "ServiceAccount")


# --- the evaluator ------------------------------------------------------------------------------


def rule_allows(rule: Mapping[str, Any], access: Access) -> bool:
    """Whether one PolicyRule grants `access` (see the module docstring)."""
    names = rule.get("resourceNames") or []
    return (_has(rule.get("apiGroups"), access.group) and _has(rule.get("resources"), access.resource)
            and _has(rule.get("verbs"), access.verb) and (not names or access.name in names))


def _has(values: Sequence[str] | None, wanted: str) -> bool:
    return bool(values) and (wanted in values or "*" in values)  # type: ignore[operator]


def cluster_role_rules(docs: Sequence[Doc], name: str) -> list[dict[str, Any]]:
    """A ClusterRole's rules, an aggregated one's gathered from the ClusterRoles its selectors match."""
    [role] = [d for d in docs if d["kind"] == "ClusterRole" and d["metadata"]["name"] == name]
    aggregation = role.get("aggregationRule")
    if aggregation is None:
        return list(role.get("rules") or [])
    rules: list[dict[str, Any]] = []
    for selector in aggregation["clusterRoleSelectors"]:
        assert set(selector) == {"matchLabels"}, f"only matchLabels is modelled: {selector}"
        for other in docs:
            labels = other["metadata"].get("labels") or {}
            if (other["kind"] == "ClusterRole" and other is not role and other.get("aggregationRule") is None
                    and all(labels.get(k) == v for k, v in selector["matchLabels"].items())):
                rules += other.get("rules") or []
    return rules


def allowed(docs: Sequence[Doc], account: str, access: Access, namespace: str = NAMESPACE) -> bool:
    """Whether the ServiceAccount `account` in `namespace` may make the request, by the bindings in `docs`."""
    subject = {"kind": "ServiceAccount", "name": account, "namespace": namespace}
    for binding in docs:
        if binding["kind"] not in ("ClusterRoleBinding", "RoleBinding") or subject not in binding.get("subjects", []):
            continue
        if binding["kind"] == "RoleBinding" and binding["metadata"].get("namespace") != access.namespace:
            continue
        ref = binding["roleRef"]
        if ref["kind"] == "ClusterRole":
            rules = cluster_role_rules(docs, ref["name"])
        else:
            [role] = [d for d in docs if d["kind"] == "Role" and d["metadata"]["name"] == ref["name"]
                      and d["metadata"].get("namespace") == binding["metadata"].get("namespace")]
            rules = role.get("rules") or []
        if any(rule_allows(rule, access) for rule in rules):
            return True
    return False
