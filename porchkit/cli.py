"""The `porchkit` command line.

Each command group belongs to one part and lives in that part's `cli.py`, which provides
`add_commands(parser)` and `USER_ERRORS` (the exception classes that mean "the user's input is
wrong"). Only the group named on the command line is imported: `kpt` starts `porchkit fn ...`
afresh for every run, so start-up must not pay for parts it does not use. For the same reason a
group may also provide `run_without_parser(argv) -> int | None`, which handles its hot path
before argparse (and the modules argparse pulls in) is even imported, or returns None.

A user error prints one line, `porchkit: <message>`, and exits 1. Anything else is a bug and keeps
its traceback. `porchkit --version` prints the installed distribution's version (looked up only
then: importlib.metadata is not cheap to import).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import argparse

# group name -> (module providing add_commands/USER_ERRORS, one-line help)
GROUPS: dict[str, tuple[str, str]] = {
    "pipeline": ("porchkit.pipeline_cli", "run Δ pipelines over manifests, offline"),
    "fn": ("krmfn.cli", "KRM functions for kpt (kpt fn eval --exec 'porchkit fn NAME')"),
    "variants": ("porchvariant.cli", "PackageVariants and PackageVariantSets: preview, or reconcile over local git"),
    "decorators": ("decorators.cli", "Metacontroller DecoratorControllers: preview over manifests, no cluster"),
    "map": ("mapctl.cli", "MapControllers: preview over manifests, no cluster"),
    "manager": ("reconcile.cli", "run controllers in one process (in a cluster, or on the embedded API server)"),
}

# The controllers `porchkit manager --controllers` knows: name -> "module:function", a function
# building that name's controllers from a reconcile.manager.Manager. The face keeps this list
# because reconcile/ cannot import the parts that define controllers; a module is imported only
# when its name is selected.
CONTROLLERS: dict[str, str] = {
    "packagevariant": "porchvariant.manager:package_variant_controllers",
    "packagevariantset": "porchvariant.manager:package_variant_set_controllers",
    "approval": "porchvariant.manager:approval_controllers",
    "decorator": "decorators.manager:decorator_controllers",
    "map": "mapctl.manager:map_controllers",
}



def in_process_functions() -> dict[str, Callable[[Any], Any]]:
    """porchkit's own KRM functions, run in-process by the embedded Porch when kpt is not installed
    ({exec command: function}); handed to porchvariant, which may not import krmfn itself."""
    from krmfn.inprocess import in_process_functions as functions

    return dict(functions())



def _manager_defaults() -> dict[str, object]:
    # Imported only for `porchkit manager`: the PackageVariant controllers' --porch flags and the
    # embedded Porch they may serve in-process (reconcile.cli.ClusterExtension).
    from porchvariant.manager import PORCH

    return {"controller_factories": CONTROLLERS, "in_process_functions": in_process_functions,
            "controller_extensions": {"packagevariant": PORCH, "packagevariantset": PORCH, "approval": PORCH}}


# Parser defaults the face hands to a group's commands, made only for the group that runs.
GROUP_DEFAULTS: dict[str, Callable[[], dict[str, object]]] = {
    "manager": _manager_defaults,
    "variants": lambda: {"in_process_functions": in_process_functions},
}


def build_parser(group: str | None = None) -> tuple[argparse.ArgumentParser, ModuleType | None]:
    """The parser, with the full sub-commands of `group` only (the others are named but not loaded)."""
    import argparse

    class PrintVersion(argparse.Action):  # argparse's own "version" action would look it up on every run
        def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
            print(f"porchkit {version()}")
            parser.exit()

    parser = argparse.ArgumentParser(prog="porchkit", description="Automation for kpt packages.")
    parser.add_argument("--version", action=PrintVersion, nargs=0, help="print porchkit's version and exit")
    groups = parser.add_subparsers(dest="group", metavar="COMMAND", required=True)
    loaded = None
    for name, (module_name, help_text) in GROUPS.items():
        group_parser = groups.add_parser(name, help=help_text, description=help_text)
        if name == group:
            loaded = importlib.import_module(module_name)
            # Set first: add_commands may read them (the manager's help names its controllers).
            group_parser.set_defaults(**GROUP_DEFAULTS.get(name, dict)())
            loaded.add_commands(group_parser)
    return parser, loaded


def version() -> str:
    """The installed porchkit distribution's version, or "unknown" when it is not installed."""
    from importlib import metadata

    try:
        return metadata.version("porchkit")
    except metadata.PackageNotFoundError:
        return "unknown"


def _group_named(argv: Sequence[str]) -> str | None:
    for arg in argv:
        if not arg.startswith("-"):
            return arg if arg in GROUPS else None
    return None


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    group = _group_named(argv)
    if group is not None and argv[0] == group:
        direct = getattr(importlib.import_module(GROUPS[group][0]), "run_without_parser", None)
        code = direct(argv[1:]) if direct is not None else None
        if code is not None:
            return int(code)
    parser, module = build_parser(group)
    args = parser.parse_args(argv)
    user_errors: tuple[type[BaseException], ...] = (OSError, *getattr(module, "USER_ERRORS", ()))
    try:
        return int(args.run(args))
    except BrokenPipeError:  # before user_errors, whose OSError would catch it
        # The reader went away (`porchkit ... | head`); there is nobody left to tell.
        sys.stderr.close()
        return 1
    except user_errors as err:
        print(f"porchkit: {_one_line(err)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def _one_line(err: BaseException) -> str:
    from reconcile.errors import one_line  # only when there is an error to print: start-up stays small

    if isinstance(err, OSError) and err.strerror and err.filename:
        return one_line(f"{err.filename}: {err.strerror.lower()}")
    return one_line(str(err)) or type(err).__name__
