"""Rendering a package's Kptfile pipeline, as Porch does on every update of a revision's resources.

`render_package` takes a package as `{path: text}` and gives back the rendered files plus Porch's
`renderStatus` (`{error, result}`, `result` being kpt's FunctionResultList as `kpt fn render
--results-dir` writes it). Two engines:

* kpt, when it is on PATH (or passed in): the files go into a temporary directory, `kpt fn render`
  runs there (with `--allow-exec` only when the Repository allows exec functions), and every file
  is read back, added and deleted ones included (this module). kpt finds an `exec:` program on
  its PATH, which starts with a directory holding only the `programs` given (by default, the
  `porchkit` installed with this code: `installed_programs()`), so that `exec: porchkit fn ...`
  runs this porchkit whether or not its directory is on the user's PATH;
* without kpt, porchkit's own functions (the `in_process` callables, keyed by their `exec:` string)
  run in this process (render/inprocess.py).

`PipelineRenderer` is the embedded Porch's `Renderer` built on it: told by the `RenderContext`
whether the revision's Repository allows exec functions, with kpt and the programs looked up
once, when it is made.

Promises: never raises for a bad package, a failing function or a timeout: the files come back
unchanged (the same strings) and `status["error"]` holds one line. A package without a pipeline
comes back unchanged, with no error. An `exec:` function never runs, by either engine, unless
`allow_exec` (Porch's Repository setting governs `exec:` entries, whoever runs them).

Does not: pull images itself, allow network to image functions, honour `.krmignore`, or run
selectors/exclude or subpackage pipelines in-process (those need kpt, and say so).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import krmyaml
from krmyaml import textedit
from porchvariant.embedded.render.inprocess import InProcessFunction, render_in_process
from porchvariant.embedded.render.pipeline import (
    KPTFILE,
    Obj,
    RenderError,
    check_functions,
    one_line,
    pipeline_functions,
    result_list,
    safe_path,
    status,
)

__all__ = ["InProcessFunction", "PipelineRenderer", "RenderContext", "RenderResult", "Renderer", "installed_programs",
           "no_render", "render_package"]

DISTRIBUTION = "porchkit"  # the distribution this code is installed with
PROGRAM = "porchkit"  # its console script, which Kptfile pipelines name in `exec: porchkit fn NAME`

_SAFE_DIR_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?\Z")


class RenderContext(NamedTuple):
    """What a renderer is told about the package it renders."""

    namespace: str
    name: str  # the PackageRevision's name
    repository: str
    package: str  # spec.packageName
    workspace: str
    allow_exec: bool = False  # the Repository allows `exec:` functions (porch.ALLOW_EXEC_ANNOTATION)


class Renderer(Protocol):
    """Runs the Kptfile pipeline: (rendered files, renderStatus `{error, result}`); a non-empty
    `error` is a failed render."""

    def __call__(self, files: Mapping[str, str], context: RenderContext) -> tuple[dict[str, str], dict[str, Any]]: ...


def no_render(files: Mapping[str, str], context: RenderContext) -> tuple[dict[str, str], dict[str, Any]]:
    """The default renderer: the files unchanged, an empty renderStatus."""
    return dict(files), {}


class PipelineRenderer:
    """A `Renderer` that runs the package's Kptfile pipeline with `render_package`.

    `kpt` is the kpt binary: None looks it up on PATH, once, here; "" means there is none, so
    pipelines run in-process with the `in_process` functions ({`exec:` string: callable}).
    `programs` ({name: executable}) are what kpt finds first for an `exec:`; None looks up
    `installed_programs()`, once, here (when there is a kpt). `exec:` functions run only when the
    context says the Repository allows them.
    """

    __slots__ = ("kpt", "in_process", "timeout", "programs")

    def __init__(self, kpt: str | None = None, in_process: Mapping[str, InProcessFunction] | None = None,
                 timeout: float = 120, programs: Mapping[str, str] | None = None) -> None:
        self.kpt: str = (shutil.which("kpt") or "") if kpt is None else kpt
        self.in_process: dict[str, InProcessFunction] = dict(in_process or {})
        self.timeout = timeout
        if programs is None:
            programs = installed_programs() if self.kpt else {}
        self.programs: dict[str, str] = dict(programs)

    def __repr__(self) -> str:
        return (f"PipelineRenderer(kpt={self.kpt!r}, in_process={sorted(self.in_process)!r}, "
                f"timeout={self.timeout!r}, programs={self.programs!r})")

    def __call__(self, files: Mapping[str, str], context: RenderContext) -> tuple[dict[str, str], dict[str, Any]]:
        result = render_package(files, allow_exec=context.allow_exec, kpt=self.kpt, in_process=self.in_process,
                                timeout=self.timeout, programs=self.programs)
        return result.files, result.status


@dataclass(frozen=True, slots=True)
class RenderResult:
    """The package's files after rendering, and Porch's renderStatus `{error, result}`."""

    files: dict[str, str]
    status: dict[str, Any] = field(default_factory=dict)


def render_package(
    files: Mapping[str, str],
    *,
    allow_exec: bool = False,
    kpt: str | None = None,
    in_process: Mapping[str, InProcessFunction] | None = None,
    timeout: float = 120,
    programs: Mapping[str, str] | None = None,
) -> RenderResult:
    """Render the package `files` (`{slash path: text}`) through its Kptfile pipeline(s).

    `kpt` is the kpt binary; None looks it up on PATH, "" means there is none. Without one, the
    pipeline runs in-process if every function of it is an `exec:` found in `in_process`. With
    one, kpt finds the `programs` ({name: executable}; None: `installed_programs()`) ahead of
    its PATH.
    Returns the rendered files and the status; on any failure the files are `files` unchanged
    and status["error"] says why. Never raises for a bad package, a failing function or a timeout.
    """
    unchanged = dict(files)
    try:
        functions = pipeline_functions(files)
        if not functions:
            return RenderResult(unchanged, status("", result_list(0, [])))
        check_functions(functions, allow_exec)
        binary = shutil.which("kpt") if kpt is None else kpt
        if binary:
            programs = installed_programs() if programs is None else programs
            rendered, result = _render_with_kpt(files, binary, allow_exec=allow_exec, timeout=timeout,
                                                programs=programs)
        else:
            rendered, result = render_in_process(files, functions, in_process or {})
        return RenderResult(rendered, status("", result))
    except RenderError as err:
        return RenderResult(unchanged, status(one_line(str(err)), err.result or result_list(1, [])))


def installed_programs() -> dict[str, str]:
    """`{"porchkit": path}`: the porchkit program installed with this code, or {} if none is found.

    Looked up in the installed distribution's record of its own files first, which is right
    wherever the wheel went (a virtualenv, `pip install --user` or `--prefix`, pipx), then in
    this interpreter's scripts directory (a distribution without a record). Never raises."""
    from importlib import metadata

    candidates: list[Path] = []
    with contextlib.suppress(Exception):  # metadata of other installers may be partial or broken
        for dist in metadata.distributions(name=DISTRIBUTION):
            candidates += [Path(os.path.abspath(str(dist.locate_file(f)))) for f in dist.files or ()
                           if f.name == PROGRAM]
    candidates += [Path(sysconfig.get_path("scripts"), PROGRAM), Path(sys.executable).parent / PROGRAM]
    found = next((path for path in candidates if path.is_file() and os.access(path, os.X_OK)), None)
    return {PROGRAM: str(found)} if found is not None else {}


# --- kpt ----------------------------------------------------------------------------------------------


def _render_with_kpt(
    files: Mapping[str, str], kpt: str, *, allow_exec: bool, timeout: float, programs: Mapping[str, str]
) -> tuple[dict[str, str], Obj]:
    with tempfile.TemporaryDirectory(prefix="porchkit-render-") as tmp:
        package = Path(tmp, _package_dir_name(files))
        results_dir = Path(tmp, "results")
        _write_tree(package, files)
        argv = [kpt, "fn", "render", str(package), "--results-dir", str(results_dir), "--truncate-output=false"]
        if allow_exec:
            argv.append("--allow-exec")
        # ".programs": a package directory's name never starts with a dot (_package_dir_name).
        returncode, stderr = _run(argv, cwd=tmp, timeout=timeout, env=_env_with(programs, Path(tmp, ".programs")))
        result = _read_results(results_dir)
        if returncode != 0:
            raise RenderError(_kpt_error(stderr, result, returncode), result)
        return _read_tree(package, files), result or result_list(0, [])


def _package_dir_name(files: Mapping[str, str]) -> str:
    try:
        name = (textedit.load_fast(files.get(KPTFILE, "")) or [None])[0]["metadata"]["name"]
    except (textedit.YamlTextError, TypeError, KeyError, IndexError):
        name = None
    return name if isinstance(name, str) and _SAFE_DIR_NAME.match(name) and name != "results" else "package"


def _write_tree(root: Path, files: Mapping[str, str]) -> None:
    for path, text in files.items():
        target = root / safe_path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8", newline="")
    root.mkdir(parents=True, exist_ok=True)


def _read_tree(root: Path, original: Mapping[str, str]) -> dict[str, str]:
    """Every file under root as `{slash path: text}`, reusing the original string where unchanged."""
    found = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        try:
            text = path.read_bytes().decode("utf-8")
        except UnicodeDecodeError as err:
            raise RenderError(f"cannot render: kpt wrote {rel}, which is not UTF-8 text") from err
        found[rel] = text
    out = {p: (t if found[p] == t else found[p]) for p, t in original.items() if p in found}
    out.update((p, t) for p, t in found.items() if p not in out)
    return out


def _env_with(programs: Mapping[str, str], bin_dir: Path) -> dict[str, str] | None:
    """This process's environment with `bin_dir`, holding links to `programs`, first on PATH
    (None: no programs, the environment unchanged). Links, not the programs' own directories: a
    virtualenv's bin would also put its `python` ahead of the one a pipeline's `exec:` means."""
    if not programs:
        return None
    bin_dir.mkdir()
    for name, executable in programs.items():
        try:
            (bin_dir / name).symlink_to(executable)
        except OSError as err:
            raise RenderError(f"cannot render: cannot link {name} to {executable}: {err.strerror or err}") from err
    return {**os.environ, "PATH": os.pathsep.join(p for p in (str(bin_dir), os.environ.get("PATH", "")) if p)}


def _run(argv: list[str], *, cwd: str, timeout: float, env: Mapping[str, str] | None = None) -> tuple[int, str]:
    """Run kpt in its own process group, so that a timeout also ends the functions it started."""
    try:
        proc = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True, env=env)
    except OSError as err:
        raise RenderError(f"cannot render: cannot start kpt: {err}") from err
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as err:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise RenderError(f"cannot render: kpt fn render timed out after {timeout:g}s") from err
    text = (stderr + stdout).decode("utf-8", "replace")  # kpt prints its progress on stderr
    return proc.returncode, text


def _read_results(results_dir: Path) -> Obj | None:
    try:
        path = results_dir / "results.yaml"
        data = (krmyaml.load_all(path.read_text(encoding="utf-8"), str(path)) or [None])[0]
    except (OSError, UnicodeDecodeError, krmyaml.YamlError):
        return None
    if not isinstance(data, dict):
        return None
    data.setdefault("items", [])
    return data


_FAIL_LINE = re.compile(r'^\[FAIL\] "(.*)"', re.MULTILINE)
_ERROR_LINE = re.compile(r"^Error: (.*)", re.MULTILINE | re.DOTALL)


def _kpt_error(stderr: str, result: Obj | None, returncode: int) -> str:
    """One line from kpt's output: which function failed and why, else kpt's own `Error:` text."""
    failed = _FAIL_LINE.search(stderr)
    error = _ERROR_LINE.search(stderr)
    kpt_says = " ".join(error.group(1).split()) if error else ""
    if failed is None:
        return f"kpt fn render failed: {kpt_says or stderr.strip() or f'exit code {returncode}'}"
    name = failed.group(1)
    item = next((i for i in (result or {}).get("items") or []
                 if isinstance(i, dict) and (i.get("exec") or i.get("image")) == name and i.get("exitCode")), {})
    detail = " ".join(str(item.get("stderr") or "").split()) or kpt_says
    errors = [r.get("message") for r in item.get("results") or []
              if isinstance(r, dict) and r.get("severity") == "error"]
    detail = "; ".join(str(p) for p in [*errors, detail] if p)
    code = f" with exit code {item['exitCode']}" if item.get("exitCode") else ""
    return f'kpt fn render failed: function "{name}" failed{code}' + (f": {detail}" if detail else "")
