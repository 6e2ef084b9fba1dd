"""`porchkit decorators reconcile -f` and `porchkit map reconcile -f`: the command both hook
controllers' previews share (the flags of reconcile.manifests.add_local_arguments)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import IO, Protocol, TypeVar

from reconcile.errors import one_line
from reconcile.hooks.build import parse_resolve
from reconcile.manifests import start_local_run


class Preview(Protocol):
    errors: list[str]


P = TypeVar("P", bound=Preview)


def run_hook_preview(args: argparse.Namespace, reconcile_manifests: Callable[..., P],
                     print_table: Callable[[P, IO[str]], None], print_yaml: Callable[[P, IO[str]], None]) -> int:
    """A hook controller's `reconcile -f` command (the flags of `add_local_arguments`): run the
    preview, print it as a table or as YAML, one line on stderr per error; exit 1 if any."""
    start_local_run(args.verbose)
    preview = reconcile_manifests(args.files, resolve=parse_resolve(args.resolve), timeout=args.timeout)
    (print_yaml if args.output == "yaml" else print_table)(preview, sys.stdout)
    for line in preview.errors:
        print(f"porchkit: {one_line(line)}", file=sys.stderr)
    return 1 if preview.errors else 0
