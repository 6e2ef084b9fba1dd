"""End to end with the real kpt: `kpt fn eval --exec`, `kpt fn render --allow-exec`, source | fn | sink.

Every test here needs the kpt binary: without it they are skipped (REQUIRE_KPT=1 fails them).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from krmfn import testing, yamlio
from tests.krmfn.conftest import TESTDATA, fn_exec

pytestmark = pytest.mark.kpt


def baseline(tmp_path: Path, kpt: str) -> dict[str, str]:
    """The fidelity package after `kpt fn eval --exec cat`: what kpt itself makes of the files."""
    package = Path(shutil.copytree(TESTDATA / "packages" / "fidelity", tmp_path / "baseline"))
    testing.kpt_fn_eval(package, "cat", kpt=kpt).check()
    return testing.package_files(package)


def load_all(text: str) -> list[object]:
    return [yamlio.load(document) for document in text.split("\n---\n")]


def test_an_sdk_function_that_changes_nothing_changes_no_file(tmp_path: Path, kpt: str, fidelity_package: Path) -> None:
    testing.kpt_fn_eval(fidelity_package, fn_exec("identity"), kpt=kpt).check()
    assert testing.package_files(fidelity_package) == baseline(tmp_path, kpt)


def test_a_mutation_through_kpt_keeps_every_other_value_and_comment(
    tmp_path: Path, kpt: str, fidelity_package: Path
) -> None:
    run = testing.kpt_fn_eval(
        fidelity_package, fn_exec("set_annotation"), fn_args=["key=example.com/owner", "value=yes"], kpt=kpt
    ).check()
    assert "[info] v1/ConfigMap/team-a/settings: set example.com/owner=yes" in run.stderr
    after, before = testing.package_files(fidelity_package), baseline(tmp_path, kpt)
    assert after["Kptfile"] == before["Kptfile"] and after["local-config.yaml"] == before["local-config.yaml"]
    configmap = after["configmap.yaml"]
    for line in [
        "# The settings every replica reads.", "  name: settings # the name other objects refer to",
        "    example.com/owner: 'yes'", "  flag: yes", "  switch: on", "  country: NO", "  mode: 0755",
        "  hex: 0x1F", '  scientific: "1e3"', '  octal: "0o17"', "  nothing: ~", "  date: 2024-01-01",
        "  quoted-true: 'true'", '  version: "1.10"', '    echo "hello" # not a comment: part of the script',
    ]:  # fmt: skip
        assert line + "\n" in configmap, line
    assert "image: nginx:1.25 # kpt-set: ${image}" in after["deployment.yaml"]
    for name in ("configmap.yaml", "deployment.yaml", "widget.yaml", "sub/service-account.yaml"):
        for old, new in zip(load_all(before[name]), load_all(after[name]), strict=True):
            del new["metadata"]["annotations"]["example.com/owner"]  # type: ignore[index]
            if not new["metadata"]["annotations"]:  # type: ignore[index]
                del new["metadata"]["annotations"]  # type: ignore[index]
            assert new == old, name


def test_a_failing_validator_leaves_the_package_untouched_and_reports(tmp_path: Path, kpt: str) -> None:
    package = Path(shutil.copytree(TESTDATA / "packages" / "fidelity", tmp_path / "pkg"))
    before = testing.package_files(package)
    run = testing.kpt_fn_eval(
        package, fn_exec("require_label"), fn_args=["label=team"], results_dir=tmp_path / "results", kpt=kpt
    )
    assert run.returncode == 1
    assert "[error] v1/ConfigMap/team-a/settings metadata.labels: missing label team" in run.stderr
    assert '  Stderr:\n    "require-label: failed with 6 error result(s)"\n  Exit code: 1' in run.stderr
    assert "Traceback" not in run.stderr
    assert testing.package_files(package) == before
    assert run.results["exitCode"] == 1 and len(run.results["items"][0]["results"]) == 6


def test_render_runs_the_kptfile_pipeline(tmp_path: Path, kpt: str, fidelity_package: Path) -> None:
    kptfile = fidelity_package / "Kptfile"
    kptfile.write_text(
        kptfile.read_text()
        + "pipeline:\n  mutators:\n  - exec: "
        + repr(fn_exec("set_annotation"))
        + "\n    configMap:\n      key: example.com/rendered\n      value: 'on'\n"
        + "  validators:\n  - exec: "
        + repr(fn_exec("identity"))
        + "\n"
    )
    run = testing.kpt_fn_render(fidelity_package, results_dir=tmp_path / "results", kpt=kpt).check()
    assert "Successfully executed 2 function(s) in 2 package(s)." in run.stdout + run.stderr
    files = testing.package_files(fidelity_package)
    assert "    example.com/rendered: 'on'\n" in files["configmap.yaml"]
    assert "    example.com/rendered: 'on'\n" in files["sub/service-account.yaml"]
    assert "example.com/rendered" not in files["local-config.yaml"]
    assert "  flag: yes\n" in files["configmap.yaml"]
    assert [item["exitCode"] for item in run.results["items"]] == [0, 0]


def test_render_with_an_invalid_config_fails_with_one_line_and_writes_nothing(
    tmp_path: Path, kpt: str, fidelity_package: Path
) -> None:
    kptfile = fidelity_package / "Kptfile"
    kptfile.write_text(kptfile.read_text() + f"pipeline:\n  mutators:\n  - exec: {fn_exec('set_annotation')!r}\n")
    before = testing.package_files(fidelity_package)
    run = testing.kpt_fn_render(fidelity_package, kpt=kpt)
    assert run.returncode == 1
    assert '"set-annotation: functionConfig (none given): key: Field required"' in run.stderr
    assert "Traceback" not in run.stderr
    assert testing.package_files(fidelity_package) == before


def test_source_fn_sink_keeps_every_file_without_kpts_help(tmp_path: Path, kpt: str) -> None:
    """Without kpt's comment restoration (spec §11): the honest test of the function's own fidelity."""
    package = TESTDATA / "packages" / "fidelity"
    source = subprocess.run([kpt, "fn", "source", str(package)], capture_output=True, check=True).stdout

    def sink(stdin: bytes, name: str) -> dict[str, str]:
        subprocess.run([kpt, "fn", "sink", str(tmp_path / name)], input=stdin, check=True, capture_output=True)
        return testing.package_files(tmp_path / name)

    through_fn = subprocess.run(
        testing.exec_command(TESTDATA.parent.parent / "tests/krmfn/fns/identity.py").split(),
        input=source, capture_output=True, check=True, env=testing.kpt_environment(),
    ).stdout  # fmt: skip
    assert through_fn == source
    assert sink(through_fn, "fn") == sink(source, "plain")
