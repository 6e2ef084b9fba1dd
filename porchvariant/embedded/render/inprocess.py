"""The in-process render engine: porchkit's own KRM functions run over the package without kpt.

Used when kpt is not there. Every function of the pipeline must be an `exec:` found among the
caller's callables (keyed by their `exec:` string, compared after shell-style normalisation);
image functions, subpackage pipelines and selectors need kpt, and a render that needs them fails
with a RenderError saying so. The package is turned into a ResourceList as kpt builds one (reader
annotations `path` and `index` on every item, the functionConfig from `configMap` or
`configPath`), each function gets a copy of the items, and afterwards only the files whose
objects changed are written again, through krmyaml.textedit, so that comments and layout stay. A
function that raises, returns an error result or returns something that is not a ResourceList of
KRM resources fails the render as kpt would fail it.
"""

from __future__ import annotations

import copy
import json
import posixpath
import shlex
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from krmyaml import textedit
from porchvariant.embedded.render.pipeline import KPTFILE, Function, Obj, RenderError, result_list, safe_path

InProcessFunction = Callable[[Obj], Obj]
"""Takes a ResourceList and returns one (items, and optionally results), like a KRM function."""

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


def render_in_process(
    files: Mapping[str, str], functions: list[Function], registry: Mapping[str, InProcessFunction]
) -> tuple[dict[str, str], Obj]:
    """The rendered files and kpt's result list; RenderError when the pipeline cannot run here or fails."""
    callables = [_lookup(registry, f) for f in functions]
    missing = [f.label for f, fn in zip(functions, callables, strict=True) if fn is None]
    if missing:
        raise RenderError("cannot render: kpt is not installed, and the pipeline has functions porchkit cannot "
                          f"run itself: {', '.join(missing)}")
    if any(f.package for f in functions):
        raise RenderError("cannot render: kpt is not installed, and subpackage pipelines need kpt")
    if selecting := [f.label for f in functions if f.spec.get("selectors") or f.spec.get("exclude")]:
        raise RenderError(f"cannot render: kpt is not installed, and selectors need kpt: {', '.join(selecting)}")
    package = _Package.read(files)
    items = package.items()
    result_items: list[Obj] = []
    for function, fn in zip(functions, callables, strict=True):
        assert fn is not None  # checked above
        output = _call(function, fn, items, result_items)
        if function.stage == "mutators":
            items = output
    return package.write(items), result_list(0, result_items)


def _lookup(registry: Mapping[str, InProcessFunction], function: Function) -> InProcessFunction | None:
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


def _call(function: Function, fn: InProcessFunction, items: list[Obj], result_items: list[Obj]) -> list[Obj]:
    """Run one function on a copy of `items`; its output items, or RenderError as kpt would fail."""
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
        raise RenderError(f'function "{function.label}" failed: {type(err).__name__}: {err}',
                          result_list(1, result_items)) from err
    results = output.get("results") if isinstance(output, dict) else None
    errors = [str(r.get("message", "")) for r in results or [] if isinstance(r, dict) and r.get("severity") == "error"]
    problem = _output_problem(output)
    entry["exitCode"] = 1 if errors or problem else 0
    if isinstance(results, list) and results:
        entry["results"] = results
    result_items.append(entry)
    if errors or problem:
        # krmfn's command exits non-zero on an error result, so kpt would fail this function too.
        raise RenderError(f'function "{function.label}" failed: {"; ".join(errors) or problem}',
                          result_list(1, result_items))
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


def _function_config(function: Function, items: list[Obj]) -> Obj | None:
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
    raise RenderError(f'function "{function.label}": configPath {config_path} holds no resource of the package')


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
                objects = textedit.load_objects(files[path])
            except textedit.YamlTextError as err:
                raise RenderError(f"cannot render: {path}: {err}") from err
            for _, obj in objects:
                if problem := _krm_problem(obj):
                    raise RenderError("cannot render: input resource list must contain only KRM resources: "
                                      f"{path}: resource must have {problem}")
            if objects:
                resources[safe_path(path)] = _File(files[path], textedit.split_documents(files[path]), objects)
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
                raise RenderError(f"function must not modify resources outside of package: resource has path {path}")
            index = _item_index(item)
            obj = _without_reader_annotations(copy.deepcopy(item))
            if index is None:
                appended.setdefault(path, []).append(obj)
            elif index in placed.setdefault(path, {}):
                raise RenderError(f'resource at path "{path}" and index "{index}" already exists')
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
            textedit.same_data(new, _without_reader_annotations(copy.deepcopy(old)))
            for new, (_, old) in zip(objects, file.objects, strict=True)
        ):
            return file.text
        if path.endswith(".json"):
            return "\n".join(json.dumps(obj, indent=2) for obj in objects) + "\n"
        pieces = []
        for index, obj in placed:
            if file is not None and index < len(file.objects):
                position, _ = file.objects[index]
                pieces.append(textedit.edit_document(file.documents[position], _sync(obj)))
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
            textedit.remove_key(data, key)
        for key, value in new.items():
            textedit.set_key(data, key, value)
    return edit


def _fresh_document(obj: Obj) -> str:
    return textedit.edit_document("{}\n", _sync(obj))


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
