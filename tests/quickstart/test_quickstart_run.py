"""The quickstart as `make run` runs it (testdata/quickstart/run.sh), into a temporary folder.

build.py, then `porchkit variants reconcile --approve` twice and once more after the set moves
to revision 2, through porchkit's command line. Checked: the tables printed, the second run's
"nothing changed", and what git holds at the end (each published variant rendered with its
region, each upgrade draft carrying revision 2 and the region's settings). Run with kpt when it
is on PATH (the venv's porchkit is put first on PATH for its `exec:`), else in-process.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from porchkit.cli import main
from porchvariant.embedded.git.repository import GitPackageRepository, Lifecycle
from tests.quickstart.test_quickstart_data import EDGES, QUICKSTART

VENV_BIN = str(Path(sys.executable).parent)


@pytest.mark.parametrize("engine", ["kpt", "in-process"])
def test_the_quickstart_publishes_then_rests_then_drafts_upgrades(
        engine: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    if engine == "kpt" and shutil.which("kpt") is None and os.environ.get("REQUIRE_KPT") != "1":
        pytest.skip("kpt is not on PATH (set REQUIRE_KPT=1 to make this a failure)")
    path = [VENV_BIN, *os.environ.get("PATH", "").split(os.pathsep)]
    if engine == "in-process":  # git, but no kpt to be found (they share /usr/bin)
        tools = tmp_path / "bin"
        tools.mkdir()
        (tools / "git").symlink_to(shutil.which("git") or "git")
        path = [VENV_BIN, str(tools)]
    monkeypatch.setenv("PATH", os.pathsep.join(path))
    work = tmp_path / "quickstart"
    subprocess.run([sys.executable, str(QUICKSTART / "build.py"), str(work)], check=True, capture_output=True)
    argv = ["variants", "reconcile", "-f", str(work / "manifests"), "--state", str(work / "state")]

    assert main([*argv, "--approve"]) == 0
    first = capsys.readouterr().out.splitlines()
    assert sorted(line.split()[:7] for line in first[1:]) == sorted(
        [repo, f"app-{region}", "packagevariant-1", "1", "Published", "yes", "created"]
        for repo, (region, _, _) in EDGES.items())

    assert main([*argv, "--approve"]) == 0
    assert capsys.readouterr().out == "no package revisions created or changed\n"

    shutil.copy(QUICKSTART / "packagevariantset-v2.yaml", work / "manifests" / "packagevariantset.yaml")
    assert main(argv) == 0
    third = capsys.readouterr().out.splitlines()
    assert sorted(line.split()[:7] for line in third[1:]) == sorted(
        [repo, f"app-{region}", "packagevariant-2", "-", "Draft", "yes", "created"] for repo in EDGES
        for region in [EDGES[repo][0]])

    for repo, (region, _, replicas) in EDGES.items():
        with GitPackageRepository(work / "repos" / f"{repo}.git") as git:
            by_lifecycle = {r.lifecycle: git.read_resources(r) for r in git.list_revisions(f"app-{region}")
                            if not r.is_placeholder}
        assert set(by_lifecycle) == {Lifecycle.PUBLISHED, Lifecycle.DRAFT}
        for files in by_lifecycle.values():
            deployment = next(doc for text in files.values() for doc in yaml.safe_load_all(text)
                              if doc and doc.get("kind") == "Deployment")
            assert deployment["spec"]["replicas"] == replicas
        draft = by_lifecycle[Lifecycle.DRAFT]
        assert "app/v2" in yaml.safe_load(draft["Kptfile"])["upstreamLock"]["git"]["ref"]
        assert "pdb.yaml" in draft and "pdb.yaml" not in by_lifecycle[Lifecycle.PUBLISHED]
