"""`porchkit fn NAME`: the KRM functions porchkit ships, each run by kpt as an exec function.

    kpt fn eval DIR --exec "porchkit fn NAME" [--fn-config CONFIG.yaml | -- key=value ...]
    kpt fn render DIR --allow-exec          # Kptfile pipeline: `- exec: "porchkit fn NAME"`

A function is registered in `krmfn.registry.FUNCTIONS` by name, as `"module:callable"` plus a
one-line help; its module is imported only when that function runs. The callable takes a
`ResourceList` (see `krmfn.runner`). `porchkit fn NAME --help` prints the module's docstring, which is the
function's documentation (`kpt fn doc --image IMAGE` runs the function image with `--help`).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from krmfn import runner
from krmfn.errors import KrmfnError
from krmfn.registry import FUNCTIONS

if TYPE_CHECKING:
    import argparse

USER_ERRORS: tuple[type[BaseException], ...] = (KrmfnError,)



def add_commands(parser: argparse.ArgumentParser) -> None:
    """Mount one sub-command per registered function on the `porchkit fn` group parser."""
    functions = parser.add_subparsers(dest="fn", metavar="FUNCTION", required=True)
    for name, (target, help_text) in FUNCTIONS.items():
        command = functions.add_parser(name, help=help_text, description=help_text)
        command.set_defaults(run=functools.partial(_run_function, name, target))


def run_without_parser(argv: Sequence[str]) -> int | None:
    """`porchkit fn NAME` and nothing else, straight to the function (what kpt runs every time),
    and `porchkit fn NAME --help`; None for anything else, which the full command line handles."""
    if len(argv) == 1 and argv[0] in FUNCTIONS:
        return _run_function(argv[0], FUNCTIONS[argv[0]][0])
    if len(argv) == 2 and argv[0] in FUNCTIONS and argv[1] in ("-h", "--help"):
        try:
            print(help_text(argv[0]), flush=True)
        except BrokenPipeError:  # `porchkit fn NAME --help | head`: nobody is left to read the rest
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    return None


def help_text(name: str) -> str:
    """The documentation of function `name`: a usage line and its module's docstring."""
    target, one_line = FUNCTIONS[name]
    doc = inspect.getdoc(importlib.import_module(target.partition(":")[0])) or one_line
    return f"usage: porchkit fn {name} < resource-list.yaml > resource-list.yaml\n\n{doc}"


def _run_function(name: str, target: str, args: argparse.Namespace | None = None) -> int:
    module_name, _, attribute = target.partition(":")
    function = getattr(importlib.import_module(module_name), attribute)
    return runner.main(function, name=name)
