"""The package-context mutation: a PackageVariant's `packageContext` edits `package-context.yaml`.

Porch's `ensurePackageContext` (spec b.10 (1)). The file must hold one ConfigMap named
`kptfile.kpt.dev` with a `data` mapping; every `packageContext.data` entry is set in it, then every
`packageContext.removeKeys` entry is deleted, so a key in both ends up removed (Porch's docs say the
opposite; its code does this). Keys already there keep their place and comments, new keys are
appended. Error texts are Porch's. Unlike Porch, the file is only rewritten if its data changes,
and then only the edited keys are touched (Porch rewrites the whole `data` mapping with every
value turned into a string).

A `data:` that is null counts as empty, as in Porch (kyaml reads its missing content as no
entries). Where Porch would quietly flatten what cannot be a ConfigMap's data (a scalar `data`, or
a value that is a list or a mapping, read as ""), this is an error instead, with Porch's
"invalid data field" prefix: rewriting the file would destroy those values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from krmyaml import textedit
from porchvariant.errors import MutationError

__all__ = ["CONTEXT_CONFIGMAP", "PACKAGE_CONTEXT_FILE", "apply_package_context"]

PACKAGE_CONTEXT_FILE = "package-context.yaml"
CONTEXT_CONFIGMAP = "kptfile.kpt.dev"


def apply_package_context(spec: Mapping[str, Any], resources: Mapping[str, str], *, prr: str = "") -> dict[str, str]:
    """The package's files with `spec.packageContext` applied to package-context.yaml.

    Returns a new dict; every file it did not change is the same string as in `resources`.
    Nothing happens without a packageContext, or when both its data and removeKeys are empty.
    Raises MutationError with Porch's texts when the file is missing, unparsable, not the
    `kptfile.kpt.dev` ConfigMap, or has no `data` mapping. `prr` (`<ns>/<name>`) is for messages.
    """
    context = spec.get("packageContext") or {}
    to_set: Mapping[str, Any] = context.get("data") or {}
    to_remove: list[str] = list(context.get("removeKeys") or ())
    out = dict(resources)
    if not to_set and not to_remove:
        return out

    text = resources.get(PACKAGE_CONTEXT_FILE)
    if text is None:
        raise MutationError(f'"{PACKAGE_CONTEXT_FILE}" not found in PackageRevisionResources \'{prr}\'')
    index, data = _context_data(text, prr)

    wanted = {**data, **to_set}
    for key in to_remove:
        wanted.pop(key, None)
    if textedit.same_data(wanted, data):
        return out

    def edit(configmap: Any) -> None:
        if not isinstance(configmap["data"], Mapping):
            textedit.set_key(configmap, "data", {})  # a null `data:`
        node = configmap["data"]
        for key, value in to_set.items():
            textedit.set_key(node, key, value)
        for key in to_remove:
            textedit.remove_key(node, key)

    try:
        out[PACKAGE_CONTEXT_FILE] = textedit.edit_file_document(text, index, edit)
    except textedit.YamlTextError as err:
        raise _unparsable(prr, err) from err
    return out


def _context_data(text: str, prr: str) -> tuple[int, dict[str, Any]]:
    """The position of the context ConfigMap's document in the file, and its `data`."""
    try:
        objects = textedit.load_objects(text)
        if len(objects) != 1:
            raise textedit.YamlTextError(f"expected exactly one object, got {len(objects)}")
    except textedit.YamlTextError as err:
        raise _unparsable(prr, err) from err
    index, configmap = objects[0]
    if configmap.get("kind") != "ConfigMap":
        raise MutationError(
            f"\"{PACKAGE_CONTEXT_FILE}\" does not contain kind \"ConfigMap\" in PackageRevisionResources '{prr}'"
        )
    metadata = configmap.get("metadata")
    if not isinstance(metadata, dict) or metadata.get("name") != CONTEXT_CONFIGMAP:
        raise MutationError(
            f'"{PACKAGE_CONTEXT_FILE}" does not contain resource named "{CONTEXT_CONFIGMAP}" '
            f"in PackageRevisionResources '{prr}'"
        )
    if "data" not in configmap:
        raise MutationError(f"PackageRevisionResources {prr} PackageContext no data field found")
    data = {} if configmap["data"] is None else configmap["data"]
    if not isinstance(data, dict) or any(isinstance(v, dict | list) for v in data.values()):
        raise MutationError(
            f"PackageRevisionResources {prr} PackageContext invalid data field: data is not a mapping of strings"
        )
    return index, data


def _unparsable(prr: str, err: textedit.YamlTextError) -> MutationError:
    return MutationError(f'failed to parse "{PACKAGE_CONTEXT_FILE}" of PackageRevisionResources {prr}: {err}')
