"""`porchkit variants reconcile`: the command, its table and exit status, and a restart after a kill."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from porchkit.cli import main
from porchvariant.embedded.gitrepo import GitPackageRepository, Lifecycle
from tests.porchvariant.variants_support import Repos, package_variant, refs


def write_manifests(folder: Path, objects: list[dict[str, Any]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "objects.yaml").write_text(yaml.safe_dump_all(objects, sort_keys=False))
    return folder


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
        deadline = time.monotonic() + 60
        while refs(prod).count("refs/heads/drafts/") < 3:  # killed once a few drafts exist, with more to come
            assert process.poll() is None, "the run ended before it could be killed"
            assert time.monotonic() < deadline, "no drafts appeared"
            time.sleep(0.01)
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
