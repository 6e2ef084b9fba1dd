"""Selectors behave like kpt's Kptfile `selectors:`/`exclude:` (fnruntime.SelectInput)."""

from __future__ import annotations

from krmfn import Selector, is_local_config, is_meta_resource, select


def obj(kind: str, name: str, namespace: str | None = None, labels=None, annotations=None, api="v1"):  # type: ignore[no-untyped-def]
    metadata = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    if labels is not None:
        metadata["labels"] = labels
    if annotations is not None:
        metadata["annotations"] = annotations
    return {"apiVersion": api, "kind": kind, "metadata": metadata}


CM = obj("ConfigMap", "a", "default", labels={"tier": "web", "n": 1})
SECRET = obj("Secret", "b", labels={"tier": "db"})
DEPLOY = obj("Deployment", "a", "team", labels={"tier": "web"}, annotations={"x": "true"}, api="apps/v1")
ITEMS = [CM, SECRET, DEPLOY]


def test_no_selectors_select_everything() -> None:
    assert select(ITEMS) == ITEMS


def test_fields_within_one_selector_must_all_match() -> None:
    assert select(ITEMS, [Selector(kind="ConfigMap", name="a")]) == [CM]
    assert select(ITEMS, [Selector(name="a", labels={"tier": "web"})]) == [CM, DEPLOY]
    assert select(ITEMS, [Selector(api_version="apps/v1", annotations={"x": "true"})]) == [DEPLOY]


def test_any_of_several_selectors_may_match_and_each_item_comes_once() -> None:
    assert select(ITEMS, [Selector(kind="Secret"), Selector(name="a"), Selector(kind="ConfigMap")]) == ITEMS


def test_exclusions_drop_matches_and_empty_exclusions_are_ignored() -> None:
    assert select(ITEMS, exclude=[Selector(labels={"tier": "web"})]) == [SECRET]
    assert select(ITEMS, exclude=[Selector()]) == ITEMS


def test_matching_is_exact_and_the_namespace_is_never_defaulted() -> None:
    assert select(ITEMS, [Selector(kind="configmap")]) == []
    assert select(ITEMS, [Selector(namespace="default")]) == [CM]
    assert select([SECRET], [Selector(namespace="default")]) == []


def test_label_values_compare_as_their_text() -> None:
    assert select(ITEMS, [Selector(labels={"n": "1"})]) == [CM]


def test_selectors_read_from_a_kptfile() -> None:
    selector = Selector.from_dict({"kind": "Deployment", "labels": {"tier": "web"}})
    assert selector == Selector(kind="Deployment", labels={"tier": "web"})
    assert select(ITEMS, [selector]) == [DEPLOY]


def test_local_config_and_meta_resources_as_the_go_sdk_sees_them() -> None:
    local = "config.kubernetes.io/local-config"
    assert is_local_config(obj("ConfigMap", "c", annotations={local: "true"}))
    assert is_local_config(obj("ConfigMap", "c", annotations={local: "yes"}))
    assert not is_local_config(obj("ConfigMap", "c", annotations={local: "false"}))
    assert not is_local_config(CM)
    assert is_meta_resource(obj("Kptfile", "k", api="kpt.dev/v1"))
    assert not is_meta_resource(obj("Kptfile", "k", api="kpt.dev/v1alpha1"))
