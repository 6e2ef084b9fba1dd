"""Typed functionConfig: ConfigMap data or a custom resource; the placeholder means no config."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from pydantic import BaseModel

from krmfn import ConfigError, ResourceList, config_fields, load_config
from krmfn.config import is_empty

PLACEHOLDER = {"metadata": {"name": "function-input"}, "data": {}, "kind": "ConfigMap", "apiVersion": "v1"}


class SetReplicas(BaseModel):
    replicas: int = 1
    enabled: bool = True
    name: str = "default"


class Required(BaseModel):
    key: str


def test_no_config_and_the_placeholder_both_mean_defaults() -> None:
    assert is_empty(None) and is_empty(PLACEHOLDER) and is_empty({**PLACEHOLDER, "data": None})
    assert load_config(None, SetReplicas) == SetReplicas()
    assert load_config(PLACEHOLDER, SetReplicas) == SetReplicas()


def test_config_map_strings_are_converted_to_the_fields_types() -> None:
    config = {**PLACEHOLDER, "data": {"replicas": "3", "enabled": "false", "name": "yes"}}
    assert not is_empty(config)
    assert load_config(config, SetReplicas) == SetReplicas(replicas=3, enabled=False, name="yes")


def test_a_custom_resource_of_the_functions_kind_gives_its_top_level_fields() -> None:
    config = {"apiVersion": "fn.kpt.dev/v1alpha1", "kind": "SetReplicas", "metadata": {"name": "c"}, "replicas": 4}
    assert load_config(config, SetReplicas) == SetReplicas(replicas=4)
    assert load_config({**config, "kind": "Scale"}, SetReplicas, kind="Scale").replicas == 4


def test_a_missing_required_field_is_a_one_line_config_error() -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(PLACEHOLDER, Required)
    assert str(caught.value) == "functionConfig (none given): key: Field required"


def test_invalid_values_name_the_config_and_the_field() -> None:
    config = {**PLACEHOLDER, "metadata": {"name": "settings"}, "data": {"replicas": "many"}}
    with pytest.raises(ConfigError) as caught:
        load_config(config, SetReplicas)
    message = str(caught.value)
    assert message.startswith("functionConfig ConfigMap/settings: replicas: Input should be a valid integer")
    assert "\n" not in message


def test_other_kinds_are_refused() -> None:
    with pytest.raises(ConfigError, match="kind 'Secret' is not supported: use a ConfigMap or a SetReplicas"):
        load_config({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}, SetReplicas)


def test_an_api_version_can_be_required() -> None:
    config = {"apiVersion": "example.com/v1", "kind": "SetReplicas", "metadata": {"name": "c"}}
    with pytest.raises(ConfigError, match="apiVersion 'example.com/v1' is not supported: use fn.kpt.dev/v1alpha1"):
        load_config(config, SetReplicas, api_version="fn.kpt.dev/v1alpha1")


def test_dataclasses_work_as_models_too() -> None:
    @dataclass
    class Labels:
        team: str

    assert load_config({**PLACEHOLDER, "data": {"team": "blue"}}, Labels) == Labels("blue")


def test_the_resource_list_offers_its_config_typed() -> None:
    rl = ResourceList(function_config={**PLACEHOLDER, "data": {"replicas": "2"}})
    assert rl.config(SetReplicas).replicas == 2


def test_config_fields_without_validation() -> None:
    assert config_fields(None, kind="X") == {}
    assert config_fields({**PLACEHOLDER, "data": {"a": "1"}}, kind="X") == {"a": "1"}
    assert config_fields({"apiVersion": "v", "kind": "X", "metadata": {}, "spec": {"a": 1}}, kind="X") == {
        "spec": {"a": 1}
    }
    with pytest.raises(ConfigError):
        config_fields({"kind": "Y"}, kind="X")
