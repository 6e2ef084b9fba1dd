"""deploy/'s RBAC on a real API server (`make e2e`): what each shipped ServiceAccount may and may not do.

The RBAC objects of deploy/*rbac*.yaml are applied to the e2e server (RBAC authorization on), and
for every shipped ServiceAccount the server's own authorizer is asked, request by request, with a
SubjectAccessReview (authorization.k8s.io/v1) for the user system:serviceaccount:NS:NAME in the
groups system:serviceaccounts, system:serviceaccounts:NS and system:authenticated. That is what
`kubectl auth can-i VERB RESOURCE --as system:serviceaccount:NS:NAME` sends (kubectl is not on every
machine that runs these tests; where it is, one test checks that it agrees). The questions are
tests/deploy/rbac_model.py's, which test_rbac_least_privilege.py answers without a server:

* none may read Secrets outside its own namespace, create pods or service account tokens, write
  RBAC objects or bind and escalate roles, impersonate, patch nodes, or touch admission webhooks;
* each may do what its controllers do: its own kinds, Events, its Lease in porchkit-system;
* the kinds a DecoratorController names come from a ClusterRole the administrator labels
  `porchkit.dev/aggregate-to-decorator: "true"`: kube-controller-manager's clusterrole-aggregation
  controller adds its rules to the decorators' role, and takes them away when it is deleted.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from reconcile import Cluster
from tests.deploy.rbac_model import (
    AGGREGATION_LABELS,
    FORBIDDEN,
    FORBIDDEN_FOR_EVERY_ACCOUNT,
    REQUIRED,
    SERVICE_PER_POD_EXAMPLE,
    SERVICE_PER_POD_GRANTS,
    Access,
    cluster_role_rules,
    load,
    shipped,
    user_of,
)
from tests.e2e.rbac_support import ShippedRbac, can_i
from tests.e2e.support import eventually


@pytest.fixture(scope="module")
def admin(kubeconfig: str) -> Iterator[Cluster]:
    from reconcile.kube import KubeCluster

    with KubeCluster.from_kubeconfig(kubeconfig) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def rbac(admin: Cluster) -> Iterator[ShippedRbac]:
    """deploy/'s RBAC applied, each aggregated ClusterRole filled in by kube-controller-manager."""
    applied = ShippedRbac(admin)
    docs = shipped()
    applied.apply(docs)
    for role, _ in AGGREGATION_LABELS.values():
        eventually(_filled_in(applied, role, cluster_role_rules(docs, role)),
                   what=f"the aggregated rules of ClusterRole {role}")
    yield applied
    applied.clean_up()


def _filled_in(applied: ShippedRbac, role: str, own: list[dict[str, Any]]) -> Callable[[], bool]:
    return lambda: all(rule in applied.aggregated_rules(role) for rule in own)


@pytest.mark.parametrize("account", sorted(REQUIRED))
def test_each_account_can_do_what_its_controllers_do(admin: Cluster, rbac: ShippedRbac, account: str) -> None:
    refused = [str(access) for access in REQUIRED[account] if not can_i(admin, account, access)]
    assert refused == []


@pytest.mark.parametrize("account", sorted(REQUIRED))
def test_no_account_can_read_secrets_run_pods_mint_tokens_or_grant_itself_more(
        admin: Cluster, rbac: ShippedRbac, account: str) -> None:
    allowed = [str(access) for access in (*FORBIDDEN_FOR_EVERY_ACCOUNT, *FORBIDDEN[account])
               if can_i(admin, account, access)]
    assert allowed == []


def test_a_review_can_tell_yes_from_no(admin: Cluster, rbac: ShippedRbac) -> None:
    # The same question for an account that may and one that may not: the reviews are not all "no".
    access = Access("update", "metacontroller.k8s.io", "decoratorcontrollers", "", "x")
    assert can_i(admin, "porchkit-decorators", access) and not can_i(admin, "porchkit-mapctl", access)


def test_kubectl_auth_can_i_agrees(kubeconfig: str, rbac: ShippedRbac) -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not on PATH: the SubjectAccessReviews above are what it would send")

    def can_i_kubectl(*words: str) -> str:
        run = subprocess.run([kubectl, "--kubeconfig", kubeconfig, "auth", "can-i", *words,
                              "--as", user_of("porchkit-decorators")], capture_output=True, text=True, timeout=60)
        return run.stdout.strip()

    assert can_i_kubectl("list", "secrets", "--all-namespaces") == "no"
    assert can_i_kubectl("create", "clusterrolebindings") == "no"
    assert can_i_kubectl("get", "secrets", "-n", "porchkit-system") == "yes"
    assert can_i_kubectl("update", "leases/porchkit-decorators", "-n", "porchkit-system") == "yes"


def test_an_aggregated_example_role_grants_the_decorators_its_kinds_until_it_is_deleted(
        admin: Cluster, rbac: ShippedRbac) -> None:
    assert not any(can_i(admin, "porchkit-decorators", access) for access in SERVICE_PER_POD_GRANTS)
    [example] = load(SERVICE_PER_POD_EXAMPLE)
    rbac.put(example)
    try:
        eventually(lambda: all(can_i(admin, "porchkit-decorators", access) for access in SERVICE_PER_POD_GRANTS),
                   what="the example's rules in porchkit-decorators")
        assert not any(can_i(admin, account, access) for access in SERVICE_PER_POD_GRANTS
                       for account in ("porchkit", "porchkit-mapctl"))
        still_refused = [str(a) for a in FORBIDDEN_FOR_EVERY_ACCOUNT if can_i(admin, "porchkit-decorators", a)]
        assert still_refused == []
    finally:
        rbac.remove(example)
    eventually(lambda: not any(can_i(admin, "porchkit-decorators", access) for access in SERVICE_PER_POD_GRANTS),
               what="the example's rules gone from porchkit-decorators")
