"""The Kptfile pipeline mutation: a PackageVariant's functions go first in the package's pipeline.

Porch's `ensureKRMFunctions` (spec b.10 (2)). For `mutators` and `validators` separately: the
entries this PackageVariant put there on an earlier pass are dropped, and one entry per function
of the variant's `spec.pipeline` is put in front, named `PackageVariant.<pv>.<function name>.<index
in its list>` and without its empty fields (as kpt's Function struct, all omitempty, writes it);
every other entry stays, in order, with its comments. A list left empty is deleted,
and so is `pipeline` when neither list is left.

Recognising "ours". Porch's rule: the name splits on "." into exactly four parts `PackageVariant`,
`<pv>`, anything, and an integer (Go's strconv.Atoi). Kubernetes names may contain dots, and a
variant named `a.b`, or a function named `x.y`, makes a name of five parts that Porch never
recognises again, so every reconcile prepends another copy. Here an entry is ours if
(1) its name is one this call generates, or
(2) it starts with `PackageVariant.<pv>.` and the rest is `<fn>.<integer>` with no dot in `<fn>`.
With no dot in the variant's name, (2) is exactly Porch's rule; (1) makes the edit a fixpoint
whatever the names. What is still ambiguous, because a name does not say where the variant's name
ends: an entry left behind by a function with a dotted name that the variant no longer has is not
recognised, and stays; and for variants `a` and `a.b` on one package, `PackageVariant.a.b.c.0`
(variant `a`, function `b.c`) also reads as variant `a.b`'s function `c`, which removes it.

The Kptfile text is only rewritten when its data changes (Porch rewrites it on every pass), so a
package that already has the pipeline comes back as the same string.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from krmyaml import textedit
from porchvariant.errors import MutationError

__all__ = ["edit_kptfile_pipeline", "is_variant_function", "variant_function_name"]

PREFIX = "PackageVariant"
FIELDS = ("mutators", "validators")  # kpt's order, which new keys follow too
_GO_INT = re.compile(r"[+-]?[0-9]+")
_INT64 = range(-(2**63), 2**63)


def variant_function_name(pv_name: str, function_name: str, index: int) -> str:
    """The name a variant's function gets in the Kptfile: `PackageVariant.<pv>.<fn>.<index>`."""
    return f"{PREFIX}.{pv_name}.{function_name}.{index}"


def is_variant_function(name: Any, pv_name: str, generated: frozenset[str] = frozenset()) -> bool:
    """Whether a pipeline entry named `name` was put there by the variant `pv_name` (rules above)."""
    if not isinstance(name, str):
        return False
    if name in generated:
        return True
    prefix = f"{PREFIX}.{pv_name}."
    if not name.startswith(prefix):
        return False
    parts = name[len(prefix):].split(".")
    return len(parts) == 2 and _is_go_int(parts[1])


def _is_go_int(text: str) -> bool:
    return _GO_INT.fullmatch(text) is not None and int(text) in _INT64


def edit_kptfile_pipeline(
    pv_name: str, pipeline: Mapping[str, Any] | None, kptfile_text: str, *, prr: str = ""
) -> str:
    """The Kptfile text with the variant's pipeline in place; `kptfile_text` itself if already so.

    `pipeline` is the variant's `spec.pipeline` ({mutators, validators}: lists of kpt functions).
    Raises MutationError if the Kptfile is not one YAML object, or its pipeline is not made of
    lists of functions with string names. `prr` (`<ns>/<name>`) is for the messages.
    """
    try:
        objects = textedit.load_objects(kptfile_text)
        if len(objects) != 1:
            raise textedit.YamlTextError(f"expected exactly one object, got {len(objects)}")
    except textedit.YamlTextError as err:
        raise MutationError(f'failed to parse "Kptfile" of PackageRevisionResources {prr}: {err}') from err
    index, kptfile = objects[0]

    current = kptfile.get("pipeline")
    current = current if isinstance(current, dict) else {}
    wanted = {field: _wanted_list(pv_name, field, current.get(field), (pipeline or {}).get(field)) for field in FIELDS}
    if _already_so(kptfile, wanted):
        return kptfile_text

    def edit(data: Any) -> None:
        _apply(data, wanted)

    try:
        return textedit.edit_file_document(kptfile_text, index, edit)
    except textedit.YamlTextError as err:
        raise MutationError(f'failed to parse "Kptfile" of PackageRevisionResources {prr}: {err}') from err


def _wanted_list(
    pv_name: str, field: str, existing: Any, functions: Sequence[Mapping[str, Any]] | None
) -> list[tuple[int | None, Any]]:
    """The list a field should hold: (None, new entry) for each variant function, then
    (index, entry) for each existing entry that is not the variant's."""
    generated: list[tuple[int | None, Any]] = [
        (None, {"name": variant_function_name(pv_name, str(function.get("name") or ""), i),
                **_without_zero_fields({key: value for key, value in function.items() if key != "name"})})
        for i, function in enumerate(functions or ())
    ]
    names = frozenset(entry["name"] for _, entry in generated)
    kept: list[tuple[int | None, Any]] = []
    for i, entry in enumerate(_existing_entries(field, existing)):
        name = entry.get("name")
        if name is not None and not isinstance(name, str):
            raise MutationError(f"could not retrieve field name: pipeline.{field}[{i}].name is not a string")
        if not is_variant_function(name, pv_name, names):
            kept.append((i, entry))
    return generated + kept


def _without_zero_fields(function: Mapping[str, Any]) -> dict[str, Any]:
    """A function as Porch writes it, through kpt's Function struct: every field of it and of its
    selectors is omitempty, so a field that is null, "", [] or {} is left out."""
    out = {}
    for key, value in function.items():
        if key in ("selectors", "exclude") and isinstance(value, list):
            value = [_without_zero_fields(item) if isinstance(item, Mapping) else item for item in value]
        if value is not None and value != "" and value != [] and value != {}:
            out[key] = value
    return out


def _existing_entries(field: str, existing: Any) -> list[dict[str, Any]]:
    if existing is None:
        return []
    if not isinstance(existing, list):
        raise MutationError(f"pipeline.{field} in the Kptfile is not a list")
    for i, entry in enumerate(existing):
        if not isinstance(entry, dict):
            raise MutationError(f"pipeline.{field}[{i}] in the Kptfile is not a function (a mapping)")
    return existing


def _already_so(kptfile: dict[str, Any], wanted: dict[str, list[tuple[int | None, Any]]]) -> bool:
    if not any(wanted.values()):
        return "pipeline" not in kptfile
    current = kptfile.get("pipeline")
    if not isinstance(current, dict):
        return False
    return all(
        (field not in current) if not items else textedit.same_data(current.get(field), [entry for _, entry in items])
        for field, items in wanted.items()
    )


def _apply(kptfile: Any, wanted: dict[str, list[tuple[int | None, Any]]]) -> None:
    if not any(wanted.values()):
        textedit.remove_key(kptfile, "pipeline")
        return
    if not isinstance(kptfile.get("pipeline"), Mapping):
        # a missing pipeline goes where kpt puts it; one that is not a mapping is replaced, as Porch does
        textedit.set_key(kptfile, "pipeline", {}, before=("inventory", "status"))
    pipeline = kptfile["pipeline"]
    for position, (field, items) in enumerate(wanted.items()):
        if not items:
            textedit.remove_key(pipeline, field)
        elif isinstance(pipeline.get(field), list):
            textedit.replace_items(pipeline[field], [(i, None) if i is not None else (None, e) for i, e in items])
        else:
            textedit.set_key(pipeline, field, [entry for _, entry in items], before=FIELDS[position + 1:])
