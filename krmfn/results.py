"""Function results: what a function reports to the person running kpt.

A result is one entry of the ResourceList's `results` list (KRM functions spec v1; krm-functions
spec §4): a message, a severity, and optionally the object, field and file it is about. kpt
prints them as `[severity] apiVersion/Kind/namespace/name field.path: message`.

kpt itself never decides success from a severity. krmfn follows the convention of the Go and
TypeScript SDKs instead: **an error result means a non-zero exit** (`exit_code`), and the runner
then writes the input items back unchanged alongside the results.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal, NamedTuple

from krmfn import annotations as kpt_annotations

Severity = Literal["error", "warning", "info"]
SEVERITIES: tuple[Severity, ...] = ("error", "warning", "info")


class Result(NamedTuple):
    """One result. `resource_ref`, `field` and `file` are the plain mappings the spec defines."""

    message: str
    severity: str | None = "error"  # None: left out (results read from input may lack one)
    resource_ref: dict[str, Any] | None = None  # {apiVersion, kind, name, namespace?}
    field: dict[str, Any] | None = None  # {path, currentValue?, proposedValue?}
    file: dict[str, Any] | None = None  # {path, index?}
    tags: dict[str, str] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The result as it appears in a ResourceList, fields in the spec's order."""
        out: dict[str, Any] = {"message": self.message}
        if self.severity is not None:
            out["severity"] = self.severity
        for key, value in (
            ("resourceRef", self.resource_ref),
            ("field", self.field),
            ("file", self.file),
            ("tags", self.tags),
        ):
            if value:
                out[key] = value
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Result:
        """A result read from input: lenient, keeping what it finds (old forms included)."""
        severity = data.get("severity")

        def mapping(key: str) -> dict[str, Any] | None:
            value = data.get(key)
            return dict(value) if isinstance(value, Mapping) else None

        return cls(
            message=str(data.get("message", "")),
            severity=None if severity is None else str(severity),
            resource_ref=mapping("resourceRef"),
            field=mapping("field"),
            file=mapping("file"),
            tags=mapping("tags"),
        )


def result(
    message: str,
    severity: Severity,
    *,
    resource: Mapping[str, Any] | None = None,
    field: str | Mapping[str, Any] | None = None,
    file: str | Mapping[str, Any] | None = None,
    tags: Mapping[str, str] | None = None,
) -> Result:
    """A result about `resource` (an object), its `field` (a path like `spec.replicas`, or a
    mapping with `path`, `currentValue`, `proposedValue`) and the `file` it lives in.

    When `resource` is given, `resourceRef` comes from its apiVersion, kind, name and namespace,
    and `file` from its path and index annotations unless `file` is given. Raises ValueError
    for an unknown severity.
    """
    if severity not in SEVERITIES:
        raise ValueError(f"severity must be one of {', '.join(SEVERITIES)}, not {severity!r}")
    ref = resource_ref(resource) if resource is not None else None
    if file is None and resource is not None:
        file_ref = _file_of(resource)
    elif isinstance(file, str):
        file_ref = {"path": file}
    else:
        file_ref = dict(file) if file is not None else None
    field_ref = {"path": field} if isinstance(field, str) else (dict(field) if field is not None else None)
    return Result(message, severity, ref, field_ref, file_ref, dict(tags) if tags else None)


def error(message: str, **where: Any) -> Result:
    """An error result (see `result` for the keywords). Any error result fails the function."""
    return result(message, "error", **where)


def warning(message: str, **where: Any) -> Result:
    """A warning result (see `result` for the keywords)."""
    return result(message, "warning", **where)


def info(message: str, **where: Any) -> Result:
    """An info result (see `result` for the keywords)."""
    return result(message, "info", **where)


def exit_code(results: Iterable[Result]) -> int:
    """1 if any result has severity `error`, else 0 (the Go SDK's `Results.ExitCode`)."""
    return 1 if any(r.severity == "error" for r in results) else 0


def resource_ref(obj: Mapping[str, Any]) -> dict[str, Any]:
    """`{apiVersion, kind, name, namespace?}` of an object, for `resourceRef`."""
    metadata = obj.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    ref: dict[str, Any] = {
        "apiVersion": str(obj.get("apiVersion", "")),
        "kind": str(obj.get("kind", "")),
        "name": str(metadata.get("name", "")),
    }
    if metadata.get("namespace"):
        ref["namespace"] = str(metadata["namespace"])
    return ref


def _file_of(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    path = kpt_annotations.path(obj)
    if path is None:
        return None
    index = kpt_annotations.index(obj)
    return {"path": path} if index is None else {"path": path, "index": index}
