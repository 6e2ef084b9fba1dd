"""Garbage collection through ownerReferences: Background, Foreground and Orphan.

On a real cluster kube-controller-manager's garbage collector does this work after delete()
returns, so every assertion about dependents polls with `eventually`; on the embedded server
the work is done when delete() returns, and the first poll passes.
"""

from __future__ import annotations

import uuid

from reconcile.cluster import Cluster, Kind, ObjectKey
from tests.reconcile.contract.support import (
    CONFIGMAP,
    HOLD,
    configmap,
    eventually,
    marked,
    reference,
    with_meta,
)

CLUSTER_ROLE = Kind("rbac.authorization.k8s.io/v1", "ClusterRole")


def test_background_deletion_removes_the_owner_at_once_and_its_dependents_after(cluster: Cluster,
                                                                               namespace: str) -> None:
    owner = cluster.create(configmap("owner", namespace))
    for name in ("d1", "d2"):
        cluster.create(configmap(name, namespace, ownerReferences=[reference(owner)]))

    assert cluster.delete(CONFIGMAP, ObjectKey(namespace, "owner"), propagation="Background") is None

    def dependents_gone() -> None:
        for name in ("d1", "d2"):
            assert cluster.get(CONFIGMAP, ObjectKey(namespace, name)) is None

    eventually(dependents_gone)


def test_foreground_deletion_keeps_the_owner_until_blocking_dependents_are_gone(cluster: Cluster,
                                                                                namespace: str) -> None:
    owner = cluster.create(configmap("owner", namespace))
    cluster.create(configmap("held", namespace, finalizers=[HOLD], ownerReferences=[reference(owner, block=True)]))

    waiting = cluster.delete(CONFIGMAP, ObjectKey(namespace, "owner"), propagation="Foreground")

    assert waiting is not None
    assert "foregroundDeletion" in waiting["metadata"]["finalizers"]
    assert waiting["metadata"]["deletionTimestamp"]

    held = eventually(lambda: marked(cluster, CONFIGMAP, ObjectKey(namespace, "held")))
    still = cluster.get(CONFIGMAP, ObjectKey(namespace, "owner"))
    assert still is not None and "foregroundDeletion" in still["metadata"]["finalizers"]

    cluster.update(with_meta(held, finalizers=None))

    eventually(lambda: cluster.get(CONFIGMAP, ObjectKey(namespace, "owner")) is None)


def test_foreground_deletion_does_not_wait_for_dependents_that_do_not_block(cluster: Cluster,
                                                                           namespace: str) -> None:
    owner = cluster.create(configmap("owner", namespace))
    cluster.create(configmap("free", namespace, finalizers=[HOLD], ownerReferences=[reference(owner, block=False)]))

    cluster.delete(CONFIGMAP, ObjectKey(namespace, "owner"), propagation="Foreground")

    eventually(lambda: cluster.get(CONFIGMAP, ObjectKey(namespace, "owner")) is None)
    free = eventually(lambda: marked(cluster, CONFIGMAP, ObjectKey(namespace, "free")))
    cluster.update(with_meta(free, finalizers=None))


def test_orphan_deletion_keeps_dependents_and_removes_only_the_owners_reference(cluster: Cluster,
                                                                               namespace: str) -> None:
    owner = cluster.create(configmap("owner", namespace))
    other = cluster.create(configmap("other", namespace))
    cluster.create(configmap("dep", namespace, ownerReferences=[reference(owner), reference(other)]))

    cluster.delete(CONFIGMAP, ObjectKey(namespace, "owner"), propagation="Orphan")

    eventually(lambda: cluster.get(CONFIGMAP, ObjectKey(namespace, "owner")) is None)

    def orphaned() -> None:
        dep = cluster.get(CONFIGMAP, ObjectKey(namespace, "dep"))
        assert dep is not None and dep["metadata"].get("deletionTimestamp") is None
        assert [r["uid"] for r in dep["metadata"]["ownerReferences"]] == [other["metadata"]["uid"]]

    eventually(orphaned)


def test_orphan_deletion_of_an_only_owner_leaves_the_dependent_without_owner_references(cluster: Cluster,
                                                                                       namespace: str) -> None:
    owner = cluster.create(configmap("owner", namespace))
    cluster.create(configmap("dep", namespace, ownerReferences=[reference(owner)]))

    cluster.delete(CONFIGMAP, ObjectKey(namespace, "owner"), propagation="Orphan")

    def orphaned() -> None:
        assert cluster.get(CONFIGMAP, ObjectKey(namespace, "owner")) is None
        dep = cluster.get(CONFIGMAP, ObjectKey(namespace, "dep"))
        assert dep is not None and not dep["metadata"].get("ownerReferences")

    eventually(orphaned)


def test_a_dependent_with_another_live_owner_survives_and_drops_the_dead_reference(cluster: Cluster,
                                                                                  namespace: str) -> None:
    first = cluster.create(configmap("first", namespace))
    second = cluster.create(configmap("second", namespace))
    cluster.create(configmap("dep", namespace, ownerReferences=[reference(first), reference(second)]))

    cluster.delete(CONFIGMAP, ObjectKey(namespace, "first"))

    def kept() -> None:
        dep = cluster.get(CONFIGMAP, ObjectKey(namespace, "dep"))
        assert dep is not None and not dep["metadata"].get("deletionTimestamp")
        assert [r["uid"] for r in dep["metadata"]["ownerReferences"]] == [second["metadata"]["uid"]]

    eventually(kept)


def test_an_object_whose_owner_never_existed_is_collected(cluster: Cluster, namespace: str) -> None:
    ghost = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ghost", "uid": str(uuid.uuid4())}}
    cluster.create(configmap("dep", namespace, ownerReferences=[reference(ghost)]))

    eventually(lambda: cluster.get(CONFIGMAP, ObjectKey(namespace, "dep")) is None)


def test_foreground_deletion_reaches_grandchildren_before_the_owner_goes(cluster: Cluster, namespace: str) -> None:
    owner = cluster.create(configmap("owner", namespace))
    child = cluster.create(configmap("child", namespace, ownerReferences=[reference(owner)]))
    cluster.create(configmap("grandchild", namespace, finalizers=[HOLD], ownerReferences=[reference(child)]))

    cluster.delete(CONFIGMAP, ObjectKey(namespace, "owner"), propagation="Foreground")

    grandchild = eventually(lambda: marked(cluster, CONFIGMAP, ObjectKey(namespace, "grandchild")))
    assert cluster.get(CONFIGMAP, ObjectKey(namespace, "owner")) is not None
    assert cluster.get(CONFIGMAP, ObjectKey(namespace, "child")) is not None

    cluster.update(with_meta(grandchild, finalizers=None))

    def all_gone() -> None:
        for name in ("owner", "child", "grandchild"):
            assert cluster.get(CONFIGMAP, ObjectKey(namespace, name)) is None

    eventually(all_gone)


def collected_after(cluster: Cluster, namespace: str) -> None:
    """Wait until the collector has dealt with an object created now, whose owner never existed:
    on a real cluster, objects created before it have then most likely been looked at too."""
    ghost = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ghost", "uid": str(uuid.uuid4())}}
    cluster.create(configmap("sentinel", namespace, ownerReferences=[reference(ghost)]))
    eventually(lambda: cluster.get(CONFIGMAP, ObjectKey(namespace, "sentinel")) is None)


def test_a_reference_the_collector_cannot_resolve_leaves_the_object_untouched(cluster: Cluster,
                                                                              namespace: str) -> None:
    unknown = {"apiVersion": "nothing.porchkit.dev/v1", "kind": "Gizmo", "name": "g", "uid": str(uuid.uuid4())}
    ghost = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ghost", "uid": str(uuid.uuid4())}}
    refs = [unknown, reference(ghost)]
    cluster.create(configmap("dep", namespace, ownerReferences=refs))

    collected_after(cluster, namespace)

    dep = cluster.get(CONFIGMAP, ObjectKey(namespace, "dep"))
    assert dep is not None and [r["uid"] for r in dep["metadata"]["ownerReferences"]] == [r["uid"] for r in refs]


def test_a_cluster_scoped_object_owned_by_a_namespaced_one_is_left_alone(cluster: Cluster, namespace: str) -> None:
    owner = cluster.create(configmap("owner", namespace))
    name = f"owned-by-a-configmap-{namespace}"
    cluster.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                    "metadata": {"name": name, "ownerReferences": [reference(owner)]}})
    try:
        collected_after(cluster, namespace)

        assert cluster.get(CLUSTER_ROLE, ObjectKey("", name)) is not None
    finally:
        cluster.delete(CLUSTER_ROLE, ObjectKey("", name))
