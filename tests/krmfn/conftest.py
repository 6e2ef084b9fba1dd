"""Fixtures for krmfn's tests: test data paths, example functions, and the shared kpt skip."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from krmfn import testing

ROOT = Path(__file__).resolve().parents[2]
TESTDATA = ROOT / "testdata" / "krmfn"
FNS = Path(__file__).resolve().parent / "fns"


@pytest.fixture
def kpt() -> str:
    """The kpt binary: skips the test without it (fails instead when REQUIRE_KPT=1)."""
    return testing.kpt_binary()


@pytest.fixture
def kpt_eval_text() -> str:
    """The ResourceList kpt 1.0.0-beta.56 sent for testdata/krmfn/packages/fidelity, byte for byte."""
    return (TESTDATA / "resourcelists" / "kpt-eval.yaml").read_text(encoding="utf-8")


@pytest.fixture
def fidelity_package(tmp_path: Path) -> Path:
    """A fresh copy of testdata/krmfn/packages/fidelity to run kpt on."""
    return Path(shutil.copytree(TESTDATA / "packages" / "fidelity", tmp_path / "fidelity"))


def fn_exec(name: str, *args: str) -> str:
    """The `--exec` string for the example function tests/krmfn/fns/NAME.py."""
    return testing.exec_command(FNS / f"{name}.py", *args)
