"""Discovery: how a kind is served (plural, scope, subresources), and NotFound for one that is not."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from reconcile.cluster import Cluster, Kind
from reconcile.errors import NotFound
from tests.reconcile.contract.support import CONFIGMAP, CRD, DEPLOYMENT, NAMESPACE, CustomKind


@pytest.mark.parametrize(("kind", "plural", "namespaced", "status"), [
    (CONFIGMAP, "configmaps", True, False),
    (NAMESPACE, "namespaces", False, True),
    (DEPLOYMENT, "deployments", True, True),
    (CRD, "customresourcedefinitions", False, True),
    (Kind("rbac.authorization.k8s.io/v1", "ClusterRole"), "clusterroles", False, False),
])
def test_a_built_in_kind_is_served_with_its_plural_scope_and_status_subresource(
        cluster: Cluster, kind: Kind, plural: str, namespaced: bool, status: bool) -> None:
    info = cluster.resource(kind)

    assert info.kind == kind
    assert (info.plural, info.namespaced, "status" in info.subresources) == (plural, namespaced, status)


@pytest.mark.parametrize("kind", [
    Kind("v1", "NoSuchKind"),
    Kind("apps/v1beta0", "Deployment"),
    Kind("nothing.porchkit.dev/v1", "Widget"),
])
def test_a_kind_the_server_does_not_serve_raises_not_found(cluster: Cluster, kind: Kind) -> None:
    with pytest.raises(NotFound):
        cluster.resource(kind)


def test_discovery_lists_every_served_kind_so_a_plural_leads_back_to_its_kind(
        cluster: Cluster, install_crd: Callable[..., CustomKind]) -> None:
    widget = install_crd()
    served = {(info.kind.api_version.rpartition("/")[0], info.plural): info for info in cluster.resources()}

    assert served[("", "configmaps")].kind == CONFIGMAP and served[("", "configmaps")].namespaced
    assert served[("", "namespaces")].kind == NAMESPACE and not served[("", "namespaces")].namespaced
    assert served[("apps", "deployments")].kind == DEPLOYMENT
    assert served[(widget.kind.group, "widgets")].kind == widget.kind
