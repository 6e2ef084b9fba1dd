"""krmfn.inprocess: porchkit's functions called with a ResourceList dict, as the embedded Porch runs them."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from krmfn import process, read_resource_list, write_resource_list
from krmfn.deltapipe_fn import GENERATED_BY, deltapipe
from krmfn.inprocess import in_process_functions
from krmfn.registry import FUNCTIONS
from krmfn.resourcelist import ResourceList

PATH = "internal.config.kubernetes.io/path"
EXPOSE = {
    "apiVersion": "fn.porchkit.dev/v1alpha1", "kind": "Pipeline", "metadata": {"name": "expose"},
    "sources": [{"kind": "Deployment"}],
    "pipeline": [{"@select": {"@exists": "$.metadata.annotations.expose"}},
                 {"@project": {"metadata": {"name": "$.metadata.name", "namespace": "$.metadata.namespace"},
                               "spec": {"ports": [{"port": {"@int": "$.metadata.annotations.expose"}}]}}}],
    "target": {"apiVersion": "v1", "kind": "Service"},
}


def deployment(name: str, expose: str | None = None) -> dict[str, Any]:
    annotations = {PATH: "deployments.yaml", "config.kubernetes.io/path": "deployments.yaml"}
    if expose:
        annotations["expose"] = expose
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "shop", "annotations": annotations}, "spec": {"replicas": 1}}


def resource_list(items: list[dict[str, Any]], config: dict[str, Any] | None = EXPOSE) -> dict[str, Any]:
    out: dict[str, Any] = {"apiVersion": "config.kubernetes.io/v1", "kind": "ResourceList", "items": items}
    if config is not None:
        out["functionConfig"] = config
    return out


def run_deltapipe(rl: dict[str, Any]) -> dict[str, Any]:
    return in_process_functions()["porchkit fn deltapipe"](rl)


def test_every_registered_function_is_there_under_its_exec_string() -> None:
    functions = in_process_functions()
    assert sorted(functions) == sorted(f"porchkit fn {name}" for name in FUNCTIONS)
    assert functions is not in_process_functions()  # a fresh mapping each time: the caller may keep or change it


def test_deltapipe_adds_its_outputs_and_leaves_the_input_dict_alone() -> None:
    given = resource_list([deployment("web", "8080"), deployment("worker")])
    before = copy.deepcopy(given)
    out = run_deltapipe(given)

    assert given == before
    assert out["kind"] == "ResourceList" and out["results"] == []
    assert [(i["kind"], i["metadata"]["name"]) for i in out["items"]] == [
        ("Deployment", "web"), ("Deployment", "worker"), ("Service", "web")]
    service = out["items"][2]
    assert service["spec"] == {"ports": [{"port": 8080}]}
    assert service["metadata"]["annotations"][GENERATED_BY] == "expose"
    assert service["metadata"]["annotations"]["config.kubernetes.io/path"] == "shop/service_web.yaml"


def test_in_process_output_is_what_the_function_process_writes() -> None:
    items = [deployment("web", "8080"), deployment("api", "9090")]
    text = write_resource_list(ResourceList(copy.deepcopy(items), copy.deepcopy(EXPOSE)))
    outcome = process(deltapipe, text, name="deltapipe")
    assert outcome.exit_code == 0
    assert run_deltapipe(resource_list(items))["items"] == read_resource_list(outcome.output).items


def test_a_bad_function_config_is_an_error_result_with_the_items_unchanged() -> None:
    items = [deployment("web", "8080")]
    out = run_deltapipe(resource_list(items, {"apiVersion": "fn.porchkit.dev/v1alpha1", "kind": "Pipeline",
                                              "metadata": {"name": "empty"}}))
    assert out["items"] == items
    [result] = out["results"]
    assert result["severity"] == "error"
    assert "no pipeline given" in result["message"]


def test_warnings_pass_through_with_the_function_output() -> None:
    patcher = {**EXPOSE, "target": {"apiVersion": "v1", "kind": "Service", "type": "Patcher"}}
    out = run_deltapipe(resource_list([deployment("web", "8080")], patcher))
    assert [r["severity"] for r in out["results"]] == ["warning"]
    assert "a Patcher creates nothing" in out["results"][0]["message"]
    assert [i["kind"] for i in out["items"]] == ["Deployment"]


@pytest.mark.parametrize("failure", ["raise", "exit"])
def test_a_function_that_crashes_or_exits_gives_the_input_back_with_an_error(
        failure: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(rl: ResourceList) -> None:
        rl.items.clear()  # whatever it did to the items is not kept
        if failure == "exit":
            raise SystemExit(4)
        raise ValueError("boom\nsecond line")

    monkeypatch.setitem(FUNCTIONS, "broken", (f"{__name__}:placeholder", "test"))
    monkeypatch.setattr(f"{__name__}.placeholder", broken, raising=False)
    items = [deployment("web")]
    out = in_process_functions()["porchkit fn broken"](resource_list(items, None))

    assert out["items"] == items
    [result] = out["results"]
    assert result["severity"] == "error"
    expected = "the function exited with 4" if failure == "exit" else "internal error: ValueError: boom second line"
    assert result["message"] == expected
