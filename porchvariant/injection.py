"""The config-injection mutation: in-cluster objects fill the package's injection points.

Porch's `ensureConfigInjection` (spec b.10 (3)). An injection point is a package object annotated
`kpt.dev/config-injection: required|optional`. For each point, the variant's `injectors` are tried
in order against the objects of the point's group, version and kind in the variant's namespace; the
first injector whose set group/version/kind equal the point's and whose name is one of those
objects wins. That object's `data` (a core-group ConfigMap) or `spec` (anything else) is copied
into the point, which is annotated `kpt.dev/injected-resource: <name>`. Every point gets a
condition `config.injection.<Kind>.<name>` in the Kptfile, and every required point a readiness
gate, so a draft whose injection failed is not ready; failing to inject is not an error.

Isolation: whatever the caller passes in `cluster_objects`, only objects whose metadata.namespace
is the variant's namespace are ever looked at, so a package cannot pull configuration out of
another namespace (with an empty namespace, nothing is injected).

Where this differs from Porch, and why:
* Points are visited in file-path order, then document order (Porch: Go map order), so messages
  such as the duplicate-condition one always name the files the same way round.
* Only files that mention `kpt.dev/config-injection` are parsed: a file that does not cannot hold
  a point, and parsing all of a 200-file package costs more than everything else here. Porch
  aborts on a syntax error in any YAML file; here only in those files (and the Kptfile).
* A package without a Kptfile is left alone when it has no injection points (Porch errors).
* Files and the Kptfile are only rewritten when their data changes, and then only the injected
  field, the annotation, the gates and the conditions are touched.
"""

from __future__ import annotations

import fnmatch
import posixpath
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from krmyaml import textedit
from porchvariant.errors import MutationError

__all__ = ["CONFIG_INJECTION", "INJECTED_RESOURCE", "inject", "injection_point_types", "record_in_kptfile"]

CONFIG_INJECTION = "kpt.dev/config-injection"
INJECTED_RESOURCE = "kpt.dev/injected-resource"
KPTFILE = "Kptfile"
_RESOURCE_FILES = ("*.yaml", "*.yml")
_NOT_MATCHED = "no resource matched any injection selector for this injection point"


@dataclass(slots=True)
class _Point:
    """One injection point and what happened to it."""

    file: str
    document: int  # position in textedit.split_documents(file text)
    obj: dict[str, Any]
    condition_type: str
    required: bool = False
    errors: list[str] = field(default_factory=list)
    injected_name: str = ""
    injected_field: str = ""
    injected_value: Any = None


def inject(
    namespace: str,
    injectors: Sequence[Mapping[str, Any]],
    resources: Mapping[str, str],
    cluster_objects: Iterable[Mapping[str, Any]],
    *,
    prr: str = "",
) -> tuple[dict[str, str], list[dict[str, str]], list[dict[str, str]]]:
    """Inject in-cluster configuration into the package's injection points.

    Returns (the package's files, a new dict in which every file not changed is the very same
    string; the condition of every injection point, sorted by type; a readiness gate
    `{conditionType: ...}` for every required point, sorted). The Kptfile gets the same gates
    (added to the ones it has) and conditions (upserted into the ones it has, all sorted by type).
    Raises MutationError, with Porch's texts, when a candidate file is not YAML, a point's
    annotation value is invalid or two points share a condition type, or when the Kptfile is
    missing (with points to record) or not a Kptfile. `prr` (`<ns>/<name>`) is for messages.
    """
    out = dict(resources)
    points = _find_points(resources)
    _check_points(points)
    visible = [obj for obj in cluster_objects if namespace and _namespace_of(obj) == namespace]
    for point in points:
        _choose(point, injectors, visible)
    for file in sorted({p.file for p in points if p.injected_name}):
        out[file] = _write_injected(out[file], [p for p in points if p.file == file and p.injected_name])

    conditions = sorted((_condition(p) for p in points), key=lambda c: c["type"])
    gates = [{"conditionType": t} for t in sorted({p.condition_type for p in points if p.required})]
    if KPTFILE in out:
        out[KPTFILE] = record_in_kptfile(out[KPTFILE], conditions, gates, prr)
    elif points:
        raise MutationError(f"\"{KPTFILE}\" not found in PackageRevisionResources '{prr}'")
    return out, conditions, gates


# --- finding and checking points ----------------------------------------------------------------------


def injection_point_types(resources: Mapping[str, str]) -> list[tuple[str, str]]:
    """The (apiVersion, kind) of the package's injection points, sorted: the kinds whose in-cluster
    objects `inject` needs. Raises MutationError where `inject` would, for a file that is not YAML."""
    return sorted({(_text_of(p.obj.get("apiVersion")), _text_of(p.obj.get("kind"))) for p in _find_points(resources)})


def _find_points(resources: Mapping[str, str]) -> list[_Point]:
    points = []
    for file in sorted(resources):
        text = resources[file]
        if not _is_resource_file(file) or CONFIG_INJECTION not in text:
            continue
        try:
            objects = textedit.load_objects(text)
        except textedit.YamlTextError as err:
            raise MutationError(f"{file}: {err}") from err
        for document, obj in objects:
            annotations = _metadata(obj).get("annotations")
            if isinstance(annotations, dict) and CONFIG_INJECTION in annotations:
                points.append(_new_point(file, document, obj, _text_of(annotations[CONFIG_INJECTION])))
    return points


def _new_point(file: str, document: int, obj: dict[str, Any], annotation: str) -> _Point:
    kind, name = _text_of(obj.get("kind")), _text_of(_metadata(obj).get("name"))
    point = _Point(file, document, obj, f"config.injection.{kind}.{name}", required=annotation == "required")
    if annotation not in ("required", "optional"):
        point.errors.append(
            f'{file}: {kind}/{name} has invalid "{CONFIG_INJECTION}" annotation value of "{annotation}"'
        )
    return point


def _check_points(points: list[_Point]) -> None:
    errors: list[str] = []
    first_with_type: dict[str, _Point] = {}
    for point in points:
        errors.extend(point.errors)
        if point.condition_type in first_with_type:
            errors.append(
                f'duplicate injection conditionType "{point.condition_type}" '
                f"({first_with_type[point.condition_type].file} and {point.file})"
            )
        first_with_type[point.condition_type] = point
    if errors:
        raise MutationError(f"errors in injection points: {', '.join(errors)}")


def _is_resource_file(path: str) -> bool:
    name = posixpath.basename(path)
    return name == KPTFILE or any(fnmatch.fnmatchcase(name, pattern) for pattern in _RESOURCE_FILES)


# --- choosing what to inject ----------------------------------------------------------------------------


def _choose(point: _Point, injectors: Sequence[Mapping[str, Any]], visible: list[Mapping[str, Any]]) -> None:
    """Find the in-cluster object for `point` and what to copy from it, or record why not."""
    if not injectors:
        point.errors.append("no injectors defined")
        return
    api_version, kind = _text_of(point.obj.get("apiVersion")), _text_of(point.obj.get("kind"))
    group, version = _group_version(api_version)
    same_type = [obj for obj in visible if _group_version(_text_of(obj.get("apiVersion"))) == (group, version)
                 and obj.get("kind") == kind]
    if not same_type:
        point.errors.append(f"no in-cluster resources of type {api_version}.{kind}")
        return
    for injector in injectors:
        if any(injector.get(key) is not None and injector.get(key) != wanted
               for key, wanted in (("group", group), ("version", version), ("kind", kind))):
            continue
        source = next((obj for obj in same_type if _metadata(obj).get("name") == injector.get("name")), None)
        if source is not None:
            _take_from(point, source)
            return


def _take_from(point: _Point, source: Mapping[str, Any]) -> None:
    name = _text_of(_metadata(source).get("name"))
    source_group, _ = _group_version(_text_of(source.get("apiVersion")))
    field_name = "data" if source_group == "" and source.get("kind") == "ConfigMap" else "spec"
    if source.get(field_name) is None:
        point.errors.append(f'field "{field_name}" not found in resource "{name}"')
        return
    point.injected_name, point.injected_field, point.injected_value = name, field_name, source[field_name]


def _condition(point: _Point) -> dict[str, str]:
    if point.injected_name:
        return {"type": point.condition_type, "status": "True",
                "message": f'injected resource "{point.injected_name}" from cluster', "reason": "ConfigInjected"}
    # key order is that of kpt's Condition type, which is how Porch writes them into the Kptfile
    return {"type": point.condition_type, "status": "False",
            "message": ", ".join(point.errors) or _NOT_MATCHED, "reason": "NoResourceSelected"}


# --- writing ---------------------------------------------------------------------------------------------


def _write_injected(text: str, points: list[_Point]) -> str:
    """The file with each point's field and annotation set; `text` itself if all were so already."""
    documents = textedit.split_documents(text)
    style = textedit.detect_style(text)
    for point in points:
        annotations = _metadata(point.obj).get("annotations") or {}
        if (annotations.get(INJECTED_RESOURCE) == point.injected_name
                and textedit.same_data(point.obj.get(point.injected_field), point.injected_value)):
            continue

        def edit(obj: Any, point: _Point = point) -> None:
            textedit.set_key(obj, point.injected_field, point.injected_value, before=("status",))
            textedit.set_key(obj["metadata"]["annotations"], INJECTED_RESOURCE, point.injected_name)

        try:
            documents[point.document] = textedit.edit_document(documents[point.document], edit, style=style)
        except textedit.YamlTextError as err:
            raise MutationError(f"{point.file}: {err}") from err
    new_text = "".join(documents)
    return text if new_text == text else new_text


def record_in_kptfile(text: str, conditions: list[dict[str, str]], gates: list[dict[str, str]], prr: str) -> str:
    """The Kptfile with the gates added and the conditions upserted (Porch's
    setInjectionPointConditionsAndGates); `text` itself if it had them all already."""
    try:
        objects = textedit.load_objects(text)
    except textedit.YamlTextError as err:
        raise MutationError(f"{KPTFILE}: {err}") from err
    if len(objects) != 1:
        raise MutationError(f'failed to parse "{KPTFILE}" of PackageRevisionResources {prr}: '
                            f"expected exactly one object, got {len(objects)}")
    document, kptfile = objects[0]
    if kptfile.get("kind") != KPTFILE:
        raise MutationError(f"\"{KPTFILE}\" does not contain kind \"{KPTFILE}\" in PackageRevisionResources '{prr}'")

    info, status = _section(kptfile, "info"), _section(kptfile, "status")
    old_gates = _entries(info, "readinessGates", "info")
    old_conditions = _entries(status, "conditions", "status")
    gate_plan = _gate_plan(old_gates, gates)
    condition_plan = _condition_plan(old_conditions, conditions)
    gates_done = not gate_plan or [g.get("conditionType") for g in old_gates] == [g["conditionType"]
                                                                                  for _, g in gate_plan]
    conditions_done = not condition_plan or textedit.same_data(old_conditions, [c for _, c in condition_plan])
    if gates_done and conditions_done:
        return text

    def edit(data: Any) -> None:
        if not gates_done:
            _put_list(data, "info", "readinessGates", gate_plan, before=("pipeline", "inventory", "status"),
                      inner_before=("description", "keywords", "man"))
        if not conditions_done:
            _put_list(data, "status", "conditions", condition_plan, before=(), inner_before=())

    try:
        return textedit.edit_file_document(text, document, edit)
    except textedit.YamlTextError as err:
        raise MutationError(f"{KPTFILE}: {err}") from err


def _gate_plan(old: list[dict[str, Any]], required: list[dict[str, str]]) -> list[tuple[int | None, dict[str, Any]]]:
    """Existing gates and the required ones, de-duplicated and sorted: (index of the existing
    entry to keep, or None for a new one; the entry)."""
    chosen: dict[str, tuple[int | None, dict[str, Any]]] = {}
    for i, gate in enumerate(old):
        chosen.setdefault(_text_of(gate.get("conditionType")), (i, gate))
    for gate in required:
        chosen.setdefault(gate["conditionType"], (None, gate))
    return [chosen[t] for t in sorted(chosen)]


def _condition_plan(
    old: list[dict[str, Any]], conditions: list[dict[str, str]]
) -> list[tuple[int | None, dict[str, Any]]]:
    """Existing conditions with ours upserted by type (as meta.SetStatusCondition does: the
    first of that type is updated), all sorted by type, stably."""
    plan: list[tuple[int | None, dict[str, Any]]] = [(i, dict(c)) for i, c in enumerate(old)]
    for condition in conditions:
        match = next((entry for _, entry in plan if entry.get("type") == condition["type"]), None)
        if match is None:
            plan.append((None, dict(condition)))
        else:
            match.update(status=condition["status"], reason=condition["reason"], message=condition["message"])
    return sorted(plan, key=lambda item: _text_of(item[1].get("type")))


def _put_list(
    data: Any,
    section: str,
    key: str,
    plan: list[tuple[int | None, dict[str, Any]]],
    *,
    before: tuple[str, ...],
    inner_before: tuple[str, ...],
) -> None:
    if not isinstance(data.get(section), Mapping):
        textedit.set_key(data, section, {}, before=before)
    holder = data[section]
    current = holder.get(key)
    if not isinstance(current, list):
        textedit.set_key(holder, key, [entry for _, entry in plan], before=inner_before)
        return
    for index, entry in plan:
        if index is not None:
            for name, value in entry.items():
                textedit.set_key(current[index], name, value)
    textedit.replace_items(current, [(index, None) if index is not None else (None, entry) for index, entry in plan])


# --- small readers ----------------------------------------------------------------------------------------


def _section(kptfile: dict[str, Any], name: str) -> dict[str, Any]:
    value = kptfile.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise MutationError(f"{KPTFILE}: {name} is not a mapping")
    return value


def _entries(section: dict[str, Any], key: str, section_name: str) -> list[dict[str, Any]]:
    value = section.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(entry, dict) for entry in value):
        raise MutationError(f"{KPTFILE}: {section_name}.{key} is not a list of mappings")
    return value


def _metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    metadata = obj.get("metadata")
    return metadata if isinstance(metadata, Mapping) else {}


def _namespace_of(obj: Any) -> str:
    return _text_of(_metadata(obj).get("namespace")) if isinstance(obj, Mapping) else ""


def _group_version(api_version: str) -> tuple[str, str]:
    group, slash, version = api_version.partition("/")
    return (group, version) if slash else ("", api_version)


def _text_of(value: Any) -> str:
    """A scalar as Go reads it into a string: booleans lower-case, null as ""."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
