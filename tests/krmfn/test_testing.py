"""The testing helpers: golden directories, checked in-process, and their update mode."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from krmfn import testing
from tests.krmfn.conftest import TESTDATA
from tests.krmfn.fns.require_label import require_label
from tests.krmfn.fns.set_annotation import set_annotation

GOLDEN = TESTDATA / "golden"
FUNCTIONS = {"set_annotation": set_annotation, "require_label": require_label}
CASES = [(name, case) for name in FUNCTIONS for case in testing.golden_cases(GOLDEN / name)]


@pytest.mark.parametrize(("function", "case"), CASES, ids=[f"{name}/{case}" for name, case in CASES])
def test_golden_case(function: str, case: testing.GoldenCase) -> None:
    testing.check_golden(FUNCTIONS[function], case)


def test_a_golden_mismatch_fails_with_a_diff(tmp_path: Path) -> None:
    case_dir = Path(shutil.copytree(GOLDEN / "set_annotation" / "plain-resources", tmp_path / "case"))
    (case_dir / "expected.yaml").write_text((case_dir / "expected.yaml").read_text().replace("'on'", "'off'"))
    with pytest.raises(AssertionError, match=r"(?s)output differs:.*-.*'off'.*\+.*'on'"):
        testing.check_golden(set_annotation, testing.GoldenCase("case", case_dir))


def test_update_mode_writes_the_expectations(tmp_path: Path) -> None:
    case_dir = Path(shutil.copytree(GOLDEN / "require_label" / "missing-label", tmp_path / "case"))
    for name in ("expected.yaml", "results.yaml"):
        (case_dir / name).unlink()
    case = testing.GoldenCase("case", case_dir)
    testing.check_golden(require_label, case, update=True)
    assert (case_dir / "expected.yaml").read_text() == (
        GOLDEN / "require_label/missing-label/expected.yaml"
    ).read_text()
    testing.check_golden(require_label, case)


def test_plain_resources_are_wrapped_into_a_resource_list_without_changing_their_text() -> None:
    text = testing.resource_list_text("a: 1 # c\n---\n# only a comment\n---\nb: |\n  x\n", "kind: K\n")
    assert text == (
        "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- a: 1 # c\n- b: |\n    x\n"
        "functionConfig:\n  kind: K\n"
    )


def test_without_kpt_a_test_is_skipped_unless_kpt_is_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(testing.shutil, "which", lambda name: None)
    monkeypatch.delenv(testing.REQUIRE_KPT_ENV, raising=False)
    with pytest.raises(pytest.skip.Exception, match="kpt is not on PATH"):
        testing.kpt_binary()
    monkeypatch.setenv(testing.REQUIRE_KPT_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match="REQUIRE_KPT=1 requires it"):
        testing.kpt_binary()
