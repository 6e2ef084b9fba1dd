"""render_package: a package's Kptfile pipeline through real kpt, or in-process without it."""

from __future__ import annotations

import copy
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from krmfn.testing import exec_command, kpt_binary
from porchvariant.embedded.render.renderer import RenderResult, installed_programs, render_package

FN = Path(__file__).resolve().parents[3] / "testdata" / "porchvariant" / "render" / "annotate_fn.py"
NO_KPT = "/nonexistent/kpt"  # a kpt that cannot start: any attempt to run it shows up as an error

CONFIGMAP = """\
# the app's settings
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings # keep me
data:
  mode: fast
"""
SECOND = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: extra
data:
  flag: "yes"
"""
README = "# a package\n\nNot YAML: kpt and render leave it alone.\n"


def kptfile(*mutators: dict[str, Any], validators: tuple[dict[str, Any], ...] = ()) -> str:
    data: dict[str, Any] = {"apiVersion": "kpt.dev/v1", "kind": "Kptfile", "metadata": {"name": "pkg"}}
    pipeline = {k: list(v) for k, v in (("mutators", mutators), ("validators", validators)) if v}
    if pipeline:
        data["pipeline"] = pipeline
    return yaml.safe_dump(data, sort_keys=False)


def package(*mutators: dict[str, Any], validators: tuple[dict[str, Any], ...] = ()) -> dict[str, str]:
    return {"Kptfile": kptfile(*mutators, validators=validators), "cm.yaml": CONFIGMAP,
            "extra.yaml": SECOND, "README.md": README}


def annotate(*args: str) -> dict[str, Any]:
    return {"exec": exec_command(FN, *args)}


def objects(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d is not None]


def assert_unchanged(result: RenderResult, files: dict[str, str]) -> None:
    assert result.files == files
    assert all(result.files[path] is files[path] for path in files)  # the very same strings


# --- with kpt ----------------------------------------------------------------------------------------------


@pytest.mark.kpt
def test_exec_function_renders_through_kpt_and_lists_its_results() -> None:
    files = package(annotate("porchkit.dev/rendered=yes"))
    result = render_package(files, allow_exec=True, kpt=kpt_binary())

    assert result.status["error"] == ""
    settings = objects(result.files["cm.yaml"])[0]
    assert settings["metadata"]["annotations"] == {"porchkit.dev/rendered": "yes"}
    assert "# keep me" in result.files["cm.yaml"]  # kpt restores the comments the function dropped
    assert objects(result.files["Kptfile"])[0]["metadata"]["annotations"] == {"porchkit.dev/rendered": "yes"}
    assert result.files["README.md"] is files["README.md"]
    results = result.status["result"]
    assert (results["kind"], results["exitCode"]) == ("FunctionResultList", 0)
    [item] = results["items"]
    assert item["exec"] == annotate("porchkit.dev/rendered=yes")["exec"]
    assert item["results"] == [{"message": "annotated 3 item(s)", "severity": "info"}]


@pytest.mark.kpt
def test_files_the_pipeline_adds_and_deletes_come_back_added_and_deleted() -> None:
    files = package(annotate("--add", "made", "--drop", "extra"))
    result = render_package(files, allow_exec=True, kpt=kpt_binary())

    assert result.status["error"] == ""
    assert "extra.yaml" not in result.files
    assert objects(result.files["configmap_made.yaml"]) == [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "made"}}
    ]
    assert set(result.files) == {"Kptfile", "cm.yaml", "README.md", "configmap_made.yaml"}


@pytest.mark.kpt
def test_failing_exec_function_leaves_files_unchanged_and_says_which_function_failed() -> None:
    files = package(annotate("a=b"), annotate("--fail"))
    result = render_package(files, allow_exec=True, kpt=kpt_binary())

    assert_unchanged(result, files)
    error = result.status["error"]
    assert "\n" not in error
    assert "annotate_fn.py --fail" in error
    assert "exit code 3" in error
    assert "annotate_fn: refusing on purpose" in error
    results = result.status["result"]
    assert results["exitCode"] == 1
    assert [item["exitCode"] for item in results["items"]] == [0, 3]


def test_exec_function_is_refused_without_allow_exec_and_kpt_is_not_run() -> None:
    files = package(annotate("a=b"))
    result = render_package(files, kpt=NO_KPT)

    assert_unchanged(result, files)
    assert "exec functions are not allowed by the Repository" in result.status["error"]
    assert "annotate_fn.py a=b" in result.status["error"]
    assert result.status["result"]["items"] == []


def test_in_process_exec_function_is_refused_without_allow_exec_too(monkeypatch: pytest.MonkeyPatch,
                                                                    tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    files = package({"exec": "porchkit fn label"})
    result = render_package(files, in_process={"porchkit fn label": set_label("x", "y")})

    assert_unchanged(result, files)
    assert "not allowed by the Repository" in result.status["error"]


@pytest.mark.kpt
def test_image_function_that_cannot_run_is_a_render_error_not_an_exception() -> None:
    # No registry access and possibly no docker daemon: either way kpt fails, and so must the status.
    image = "gcr.io/kpt-fn/set-labels:v0.2.0"
    files = package({"image": image, "configMap": {"tier": "web"}})
    result = render_package(files, kpt=kpt_binary(), timeout=90)

    assert_unchanged(result, files)
    assert image in result.status["error"]
    assert "\n" not in result.status["error"]
    assert result.status["result"]["exitCode"] == 1


@pytest.mark.kpt
def test_a_render_that_runs_too_long_is_stopped_and_reported() -> None:
    files = package(annotate("--sleep", "30"))
    result = render_package(files, allow_exec=True, kpt=kpt_binary(), timeout=1)

    assert_unchanged(result, files)
    assert result.status["error"] == "cannot render: kpt fn render timed out after 1s"


@pytest.mark.kpt
def test_kpt_finds_the_programs_given_though_path_does_not_hold_them(monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    kpt = kpt_binary()
    program = tmp_path / "elsewhere" / "annotate"
    program.parent.mkdir()
    program.write_text(f"#!/bin/sh\nexec {shlex.join([sys.executable, str(FN)])} \"$@\"\n")
    program.chmod(0o755)
    (tmp_path / "git").symlink_to(shutil.which("git") or "git")  # kpt insists on git
    monkeypatch.setenv("PATH", str(tmp_path))  # git only: not the program
    files = package({"exec": "annotate porchkit.dev/rendered=yes"})

    found = render_package(files, allow_exec=True, kpt=kpt, programs={"annotate": str(program)})
    assert found.status["error"] == ""
    assert objects(found.files["cm.yaml"])[0]["metadata"]["annotations"] == {"porchkit.dev/rendered": "yes"}
    missing = render_package(files, allow_exec=True, kpt=kpt, programs={})
    assert_unchanged(missing, files)
    assert '"annotate": executable file not found' in missing.status["error"]


def test_the_installed_porchkit_program_is_found_and_is_this_porchkit() -> None:
    [(name, program)] = installed_programs().items()
    assert name == "porchkit"
    version = subprocess.run([program, "--version"], capture_output=True, text=True, env={"PATH": "/nonexistent"})
    assert version.stdout == subprocess.run([sys.executable, "-m", "porchkit", "--version"], capture_output=True,
                                            text=True).stdout


@pytest.mark.parametrize("pipeline", [None, {}, {"mutators": [], "validators": []}])
def test_package_without_pipeline_comes_back_unchanged_without_running_kpt(pipeline: Any) -> None:
    files = package()
    if pipeline is not None:
        data = objects(files["Kptfile"])[0]
        data["pipeline"] = pipeline
        files["Kptfile"] = yaml.safe_dump(data)
    result = render_package(files, allow_exec=True, kpt=NO_KPT)

    assert_unchanged(result, files)
    assert result.status["error"] == ""
    assert result.status["result"]["items"] == []


def test_invalid_kptfile_is_an_error_not_an_exception() -> None:
    files = {"Kptfile": "apiVersion: kpt.dev/v1\npipeline: [unclosed\n", "cm.yaml": CONFIGMAP}
    result = render_package(files, kpt=NO_KPT)

    assert_unchanged(result, files)
    assert result.status["error"].startswith("cannot render: Kptfile: ")


# --- without kpt -------------------------------------------------------------------------------------------


@pytest.fixture
def no_kpt_on_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))


def set_label(key: str, value: str) -> Any:
    def fn(resource_list: dict[str, Any]) -> dict[str, Any]:
        for item in resource_list["items"]:
            if item["kind"] == "ConfigMap":
                item["metadata"].setdefault("labels", {})[key] = value
        return resource_list
    return fn


def copy_label_to_data(resource_list: dict[str, Any]) -> dict[str, Any]:
    """Sees the first function's label only if the functions run in pipeline order."""
    data = resource_list["functionConfig"]["data"]
    for item in resource_list["items"]:
        if item["metadata"]["name"] == data["name"]:
            item.setdefault("data", {})["copied"] = item["metadata"].get("labels", {}).get("tier", "missing")
    resource_list["results"] = [{"message": "copied", "severity": "info"}]
    return resource_list


@pytest.mark.usefixtures("no_kpt_on_path")
def test_in_process_functions_run_in_pipeline_order_and_rewrite_only_changed_files() -> None:
    seen: list[dict[str, Any]] = []

    def label(resource_list: dict[str, Any]) -> dict[str, Any]:
        seen.append(copy.deepcopy(resource_list))
        for item in resource_list["items"]:
            if item["metadata"]["name"] == "settings":
                item["metadata"]["labels"] = {"tier": "web"}
        return resource_list

    files = package({"exec": "porchkit fn label"},
                    {"exec": "porchkit fn copy", "configMap": {"name": "settings"}})
    result = render_package(files, allow_exec=True, kpt=None,
                            in_process={"porchkit fn label": label, "porchkit fn copy": copy_label_to_data})

    assert result.status["error"] == ""
    assert result.files["cm.yaml"] == """\
# the app's settings
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings # keep me
  labels:
    tier: web
data:
  mode: fast
  copied: web
"""
    for path in ("Kptfile", "extra.yaml", "README.md"):
        assert result.files[path] is files[path]
    # the ResourceList is kpt's: every KRM object, with reader annotations, and no config when none is given
    [first] = seen
    assert "functionConfig" not in first
    assert [(i["kind"], i["metadata"]["annotations"]["internal.config.kubernetes.io/path"],
             i["metadata"]["annotations"]["config.kubernetes.io/index"]) for i in first["items"]] == [
        ("Kptfile", "Kptfile", "0"), ("ConfigMap", "cm.yaml", "0"), ("ConfigMap", "extra.yaml", "0")]
    assert [item["exec"] for item in result.status["result"]["items"]] == ["porchkit fn label", "porchkit fn copy"]
    assert result.status["result"]["items"][1]["results"] == [{"message": "copied", "severity": "info"}]


@pytest.mark.usefixtures("no_kpt_on_path")
def test_in_process_function_config_comes_from_config_path() -> None:
    files = package({"exec": "porchkit fn copy", "configPath": "fn-config.yaml"})
    files["fn-config.yaml"] = ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\n"
                               "  annotations:\n    config.kubernetes.io/local-config: 'true'\ndata:\n  name: extra\n")
    result = render_package(files, allow_exec=True, in_process={"porchkit fn copy": copy_label_to_data})

    assert result.status["error"] == ""
    assert objects(result.files["extra.yaml"])[0]["data"] == {"flag": "yes", "copied": "missing"}
    assert 'flag: "yes"' in result.files["extra.yaml"]  # YAML 1.2 strings keep their quotes


@pytest.mark.usefixtures("no_kpt_on_path")
def test_in_process_function_can_add_and_remove_resources() -> None:
    def add_and_drop(resource_list: dict[str, Any]) -> dict[str, Any]:
        items = [i for i in resource_list["items"] if i["metadata"]["name"] != "extra"]
        items.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "made", "namespace": "ns"}})
        return {**resource_list, "items": items}

    files = package({"exec": "porchkit fn gen"})
    result = render_package(files, allow_exec=True, in_process={"porchkit fn gen": add_and_drop})

    assert result.status["error"] == ""
    assert set(result.files) == {"Kptfile", "cm.yaml", "README.md", "ns/configmap_made.yaml"}
    assert objects(result.files["ns/configmap_made.yaml"]) == [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "made", "namespace": "ns"}}]


@pytest.mark.usefixtures("no_kpt_on_path")
def test_in_process_validators_cannot_change_files() -> None:
    files = package(validators=({"exec": "porchkit fn label"},))
    result = render_package(files, allow_exec=True, in_process={"porchkit fn label": set_label("x", "y")})

    assert result.status["error"] == ""
    assert_unchanged(result, files)
    assert [item["exec"] for item in result.status["result"]["items"]] == ["porchkit fn label"]


@pytest.mark.usefixtures("no_kpt_on_path")
def test_missing_function_without_kpt_is_a_clear_error() -> None:
    image = "gcr.io/kpt-fn/set-labels:v0.2.0"
    files = package({"exec": "porchkit fn label"}, {"image": image}, {"exec": "not-porchkit"})
    result = render_package(files, allow_exec=True, in_process={"porchkit fn label": set_label("x", "y")})

    assert_unchanged(result, files)
    assert result.status["error"] == (
        "cannot render: kpt is not installed, and the pipeline has functions porchkit cannot run itself: "
        f"{image}, not-porchkit")


@pytest.mark.usefixtures("no_kpt_on_path")
@pytest.mark.parametrize("outcome", ["raises", "error result", "no items"])
def test_failing_in_process_function_leaves_files_unchanged(outcome: str) -> None:
    def bad(resource_list: dict[str, Any]) -> dict[str, Any]:
        if outcome == "raises":
            raise ValueError("bad config")
        if outcome == "no items":
            return {"kind": "ResourceList"}
        return {**resource_list, "results": [{"message": "bad config", "severity": "error"}]}

    files = package({"exec": "porchkit fn label"}, {"exec": "porchkit fn bad"})
    result = render_package(files, allow_exec=True,
                            in_process={"porchkit fn label": set_label("x", "y"), "porchkit fn bad": bad})

    assert_unchanged(result, files)
    assert result.status["error"].startswith('function "porchkit fn bad" failed: ')
    assert ("bad config" in result.status["error"]) == (outcome != "no items")
    assert [item["exitCode"] for item in result.status["result"]["items"]] == [0, 1]
    assert result.status["result"]["exitCode"] == 1


@pytest.mark.usefixtures("no_kpt_on_path")
def test_non_krm_document_without_kpt_is_an_error_as_kpt_words_it() -> None:
    files = package({"exec": "porchkit fn label"})
    files["values.yaml"] = "replicas: 3\n"
    result = render_package(files, allow_exec=True, in_process={"porchkit fn label": set_label("x", "y")})

    assert_unchanged(result, files)
    assert result.status["error"] == ("cannot render: input resource list must contain only KRM resources: "
                                      "values.yaml: resource must have `apiVersion`")
