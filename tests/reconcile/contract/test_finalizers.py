"""Finalizers and deletionTimestamp: deleting an object that finalizers hold only marks it."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from reconcile.cluster import Cluster, ObjectKey
from reconcile.errors import Invalid
from tests.reconcile.contract.support import (
    CONFIGMAP,
    HOLD,
    WATCH_TIMEOUT,
    Backend,
    CustomKind,
    configmap,
    version,
    widget,
    with_meta,
)


def test_deleting_an_object_with_a_finalizer_marks_it_instead_of_removing_it(cluster: Cluster,
                                                                            namespace: str) -> None:
    cluster.create(configmap("a", namespace, finalizers=[HOLD]))

    marked = cluster.delete(CONFIGMAP, ObjectKey(namespace, "a"))

    assert marked is not None
    meta = marked["metadata"]
    assert meta["deletionTimestamp"].endswith("Z")
    assert meta["deletionGracePeriodSeconds"] == 0
    assert meta["finalizers"] == [HOLD]
    assert cluster.get(CONFIGMAP, ObjectKey(namespace, "a")) is not None
    cluster.update(with_meta(marked, finalizers=None))


def test_removing_the_last_finalizer_of_a_deleting_object_deletes_it(backend: Backend, namespace: str) -> None:
    cluster = backend.cluster
    cluster.create(configmap("a", namespace, finalizers=[HOLD]))
    start = cluster.list(CONFIGMAP, namespace=namespace).resource_version
    marked = cluster.delete(CONFIGMAP, ObjectKey(namespace, "a"))
    assert marked is not None

    cluster.update(with_meta(marked, finalizers=None))

    assert cluster.get(CONFIGMAP, ObjectKey(namespace, "a")) is None
    events = backend.take(cluster.watch(CONFIGMAP, namespace=namespace, resource_version=start,
                                        timeout=WATCH_TIMEOUT), 2)
    assert [e.type for e in events] == ["MODIFIED", "DELETED"]
    assert events[0].object["metadata"]["deletionTimestamp"]


def test_a_deleting_object_accepts_no_new_finalizers(cluster: Cluster, namespace: str) -> None:
    cluster.create(configmap("a", namespace, finalizers=[HOLD]))
    marked = cluster.delete(CONFIGMAP, ObjectKey(namespace, "a"))
    assert marked is not None

    with pytest.raises(Invalid):
        cluster.update(with_meta(marked, finalizers=[HOLD, "contract.porchkit.dev/another"]))
    cluster.update(with_meta(marked, finalizers=None))


def test_deleting_an_object_that_is_already_being_deleted_changes_nothing(cluster: Cluster,
                                                                          namespace: str) -> None:
    cluster.create(configmap("a", namespace, finalizers=[HOLD]))
    first = cluster.delete(CONFIGMAP, ObjectKey(namespace, "a"))

    second = cluster.delete(CONFIGMAP, ObjectKey(namespace, "a"))

    assert first is not None and second is not None
    assert second["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    assert second["metadata"]["deletionTimestamp"] == first["metadata"]["deletionTimestamp"]
    cluster.update(with_meta(second, finalizers=None))


def test_marking_for_deletion_bumps_generation_only_where_the_kind_has_one(
        cluster: Cluster, namespace: str, install_crd: Callable[..., CustomKind]) -> None:
    widgets = install_crd(status=True)
    cluster.create(with_meta(widget(widgets, "w", namespace, spec={"size": 1}), finalizers=[HOLD]))
    cluster.create(configmap("a", namespace, finalizers=[HOLD]))

    marked_widget = cluster.delete(widgets.kind, ObjectKey(namespace, "w"))
    marked_map = cluster.delete(CONFIGMAP, ObjectKey(namespace, "a"))

    assert marked_widget is not None and marked_map is not None
    assert marked_widget["metadata"]["generation"] == 2
    assert "generation" not in marked_map["metadata"]
    cluster.update(with_meta(marked_widget, finalizers=None))
    cluster.update(with_meta(marked_map, finalizers=None))


def test_a_deleting_object_can_still_be_updated(cluster: Cluster, namespace: str) -> None:
    cluster.create(configmap("a", namespace, data={"k": "1"}, finalizers=[HOLD]))
    marked = cluster.delete(CONFIGMAP, ObjectKey(namespace, "a"))
    assert marked is not None

    updated = cluster.update({**marked, "data": {"k": "2"}})

    assert updated["data"] == {"k": "2"}
    assert updated["metadata"]["deletionTimestamp"] == marked["metadata"]["deletionTimestamp"]
    assert version(updated) > version(marked)
    cluster.update(with_meta(updated, finalizers=None))


def test_an_object_without_finalizers_is_gone_when_delete_returns(cluster: Cluster, namespace: str) -> None:
    cluster.create(configmap("a", namespace))

    assert cluster.delete(CONFIGMAP, ObjectKey(namespace, "a")) is None
    assert cluster.get(CONFIGMAP, ObjectKey(namespace, "a")) is None
