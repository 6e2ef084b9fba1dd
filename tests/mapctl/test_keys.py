"""Map keys and stamps: stable, valid as label values, selectable, readable back, and never written
into the caller's object."""

from __future__ import annotations

from typing import Any

import pytest

from mapctl.keys import (
    CONTROLLER_LABEL,
    INPUT_ANNOTATION,
    MAP_KEY_LABEL,
    input_reference,
    key_of,
    map_key,
    parse_reference,
    stamp,
)
from reconcile import EmbeddedCluster, Kind
from reconcile.children import _stamped
from reconcile.selectors import check_label_key, check_label_value

PVC = Kind("v1", "PersistentVolumeClaim")
DEPLOYMENT = Kind("apps/v1", "Deployment")


def output(**meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "out", "namespace": "default", **meta},
            "data": {"k": "v"}}


class TestMapKey:
    def test_a_key_is_the_same_in_every_process(self) -> None:
        # a literal, so that a change of recipe (which would orphan every existing output) fails here
        assert map_key(PVC, "default", "data-0") == "mk-78fc37983a35b7e39a09d79625691840"
        assert map_key(Kind("v1", "ConfigMap"), "default", "a") == "mk-f14a88b16dec340a8af5d79f6e80a2de"

    def test_the_version_of_the_input_kind_does_not_change_the_key(self) -> None:
        assert map_key(Kind("apps/v1", "Deployment"), "ns", "web") == map_key(Kind("apps/v1beta2", "Deployment"),
                                                                             "ns", "web")

    @pytest.mark.parametrize("other", [
        (Kind("apps/v1", "StatefulSet"), "ns", "web"),
        (Kind("extensions/v1beta1", "Deployment"), "ns", "web"),
        (DEPLOYMENT, "other", "web"),
        (DEPLOYMENT, "ns", "web2"),
    ])
    def test_group_kind_namespace_and_name_each_change_the_key(self, other: tuple[Kind, str, str]) -> None:
        assert map_key(*other) != map_key(DEPLOYMENT, "ns", "web")

    @pytest.mark.parametrize(("namespace", "name"), [("default", "a"), ("n" * 63, "x" * 253), ("", "cluster-wide")])
    def test_a_key_is_always_a_valid_label_value(self, namespace: str, name: str) -> None:
        key = map_key(Kind("example.com/v1", "Widget"), namespace, name)
        assert check_label_value(key) is None
        assert len(key) == 35
        assert key.startswith("mk-")


class TestInputReference:
    def test_a_core_kind_has_no_group(self) -> None:
        assert input_reference(PVC, "default", "data-0") == "PersistentVolumeClaim/default/data-0"

    def test_a_grouped_kind_is_qualified_by_its_group_not_its_version(self) -> None:
        assert input_reference(DEPLOYMENT, "ns", "web") == "Deployment.apps/ns/web"


class TestStamp:
    def test_a_stamped_output_carries_the_key_the_controller_and_the_input(self) -> None:
        out = _stamped(output(), stamp("snapshots", "mk-1", "PersistentVolumeClaim/default/data-0"), True)
        assert out["metadata"]["labels"] == {MAP_KEY_LABEL: "mk-1", CONTROLLER_LABEL: "snapshots"}
        assert out["metadata"]["annotations"] == {INPUT_ANNOTATION: "PersistentVolumeClaim/default/data-0"}
        assert out["data"] == {"k": "v"}
        assert key_of(out) == "mk-1"

    def test_labels_and_annotations_the_hook_wrote_are_kept_except_ours(self) -> None:
        forged = output(labels={"app": "x", MAP_KEY_LABEL: "forged"}, annotations={"note": "y"})
        out = _stamped(forged, stamp("c", "mk-1", "r"), True)
        assert out["metadata"]["labels"] == {"app": "x", MAP_KEY_LABEL: "mk-1", CONTROLLER_LABEL: "c"}
        assert out["metadata"]["annotations"] == {"note": "y", INPUT_ANNOTATION: "r"}
        assert forged["metadata"]["labels"][MAP_KEY_LABEL] == "forged"

    def test_an_object_is_ours_only_with_every_mark(self) -> None:
        marks = stamp("c", "mk-1", "r")
        assert marks.on(_stamped(output(), marks, True))
        assert not marks.on(_stamped(output(), stamp("c", "mk-2", "r"), True))
        assert not marks.on(_stamped(output(), stamp("other", "mk-1", "r"), True))
        assert not marks.on(output())

    def test_an_output_without_metadata_or_with_null_labels_is_stamped(self) -> None:
        assert key_of(_stamped({"apiVersion": "v1", "kind": "ConfigMap"}, stamp("c", "mk-1", "r"), True)) == "mk-1"
        assert key_of(_stamped(output(labels=None, annotations=None), stamp("c", "mk-2", "r"), True)) == "mk-2"


class TestParseReference:
    @pytest.mark.parametrize(("kind", "namespace"), [(PVC, "default"), (DEPLOYMENT, "ns"), (PVC, "")])
    def test_a_reference_reads_back_as_its_input(self, kind: Kind, namespace: str) -> None:
        assert parse_reference(input_reference(kind, namespace, "web")) == (kind.group, kind.kind, namespace, "web")

    @pytest.mark.parametrize("text", ["", "ConfigMap", "ConfigMap/ns", "/ns/name", "ConfigMap/ns/", "A/b/c/d"])
    def test_anything_else_is_none(self, text: str) -> None:
        assert parse_reference(text) is None


class TestLabels:
    def test_our_label_keys_are_valid(self) -> None:
        assert check_label_key(MAP_KEY_LABEL) is None
        assert check_label_key(CONTROLLER_LABEL) is None
        assert check_label_key(INPUT_ANNOTATION) is None

    def test_a_real_api_server_stores_a_tagged_output_and_selects_it_by_key(self) -> None:
        key = map_key(PVC, "default", "data-0")
        with EmbeddedCluster() as cluster:
            mine = stamp("snapshots", key, input_reference(PVC, "default", "data-0"))
            theirs = stamp("snapshots", map_key(PVC, "default", "data-1"), "r")
            cluster.create(_stamped(output(name="mine"), mine, True))
            cluster.create(_stamped(output(name="theirs"), theirs, True))
            found = cluster.list(Kind("v1", "ConfigMap"), namespace="default", labels=f"{MAP_KEY_LABEL}={key}").items
        assert [o["metadata"]["name"] for o in found] == ["mine"]
        assert key_of(found[0]) == key


class TestKeyOf:
    @pytest.mark.parametrize("obj", [
        {}, {"metadata": None}, {"metadata": {"labels": None}}, {"metadata": {"labels": {"app": "x"}}},
        {"metadata": {"labels": {MAP_KEY_LABEL: ""}}}, {"metadata": {"labels": {MAP_KEY_LABEL: 5}}},
    ])
    def test_an_untagged_or_oddly_tagged_object_has_no_key(self, obj: dict[str, Any]) -> None:
        assert key_of(obj) is None

    def test_a_tagged_object_gives_its_key_back(self) -> None:
        assert key_of(output(labels={MAP_KEY_LABEL: "mk-abc"})) == "mk-abc"
