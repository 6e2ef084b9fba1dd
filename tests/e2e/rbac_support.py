"""The shipped RBAC on a real API server, for the security e2e tests.

`ShippedRbac` applies deploy/'s ServiceAccounts, roles and bindings (and any example ClusterRole
on request) and removes what it created, or skips the test on a server where porchkit's RBAC is
installed already (a shared cluster running porchkit: the tests must not change it). `can_i`
asks the server's authorizer whether a ServiceAccount may make a request, with the
SubjectAccessReview that `kubectl auth can-i --as system:serviceaccount:NS:NAME` amounts to;
`cluster_as` connects as a ServiceAccount, with a token from the TokenRequest API, to run
controllers under exactly the rights deploy/ gives them.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterable
from typing import Any

import pytest

from reconcile import ApiError, Cluster, Kind, ObjectKey
from tests.deploy.rbac_model import NAMESPACE, Access, Doc, user_of

SUBJECT_ACCESS_REVIEW = Kind("authorization.k8s.io/v1", "SubjectAccessReview")
CLUSTER_ROLE = Kind("rbac.authorization.k8s.io/v1", "ClusterRole")
NAMESPACE_KIND = Kind("v1", "Namespace")


def can_i(cluster: Cluster, account: str, access: Access, namespace: str = NAMESPACE) -> bool:
    """Whether the ServiceAccount may make the request, as the server's authorizer answers a
    SubjectAccessReview for its user and groups (what `kubectl auth can-i --as` sends, the
    impersonation filter adding a ServiceAccount's groups)."""
    plural, _, subresource = access.resource.partition("/")
    attributes = {"verb": access.verb, "group": access.group, "resource": plural}
    for key, value in (("subresource", subresource), ("namespace", access.namespace), ("name", access.name)):
        if value:
            attributes[key] = value
    review = cluster.create({
        "apiVersion": SUBJECT_ACCESS_REVIEW.api_version, "kind": SUBJECT_ACCESS_REVIEW.kind, "metadata": {},
        "spec": {"user": user_of(account, namespace),
                 "groups": ["system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"],
                 "resourceAttributes": attributes}})
    return bool((review.get("status") or {}).get("allowed"))


class ShippedRbac:
    """deploy/'s RBAC objects applied to a server (created, or updated where they exist)."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.created: list[tuple[Kind, ObjectKey]] = []

    def apply(self, docs: Iterable[Doc]) -> None:
        """Apply `docs`, in porchkit-system (created if missing, and kept: a namespace being deleted
        takes new objects only once it is gone, and the next test applies them again)."""
        docs = list(docs)
        installed = [f"{doc['kind']} {doc['metadata']['name']}" for doc in docs
                     if self.cluster.get(Kind.of(doc), ObjectKey.of(doc)) is not None]
        if installed:
            pytest.skip(f"porchkit's RBAC is installed on this server already ({', '.join(installed[:3])}, ...): "
                        "these tests would change it")
        if self.cluster.get(NAMESPACE_KIND, ObjectKey("", NAMESPACE)) is None:
            self.cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        for doc in docs:
            self.put(doc)

    def put(self, doc: Doc) -> None:
        kind, key = Kind.of(doc), ObjectKey.of(doc)
        live = self.cluster.get(kind, key)
        if live is None:
            self.cluster.create(copy.deepcopy(doc))
            self.created.append((kind, key))
        else:
            wanted = copy.deepcopy(doc)
            wanted["metadata"]["resourceVersion"] = live["metadata"]["resourceVersion"]
            self.cluster.update(wanted)

    def remove(self, doc: Doc) -> None:
        kind, key = Kind.of(doc), ObjectKey.of(doc)
        with contextlib.suppress(ApiError):
            self.cluster.delete(kind, key)
        self.created = [(k, o) for k, o in self.created if (k, o) != (kind, key)]

    def clean_up(self) -> None:
        """Delete what `apply` and `put` created, newest first."""
        for kind, key in reversed(self.created):
            with contextlib.suppress(ApiError):
                self.cluster.delete(kind, key)
        self.created = []

    def aggregated_rules(self, role: str) -> list[dict[str, Any]]:
        live = self.cluster.get(CLUSTER_ROLE, ObjectKey("", role))
        return list((live or {}).get("rules") or [])


def cluster_as(kubeconfig: str, account: str, namespace: str = NAMESPACE) -> Cluster:
    """A KubeCluster authenticated as the ServiceAccount (a one-hour token from the TokenRequest
    API, requested by the kubeconfig's user), on the kubeconfig's server."""
    from kubernetes import client, config

    from reconcile.kube import KubeCluster

    admin = client.Configuration()
    config.load_kube_config(config_file=kubeconfig, client_configuration=admin, persist_config=False)
    with client.ApiClient(admin) as api:
        request = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[],
                                                                                    expiration_seconds=3600))
        answer = client.CoreV1Api(api).create_namespaced_service_account_token(account, namespace, request)
    assert answer.status is not None, f"no token for {account}"
    as_account = copy.copy(admin)
    as_account.api_key = {"authorization": f"Bearer {answer.status.token}"}
    as_account.api_key_prefix = {}
    return KubeCluster(as_account)
