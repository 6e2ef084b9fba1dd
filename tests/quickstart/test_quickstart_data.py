"""testdata/quickstart: what build.py builds, what the set renders, and what the blueprint renders to.

The blueprint's Kptfile pipeline is run by both engines the embedded Porch uses: kpt (`kpt fn
render --allow-exec`; those tests skip without kpt, and fail instead when REQUIRE_KPT=1) and
porchkit's in-process renderer, which calls `porchkit fn deltapipe` as a Python function. A
variant is followed offline the way the controllers would take it: the set's PackageVariants
rendered, their mutations applied to the published blueprint, the result rendered, then upgraded
to revision 2 by the 3-way merge and rendered again.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

import krmfn
from krmfn import testing
from krmfn.deltapipe_fn import deltapipe
from porchvariant import apply_mutations, validate_package_variant_set
from porchvariant.embedded.git.repository import GitPackageRepository, Lifecycle
from porchvariant.embedded.merge.resources import merge_packages
from porchvariant.embedded.render.renderer import render_package

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "testdata" / "quickstart"
VENV_BIN = Path(sys.executable).parent

# downstream repository -> (region, size, replicas the size gives)
EDGES = {"edge-us": ("us-east", "large", 3), "edge-eu": ("eu-west", "medium", 2), "edge-ap": ("ap-south", "small", 1)}


# --- helpers ---------------------------------------------------------------------------------------


def run_build(workdir: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(QUICKSTART / "build.py"), str(workdir), *flags],
                          capture_output=True, text=True)


def blueprint(version: str) -> dict[str, str]:
    root = QUICKSTART / "blueprint" / version
    return {path.relative_to(root).as_posix(): path.read_text(encoding="utf-8")
            for path in sorted(root.rglob("*")) if path.is_file()}


def load_yaml_files(directory: Path) -> list[dict[str, Any]]:
    return [doc for path in sorted(directory.glob("*.yaml"))
            for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]


def refs(bare: Path) -> str:
    return subprocess.run(["git", "--git-dir", str(bare), "for-each-ref", "--format=%(objectname) %(refname)"],
                          capture_output=True, text=True, check=True).stdout


def one(text: str) -> dict[str, Any]:
    [doc] = [d for d in yaml.safe_load_all(text) if d]
    return doc


def with_region(files: dict[str, str], region: str, size: str) -> dict[str, str]:
    """The package with its injection point filled in by hand, as injection would fill it."""
    text = files["region.yaml"].replace("region: local #", f"region: {region} #")
    return {**files, "region.yaml": text.replace("size: small #", f"size: {json.dumps(size)} #")}


def deltapipe_in_process(resource_list: dict[str, Any]) -> dict[str, Any]:
    """`porchkit fn deltapipe` as the in-process renderer calls it: a ResourceList in and out."""
    outcome = krmfn.process(deltapipe, json.dumps(resource_list))
    if outcome.exit_code != 0:
        raise RuntimeError("; ".join(outcome.messages))
    result: dict[str, Any] = yaml.safe_load(outcome.output)
    return result


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    workdir = tmp_path_factory.mktemp("quickstart") / "build"
    done = run_build(workdir)
    assert done.returncode == 0, done.stderr
    return workdir


@pytest.fixture(scope="module")
def variants(built: Path) -> dict[str, dict[str, Any]]:
    """The PackageVariants `porchkit variants render` gives for the built manifests, by downstream repo."""
    done = subprocess.run([sys.executable, "-m", "porchkit", "variants", "render", "-f", str(built / "manifests")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return {pv["spec"]["downstream"]["repo"]: pv for pv in yaml.safe_load_all(done.stdout) if pv}


@pytest.fixture(params=["kpt", "in-process"])
def render(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Render a package as the embedded Porch does for a Repository that allows exec functions."""
    if request.param == "kpt":
        kpt = testing.kpt_binary()
        monkeypatch.setenv("PATH", os.pathsep.join([str(VENV_BIN), os.environ.get("PATH", "")]))  # for `exec: porchkit`
        return lambda files: render_package(files, allow_exec=True, kpt=kpt)
    monkeypatch.setenv("PATH", "")  # no kpt: the pipeline runs in this process
    return lambda files: render_package(files, allow_exec=True,
                                        in_process={"porchkit fn deltapipe": deltapipe_in_process})


def rendered_ok(result: Any) -> dict[str, str]:
    assert result.status["error"] == ""
    files: dict[str, str] = result.files
    return files


# --- build.py ----------------------------------------------------------------------------------------


def test_the_blueprint_repository_holds_app_published_as_revisions_1_and_2(built: Path) -> None:
    with GitPackageRepository(built / "repos" / "blueprints.git") as repo:
        revisions = repo.list_revisions()
        assert [(r.name, r.workspace, r.revision, r.lifecycle, r.ref) for r in revisions] == [
            ("app", "main", -1, Lifecycle.PUBLISHED, "refs/heads/main"),  # the placeholder: the tip of main
            ("app", "v1", 1, Lifecycle.PUBLISHED, "refs/tags/app/v1"),
            ("app", "v2", 2, Lifecycle.PUBLISHED, "refs/tags/app/v2"),
        ]
        placeholder, v1, v2 = revisions
        assert repo.read_resources(v1) == blueprint("v1")
        assert repo.read_resources(v2) == blueprint("v2")
        assert repo.read_resources(placeholder) == blueprint("v2")


def test_the_deployment_repositories_have_a_main_branch_and_no_package_yet(built: Path) -> None:
    for name in EDGES:
        with GitPackageRepository(built / "repos" / f"{name}.git") as repo:  # NotFound without main
            assert repo.bare and repo.list_revisions() == []


def test_a_second_build_gives_the_same_commits(built: Path, tmp_path: Path) -> None:
    assert run_build(tmp_path / "again").returncode == 0
    for name in ["blueprints", *EDGES]:
        first, second = refs(built / "repos" / f"{name}.git"), refs(tmp_path / "again" / "repos" / f"{name}.git")
        assert first == second and first


def test_build_refuses_a_directory_it_did_not_make_even_with_force(tmp_path: Path) -> None:
    (tmp_path / "mine.txt").write_text("keep me")
    refused = run_build(tmp_path)
    assert refused.returncode != 0 and "is not empty" in refused.stderr
    forced = run_build(tmp_path, "--force")
    assert forced.returncode != 0 and "was not made by build.py" in forced.stderr
    assert (tmp_path / "mine.txt").read_text() == "keep me"


def test_build_rebuilds_its_own_directory_only_with_force(tmp_path: Path) -> None:
    workdir = tmp_path / "build"
    assert run_build(workdir).returncode == 0
    (workdir / "state").mkdir()
    again = run_build(workdir)
    assert again.returncode != 0 and "pass --force" in again.stderr
    assert run_build(workdir, "--force").returncode == 0
    assert not (workdir / "state").exists() and (workdir / "repos" / "blueprints.git").is_dir()


def test_the_manifests_name_each_built_repository_by_its_absolute_path(built: Path) -> None:
    objects = load_yaml_files(built / "manifests")
    repositories = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Repository"}
    assert sorted(repositories) == sorted(["blueprints", *EDGES])
    for name, repository in repositories.items():
        git = repository["spec"]["git"]
        assert repository["spec"]["type"] == "git" and git["branch"] == "main"
        assert git["repo"] == str(built.absolute() / "repos" / f"{name}.git")
        assert (Path(git["repo"]) / "HEAD").is_file()
    assert repositories["blueprints"]["spec"]["deployment"] is False
    for name, (region, _, _) in EDGES.items():
        metadata = repositories[name]["metadata"]
        assert repositories[name]["spec"]["deployment"] is True
        assert metadata["labels"] == {"porchkit.dev/quickstart": "edge", "region": region}
        assert metadata["annotations"]["porchkit.dev/allow-exec-functions"] == "true"
    assert "porchkit.dev/quickstart" not in repositories["blueprints"]["metadata"].get("labels", {})


def test_both_package_variant_sets_are_valid_and_differ_only_in_the_upstream_revision() -> None:
    first = one((QUICKSTART / "manifests" / "packagevariantset.yaml").read_text(encoding="utf-8"))
    second = one((QUICKSTART / "packagevariantset-v2.yaml").read_text(encoding="utf-8"))
    assert first["kind"] == second["kind"] == "PackageVariantSet"
    assert validate_package_variant_set(first) == [] and validate_package_variant_set(second) == []
    assert first["spec"]["upstream"] == {"repo": "blueprints", "package": "app", "revision": 1}
    second["spec"]["upstream"]["revision"] = 1
    assert second == first


def test_the_set_renders_one_variant_per_edge_repository(built: Path, variants: dict[str, dict[str, Any]]) -> None:
    assert sorted(variants) == sorted(EDGES)
    configmaps = {(o["metadata"]["namespace"], o["metadata"]["name"])
                  for o in load_yaml_files(built / "manifests") if o["kind"] == "ConfigMap"}
    for repo, (region, _, _) in EDGES.items():
        pv = variants[repo]
        assert pv["metadata"]["name"] == f"app-{repo}-app-{region}"
        assert pv["metadata"]["namespace"] == "default"
        assert pv["spec"]["upstream"] == {"repo": "blueprints", "package": "app", "revision": 1}
        assert pv["spec"]["downstream"] == {"repo": repo, "package": f"app-{region}"}
        assert pv["spec"]["labels"] == {"region": region}
        assert pv["spec"]["packageContext"] == {"data": {"region": region}}
        assert pv["spec"]["injectors"] == [{"kind": "ConfigMap", "name": f"region-{region}"}]
        assert ("default", f"region-{region}") in configmaps


# --- the blueprint through kpt -------------------------------------------------------------------


@pytest.mark.kpt
@pytest.mark.parametrize("version", ["v1", "v2"])
def test_each_blueprint_version_is_already_rendered(version: str, tmp_path: Path) -> None:
    package = Path(shutil.copytree(QUICKSTART / "blueprint" / version, tmp_path / "app"))
    testing.kpt_fn_render(package).check()
    assert testing.package_files(package) == blueprint(version)


@pytest.mark.kpt
@pytest.mark.parametrize(("size", "replicas"), [("small", 1), ("medium", 2), ("large", 3), ("5", 5)])
def test_kpt_render_derives_settings_replicas_and_placement_from_the_region(
        size: str, replicas: int, tmp_path: Path) -> None:
    package = tmp_path / "app"
    package.mkdir()
    for path, text in with_region(blueprint("v1"), "us-east", size).items():
        (package / path).write_text(text, encoding="utf-8")
    testing.kpt_fn_render(package).check()
    files = testing.package_files(package)
    deployment, settings = one(files["deployment.yaml"]), one(files["configmap.yaml"])
    assert deployment["spec"]["replicas"] == replicas
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert pod_labels == {"app.kubernetes.io/name": "app", "region": "us-east"}
    assert deployment["spec"]["template"]["spec"]["nodeSelector"] == {"topology.kubernetes.io/region": "us-east"}
    assert settings["data"] == {"LOG_LEVEL": "info", "REGION": "us-east", "PUBLIC_URL": "https://us-east.app.example.com"}
    assert "# Derived from the region ConfigMap by settings-pipeline.yaml" in files["configmap.yaml"]
    assert f"replicas: {replicas} # set from the region's size" in files["deployment.yaml"]


@pytest.mark.kpt
def test_kpt_render_fails_on_an_unknown_size_and_names_it(tmp_path: Path) -> None:
    package = tmp_path / "app"
    package.mkdir()
    for path, text in with_region(blueprint("v1"), "us-east", "huge").items():
        (package / path).write_text(text, encoding="utf-8")
    run = testing.kpt_fn_render(package)
    assert run.returncode != 0
    assert 'expected an integer, got string "huge"' in run.stderr


# --- a variant's life, offline, with either engine -----------------------------------------------------


def regions() -> list[dict[str, Any]]:
    return [o for o in load_yaml_files(QUICKSTART / "manifests") if o["kind"] == "ConfigMap"]


def assert_variant(files: dict[str, str], region: str, replicas: int, image: str) -> None:
    deployment, settings = one(files["deployment.yaml"]), one(files["configmap.yaml"])
    assert deployment["spec"]["replicas"] == replicas
    assert deployment["spec"]["template"]["spec"]["nodeSelector"] == {"topology.kubernetes.io/region": region}
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == image
    assert settings["data"]["REGION"] == region
    assert settings["data"]["PUBLIC_URL"] == f"https://{region}.app.example.com"
    assert one(files["region.yaml"])["metadata"]["annotations"]["kpt.dev/injected-resource"] == f"region-{region}"
    assert one(files["package-context.yaml"])["data"]["region"] == region
    [condition] = one(files["Kptfile"])["status"]["conditions"]
    assert (condition["type"], condition["status"]) == ("config.injection.ConfigMap.region", "True")


def test_each_variant_is_injected_and_rendered_with_its_regions_settings(
        variants: dict[str, dict[str, Any]], render: Any) -> None:
    for repo, (region, _, replicas) in EDGES.items():
        mutated = apply_mutations(variants[repo], blueprint("v1"), regions())
        files = rendered_ok(render(mutated.resources))
        assert_variant(files, region, replicas, "ghcr.io/porchkit/quickstart-app:1.0.0")
        assert "pdb.yaml" not in files and "CACHE_TTL" not in one(files["configmap.yaml"])["data"]
        # a second pass changes nothing, so a published variant is left alone
        assert not apply_mutations(variants[repo], files, regions()).changed
        assert rendered_ok(render(files)) == files


def test_the_upgrade_to_revision_2_brings_v2_and_keeps_each_regions_settings(
        variants: dict[str, dict[str, Any]], render: Any) -> None:
    for repo, (region, _, replicas) in EDGES.items():
        v1 = rendered_ok(render(apply_mutations(variants[repo], blueprint("v1"), regions()).resources))
        merged = merge_packages(blueprint("v1"), blueprint("v2"), v1)
        upgraded_variant = {**variants[repo], "spec": {**variants[repo]["spec"],
                                                       "upstream": {"repo": "blueprints", "package": "app",
                                                                    "revision": 2}}}
        files = rendered_ok(render(apply_mutations(upgraded_variant, merged, regions()).resources))
        assert_variant(files, region, replicas, "ghcr.io/porchkit/quickstart-app:1.1.0")
        assert files["pdb.yaml"] == blueprint("v2")["pdb.yaml"]
        assert one(files["configmap.yaml"])["data"]["CACHE_TTL"] == "60s"


@pytest.mark.kpt
def test_kpt_and_the_in_process_renderer_write_the_same_files(
        variants: dict[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    kpt = testing.kpt_binary()
    path = os.pathsep.join([str(VENV_BIN), os.environ.get("PATH", "")])
    for repo in EDGES:
        files = apply_mutations(variants[repo], blueprint("v1"), regions()).resources
        monkeypatch.setenv("PATH", path)
        by_kpt = rendered_ok(render_package(files, allow_exec=True, kpt=kpt))
        monkeypatch.setenv("PATH", "")
        in_process = rendered_ok(render_package(files, allow_exec=True,
                                                in_process={"porchkit fn deltapipe": deltapipe_in_process}))
        assert by_kpt == in_process != files
