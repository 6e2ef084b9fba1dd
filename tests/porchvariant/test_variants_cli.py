"""`porchkit variants reconcile`: the command, its table or YAML and exit status, `-v`, a restart
after a kill, and a Kptfile's `exec: porchkit fn ...` run by kpt with porchkit's directory not
on PATH (testdata/quickstart, built by its build.py)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from krmfn.testing import kpt_binary
from porchkit.cli import main
from porchvariant.embedded.git.repository import GitPackageRepository, Lifecycle
from tests.porchvariant.variants_support import KPTFILE, V1, Repos, package_variant, refs
from tests.waiting import eventually

QUICKSTART = Path(__file__).resolve().parents[2] / "testdata" / "quickstart"


def write_manifests(folder: Path, objects: list[dict[str, Any]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "objects.yaml").write_text(yaml.safe_dump_all(objects, sort_keys=False))
    return folder


def tools(folder: Path, *names: str) -> str:
    """A PATH of one directory holding links to these programs only (not porchkit, wherever it is)."""
    folder.mkdir()
    for name in names:
        (folder / name).symlink_to(shutil.which(name) or name)
    return str(folder)


def reconcile(folder: Path, *flags: str, path: str | None = None) -> subprocess.CompletedProcess[str]:
    """`porchkit variants reconcile -f folder`, a process of its own, run as a user runs it: the
    virtualenv's `porchkit` by its full path (python -m porchkit where there is none)."""
    script = Path(sys.executable).parent / "porchkit"
    command = [str(script)] if script.is_file() else [sys.executable, "-m", "porchkit"]
    env = {**os.environ, "PATH": path} if path is not None else None
    return subprocess.run([*command, "variants", "reconcile", "-f", str(folder), *flags], capture_output=True,
                          text=True, env=env, cwd=folder, timeout=300)


def test_reconcile_prints_the_new_revisions_then_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repos = Repos(tmp_path)
    folder = write_manifests(tmp_path / "manifests", [*repos.repositories(), package_variant("web-prod")])
    argv = ["variants", "reconcile", "-f", str(folder), "--state", str(tmp_path / "state"), "--approve"]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["REPOSITORY", "PACKAGE", "WORKSPACE", "REVISION", "LIFECYCLE", "READY", "CHANGE",
                                "VARIANT"]
    assert lines[1].split() == ["prod", "web", "packagevariant-1", "1", "Published", "yes", "created", "web-prod"]
    assert main(argv) == 0
    assert capsys.readouterr().out == "no package revisions created or changed\n"


def test_a_stalled_variant_fails_the_run_and_says_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repos = Repos(tmp_path)
    folder = write_manifests(tmp_path / "manifests",
                             [*repos.repositories(), package_variant("web-prod", downstream="nowhere")])
    assert main(["variants", "reconcile", "-f", str(folder)]) == 1
    captured = capsys.readouterr()
    assert captured.err == ('porchkit: PackageVariant team/web-prod is Stalled (RepositoryNotFound): downstream '
                            'repository "nowhere" not found in namespace "team"\n')


def test_an_object_of_an_unknown_kind_is_one_line_naming_the_file(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    repos = Repos(tmp_path)
    folder = write_manifests(tmp_path / "manifests", [*repos.repositories(), package_variant("web-prod"),
                                                      {"apiVersion": "example.com/v1", "kind": "Widget",
                                                       "metadata": {"name": "w"}}])
    before = repos.all_refs()
    assert main(["variants", "reconcile", "-f", str(folder)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "objects.yaml" in err and "Widget" in err
    assert repos.all_refs() == before


@pytest.mark.parametrize("command", ["render", "reconcile"])
def test_a_variant_that_cannot_be_loaded_stops_the_run_before_anything_is_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str) -> None:
    repos = Repos(tmp_path)
    impossible = package_variant("web-dev", revision=-2)
    del impossible["metadata"]["namespace"]
    folder = write_manifests(tmp_path / "manifests", [*repos.repositories(), package_variant("web-prod"), impossible])
    before = repos.all_refs()
    assert main(["variants", command, "-f", str(folder), *(["--state", str(tmp_path / "state")]
                                                            if command == "reconcile" else [])]) == 1
    captured = capsys.readouterr()
    assert captured.err == (f"porchkit: {folder / 'objects.yaml'} (document 4): PackageVariant default/web-dev: "
                            "spec.upstream.revision: must be at least -1 (no package revision has a lower number), "
                            "not -2\n")
    assert captured.out == "" and repos.all_refs() == before and not (tmp_path / "state").exists()


def test_a_run_killed_midway_and_restarted_leaves_one_complete_draft_per_variant(tmp_path: Path) -> None:
    repos = Repos(tmp_path)
    count = 24
    variants = [package_variant(f"web-{i:02d}", package=f"web-{i:02d}", packageContext={"data": {"n": str(i)}})
                for i in range(count)]
    folder = write_manifests(tmp_path / "manifests", [*repos.repositories(), *variants])
    argv = [sys.executable, "-m", "porchkit", "variants", "reconcile", "-f", str(folder),
            "--state", str(tmp_path / "state")]
    prod = repos.deployments["prod"]
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def some_drafts() -> bool:  # killed once a few drafts exist, with more to come
            if refs(prod).count("refs/heads/drafts/") >= 3:
                return True
            assert process.poll() is None, "the run ended before it could be killed"
            return False
        eventually(some_drafts, 60.0, interval=0.01)
        process.send_signal(signal.SIGKILL)
    finally:
        process.wait()
    assert refs(prod).count("refs/heads/drafts/") < count  # it really was cut short

    finished = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert finished.returncode == 0, finished.stderr
    with GitPackageRepository(prod) as git:
        drafts = [r for r in git.list_revisions() if r.lifecycle == Lifecycle.DRAFT]
        assert sorted(r.name for r in drafts) == [f"web-{i:02d}" for i in range(count)]  # one each, no duplicate
        for draft in drafts:
            context = yaml.safe_load(git.read_resources(draft)["package-context.yaml"])
            assert context["data"]["n"] == str(int(draft.name[-2:]))  # mutated, not left half-done


def test_without_state_the_run_warns_that_ownership_is_not_kept(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    repos = Repos(tmp_path)
    folder = write_manifests(tmp_path / "manifests", [*repos.repositories(), package_variant("web-prod")])
    assert main(["variants", "reconcile", "-f", str(folder)]) == 0
    assert "without --state" in capsys.readouterr().err


@pytest.mark.kpt
def test_kpt_runs_the_pipelines_porchkit_though_its_directory_is_not_on_path(tmp_path: Path) -> None:
    kpt_binary()
    work = tmp_path / "quickstart"
    subprocess.run([sys.executable, str(QUICKSTART / "build.py"), str(work)], check=True, capture_output=True)
    path = tools(tmp_path / "bin", "kpt", "git")
    assert shutil.which("porchkit", path=path) is None

    result = reconcile(work / "manifests", "--approve", path=path)
    assert result.returncode == 0, result.stderr
    assert sorted(line.split()[:7] for line in result.stdout.splitlines()[1:]) == sorted(
        [repo, f"app-{region}", "packagevariant-1", "1", "Published", "yes", "created"]
        for repo, region in (("edge-us", "us-east"), ("edge-eu", "eu-west"), ("edge-ap", "ap-south")))
    with GitPackageRepository(work / "repos" / "edge-us.git") as git:
        [published] = [r for r in git.list_revisions("app-us-east")
                       if r.lifecycle == Lifecycle.PUBLISHED and not r.is_placeholder]
        config = next(doc for text in git.read_resources(published).values() for doc in yaml.safe_load_all(text)
                      if doc and doc["metadata"]["name"] == "app-config")
    assert config["data"]["PUBLIC_URL"] == "https://us-east.app.example.com"  # rendered by `porchkit fn deltapipe`


def test_yaml_output_is_the_package_revisions_as_they_ended_up(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    repos = Repos(tmp_path)
    folder = write_manifests(tmp_path / "manifests", [*repos.repositories(), package_variant("web-prod")])
    argv = ["variants", "reconcile", "-f", str(folder), "--state", str(tmp_path / "state"), "--approve", "-o", "yaml"]
    assert main(argv) == 0
    [revision] = [doc for doc in yaml.safe_load_all(capsys.readouterr().out) if doc]
    assert (revision["kind"], revision["metadata"]["name"]) == ("PackageRevision", "prod.web.packagevariant-1")
    assert {k: revision["spec"][k] for k in ("repository", "packageName", "revision", "lifecycle")} == {
        "repository": "prod", "packageName": "web", "revision": 1, "lifecycle": "Published"}
    assert [owner["name"] for owner in revision["metadata"]["ownerReferences"]] == ["web-prod"]
    assert "resourceVersion" not in revision["metadata"] and "uid" not in revision["metadata"]
    assert main(argv) == 0
    assert capsys.readouterr().out == ""  # nothing created or changed: no documents


def test_retries_are_logged_with_verbose_only(tmp_path: Path) -> None:
    repos = Repos(tmp_path)
    with GitPackageRepository(repos.catalog) as git:  # an image function: no container runtime, so it fails
        pipeline = "pipeline:\n  mutators:\n  - image: example.com/fails:v1\n"
        git.approve(git.create_draft("broken", "v1", {**V1, "Kptfile": KPTFILE + pipeline}))
    variant = package_variant("web-prod")
    variant["spec"]["upstream"]["package"] = "broken"
    folder = write_manifests(tmp_path / "manifests", [*repos.repositories(), variant])
    path = tools(tmp_path / "bin", "git")  # no kpt: rendered in-process, whatever the machine has

    quiet, verbose = reconcile(folder, path=path), reconcile(folder, "-v", path=path)
    assert quiet.returncode == verbose.returncode == 1
    [problem] = quiet.stderr.splitlines()
    assert problem.startswith("porchkit: PackageVariant team/web-prod is not Ready (Error): error rendering package")
    retries = [line for line in verbose.stderr.splitlines() if "(retry " in line]
    assert len(retries) >= 2 and all("packagevariant team/web-prod" in line for line in retries)
    assert verbose.stderr.splitlines()[-1] == problem


def test_a_package_revision_among_the_manifests_is_a_note_not_an_object(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    repos = Repos(tmp_path)
    revision = {"apiVersion": "porch.kpt.dev/v1alpha1", "kind": "PackageRevision",
                "metadata": {"name": "prod.web.main", "namespace": "team"}}
    folder = write_manifests(tmp_path / "manifests", [*repos.repositories(), revision])
    assert main(["variants", "reconcile", "-f", str(folder)]) == 0
    assert capsys.readouterr().err == (f"porchkit: note: {folder / 'objects.yaml'} (document 3): PackageRevision "
                                       "team/prod.web.main: ignored: package revisions come from the git "
                                       "repositories\n")
