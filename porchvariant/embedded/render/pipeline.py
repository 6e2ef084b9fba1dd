"""What both render engines share: the Kptfile pipelines read from a package, and how a render fails.

Owns: finding every function of every Kptfile pipeline in a package `{path: text}` (root package
first, mutators before validators, in file order), the rule that an `exec:` function needs the
Repository's permission, the `RenderError` an engine raises to stop a render, and the shapes of
Porch's renderStatus (`{error, result}`, `result` a kpt FunctionResultList). Running anything is
left to the engines (render/renderer.py for kpt, render/inprocess.py for porchkit's own functions).
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from krmyaml import textedit
from porchvariant.errors import PorchVariantError

Obj = dict[str, Any]

KPTFILE = "Kptfile"
_MAX_MESSAGE = 400


class RenderError(PorchVariantError):
    """A render that cannot go on; str() is the one line for status.error, `result` kpt's list if any."""

    def __init__(self, message: str, result: Obj | None = None) -> None:
        super().__init__(message)
        self.result = result


@dataclass(frozen=True, slots=True)
class Function:
    """One entry of a Kptfile pipeline."""

    package: str  # directory of its Kptfile, "" for the root
    stage: str  # "mutators" or "validators"
    spec: Obj

    @property
    def label(self) -> str:
        return str(self.spec.get("exec") or self.spec.get("image") or "?")


def pipeline_functions(files: Mapping[str, str]) -> list[Function]:
    """Every function of every Kptfile pipeline in the package, root package's in order.

    RenderError for a Kptfile that is not YAML or a pipeline kpt would refuse.
    """
    functions = []
    for path in sorted(p for p in files if posixpath.basename(p) == KPTFILE):
        package = posixpath.dirname(path)
        try:
            documents = [d for d in textedit.load_fast(files[path]) if d is not None]
        except textedit.YamlTextError as err:
            raise RenderError(f"cannot render: {path}: {err}") from err
        if not documents:
            continue
        kptfile = documents[0]
        pipeline = kptfile.get("pipeline") if isinstance(kptfile, dict) else None
        if pipeline is None:
            continue
        if not isinstance(pipeline, dict):
            raise RenderError(f"cannot render: {path}: pipeline is not a mapping")
        for stage in ("mutators", "validators"):
            entries = pipeline.get(stage) or []
            if not isinstance(entries, list):
                raise RenderError(f"cannot render: {path}: pipeline.{stage} is not a list")
            for i, spec in enumerate(entries):
                if not isinstance(spec, dict) or bool(spec.get("image")) == bool(spec.get("exec")):
                    raise RenderError(f"cannot render: {path}: pipeline.{stage}[{i}] must have exactly one of "
                                      "image and exec")
                functions.append(Function(package, stage, spec))
    return functions


def check_functions(functions: list[Function], allow_exec: bool) -> None:
    """RenderError naming the `exec:` functions when the Repository does not allow them."""
    execs = [f.label for f in functions if "exec" in f.spec and f.spec.get("exec")]
    if execs and not allow_exec:
        raise RenderError(f"cannot render: exec functions are not allowed by the Repository: {', '.join(execs)}")


def safe_path(path: str) -> str:
    """`path` normalised; RenderError if it leaves the package."""
    normal = posixpath.normpath(path)
    if posixpath.isabs(normal) or normal == "." or normal.split("/")[0] == "..":
        raise RenderError(f"cannot render: file path {path!r} is outside the package")
    return normal


def status(error: str, result: Obj) -> dict[str, Any]:
    """Porch's renderStatus."""
    return {"error": error, "result": result}


def result_list(exit_code: int, items: list[Obj]) -> Obj:
    """A kpt FunctionResultList, as `kpt fn render --results-dir` writes it."""
    return {"apiVersion": "kpt.dev/v1", "kind": "FunctionResultList", "metadata": {"name": "fnresults"},
            "exitCode": exit_code, "items": items}


def one_line(text: str) -> str:
    """`text` on one line, cut to a length a status field can show."""
    line = " ".join(text.split())
    return line if len(line) <= _MAX_MESSAGE else line[: _MAX_MESSAGE - 3] + "..."
