"""Label selectors (the string syntax and the matchLabels/matchExpressions map) and field
selectors (metadata.name, metadata.namespace, and the fields a kind declares selectable)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from reconcile.cluster import Cluster
from reconcile.errors import BadRequest
from tests.reconcile.contract.support import (
    CONFIGMAP,
    TEST_LABEL,
    CustomKind,
    configmap,
    names,
    widget,
)

LABELLED = {
    "web": {"app": "web", "tier": "front", "version": "3"},
    "api": {"app": "api", "tier": "back", "version": "10"},
    "old": {"app": "web", "tier": "front", "legacy": "true"},
    "bare": {},
}


@pytest.fixture
def labelled(cluster: Cluster, namespace: str) -> str:
    for name, labels in LABELLED.items():
        cluster.create(configmap(name, namespace, labels=labels))
    return namespace


@pytest.mark.parametrize(("selector", "expected"), [
    ("app=web", ["old", "web"]),
    ("app==web", ["old", "web"]),
    ("app!=web", ["api", "bare"]),  # != also matches objects without the key
    ("tier in (front,back)", ["api", "old", "web"]),
    ("tier notin (front)", ["api", "bare"]),
    ("legacy", ["old"]),
    ("!legacy", ["api", "bare", "web"]),
    ("app=web,!legacy", ["web"]),
    ("version>5", ["api"]),
    ("", ["api", "bare", "old", "web"]),
])
def test_a_label_selector_string_lists_exactly_the_matching_objects(cluster: Cluster, labelled: str, selector: str,
                                                                    expected: list[str]) -> None:
    assert names(cluster.list(CONFIGMAP, namespace=labelled, labels=selector).items) == expected


@pytest.mark.parametrize(("selector", "expected"), [
    ({"matchLabels": {"app": "web"}}, ["old", "web"]),
    ({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["back"]}]}, ["api"]),
    ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]}, ["api", "bare"]),
    ({"matchExpressions": [{"key": "legacy", "operator": "DoesNotExist"}],
      "matchLabels": {"tier": "front"}}, ["web"]),
    ({"matchExpressions": [{"key": "legacy", "operator": "Exists"}]}, ["old"]),
    ({}, ["api", "bare", "old", "web"]),
])
def test_a_label_selector_map_lists_exactly_the_matching_objects(cluster: Cluster, labelled: str,
                                                                 selector: dict[str, Any], expected: list[str]) -> None:
    assert names(cluster.list(CONFIGMAP, namespace=labelled, labels=selector).items) == expected


def test_a_malformed_label_selector_is_a_bad_request(cluster: Cluster, namespace: str) -> None:
    with pytest.raises(BadRequest):
        cluster.list(CONFIGMAP, namespace=namespace, labels="app in web")


def test_a_field_selector_on_metadata_name_lists_that_object(cluster: Cluster, labelled: str) -> None:
    assert names(cluster.list(CONFIGMAP, namespace=labelled, fields="metadata.name=api").items) == ["api"]
    assert names(cluster.list(CONFIGMAP, namespace=labelled, fields="metadata.name!=api").items) == \
        ["bare", "old", "web"]


def test_a_field_selector_on_metadata_namespace_picks_one_namespace_of_a_cluster_wide_list(
        cluster: Cluster, new_namespace: Callable[[], str]) -> None:
    here, there = new_namespace(), new_namespace()
    mark = {TEST_LABEL: here}  # keeps the rest of a shared cluster out of the list
    cluster.create(configmap("a", here, labels=mark))
    cluster.create(configmap("b", there, labels=mark))

    everywhere = cluster.list(CONFIGMAP, labels=f"{TEST_LABEL}={here}")
    only_there = cluster.list(CONFIGMAP, labels=f"{TEST_LABEL}={here}", fields=f"metadata.namespace={there}")

    assert names(everywhere.items) == ["a", "b"]
    assert names(only_there.items) == ["b"]


def test_a_field_selector_on_a_field_the_kind_does_not_index_is_a_bad_request(cluster: Cluster,
                                                                             namespace: str) -> None:
    # kube-apiserver supports only a few field labels per kind ("field label not supported")
    with pytest.raises(BadRequest):
        cluster.list(CONFIGMAP, namespace=namespace, fields="data.k=1")


@pytest.mark.min_server("1.31", "CRD selectableFields came with 1.31 (beta, on by default)")
def test_a_crd_can_declare_spec_fields_selectable(cluster: Cluster, namespace: str,
                                                  install_crd: Callable[..., CustomKind]) -> None:
    # selectableFields: Kubernetes 1.31 and later
    widgets = install_crd(selectable=["spec.color"])
    cluster.create(widget(widgets, "red", namespace, spec={"color": "red"}))
    cluster.create(widget(widgets, "blue", namespace, spec={"color": "blue"}))

    assert names(cluster.list(widgets.kind, namespace=namespace, fields="spec.color=red").items) == ["red"]
    with pytest.raises(BadRequest):
        cluster.list(widgets.kind, namespace=namespace, fields="spec.size=1")
