"""`porchkit decorators reconcile -f DIR`: DecoratorControllers previewed on the embedded cluster.

    porchkit decorators reconcile -f DIR [-f FILE ...] [--resolve HOST=ADDR ...] [-o table|yaml]

Loads the manifests, runs the DecoratorControllers among them over the other objects
(decorators.preview), and prints what the passes did: a table with one row per target changed and
per attachment created, updated, deleted or recreated; or, with `-o yaml`, those objects as they
ended up (a deleted attachment is not printed). Rows are sorted by decorator, target and
attachment, documents by kind and key, so that two runs over the same manifests print the same
whichever order the controllers' workers ran in. A DecoratorController that cannot start, or a
target whose last pass failed, is one line on stderr each, and the exit status is 1.
"""

from __future__ import annotations

import argparse
from typing import IO

from decorators.preview import Preview, reconcile_manifests
from reconcile.errors import ReconcileError
from reconcile.hooks.preview import add_preview_command
from reconcile.manifests import in_key_order, print_columns, write_manifests

USER_ERRORS: tuple[type[BaseException], ...] = (ReconcileError,)  # ManifestError among them


def add_commands(parser: argparse.ArgumentParser) -> None:
    add_preview_command(parser, controllers="DecoratorControllers", printed="the targets and attachments they changed",
                        yaml_help="the changed objects", reconcile_manifests=reconcile_manifests,
                        print_table=print_table, print_yaml=print_yaml)


def print_table(preview: Preview, out: IO[str]) -> None:
    """One row per target changed and per attachment change, sorted (the changes of one attachment
    in the order they happened; a target written back by several passes is one row)."""
    rows: list[tuple[str, str, str, str]] = []
    for result in preview.passes:
        target = f"{result.target.kind} {result.key}"
        if result.target_changed:
            rows.append((result.decorator, target, "target updated", ""))
        rows += [(result.decorator, target, change.action, f"{change.kind.kind} {change.key}")
                 for change in result.changes]
    rows = sorted(dict.fromkeys(rows), key=lambda row: (row[0], row[1], row[3]))
    print_columns(("DECORATOR", "TARGET", "CHANGE", "ATTACHMENT"), rows, out, "no targets or attachments changed")


def print_yaml(preview: Preview, out: IO[str]) -> None:
    documents = [obj for _, obj in in_key_order(preview.targets)]
    documents += [obj for _, obj in in_key_order(preview.attachments) if obj is not None]
    write_manifests(documents, out)
