"""Rendering a package's Kptfile pipeline, as Porch does on every update of a revision's resources.

`render_package` takes a package as `{path: text}` and gives back the rendered files plus Porch's
`renderStatus` (`{error, result}`, `result` being kpt's FunctionResultList as `kpt fn render
--results-dir` writes it). Two engines:

* kpt, when it is on PATH (or passed in): the files go into a temporary directory, `kpt fn render`
  runs there (with `--allow-exec` only when the Repository allows exec functions), and every file
  is read back, added and deleted ones included;
* without kpt, porchkit's own functions (the `in_process` callables, keyed by their `exec:` string)
  run in this process over a ResourceList built as kpt builds it (reader annotations `path` and
  `index`, functionConfig from `configMap`/`configPath`), and only the files whose objects changed
  are written again, through yamltext so that comments and layout stay.

Promises: never raises for a bad package, a failing function or a timeout: the files come back
unchanged (the same strings) and `status["error"]` holds one line. A package without a pipeline
comes back unchanged, with no error. An `exec:` function never runs, by either engine, unless
`allow_exec` (Porch's Repository setting governs `exec:` entries, whoever runs them).

Does not: pull images itself, allow network to image functions, honour `.krmignore`, or run
selectors/exclude or subpackage pipelines in-process (those need kpt, and say so).
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import posixpath
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from porchvariant import yamltext

__all__ = ["InProcessFunction", "RenderResult", "render_package"]

Obj = dict[str, Any]
InProcessFunction = Callable[[Obj], Obj]
"""Takes a ResourceList and returns one (items, and optionally results), like a KRM function."""

KPTFILE = "Kptfile"
PATH = "config.kubernetes.io/path"
INDEX = "config.kubernetes.io/index"
INTERNAL_PATH = "internal.config.kubernetes.io/path"
INTERNAL_INDEX = "internal.config.kubernetes.io/index"
# Annotations kpt adds while a function runs and removes before writing; so does this module.
_READER_ANNOTATIONS = (
    PATH, INDEX, INTERNAL_PATH, INTERNAL_INDEX,
    "internal.config.kubernetes.io/seqindent",
    "internal.config.kubernetes.io/id",
    "config.k8s.io/id",
    "internal.config.kubernetes.io/annotations-migration-resource-id",
    "internal.config.kubernetes.io/package-path",
)
_RESOURCE_SUFFIXES = (".yaml", ".yml", ".json")
_MAX_MESSAGE = 400
_SAFE_DIR_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?\Z")


@dataclass(frozen=True, slots=True)
class RenderResult:
    """The package's files after rendering, and Porch's renderStatus `{error, result}`."""

    files: dict[str, str]
    status: dict[str, Any] = field(default_factory=dict)


class _RenderError(Exception):
    """A render that cannot go on; str() is the one line for status.error."""

    def __init__(self, message: str, result: Obj | None = None) -> None:
        super().__init__(message)
        self.result = result


def render_package(
    files: Mapping[str, str],
    *,
    allow_exec: bool = False,
    kpt: str | None = None,
    in_process: Mapping[str, InProcessFunction] | None = None,
    timeout: float = 120,
) -> RenderResult:
    """Render the package `files` (`{slash path: text}`) through its Kptfile pipeline(s).

    `kpt` is the kpt binary; None looks it up on PATH. Without one, the pipeline runs in-process
    if every function of it is an `exec:` found in `in_process`. Returns the rendered files and
    the status; on any failure the files are `files` unchanged and status["error"] says why.
    Never raises for a bad package, a failing function or a timeout.
    """
    unchanged = dict(files)
    try:
        functions = _pipeline_functions(files)
        if not functions:
            return RenderResult(unchanged, _status("", _result_list(0, [])))
        _check_functions(functions, allow_exec)
        binary = kpt or shutil.which("kpt")
        if binary:
            rendered, result = _render_with_kpt(files, binary, allow_exec=allow_exec, timeout=timeout)
        else:
            rendered, result = _render_in_process(files, functions, in_process or {})
        return RenderResult(rendered, _status("", result))
    except _RenderError as err:
        return RenderResult(unchanged, _status(_one_line(str(err)), err.result or _result_list(1, [])))


def _status(error: str, result: Obj) -> dict[str, Any]:
    return {"error": error, "result": result}


def _result_list(exit_code: int, items: list[Obj]) -> Obj:
    return {"apiVersion": "kpt.dev/v1", "kind": "FunctionResultList", "metadata": {"name": "fnresults"},
            "exitCode": exit_code, "items": items}


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= _MAX_MESSAGE else line[: _MAX_MESSAGE - 3] + "..."


# --- the pipeline -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Function:
    package: str  # directory of its Kptfile, "" for the root
    stage: str  # "mutators" or "validators"
    spec: Obj

    @property
    def label(self) -> str:
        return str(self.spec.get("exec") or self.spec.get("image") or "?")


def _pipeline_functions(files: Mapping[str, str]) -> list[_Function]:
    """Every function of every Kptfile pipeline in the package, root package's in order."""
    functions = []
    for path in sorted(p for p in files if posixpath.basename(p) == KPTFILE):
        package = posixpath.dirname(path)
        try:
            documents = [d for d in yamltext.load_fast(files[path]) if d is not None]
        except yamltext.YamlTextError as err:
            raise _RenderError(f"cannot render: {path}: {err}") from err
        if not documents:
            continue
        kptfile = documents[0]
        pipeline = kptfile.get("pipeline") if isinstance(kptfile, dict) else None
        if pipeline is None:
            continue
        if not isinstance(pipeline, dict):
            raise _RenderError(f"cannot render: {path}: pipeline is not a mapping")
        for stage in ("mutators", "validators"):
            entries = pipeline.get(stage) or []
            if not isinstance(entries, list):
                raise _RenderError(f"cannot render: {path}: pipeline.{stage} is not a list")
            for i, spec in enumerate(entries):
                if not isinstance(spec, dict) or bool(spec.get("image")) == bool(spec.get("exec")):
                    raise _RenderError(f"cannot render: {path}: pipeline.{stage}[{i}] must have exactly one of "
                                       "image and exec")
                functions.append(_Function(package, stage, spec))
    return functions


def _check_functions(functions: list[_Function], allow_exec: bool) -> None:
    execs = [f.label for f in functions if "exec" in f.spec and f.spec.get("exec")]
    if execs and not allow_exec:
        raise _RenderError(f"cannot render: exec functions are not allowed by the Repository: {', '.join(execs)}")


# --- kpt ----------------------------------------------------------------------------------------------


def _render_with_kpt(
    files: Mapping[str, str], kpt: str, *, allow_exec: bool, timeout: float
) -> tuple[dict[str, str], Obj]:
    with tempfile.TemporaryDirectory(prefix="porchkit-render-") as tmp:
        package = Path(tmp, _package_dir_name(files))
        results_dir = Path(tmp, "results")
        _write_tree(package, files)
        argv = [kpt, "fn", "render", str(package), "--results-dir", str(results_dir), "--truncate-output=false"]
        if allow_exec:
            argv.append("--allow-exec")
        returncode, stderr = _run(argv, cwd=tmp, timeout=timeout)
        result = _read_results(results_dir)
        if returncode != 0:
            raise _RenderError(_kpt_error(stderr, result, returncode), result)
        return _read_tree(package, files), result or _result_list(0, [])


def _package_dir_name(files: Mapping[str, str]) -> str:
    try:
        name = (yamltext.load_fast(files.get(KPTFILE, "")) or [None])[0]["metadata"]["name"]
    except (yamltext.YamlTextError, TypeError, KeyError, IndexError):
        name = None
    return name if isinstance(name, str) and _SAFE_DIR_NAME.match(name) and name != "results" else "package"


def _write_tree(root: Path, files: Mapping[str, str]) -> None:
    for path, text in files.items():
        target = root / _safe_path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8", newline="")
    root.mkdir(parents=True, exist_ok=True)


def _safe_path(path: str) -> str:
    normal = posixpath.normpath(path)
    if posixpath.isabs(normal) or normal == "." or normal.split("/")[0] == "..":
        raise _RenderError(f"cannot render: file path {path!r} is outside the package")
    return normal


def _read_tree(root: Path, original: Mapping[str, str]) -> dict[str, str]:
    """Every file under root as `{slash path: text}`, reusing the original string where unchanged."""
    found = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        try:
            text = path.read_bytes().decode("utf-8")
        except UnicodeDecodeError as err:
            raise _RenderError(f"cannot render: kpt wrote {rel}, which is not UTF-8 text") from err
        found[rel] = text
    out = {p: (t if found[p] == t else found[p]) for p, t in original.items() if p in found}
    out.update((p, t) for p, t in found.items() if p not in out)
    return out


def _run(argv: list[str], *, cwd: str, timeout: float) -> tuple[int, str]:
    """Run kpt in its own process group, so that a timeout also ends the functions it started."""
    try:
        proc = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
    except OSError as err:
        raise _RenderError(f"cannot render: cannot start kpt: {err}") from err
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as err:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise _RenderError(f"cannot render: kpt fn render timed out after {timeout:g}s") from err
    text = (stderr + stdout).decode("utf-8", "replace")  # kpt prints its progress on stderr
    return proc.returncode, text


def _read_results(results_dir: Path) -> Obj | None:
    try:
        data = yaml.safe_load((results_dir / "results.yaml").read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
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


# --- in-process ---------------------------------------------------------------------------------------


def _render_in_process(
    files: Mapping[str, str], functions: list[_Function], registry: Mapping[str, InProcessFunction]
) -> tuple[dict[str, str], Obj]:
    callables = [_lookup(registry, f) for f in functions]
    missing = [f.label for f, fn in zip(functions, callables, strict=True) if fn is None]
    if missing:
        raise _RenderError("cannot render: kpt is not installed, and the pipeline has functions porchkit cannot "
                           f"run itself: {', '.join(missing)}")
    if any(f.package for f in functions):
        raise _RenderError("cannot render: kpt is not installed, and subpackage pipelines need kpt")
    if selecting := [f.label for f in functions if f.spec.get("selectors") or f.spec.get("exclude")]:
        raise _RenderError(f"cannot render: kpt is not installed, and selectors need kpt: {', '.join(selecting)}")
    package = _Package.read(files)
    items = package.items()
    result_items: list[Obj] = []
    for function, fn in zip(functions, callables, strict=True):
        assert fn is not None  # checked above
        output = _call(function, fn, items, result_items)
        if function.stage == "mutators":
            items = output
    return package.write(items), _result_list(0, result_items)


def _lookup(registry: Mapping[str, InProcessFunction], function: _Function) -> InProcessFunction | None:
    command = function.spec.get("exec")
    if not isinstance(command, str):
        return None
    if command in registry:
        return registry[command]
    return next((fn for key, fn in registry.items() if _normal(key) == _normal(command)), None)


def _normal(command: str) -> str:
    try:
        return shlex.join(shlex.split(command))
    except ValueError:
        return command


def _call(function: _Function, fn: InProcessFunction, items: list[Obj], result_items: list[Obj]) -> list[Obj]:
    """Run one function on a copy of `items`; its output items, or _RenderError as kpt would fail."""
    resource_list: Obj = {"apiVersion": "config.kubernetes.io/v1", "kind": "ResourceList",
                          "items": copy.deepcopy(items)}
    config = _function_config(function, items)
    if config is not None:
        resource_list["functionConfig"] = config
    entry: Obj = {"exec": function.label}
    try:
        output = fn(resource_list)
    except Exception as err:  # a function's bug is this revision's render error, not porchkit's crash
        entry.update(exitCode=1, stderr=f"{type(err).__name__}: {err}")
        result_items.append(entry)
        raise _RenderError(f'function "{function.label}" failed: {type(err).__name__}: {err}',
                           _result_list(1, result_items)) from err
    results = output.get("results") if isinstance(output, dict) else None
    errors = [str(r.get("message", "")) for r in results or [] if isinstance(r, dict) and r.get("severity") == "error"]
    problem = _output_problem(output)
    entry["exitCode"] = 1 if errors or problem else 0
    if isinstance(results, list) and results:
        entry["results"] = results
    result_items.append(entry)
    if errors or problem:
        # krmfn's command exits non-zero on an error result, so kpt would fail this function too.
        raise _RenderError(f'function "{function.label}" failed: {"; ".join(errors) or problem}',
                           _result_list(1, result_items))
    return list(output["items"])


def _output_problem(output: Any) -> str:
    if not isinstance(output, dict) or not isinstance(output.get("items"), list):
        return "it did not return a ResourceList with items"
    for i, item in enumerate(output["items"]):
        meta = item.get("metadata") if isinstance(item, dict) else None
        if not (isinstance(item, dict) and item.get("apiVersion") and item.get("kind")
                and isinstance(meta, dict) and meta.get("name")):
            return f"output item {i} is not a KRM resource (apiVersion, kind, metadata.name)"
    return ""


def _function_config(function: _Function, items: list[Obj]) -> Obj | None:
    """The functionConfig kpt would send: configMap as a ConfigMap, configPath re-read from `items`."""
    if isinstance(function.spec.get("configMap"), dict):
        data = {str(k): _go_string(v) for k, v in function.spec["configMap"].items()}
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "function-input"}, "data": data}
    config_path = function.spec.get("configPath")
    if not config_path:
        return None
    wanted = posixpath.normpath(str(config_path))
    for item in items:
        if _item_path(item) == wanted:
            return _without_reader_annotations(copy.deepcopy(item))
    raise _RenderError(f'function "{function.label}": configPath {config_path} holds no resource of the package')


def _go_string(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


# --- the package as a ResourceList, and back --------------------------------------------------------------


@dataclass
class _File:
    text: str
    documents: list[str]  # split_documents(text)
    objects: list[tuple[int, Obj]]  # (position in documents, data), in order: index = list position


@dataclass
class _Package:
    files: Mapping[str, str]
    resources: dict[str, _File]

    @classmethod
    def read(cls, files: Mapping[str, str]) -> _Package:
        resources = {}
        for path in sorted(files):
            if not (posixpath.basename(path) == KPTFILE or path.endswith(_RESOURCE_SUFFIXES)):
                continue
            try:
                objects = yamltext.load_objects(files[path])
            except yamltext.YamlTextError as err:
                raise _RenderError(f"cannot render: {path}: {err}") from err
            for _, obj in objects:
                if problem := _krm_problem(obj):
                    raise _RenderError("cannot render: input resource list must contain only KRM resources: "
                                       f"{path}: resource must have {problem}")
            if objects:
                resources[_safe_path(path)] = _File(files[path], yamltext.split_documents(files[path]), objects)
        return cls(files, resources)

    def items(self) -> list[Obj]:
        out = []
        for path, file in self.resources.items():
            for index, (_, obj) in enumerate(file.objects):
                item = copy.deepcopy(obj)
                annotations = item["metadata"].get("annotations")
                if not isinstance(annotations, dict):
                    annotations = item["metadata"]["annotations"] = {}
                annotations.update({PATH: path, INDEX: str(index), INTERNAL_PATH: path, INTERNAL_INDEX: str(index)})
                out.append(item)
        return out

    def write(self, items: list[Obj]) -> dict[str, str]:
        """The package's files holding `items`; a file whose objects are unchanged keeps its text."""
        placed: dict[str, dict[int, Obj]] = {}
        appended: dict[str, list[Obj]] = {}
        for item in items:
            path = _item_path(item) or _default_path(item)
            if posixpath.isabs(path) or path.split("/")[0] == "..":
                raise _RenderError(f"function must not modify resources outside of package: resource has path {path}")
            index = _item_index(item)
            obj = _without_reader_annotations(copy.deepcopy(item))
            if index is None:
                appended.setdefault(path, []).append(obj)
            elif index in placed.setdefault(path, {}):
                raise _RenderError(f'resource at path "{path}" and index "{index}" already exists')
            else:
                placed[path][index] = obj
        out = dict(self.files)
        for path in self.resources.keys() - placed.keys() - appended.keys():
            del out[path]  # every object of the file is gone, so is the file (kpt prunes it)
        for path in sorted(placed.keys() | appended.keys()):
            objects = [obj for _, obj in sorted(placed.get(path, {}).items())] + appended.get(path, [])
            out[path] = self._file_text(path, sorted(placed.get(path, {}).items()), appended.get(path, []), objects)
        return out

    def _file_text(self, path: str, placed: list[tuple[int, Obj]], appended: list[Obj], objects: list[Obj]) -> str:
        file = self.resources.get(path)
        if file is not None and len(objects) == len(file.objects) and all(
            yamltext.same_data(new, _without_reader_annotations(copy.deepcopy(old)))
            for new, (_, old) in zip(objects, file.objects, strict=True)
        ):
            return file.text
        if path.endswith(".json"):
            return "\n".join(json.dumps(obj, indent=2) for obj in objects) + "\n"
        pieces = []
        for index, obj in placed:
            if file is not None and index < len(file.objects):
                position, _ = file.objects[index]
                pieces.append(yamltext.edit_document(file.documents[position], _sync(obj)))
            else:
                pieces.append(_fresh_document(obj))
        pieces.extend(_fresh_document(obj) for obj in appended)
        return _join_documents(pieces)


def _krm_problem(obj: Obj) -> str:
    if not obj.get("apiVersion"):
        return "`apiVersion`"
    if not obj.get("kind"):
        return "`kind`"
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or not meta.get("name"):
        return "`metadata.name`"
    return ""


def _sync(new: Obj) -> Callable[[Any], None]:
    def edit(data: Any) -> None:
        for key in [k for k in data if k not in new]:
            yamltext.remove_key(data, key)
        for key, value in new.items():
            yamltext.set_key(data, key, value)
    return edit


def _fresh_document(obj: Obj) -> str:
    return yamltext.edit_document("{}\n", _sync(obj))


def _join_documents(pieces: list[str]) -> str:
    out = ""
    for i, piece in enumerate(pieces):
        if out and not out.endswith("\n"):
            out += "\n"
        if i and not any(line.startswith("---") for line in _head_lines(piece)):
            out += "---\n"
        out += piece
    return out


def _head_lines(document: str) -> Iterator[str]:
    """The lines of a document up to its first line of content (comments, directives, `---`)."""
    for line in document.splitlines():
        yield line
        if line.strip() and not line.lstrip().startswith(("#", "%")):
            return


def _item_path(item: Obj) -> str:
    annotations = (item.get("metadata") or {}).get("annotations") or {}
    path = annotations.get(INTERNAL_PATH) or annotations.get(PATH)
    return posixpath.normpath(str(path)) if path else ""


def _item_index(item: Obj) -> int | None:
    annotations = (item.get("metadata") or {}).get("annotations") or {}
    index = annotations.get(INTERNAL_INDEX, annotations.get(INDEX))
    try:
        return int(index) if index is not None and (_item_path(item)) else None
    except (TypeError, ValueError):
        return None


def _default_path(item: Obj) -> str:
    """kpt's file for a new resource without a path: `[<namespace>/]<kind>_<name>.yaml`."""
    meta = item.get("metadata") or {}
    name = f"{str(item.get('kind', '')).lower()}_{meta.get('name', '')}.yaml"
    return f"{meta['namespace']}/{name}" if meta.get("namespace") else name


def _without_reader_annotations(obj: Obj) -> Obj:
    meta = obj.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    if isinstance(annotations, dict):
        for key in _READER_ANNOTATIONS:
            annotations.pop(key, None)
        if not annotations:
            del meta["annotations"]  # type: ignore[union-attr]
    return obj
