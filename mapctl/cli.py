"""`porchkit map reconcile -f DIR`: MapControllers previewed on the embedded cluster.

    porchkit map reconcile -f DIR [-f FILE ...] [--resolve HOST=ADDR ...] [-o table|yaml]

Loads the manifests, runs the MapControllers among them over the other objects (mapctl.preview),
and prints what the passes did: a table with one row per output created, updated, deleted or
recreated, and one per parent with the counts of its status; or, with `-o yaml`, the outputs and
parents as they ended up (a deleted output is not printed). Rows are sorted by controller,
parent, input and output, documents by kind and key, so that two runs over the same manifests
print the same whichever order the controllers' workers ran in. A MapController that cannot
start, or an input whose last pass failed, is one line on stderr each, and the exit status is 1.
"""

from __future__ import annotations

import argparse
from typing import IO, Any

from mapctl.preview import Preview, reconcile_manifests
from reconcile.errors import ReconcileError
from reconcile.hooks.preview import add_preview_command
from reconcile.manifests import in_key_order, print_columns, write_manifests

USER_ERRORS: tuple[type[BaseException], ...] = (ReconcileError,)


def add_commands(parser: argparse.ArgumentParser) -> None:
    add_preview_command(parser, controllers="MapControllers",
                        printed="the outputs they changed and their parents' status",
                        yaml_help="the changed outputs and the parents", reconcile_manifests=reconcile_manifests,
                        print_table=print_table, print_yaml=print_yaml)


def print_table(preview: Preview, out: IO[str]) -> None:
    """One row per output change, sorted (the changes of one output in the order they happened),
    then one per parent with its counts."""
    rows: list[tuple[str, ...]] = []
    for result in preview.passes:
        for change in result.changes:
            rows.append((result.controller, str(result.key.parent_key), _input(result.key), change.action,
                         f"{change.kind.kind} {change.key}"))
    rows = sorted(dict.fromkeys(rows), key=lambda row: (*row[:3], row[4]))
    print_columns(("MAPCONTROLLER", "PARENT", "INPUT", "CHANGE", "OUTPUT"), rows, out, "no outputs changed")
    parents = [(f"{kind.kind} {key}", _counts(obj)) for (kind, key), obj in in_key_order(preview.parents)]
    if parents:
        print(file=out)
        print_columns(("PARENT", "STATUS"), parents, out)


def print_yaml(preview: Preview, out: IO[str]) -> None:
    documents = [obj for _, obj in in_key_order(preview.outputs) if obj is not None]
    documents += [obj for _, obj in in_key_order(preview.parents)]
    write_manifests(documents, out)


def _input(key: Any) -> str:
    return f"{key.kind} {key.name}" if key.name else key.map_key


def _counts(parent: dict[str, Any]) -> str:
    """`inputs: persistentvolumeclaims=2; outputs: volumesnapshots=2 (Ready=0)`, from the status."""
    found = parent.get("status")
    status: dict[str, Any] = found if isinstance(found, dict) else {}
    inputs: dict[str, Any] = status["inputs"] if isinstance(status.get("inputs"), dict) else {}
    outputs: dict[str, Any] = status["outputs"] if isinstance(status.get("outputs"), dict) else {}
    parts = [f"{plural}={counts.get('total', 0)}" for plural, counts in inputs.items() if isinstance(counts, dict)]
    made = []
    for plural, counts in outputs.items():
        if not isinstance(counts, dict):
            continue  # another writer's entry
        extra = ", ".join(f"{k}={v}" for k, v in counts.items() if k != "total")
        made.append(f"{plural}={counts.get('total', 0)}" + (f" ({extra})" if extra else ""))
    return f"inputs: {', '.join(parts) or '-'}; outputs: {', '.join(made) or '-'}"
