"""A PackageVariant's three mutations of a package, in Porch's order, and Porch's idea of "changed".

Porch's `calculateDraftResources` (spec b.10): (1) package context, (2) Kptfile pipeline,
(3) config injection, each a pure function in its own module. Reading the PackageRevisionResources
and writing them back is the controller's business; this module only computes.

Each mutation gives back unchanged files as the very same strings, so a second pass over its own
output changes nothing, and `resources_changed` (text comparison, except the Kptfile, compared as
data as Porch does) reports no change: a published downstream does not get a needless edit draft.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from krmyaml import textedit
from porchvariant.injection import KPTFILE, inject
from porchvariant.kptfile_pipeline import edit_kptfile_pipeline
from porchvariant.package_context import apply_package_context

__all__ = ["MutationResult", "apply_mutations", "resources_changed"]


@dataclass(frozen=True, slots=True)
class MutationResult:
    """The mutated package and what injection found.

    `conditions` and `readiness_gates` are those of the injection points (see injection.inject);
    they are also recorded in the Kptfile, if the package has one.
    """

    resources: dict[str, str]
    changed: bool
    conditions: list[dict[str, str]]
    readiness_gates: list[dict[str, str]]


def apply_mutations(
    pv: Mapping[str, Any],
    resources: Mapping[str, str],
    cluster_objects: Iterable[Mapping[str, Any]],
    *,
    prr: str = "",
) -> MutationResult:
    """Apply the PackageVariant `pv`'s package context, pipeline and injectors to the package.

    `resources` is never modified. Only objects in the variant's own namespace are injected,
    whatever `cluster_objects` holds. A package without a Kptfile gets no pipeline edit.
    Raises MutationError (Porch's texts) if a mutation cannot be applied. `prr` (`<ns>/<name>`
    of the PackageRevisionResources) is for the messages.
    """
    metadata = pv.get("metadata") or {}
    name, namespace = str(metadata.get("name") or ""), str(metadata.get("namespace") or "")
    spec = pv.get("spec") or {}
    out = apply_package_context(spec, resources, prr=prr)
    if KPTFILE in out:
        out[KPTFILE] = edit_kptfile_pipeline(name, spec.get("pipeline"), out[KPTFILE], prr=prr)
    out, conditions, gates = inject(namespace, spec.get("injectors") or (), out, cluster_objects, prr=prr)
    return MutationResult(out, resources_changed(resources, out), conditions, gates)


def resources_changed(old: Mapping[str, str], new: Mapping[str, str]) -> bool:
    """Porch's test for "the mutations changed the package": a file added or gone, or a file's
    text differs, except the Kptfile, whose parsed data is compared instead (an unparsable
    Kptfile that differs in text has changed).

    Porch compares Kptfiles as kpt's KptFile struct, marshalled: a field that is null, "" or an
    empty list reads as Go's zero value and marshals like no field at all (every list in the
    struct is omitempty), so `mutators: []` and no `mutators` are the same Kptfile; so they are
    here. Unlike Porch, fields the struct does not know are compared too."""
    if len(old) != len(new):
        return True
    for path, text in old.items():
        if path not in new:
            return True
        if new[path] is text or new[path] == text:
            continue
        if path != KPTFILE or not _same_kptfile(text, new[path]):
            return True
    return False


def _same_kptfile(a: str, b: str) -> bool:
    try:
        return textedit.same_data(_without_zeros(_objects(a)), _without_zeros(_objects(b)))
    except textedit.YamlTextError:
        return False


def _without_zeros(value: Any) -> Any:
    """`value` without the mapping entries that hold null, "" or [] (after the same pruning)."""
    if isinstance(value, dict):
        pruned = {key: _without_zeros(item) for key, item in value.items()}
        return {key: item for key, item in pruned.items() if item is not None and item != "" and item != []}
    if isinstance(value, list):
        return [_without_zeros(item) for item in value]
    return value


def _objects(text: str) -> list[dict[str, Any]]:
    return [obj for _, obj in textedit.load_objects(text)]
