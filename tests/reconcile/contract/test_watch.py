"""Watches: ADDED/MODIFIED/DELETED in order, resuming from a resourceVersion, BOOKMARKs,
timeouts, selectors, and Gone for a version the server no longer keeps."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from reconcile.cluster import ObjectKey
from reconcile.errors import Gone
from tests.reconcile.contract.support import (
    CONFIGMAP,
    WATCH_TIMEOUT,
    Backend,
    configmap,
    version,
)


def test_a_watch_from_a_list_sees_added_modified_and_deleted_in_order(backend: Backend, namespace: str) -> None:
    cluster = backend.cluster
    start = cluster.list(CONFIGMAP, namespace=namespace).resource_version
    stream = cluster.watch(CONFIGMAP, namespace=namespace, resource_version=start, timeout=WATCH_TIMEOUT)

    made = cluster.create(configmap("a", namespace, data={"k": "1"}))
    changed = cluster.update({**made, "data": {"k": "2"}})
    cluster.delete(CONFIGMAP, ObjectKey(namespace, "a"))

    events = backend.take(stream, 3)
    assert [(e.type, e.object["metadata"]["name"]) for e in events] == [("ADDED", "a"), ("MODIFIED", "a"),
                                                                       ("DELETED", "a")]
    assert [e.object["metadata"]["resourceVersion"] for e in events[:2]] == \
        [made["metadata"]["resourceVersion"], changed["metadata"]["resourceVersion"]]
    assert version(events[0].object) < version(events[1].object) < version(events[2].object)


def test_a_deleted_event_carries_the_final_state_of_the_object(backend: Backend, namespace: str) -> None:
    cluster = backend.cluster
    made = cluster.create(configmap("a", namespace, data={"k": "1"}))
    last = cluster.update({**made, "data": {"k": "last"}})

    cluster.delete(CONFIGMAP, ObjectKey(namespace, "a"))

    [deleted] = backend.take(cluster.watch(CONFIGMAP, namespace=namespace, resource_version=last["metadata"][
        "resourceVersion"], timeout=WATCH_TIMEOUT), 1)
    assert deleted.type == "DELETED"
    assert deleted.object["data"] == {"k": "last"}
    assert deleted.object["metadata"]["uid"] == made["metadata"]["uid"]
    assert version(deleted.object) > version(last)


def test_a_watch_resumes_right_after_the_given_resource_version(backend: Backend, namespace: str) -> None:
    cluster = backend.cluster
    cluster.create(configmap("before", namespace))
    middle = cluster.create(configmap("middle", namespace))
    cluster.create(configmap("after", namespace))

    events = backend.take(cluster.watch(CONFIGMAP, namespace=namespace,
                                        resource_version=middle["metadata"]["resourceVersion"],
                                        timeout=WATCH_TIMEOUT), 1)

    assert [(e.type, e.object["metadata"]["name"]) for e in events] == [("ADDED", "after")]


def test_a_watch_from_resource_version_zero_starts_with_the_current_objects_as_added(backend: Backend,
                                                                                    namespace: str) -> None:
    cluster = backend.cluster
    cluster.create(configmap("a", namespace, labels={"pick": "me"}))
    cluster.create(configmap("b", namespace, labels={"pick": "me"}))

    events = backend.take(cluster.watch(CONFIGMAP, namespace=namespace, labels="pick=me", resource_version="0",
                                        timeout=WATCH_TIMEOUT), 2)

    assert sorted((e.type, e.object["metadata"]["name"]) for e in events) == [("ADDED", "a"), ("ADDED", "b")]


def test_a_namespaced_watch_sees_only_its_namespace(backend: Backend, new_namespace: Callable[[], str]) -> None:
    cluster = backend.cluster
    here, there = new_namespace(), new_namespace()
    start = cluster.list(CONFIGMAP, namespace=here).resource_version
    stream = cluster.watch(CONFIGMAP, namespace=here, resource_version=start, timeout=WATCH_TIMEOUT)

    cluster.create(configmap("elsewhere", there))
    cluster.create(configmap("here", here))

    events = backend.take(stream, 1)
    assert [(e.type, e.object["metadata"]["namespace"]) for e in events] == [("ADDED", here)]


def test_a_label_selected_watch_sees_objects_enter_as_added_and_leave_as_deleted(backend: Backend,
                                                                                 namespace: str) -> None:
    cluster = backend.cluster
    made = cluster.create(configmap("a", namespace, labels={"tier": "back"}))
    stream = cluster.watch(CONFIGMAP, namespace=namespace, labels="tier=front",
                           resource_version=made["metadata"]["resourceVersion"], timeout=WATCH_TIMEOUT)

    front = cluster.update({**made, "metadata": {**made["metadata"], "labels": {"tier": "front"}}})
    still = cluster.update({**front, "data": {"k": "1"}})
    cluster.update({**still, "metadata": {**still["metadata"], "labels": {"tier": "back"}}})

    events = backend.take(stream, 3)
    assert [e.type for e in events] == ["ADDED", "MODIFIED", "DELETED"]
    assert events[2].object["data"] == {"k": "1"}


def test_an_object_leaving_a_label_selection_is_deleted_with_its_last_selected_state_at_the_new_version(
        backend: Backend, namespace: str) -> None:
    # kube-apiserver's watch cache (cacheWatcher.convertToWatchEvent): "return a delete event with
    # the previous object content, but with the event's resource version"
    cluster = backend.cluster
    made = cluster.create(configmap("a", namespace, labels={"tier": "front"}, data={"k": "1"}))
    stream = cluster.watch(CONFIGMAP, namespace=namespace, labels="tier=front",
                           resource_version=made["metadata"]["resourceVersion"], timeout=WATCH_TIMEOUT)

    left = cluster.update({**made, "metadata": {**made["metadata"], "labels": {"tier": "back"}}, "data": {"k": "2"}})

    [event] = backend.take(stream, 1)
    assert event.type == "DELETED"
    assert event.object["metadata"]["labels"] == {"tier": "front"}
    assert event.object["data"] == {"k": "1"}
    assert event.object["metadata"]["resourceVersion"] == left["metadata"]["resourceVersion"]


def test_a_bookmark_carries_a_resource_version_to_resume_from(backend: Backend, namespace: str) -> None:
    cluster = backend.cluster
    start = cluster.create(configmap("a", namespace))["metadata"]["resourceVersion"]

    bookmark = backend.first_bookmark(cluster.watch(CONFIGMAP, namespace=namespace, resource_version=start,
                                                    timeout=4))

    assert bookmark is not None
    resume = bookmark.object["metadata"]["resourceVersion"]
    assert int(resume) >= int(start)
    cluster.create(configmap("b", namespace))
    events = backend.take(cluster.watch(CONFIGMAP, namespace=namespace, resource_version=resume,
                                        timeout=WATCH_TIMEOUT), 1)
    assert [(e.type, e.object["metadata"]["name"]) for e in events] == [("ADDED", "b")]


def test_a_watch_ends_once_its_timeout_has_passed(backend: Backend, namespace: str) -> None:
    cluster = backend.cluster
    start = cluster.create(configmap("a", namespace))["metadata"]["resourceVersion"]
    stream = cluster.watch(CONFIGMAP, namespace=namespace, resource_version=start, timeout=2)
    cluster.create(configmap("b", namespace))

    events = backend.rest(stream, 2)  # returns only because the stream ended

    assert [(e.type, e.object["metadata"]["name"]) for e in events] == [("ADDED", "b")]


@pytest.mark.embedded_only("only the embedded server's history can be made short enough to outrun on demand")
def test_a_watch_from_a_version_older_than_the_kept_history_raises_gone(backend: Backend, namespace: str) -> None:
    cluster = backend.cluster
    made = cluster.create(configmap("a", namespace))
    current = made
    for round_ in range(backend.history + 1):
        current = cluster.update({**current, "data": {"round": str(round_)}})

    with pytest.raises(Gone):
        backend.take(cluster.watch(CONFIGMAP, namespace=namespace, resource_version=made["metadata"][
            "resourceVersion"], timeout=WATCH_TIMEOUT), 1)
    relisted = cluster.list(CONFIGMAP, namespace=namespace)
    cluster.create(configmap("b", namespace))
    events = backend.take(cluster.watch(CONFIGMAP, namespace=namespace, resource_version=relisted.resource_version,
                                        timeout=WATCH_TIMEOUT), 1)
    assert [(e.type, e.object["metadata"]["name"]) for e in events] == [("ADDED", "b")]
