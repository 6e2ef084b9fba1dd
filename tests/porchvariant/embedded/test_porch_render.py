"""The embedded Porch renders a revision's Kptfile pipeline on create and on every resources update.

The package is testdata/krmfn/deltapipe/expose: a pipeline `exec: porchkit fn deltapipe` that
writes a Service for every Deployment annotated `porchkit.dev/expose`. It is published in the
catalog and cloned into `deploy`, whose Repository allows exec functions only when annotated
ALLOW_EXEC_ANNOTATION: "true".
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from krmfn.inprocess import in_process_functions
from krmfn.testing import kpt_binary
from krmyaml import textedit
from porchvariant.embedded.git.repository import GitPackageRepository
from porchvariant.embedded.porch import ALLOW_EXEC_ANNOTATION, PUSH_ON_RENDER_FAILURE, RenderContext
from porchvariant.embedded.render.renderer import PipelineRenderer
from porchvariant.porch_client import REPOSITORY, clone_task
from reconcile import ObjectKey
from reconcile.errors import Invalid
from tests.porchvariant.embedded.porch_env import NS, Env

EXPOSE = Path(__file__).resolve().parents[3] / "testdata" / "krmfn" / "deltapipe" / "expose"
EXEC = "porchkit fn deltapipe"
NO_EXEC_MESSAGE = f"cannot render: exec functions are not allowed by the Repository: {EXEC}"


def publish(env: Env, package: str, files: Mapping[str, str]) -> str:
    """Publish `files` as revision 1 of `package` in the catalog; its PackageRevision name."""
    with GitPackageRepository(env.catalog) as repo:
        repo.approve(repo.create_draft(package, "v1", files))
    return f"catalog.{package}.v1"


def expose_package() -> dict[str, str]:
    return {path.name: path.read_text() for path in EXPOSE.iterdir()}


def allow_exec(env: Env, allowed: bool) -> None:
    deploy = env.cluster.get(REPOSITORY, ObjectKey(NS, "deploy"))
    assert deploy is not None
    annotations = dict(deploy["metadata"].get("annotations") or {})
    if allowed:
        annotations[ALLOW_EXEC_ANNOTATION] = "true"
    else:
        annotations.pop(ALLOW_EXEC_ANNOTATION, None)
    env.cluster.update({**deploy, "metadata": {**deploy["metadata"], "annotations": annotations}})


def clone(env: Env, upstream: str, workspace: str = "prod", **kw: Any) -> dict[str, Any]:
    return env.client.create_revision(NS, repository="deploy", package="shop", workspace=workspace,
                                      task=clone_task(upstream), **kw)


def services(files: Mapping[str, str]) -> dict[str, Any]:
    """The Services in the package by file path, as data."""
    found = {}
    for path, text in files.items():
        if path.endswith(".yaml"):
            for _, obj in textedit.load_objects(text):
                if obj.get("kind") == "Service":
                    found[path] = obj
    return found


def unexpose_api(files: dict[str, str]) -> None:
    files["deployments.yaml"] = files["deployments.yaml"].replace('porchkit.dev/expose: "9090"', "team: api")


def assert_rendered_on_create_and_update(env: Env) -> None:
    allow_exec(env, True)
    draft = clone(env, publish(env, "expose", expose_package()))

    created = services(env.files(draft))
    assert sorted(created) == ["shop/service_api.yaml", "shop/service_web.yaml"]
    web = created["shop/service_web.yaml"]
    assert web["spec"]["type"] == "ClusterIP"
    assert web["spec"]["ports"] == [{"name": "http", "port": 8080, "targetPort": 8080}]
    assert web["metadata"]["annotations"]["fn.porchkit.dev/generated-by"] == "expose"

    status = env.write(draft, unexpose_api)
    assert status["error"] == ""
    assert [(item["exec"], item["exitCode"]) for item in status["result"]["items"]] == [(EXEC, 0)]
    assert sorted(services(env.files(draft))) == ["shop/service_web.yaml"]  # api's Service went with its annotation
    assert "# kept: comments survive the function" in env.files(draft)["deployments.yaml"]


def test_exec_pipeline_renders_in_process_without_kpt_when_the_repository_allows_exec(env: Env) -> None:
    env.restart(PipelineRenderer(kpt="", in_process=in_process_functions()))
    assert_rendered_on_create_and_update(env)


@pytest.mark.kpt
def test_exec_pipeline_renders_through_kpt_when_the_repository_allows_exec(
        env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    # kpt runs `porchkit fn deltapipe` from PATH: the porchkit of this interpreter.
    monkeypatch.setenv("PATH", os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    renderer = PipelineRenderer(kpt=kpt_binary())
    assert renderer.kpt == kpt_binary()
    env.restart(renderer)
    assert_rendered_on_create_and_update(env)


@pytest.mark.parametrize("kpt", ["", "/nonexistent/kpt"], ids=["in-process", "kpt"])
def test_exec_pipeline_without_the_annotation_fails_to_render_and_the_write_is_refused(env: Env, kpt: str) -> None:
    # "/nonexistent/kpt" cannot start: the refusal comes before any engine runs.
    env.restart(PipelineRenderer(kpt=kpt, in_process=in_process_functions()))
    upstream = publish(env, "expose", expose_package())
    with pytest.raises(Invalid) as refused:
        clone(env, upstream)
    assert str(refused.value) == f"error rendering package deploy.shop.prod: {NO_EXEC_MESSAGE}"
    assert env.client.revision(NS, "deploy.shop.prod") is None

    pushed = clone(env, upstream, "pushed", annotations={PUSH_ON_RENDER_FAILURE: "true"})
    assert services(env.files(pushed)) == {}  # stored as cloned, unrendered
    status = env.write(pushed, unexpose_api)
    assert status["error"] == NO_EXEC_MESSAGE
    assert status["result"]["exitCode"] == 1
    assert "team: api" in env.files(pushed)["deployments.yaml"]  # pushed anyway, unrendered


def test_an_image_function_that_cannot_run_is_a_render_error_not_a_crash(env: Env) -> None:
    env.restart(PipelineRenderer(kpt="", in_process=in_process_functions()))
    image = "gcr.io/kpt-fn/set-labels:v0.2.0"
    files = expose_package()
    files["Kptfile"] = files["Kptfile"].replace("- exec: porchkit fn deltapipe\n      configPath: expose-pipeline.yaml",
                                                f"- image: {image}\n      configMap: {{tier: web}}")
    assert image in files["Kptfile"]
    upstream = publish(env, "labels", files)
    with pytest.raises(Invalid, match=f"porchkit cannot run itself: {image}$"):
        clone(env, upstream)
    pushed = clone(env, upstream, "pushed", annotations={PUSH_ON_RENDER_FAILURE: "true"})
    status = env.write(pushed, lambda f: f.update({"extra.txt": "x\n"}))
    assert status["error"] == ("cannot render: kpt is not installed, and the pipeline has functions porchkit "
                               f"cannot run itself: {image}")
    assert "extra.txt" in env.files(pushed)


def test_the_renderer_is_told_whether_the_repository_allows_exec(env: Env) -> None:
    seen: list[RenderContext] = []

    def renderer(files: Mapping[str, str], context: RenderContext) -> tuple[dict[str, str], dict[str, Any]]:
        seen.append(context)
        return dict(files), {}

    env.restart(renderer)
    draft = env.clone()
    allow_exec(env, True)
    env.write(draft, lambda f: f.update({"a.txt": "a\n"}))
    allow_exec(env, False)
    env.write(draft, lambda f: f.update({"b.txt": "b\n"}))
    assert [c.allow_exec for c in seen] == [False, True, False]
    assert seen[1] == RenderContext(NS, "deploy.web.prod", "deploy", "web", "prod", True)


def test_kpt_is_looked_up_once_when_the_renderer_is_made(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = tmp_path / "kpt"
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    renderer = PipelineRenderer()
    monkeypatch.setenv("PATH", "/nonexistent")
    assert renderer.kpt == str(fake)
    assert PipelineRenderer().kpt == ""  # none on PATH: in-process
