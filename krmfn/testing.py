"""Testing KRM functions: golden directories, and runs through the real kpt.

Golden directories (after the Go SDK's `testhelpers.RunGoldenTests` and kyaml's checkers): one
directory per case, holding

    input.yaml      a ResourceList, or plain (multi-document) resources to wrap in one
    config.yaml     optional: the functionConfig
    expected.yaml   the function's stdout, exactly, up to its `results:` section
    results.yaml    optional: the expected results, compared as data (absent: none expected)

`check_golden(function, case)` runs the function in-process (`krmfn.process`) and fails with a
diff when the output differs; the exit code must be 1 exactly when an error result is expected.
With `KRMFN_UPDATE_GOLDEN=1` in the environment it writes `expected.yaml` and `results.yaml`
instead. `golden_cases(root)` lists the cases under a directory, for `pytest.mark.parametrize`.

Real kpt: `kpt_fn_eval` and `kpt_fn_render` run `kpt fn eval DIR --exec ...` and
`kpt fn render DIR --allow-exec` in a subprocess whose PYTHONPATH can import krmfn, and return
what kpt printed and wrote (`KptRun`). `kpt_binary()` is the shared skip: it skips the calling
test with a clear reason when `kpt` is not on PATH, and fails it instead when `REQUIRE_KPT=1`.

pytest is imported only by the functions that need it; this module is not imported by
`import krmfn`.
"""

from __future__ import annotations

import difflib
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from krmfn import yamlio
from krmfn.resourcelist import API_VERSION, KIND
from krmfn.runner import Function, Outcome, process

REQUIRE_KPT_ENV = "REQUIRE_KPT"
UPDATE_GOLDEN_ENV = "KRMFN_UPDATE_GOLDEN"
INPUT, CONFIG, EXPECTED, RESULTS = "input.yaml", "config.yaml", "expected.yaml", "results.yaml"
_SOURCE_ROOT = Path(__file__).resolve().parent.parent  # the directory that holds krmfn/


# ---------------------------------------------------------------------------------------------
# Golden directories


@dataclass(frozen=True, slots=True)
class GoldenCase:
    """One golden directory."""

    name: str
    directory: Path

    def __str__(self) -> str:  # pytest uses it in test ids
        return self.name


def golden_cases(root: str | Path) -> list[GoldenCase]:
    """Every directory under `root` (recursively) that holds an `input.yaml`, sorted by name."""
    root = Path(root)
    return [GoldenCase(str(path.parent.relative_to(root)), path.parent) for path in sorted(root.rglob(INPUT))]


def golden_input(case: GoldenCase) -> str:
    """The ResourceList text a case feeds its function (input.yaml, wrapped, plus config.yaml)."""
    text = (case.directory / INPUT).read_text(encoding="utf-8")
    config_path = case.directory / CONFIG
    config = config_path.read_text(encoding="utf-8") if config_path.exists() else None
    return resource_list_text(text, config)


def check_golden(function: Function, case: GoldenCase, *, update: bool | None = None) -> Outcome:
    """Run `function` on the case and compare with its expectations; returns the Outcome.

    Raises AssertionError (with a unified diff) on a mismatch. With `update` (default: the
    `KRMFN_UPDATE_GOLDEN=1` environment variable) it rewrites the expectations instead.
    """
    update = os.environ.get(UPDATE_GOLDEN_ENV) == "1" if update is None else update
    outcome = process(function, golden_input(case), name=case.name)
    output = outcome.output.decode("utf-8")
    body, results = split_results(output)
    expected_path, results_path = case.directory / EXPECTED, case.directory / RESULTS
    if update:
        expected_path.write_text(body, encoding="utf-8")
        if results:
            results_path.write_text(yamlio.dump(results), encoding="utf-8")
        elif results_path.exists():
            results_path.unlink()
        return outcome
    expected = expected_path.read_text(encoding="utf-8") if expected_path.exists() else None
    expected_results = yamlio.load(results_path.read_text(encoding="utf-8")) if results_path.exists() else []
    problems = []
    if expected is not None and body != expected:
        diff = difflib.unified_diff(
            expected.splitlines(keepends=True), body.splitlines(keepends=True), str(expected_path), "actual output"
        )
        problems.append("output differs:\n" + "".join(diff))
    if (results or []) != (expected_results or []):
        problems.append(f"results differ:\nexpected: {expected_results!r}\nactual:   {results!r}")
    wanted_code = 1 if any(r.get("severity") == "error" for r in expected_results or []) else 0
    if outcome.exit_code != wanted_code:
        problems.append(f"exit code {outcome.exit_code}, expected {wanted_code}; stderr: {outcome.messages}")
    if problems:
        raise AssertionError(f"golden case {case.name}: " + "\n".join(problems))
    return outcome


def split_results(output: str) -> tuple[str, list[dict[str, Any]]]:
    """A written ResourceList split into its text before `results:` and the results as data."""
    marker = output.find("\nresults:\n")
    if marker < 0:
        return output, []
    results = yamlio.load(output[marker + 1 :]).get("results") or []
    return output[: marker + 1], results


def resource_list_text(resources: str, config: str | None = None) -> str:
    """`resources` as ResourceList text: kept as it is if it already is one, else each document
    of the (multi-document) YAML becomes an item, its text unchanged; `config` (an object's YAML)
    becomes the functionConfig."""
    documents = _documents(resources)
    if len(documents) == 1 and isinstance(_kind_of(documents[0]), str) and _kind_of(documents[0]) == KIND:
        text = documents[0]
        if config is not None:
            text = text.rstrip("\n") + "\n" + _section("functionConfig", config)
        return text
    lines = [f"apiVersion: {API_VERSION}", f"kind: {KIND}"]
    lines.append("items:" if documents else "items: []")
    for document in documents:
        body = document.rstrip("\n").split("\n")
        lines.append("- " + body[0])
        lines.extend("  " + line if line else "" for line in body[1:])
    text = "\n".join(lines) + "\n"
    return text + _section("functionConfig", config) if config is not None else text


def _documents(text: str) -> list[str]:
    documents: list[str] = []
    current: list[str] = []
    for line in text.split("\n"):
        if line == "---" or line.startswith("--- "):
            documents.append("\n".join(current))
            current = []
        else:
            current.append(line)
    documents.append("\n".join(current))
    return [d for d in documents if any(ln.strip() and not ln.lstrip().startswith("#") for ln in d.split("\n"))]


def _kind_of(document: str) -> Any:
    value = yamlio.load(document)
    return value.get("kind") if isinstance(value, dict) else None


def _section(key: str, document: str) -> str:
    body = [line for line in document.rstrip("\n").split("\n") if line != "---"]
    return f"{key}:\n" + "\n".join("  " + line if line else "" for line in body) + "\n"


# ---------------------------------------------------------------------------------------------
# Real kpt


@dataclass(frozen=True, slots=True)
class KptRun:
    """What one kpt command did."""

    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    results: Any = None  # results.yaml as data, when a results directory was asked for

    def check(self) -> KptRun:
        """self, or AssertionError with kpt's output if kpt failed."""
        if self.returncode != 0:
            raise AssertionError(f"{shlex.join(self.args)} exited {self.returncode}\n{self.stdout}\n{self.stderr}")
        return self


def kpt_binary() -> str:
    """The path of `kpt`; skips the calling pytest test without it, fails it if REQUIRE_KPT=1."""
    import pytest

    path = shutil.which("kpt")
    if path is None:
        if os.environ.get(REQUIRE_KPT_ENV) == "1":
            pytest.fail(f"kpt is not on PATH, and {REQUIRE_KPT_ENV}=1 requires it")
        pytest.skip(f"kpt is not on PATH (set {REQUIRE_KPT_ENV}=1 to make this a failure)")
    return path


def exec_command(script: str | Path, *args: str, python: str | None = None) -> str:
    """The `--exec`/`exec:` string that runs a function script with this Python."""
    return shlex.join([python or sys.executable, str(Path(script).resolve()), *args])


def kpt_environment() -> dict[str, str]:
    """This process's environment, with krmfn's source directory first on PYTHONPATH and this
    interpreter's scripts directory first on PATH."""
    env = dict(os.environ)
    paths = [str(_SOURCE_ROOT), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    # This interpreter's scripts first on PATH, so that a Kptfile's `exec: porchkit fn ...` runs
    # the porchkit under test, installed or not on the machine.
    scripts = [str(Path(sys.executable).parent), *filter(None, env.get("PATH", "").split(os.pathsep))]
    env["PATH"] = os.pathsep.join(dict.fromkeys(scripts))
    return env


def kpt_fn_eval(
    package: str | Path,
    exec_: str,
    *,
    fn_config: str | Path | None = None,
    fn_args: Sequence[str] = (),
    results_dir: str | Path | None = None,
    flags: Sequence[str] = (),
    kpt: str | None = None,
    timeout: float = 300,
) -> KptRun:
    """`kpt fn eval PACKAGE --exec EXEC [--fn-config F] [flags] [-- fn_args]`, run in a subprocess."""
    args = [kpt or kpt_binary(), "fn", "eval", str(package), "--exec", exec_, *flags]
    if fn_config is not None:
        args += ["--fn-config", str(fn_config)]
    if results_dir is not None:
        args += ["--results-dir", str(results_dir)]
    if fn_args:
        args += ["--", *fn_args]
    return _run_kpt(args, results_dir, timeout)


def kpt_fn_render(
    package: str | Path,
    *,
    results_dir: str | Path | None = None,
    flags: Sequence[str] = (),
    kpt: str | None = None,
    timeout: float = 300,
) -> KptRun:
    """`kpt fn render PACKAGE --allow-exec [flags]`, run in a subprocess."""
    args = [kpt or kpt_binary(), "fn", "render", str(package), "--allow-exec", *flags]
    if results_dir is not None:
        args += ["--results-dir", str(results_dir)]
    return _run_kpt(args, results_dir, timeout)


def _run_kpt(args: list[str], results_dir: str | Path | None, timeout: float) -> KptRun:
    completed = subprocess.run(
        args, capture_output=True, text=True, env=kpt_environment(), timeout=timeout, check=False
    )
    results = None
    if results_dir is not None and (Path(results_dir) / "results.yaml").exists():
        results = yamlio.load((Path(results_dir) / "results.yaml").read_text(encoding="utf-8"))
    return KptRun(tuple(args), completed.returncode, completed.stdout, completed.stderr, results)


def package_files(package: str | Path) -> dict[str, str]:
    """Every file under `package` by relative path, with its text: for before/after comparisons."""
    root = Path(package)
    return {
        str(path.relative_to(root)): path.read_text(encoding="utf-8")
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }
