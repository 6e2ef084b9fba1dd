"""`porchkit fn NAME`: the KRM functions porchkit ships, each run by kpt as an exec function.

    kpt fn eval DIR --exec "porchkit fn NAME" [--fn-config CONFIG.yaml | -- key=value ...]
    kpt fn render DIR --allow-exec          # Kptfile pipeline: `- exec: "porchkit fn NAME"`

A function is registered in `FUNCTIONS` by name, as `"module:callable"` plus a one-line help; its
module is imported only when that function runs, so every function starts as fast as krmfn
itself does (kpt starts a fresh process for each run). The callable takes a `ResourceList`
(see `krmfn.runner`).
"""

from __future__ import annotations

import argparse
import functools
import importlib

from krmfn import runner
from krmfn.errors import KrmfnError

USER_ERRORS: tuple[type[BaseException], ...] = (KrmfnError,)

# Functions register here: name -> ("package.module:callable", one-line help).
FUNCTIONS: dict[str, tuple[str, str]] = {
    "deltapipe": ("krmfn.deltapipe_fn:deltapipe",
                  "run a Δ pipeline over the package: generate, reshape or patch its resources"),
}


def add_commands(parser: argparse.ArgumentParser) -> None:
    """Mount one sub-command per registered function on the `porchkit fn` group parser."""
    functions = parser.add_subparsers(dest="fn", metavar="FUNCTION", required=True)
    for name, (target, help_text) in FUNCTIONS.items():
        command = functions.add_parser(name, help=help_text, description=help_text)
        command.set_defaults(run=functools.partial(_run_function, name, target))


def _run_function(name: str, target: str, args: argparse.Namespace) -> int:
    module_name, _, attribute = target.partition(":")
    function = getattr(importlib.import_module(module_name), attribute)
    return runner.main(function, name=name)
