"""deploy/: the shipped RBAC is least-privilege, checked statically (no server; runs in `make test`).

No wildcard, no Secret outside the manager's own namespace, no verb that leads to more rights
(escalate, bind, impersonate, RBAC or webhook writes, pods, tokens); every account can do what its
controllers do (the same list tests/e2e/test_security_rbac_e2e.py asks a real API server); the
kinds that DecoratorControllers, MapControllers and PackageVariantSets name come only from
ClusterRoles an administrator labels for aggregation, as deploy/examples/ shows; and the pods run
without root, privilege escalation, capabilities or a writable root filesystem.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from porchvariant.local_run import serve_porch
from reconcile import EmbeddedCluster, Kind, ObjectKey
from tests.deploy.rbac_model import (
    AGGREGATION_LABELS,
    FORBIDDEN,
    FORBIDDEN_FOR_EVERY_ACCOUNT,
    NAMESPACE,
    REQUIRED,
    ROOT,
    SERVICE_PER_POD_EXAMPLE,
    SERVICE_PER_POD_GRANTS,
    Access,
    Doc,
    allowed,
    cluster_role_rules,
    examples,
    load,
    service_accounts,
    shipped,
)

CRD = Kind("apiextensions.k8s.io/v1", "CustomResourceDefinition")
DEPLOYMENTS = ("variants/deployment.yaml", "decorators-deployment.yaml", "mapctl-deployment.yaml")
# API groups whose write (or, for these, any) access leads to more rights than a controller needs.
POWERFUL_GROUPS = {"rbac.authorization.k8s.io", "admissionregistration.k8s.io", "certificates.k8s.io",
                   "authentication.k8s.io", "apiextensions.k8s.io", "policy"}
POWERFUL_VERBS = {"escalate", "bind", "impersonate", "*"}
POWERFUL_CORE = {"pods", "pods/exec", "pods/attach", "pods/portforward", "nodes", "nodes/proxy", "serviceaccounts",
                 "serviceaccounts/token", "persistentvolumes", "namespaces"}


def roles(docs: list[Doc]) -> list[Doc]:
    return [d for d in docs if d["kind"] in ("ClusterRole", "Role")]


def rules_of(docs: list[Doc]) -> list[tuple[str, dict[str, Any]]]:
    return [(f"{d['kind']} {d['metadata']['name']}", rule) for d in roles(docs) for rule in d.get("rules") or []]


def test_every_shipped_service_account_has_its_expectations() -> None:
    accounts = service_accounts(shipped())
    assert accounts == sorted(REQUIRED) == sorted(FORBIDDEN) == sorted(AGGREGATION_LABELS)
    assert all(d["metadata"]["namespace"] == NAMESPACE for d in shipped() if d["kind"] == "ServiceAccount")


@pytest.mark.parametrize(("where", "rule"), rules_of(shipped() + examples()), ids=lambda v: v if isinstance(v, str)
                         else "/".join(v.get("resources") or []))
def test_no_rule_uses_a_wildcard_or_a_non_resource_url(where: str, rule: dict[str, Any]) -> None:
    for field in ("apiGroups", "resources", "verbs"):
        assert rule.get(field) and "*" not in rule[field], f"{where}: {field} {rule.get(field)}"
    assert "nonResourceURLs" not in rule, where


@pytest.mark.parametrize(("where", "rule"), rules_of(shipped() + examples()), ids=lambda v: v if isinstance(v, str)
                         else "/".join(v.get("resources") or []))
def test_no_rule_reaches_for_more_rights(where: str, rule: dict[str, Any]) -> None:
    assert not POWERFUL_GROUPS & set(rule["apiGroups"]), where
    assert not POWERFUL_VERBS & set(rule["verbs"]), where
    if "" in rule["apiGroups"]:
        assert not POWERFUL_CORE & set(rule["resources"]), where


def test_no_cluster_role_names_secrets_and_roles_only_get_them_in_the_managers_namespace() -> None:
    for doc in roles(shipped() + examples()):
        for rule in doc.get("rules") or []:
            if "secrets" not in rule["resources"]:
                continue
            assert doc["kind"] == "Role" and doc["metadata"]["namespace"] == NAMESPACE, doc["metadata"]["name"]
            assert rule["verbs"] == ["get"], doc["metadata"]["name"]


@pytest.mark.parametrize("account", sorted(REQUIRED))
def test_each_account_can_do_what_its_controllers_do(account: str) -> None:
    missing = [str(a) for a in REQUIRED[account] if not allowed(shipped(), account, a)]
    assert missing == []


@pytest.mark.parametrize("account", sorted(REQUIRED))
def test_no_account_can_read_secrets_run_pods_mint_tokens_or_grant_itself_more(account: str) -> None:
    # the examples applied too: they add kinds, never any of this
    granted = [str(a) for a in FORBIDDEN_FOR_EVERY_ACCOUNT if allowed(shipped() + examples(), account, a)]
    assert granted == []


@pytest.mark.parametrize("account", sorted(FORBIDDEN))
def test_each_account_is_refused_what_only_others_or_administrators_grant(account: str) -> None:
    granted = [str(a) for a in FORBIDDEN[account] if allowed(shipped(), account, a)]
    assert granted == []


@pytest.mark.parametrize("account", sorted(AGGREGATION_LABELS))
def test_each_account_is_bound_to_one_aggregated_role_selecting_the_documented_labels(account: str) -> None:
    docs = shipped()
    role_name, labels = AGGREGATION_LABELS[account]
    [binding] = [d for d in docs if d["kind"] == "ClusterRoleBinding"
                 and {"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE} in d["subjects"]]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role_name}
    [role] = [d for d in docs if d["kind"] == "ClusterRole" and d["metadata"]["name"] == role_name]
    assert "rules" not in role, "kube-controller-manager overwrites an aggregated role's rules"
    assert role["aggregationRule"]["clusterRoleSelectors"] == [{"matchLabels": {label: "true"}} for label in labels]
    own = [d for d in docs if d["kind"] == "ClusterRole" and d is not role]
    assert own and all((d["metadata"].get("labels") or {}).get(labels[0]) == "true" for d in own
                       if d["metadata"]["name"].startswith(role_name))
    assert cluster_role_rules(docs, role_name)  # the controller's own rules reach it


def test_every_example_adds_to_exactly_one_account_by_its_label() -> None:
    known = {label for _, labels in AGGREGATION_LABELS.values() for label in labels}
    for doc in examples():
        assert doc["kind"] == "ClusterRole" and "aggregationRule" not in doc
        labels = {k for k, v in (doc["metadata"].get("labels") or {}).items() if v == "true"} & known
        assert len(labels) == 1, doc["metadata"]["name"]


def test_the_service_per_pod_example_grants_the_decorators_its_targets_and_attachments() -> None:
    without, with_example = shipped(), shipped() + load(SERVICE_PER_POD_EXAMPLE)
    assert [str(a) for a in SERVICE_PER_POD_GRANTS if allowed(without, "porchkit-decorators", a)] == []
    assert [str(a) for a in SERVICE_PER_POD_GRANTS if not allowed(with_example, "porchkit-decorators", a)] == []
    assert not any(allowed(with_example, account, a) for a in SERVICE_PER_POD_GRANTS
                   for account in ("porchkit", "porchkit-mapctl"))


def test_the_examples_name_the_kinds_the_example_controllers_use() -> None:
    decorator = yaml.safe_load((ROOT / "testdata/decorators/service-per-pod/decoratorcontroller.yaml").read_text())
    mapper = yaml.safe_load((ROOT / "testdata/mapctl/snapshotschedule/mapcontroller.yaml").read_text())
    named = {("decorators-service-per-pod.yaml", rule["apiVersion"], rule["resource"])
             for rule in decorator["spec"]["resources"] + decorator["spec"]["attachments"]}
    named |= {("mapctl-snapshotschedule.yaml", rule["apiVersion"], rule["resource"])
              for rule in [mapper["spec"]["parentResource"], *mapper["spec"]["inputResources"],
                           *mapper["spec"]["outputResources"]]}
    for name, api_version, resource in named:
        group = api_version.rpartition("/")[0]
        rules = [rule for doc in load(f"examples/{name}") for rule in doc["rules"]]
        assert any(group in r["apiGroups"] and resource in r["resources"] and "watch" in r["verbs"] for r in rules), \
            (name, resource)


def test_every_rule_names_a_resource_and_subresource_the_controllers_are_served() -> None:
    # deploy/crds and Porch's API as the embedded API server and the embedded Porch serve them
    with EmbeddedCluster() as cluster:
        porch = serve_porch(cluster)
        try:
            for path in sorted((ROOT / "deploy" / "crds").glob("*_*.yaml")):  # not kustomization.yaml
                for crd in yaml.safe_load_all(path.read_text(encoding="utf-8")):
                    if cluster.get(CRD, ObjectKey("", crd["metadata"]["name"])) is None:
                        cluster.create(crd)
            served = {(info.kind.group, info.plural): info.subresources for info in cluster.resources()}
        finally:
            porch.close()
    for where, rule in rules_of(shipped()):
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                plural, _, subresource = resource.partition("/")
                assert (group, plural) in served, f"{where}: {group}/{resource} is not served"
                assert not subresource or subresource in served[(group, plural)], f"{where}: {group}/{resource}"


@pytest.mark.parametrize("name", DEPLOYMENTS)
def test_each_pod_runs_unprivileged_on_a_read_only_root_filesystem(name: str) -> None:
    [deployment] = [d for d in load(name) if d["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert not pod.get("hostNetwork") and not pod.get("hostPID") and not pod.get("hostIPC")
    for container in pod["containers"]:
        context = container["securityContext"]
        assert context["allowPrivilegeEscalation"] is False and context["readOnlyRootFilesystem"] is True
        assert context["capabilities"] == {"drop": ["ALL"]} and not context.get("privileged")
    assert pod["serviceAccountName"] in AGGREGATION_LABELS


def test_an_access_reads_as_a_sentence() -> None:
    assert str(Access("list", "", "secrets")) == "list secrets cluster-wide"
    assert str(Access("update", "coordination.k8s.io", "leases", NAMESPACE, "x")) == \
        "update leases.coordination.k8s.io 'x' in porchkit-system"
