"""`porchkit fn deltapipe`: the Δ pipeline as a kpt function, in-process and under the real kpt."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from krmfn import process, read_resource_list, testing, yamlio
from krmfn.deltapipe_fn import GENERATED_BY, deltapipe

EXAMPLES = Path(__file__).resolve().parents[2] / "testdata" / "krmfn" / "deltapipe"
EXEC = f"{sys.executable} -m porchkit fn deltapipe"

EXPOSE_CONFIG = """\
apiVersion: fn.porchkit.dev/v1alpha1
kind: Pipeline
metadata: {name: expose}
sources: [{kind: Deployment}]
pipeline:
  - "@select": {"@exists": "$.metadata.annotations.expose"}
  - "@project":
      metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}
      spec: {ports: [{port: {"@int": "$.metadata.annotations.expose"}}]}
target: {apiVersion: v1, kind: Service}
"""


def deployment(name: str, expose: str | None = None, namespace: str = "shop") -> str:
    annotations = f"\n  annotations: {{expose: '{expose}'}}" if expose else ""
    return f"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  namespace: {namespace}{annotations}\n"


def run(resources: list[str], config: str = EXPOSE_CONFIG) -> tuple[int, list[dict], list[dict], str]:
    """(exit code, items, results, stderr) of one in-process run."""
    outcome = process(deltapipe, testing.resource_list_text("---\n".join(resources), config), name="deltapipe")
    rl = read_resource_list(outcome.output) if outcome.output else None
    items = rl.items if rl else []
    found = [r.to_dict() for r in rl.results] if rl else []
    return outcome.exit_code, items, found, "\n".join(outcome.messages)


def names(items: list[dict], kind: str) -> list[str]:
    return sorted(i["metadata"]["name"] for i in items if i["kind"] == kind)


# --- in-process ------------------------------------------------------------------------------

def test_outputs_are_added_marked_and_placed_by_kind_name_and_namespace() -> None:
    code, items, _, _ = run([deployment("web", "8080"), deployment("worker")])
    assert code == 0
    (service,) = [i for i in items if i["kind"] == "Service"]
    assert service["metadata"]["annotations"][GENERATED_BY] == "expose"
    assert service["metadata"]["annotations"]["config.kubernetes.io/path"] == "shop/service_web.yaml"
    assert service["spec"] == {"ports": [{"port": 8080}]}


def test_a_second_run_over_its_own_output_changes_nothing() -> None:
    first = process(deltapipe, testing.resource_list_text(deployment("web", "8080"), EXPOSE_CONFIG))
    second = process(deltapipe, first.output)
    assert second.exit_code == 0
    assert second.output == first.output


def test_outputs_the_pipeline_no_longer_produces_are_removed() -> None:
    first = process(deltapipe, testing.resource_list_text("---\n".join([deployment("web", "8080"),
                                                                        deployment("api", "9090")]), EXPOSE_CONFIG))
    rl = read_resource_list(first.output)
    for item in rl.items:
        if item["kind"] == "Deployment" and item["metadata"]["name"] == "api":
            del item["metadata"]["annotations"]
    from krmfn import write_resource_list
    second = process(deltapipe, write_resource_list(rl))
    items = read_resource_list(second.output).items
    assert names(items, "Service") == ["web"] and names(items, "Deployment") == ["api", "web"]


def test_an_existing_generated_resource_is_updated_in_place() -> None:
    first = process(deltapipe, testing.resource_list_text(deployment("web", "8080"), EXPOSE_CONFIG))
    text = first.output.decode().replace("expose: '8080'", "expose: '9000'")
    items = read_resource_list(process(deltapipe, text).output).items
    (service,) = [i for i in items if i["kind"] == "Service"]
    assert service["spec"]["ports"] == [{"port": 9000}]
    assert [i["kind"] for i in items] == ["Deployment", "Service"]


def test_a_hand_written_resource_with_the_same_identity_is_updated_but_never_claimed() -> None:
    own = "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: shop\n  labels: {mine: 'yes'}\n"
    code, items, _, _ = run([deployment("web", "8080"), own])
    (service,) = [i for i in items if i["kind"] == "Service"]
    assert code == 0 and GENERATED_BY not in service["metadata"].get("annotations", {})
    assert service["metadata"]["labels"] == {"mine": "yes"} and service["spec"] == {"ports": [{"port": 8080}]}
    # without the mark, it is never removed
    code, items, _, _ = run([deployment("web"), own])
    assert names(items, "Service") == ["web"]


def test_the_configmap_form_takes_the_stages_as_yaml_text() -> None:
    config = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: function-input}
data:
  pipeline: |
    - "@project": {metadata: {name: "$.metadata.name"}, data: {from: "$.kind"}}
  target: "{apiVersion: v1, kind: ConfigMap}"
"""
    code, items, _, _ = run([deployment("web")], config)
    assert code == 0
    (cm,) = [i for i in items if i["kind"] == "ConfigMap"]
    assert cm["data"] == {"from": "Deployment"} and cm["metadata"]["annotations"][GENERATED_BY] == "deltapipe"


def test_the_configmap_form_accepts_a_whole_spec_in_data_pipeline() -> None:
    spec = yamlio.load(EXPOSE_CONFIG)
    body = "\n".join("    " + line for line in yamlio.dump({k: spec[k] for k in ("sources", "pipeline", "target")})
                     .splitlines())
    config = f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cfg}}\ndata:\n  pipeline: |\n{body}\n"
    code, items, _, stderr = run([deployment("web", "80")], config)
    assert code == 0, stderr
    (service,) = [i for i in items if i["kind"] == "Service"]
    assert service["metadata"]["annotations"][GENERATED_BY] == "cfg"


def test_meta_resources_are_not_inputs_unless_a_source_names_them() -> None:
    config = ('apiVersion: fn.porchkit.dev/v1alpha1\nkind: Pipeline\nmetadata: {name: all}\n'
              'pipeline: {"@project": {metadata: {name: {"@concat": ["copy-", "$.metadata.name"]}}}}\n'
              'target: {apiVersion: v1, kind: ConfigMap}\n')
    local = ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  annotations:\n"
             "    config.kubernetes.io/local-config: 'true'\n")
    kptfile = "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: pkg\n"
    code, items, _, _ = run([kptfile, local, deployment("web")], config)
    assert code == 0 and names(items, "ConfigMap") == ["copy-web", "settings"]


def test_a_patcher_merges_into_existing_resources_and_warns_about_missing_ones() -> None:
    config = """\
apiVersion: fn.porchkit.dev/v1alpha1
kind: Pipeline
metadata: {name: owner}
pipeline:
  - "@project": {metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace", labels: {owner: me}}}
  - "@project": [{"$.": "$."}, {metadata: {name: {"@concat": ["$.metadata.name", ""]}}}]
target: {apiVersion: apps/v1, kind: Deployment, type: Patcher}
"""
    code, items, found, _ = run([deployment("web")], config)
    assert code == 0
    (web,) = items
    assert web["metadata"]["labels"] == {"owner": "me"} and GENERATED_BY not in web["metadata"].get("annotations", {})
    assert found == []


def test_a_patcher_creates_nothing() -> None:
    config = """\
apiVersion: fn.porchkit.dev/v1alpha1
kind: Pipeline
metadata: {name: ghost}
pipeline: {"@project": {metadata: {name: ghost}, spec: {replicas: 1}}}
target: {apiVersion: apps/v1, kind: Deployment, type: Patcher}
"""
    code, items, found, _ = run([deployment("web")], config)
    assert code == 0 and names(items, "Deployment") == ["web"]
    assert [(r["severity"], r["message"]) for r in found] == [
        ("warning", "pipeline ghost: no Deployment ghost to patch; a Patcher creates nothing")]


@pytest.mark.parametrize(("config", "message"), [
    (EXPOSE_CONFIG.replace('"@select"', '"@selekt"'), "stage 1: unknown pipeline operation '@selekt'"),
    (EXPOSE_CONFIG.replace("@exists", "@exist"), "stage 1 (@select): unknown operator @exist"),
    (EXPOSE_CONFIG.replace("@exists", "@not"), "stage 1 (@select) on Deployment shop/web: @not: expected a bool"),
    (EXPOSE_CONFIG.replace("kind: Service", "kind: ''"), "target.kind: expected a kind name"),
    (EXPOSE_CONFIG.replace("fn.porchkit.dev/v1alpha1", "fn.porchkit.dev/v9"), "apiVersion 'fn.porchkit.dev/v9'"),
    ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: function-input}\n", "no pipeline given"),
    ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {pipeline: '[', }\n", "data.pipeline"),
    ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {stages: '[]'}\n", "unknown key 'stages'"),
])
def test_bad_pipelines_fail_with_one_line_and_leave_the_package_unchanged(config: str, message: str) -> None:
    resources = [deployment("web", "8080")]
    code, items, found, stderr = run(resources, config)
    assert code == 1
    assert len(stderr.splitlines()) == 1 and message in stderr and "Traceback" not in stderr
    assert [r["severity"] for r in found] == ["error"] and message in found[0]["message"]
    assert [i["kind"] for i in items] == ["Deployment"]


# --- the real kpt ----------------------------------------------------------------------------

@pytest.fixture
def examples(tmp_path: Path) -> Path:
    shutil.copytree(EXAMPLES, tmp_path / "examples")
    return tmp_path / "examples"


def test_render_runs_the_kptfile_pipeline_and_keeps_comments(kpt: str, examples: Path) -> None:
    package = examples / "expose"
    testing.kpt_fn_render(package, kpt=kpt).check()
    files = testing.package_files(package)
    assert sorted(files) == ["Kptfile", "defaults.yaml", "deployments.yaml", "expose-pipeline.yaml",
                             "shop/service_api.yaml", "shop/service_web.yaml"]
    service = yamlio.load(files["shop/service_web.yaml"])
    assert service["spec"] == {"type": "ClusterIP", "selector": {"app": "web"},
                               "ports": [{"name": "http", "port": 8080, "targetPort": 8080}]}
    assert service["metadata"]["annotations"] == {GENERATED_BY: "expose"}
    assert "# kept: comments survive the function" in files["deployments.yaml"]
    assert 'value: "on"' in files["deployments.yaml"]
    before = testing.package_files(package)
    testing.kpt_fn_render(package, kpt=kpt).check()
    assert testing.package_files(package) == before


def test_eval_generates_a_summary_per_namespace(kpt: str, examples: Path) -> None:
    package = examples / "summary"
    testing.kpt_fn_eval(package, EXEC, fn_config=package / "summary-pipeline.yaml", kpt=kpt).check()
    shop = yamlio.load((package / "shop" / "configmap_shop-summary.yaml").read_text())
    monitoring = yamlio.load((package / "monitoring" / "configmap_monitoring-summary.yaml").read_text())
    assert shop["data"] == {"deployments": "api\nweb\n", "count": "2", "replicas": "5"}
    assert monitoring["data"] == {"deployments": "grafana\n", "count": "1", "replicas": "1"}
    (package / "apps.yaml").write_text((package / "apps.yaml").read_text().replace("namespace: monitoring",
                                                                                   "namespace: shop"))
    testing.kpt_fn_eval(package, EXEC, fn_config=package / "summary-pipeline.yaml", kpt=kpt).check()
    assert not (package / "monitoring" / "configmap_monitoring-summary.yaml").exists()
    shop = yamlio.load((package / "shop" / "configmap_shop-summary.yaml").read_text())
    assert shop["data"] == {"deployments": "api\ngrafana\nweb\n", "count": "3", "replicas": "6"}


def test_eval_patches_labels_into_deployments(kpt: str, examples: Path) -> None:
    package = examples / "team-labels"
    before = testing.package_files(package)
    testing.kpt_fn_eval(package, EXEC, fn_config=package / "labels-pipeline.yaml", kpt=kpt).check()
    after = testing.package_files(package)
    assert sorted(after) == sorted(before)
    app = yamlio.load(after["app.yaml"])
    wanted = {"app": "checkout", "team": "payments", "cost-center": "0042"}
    assert app["metadata"]["labels"] == wanted and app["spec"]["template"]["metadata"]["labels"] == wanted
    assert app["spec"]["template"]["spec"]["containers"][0]["image"] == "pay/checkout:3.1"
    assert after["team.yaml"] == before["team.yaml"]


def test_a_failing_pipeline_fails_kpt_and_writes_nothing(kpt: str, examples: Path, tmp_path: Path) -> None:
    package = examples / "expose"
    broken = tmp_path / "broken.yaml"
    broken.write_text((package / "expose-pipeline.yaml").read_text().replace('"@int"', '"@bool"'))
    before = testing.package_files(package)
    run = testing.kpt_fn_eval(package, EXEC, fn_config=broken, results_dir=tmp_path / "results", kpt=kpt)
    assert run.returncode == 1
    assert testing.package_files(package) == before
    (result,) = run.results["items"][0]["results"]
    assert result["severity"] == "error"
    assert result["message"] == ('pipeline expose: stage 2 (@project) on Deployment shop/web + ConfigMap '
                                 'service-defaults: @bool: expected a bool, got string "8080"')
    assert result["message"] in run.stdout + run.stderr


@pytest.mark.parametrize(("example", "path"), [
    ("expose-pipeline", "expose/expose-pipeline.yaml"),
    ("summary-pipeline", "summary/summary-pipeline.yaml"),
    ("labels-pipeline", "team-labels/labels-pipeline.yaml"),
])
def test_the_documented_pipelines_are_the_tested_ones(example: str, path: str) -> None:
    import re

    doc = (EXAMPLES.parents[2] / "docs" / "krmfn.md").read_text(encoding="utf-8")
    match = re.search(rf"<!-- example: {example} -->\n```yaml\n(.*?)```", doc, re.S)
    assert match, f"no {example} example in docs/krmfn.md"
    assert match.group(1) == (EXAMPLES / path).read_text(encoding="utf-8")


NAMED_CONFIG = """\
apiVersion: fn.porchkit.dev/v1alpha1
kind: Pipeline
metadata: {name: named}
sources: [{kind: Deployment}]
pipeline:
  - "@project":
      metadata:
        name: "$.metadata.annotations.out"
        namespace: "$.metadata.annotations.ns"
        annotations: {"config.kubernetes.io/path": "$.metadata.annotations.path"}
target: {apiVersion: v1, kind: ConfigMap}
"""


def annotated(**annotations: str) -> str:
    lines = "".join(f"\n    {key}: '{value}'" for key, value in annotations.items())
    return f"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  annotations:{lines}\n"


@pytest.mark.parametrize(("annotations", "words"), [
    ({"out": "../../../evil", "ns": "shop", "path": "shop/x.yaml"}, "metadata.name '../../../evil' is not a valid"),
    ({"out": "..", "ns": "shop", "path": "shop/x.yaml"}, "metadata.name '..' is not a valid object name"),
    ({"out": "a%2f..", "ns": "shop", "path": "shop/x.yaml"}, "is not a valid object name"),
    ({"out": "ok", "ns": "../etc", "path": "shop/x.yaml"}, "metadata.namespace '../etc' is not a valid namespace"),
    ({"out": "ok", "ns": "shop", "path": "../../outside.yaml"}, "its path '../../outside.yaml' must be a relative"),
    ({"out": "ok", "ns": "shop", "path": "/etc/passwd"}, "its path '/etc/passwd' must be a relative path"),
    ({"out": "ok", "ns": "shop", "path": "shop/./x.yaml"}, "must be a relative path inside the package"),
])
def test_an_output_whose_name_or_path_would_leave_the_package_fails_the_run(annotations: dict[str, str],
                                                                          words: str) -> None:
    code, items, found, _ = run([annotated(**annotations)], NAMED_CONFIG)
    assert code == 1
    assert [r["severity"] for r in found] == ["error"] and words in found[0]["message"]
    assert "pipeline named" in found[0]["message"]
    assert not [i for i in items if i["kind"] == "ConfigMap"]


def test_an_output_with_a_valid_name_and_its_own_path_is_placed_there() -> None:
    code, items, _, _ = run([annotated(out="settings", ns="shop", path="shop/sub/settings.yaml")], NAMED_CONFIG)
    assert code == 0
    (made,) = [i for i in items if i["kind"] == "ConfigMap"]
    assert made["metadata"]["annotations"]["config.kubernetes.io/path"] == "shop/sub/settings.yaml"
