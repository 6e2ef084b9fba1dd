"""The local preview the hook controllers share: `porchkit decorators reconcile -f` and `porchkit map reconcile -f`.

`run_locally(crd, paths, supervise)` loads the manifests into an `EmbeddedCluster` serving the
hook controller's CRD (reconcile.manifests.embedded_with), runs the supervisor `supervise` builds
until the controllers are idle (reconcile.idle.run_until_idle), stops every instance, and returns
a `LocalRun`: the cluster as it ended, what was loaded from where, the instances that were running
and why the others could not start. An error that would only come back (deterministic,
reconcile.errors) is not retried; one that may pass is, while the run lasts. `Passes` gathers what
the instances' passes reported from the controllers' workers.

A hook controller's preview is then only what differs: its CRD and supervisor, the Options that
report its passes to a `Passes` (with `HookPolicy.local()`: the manifests are the user's own), and
the `Preview` it makes of the run. `add_preview_command` adds the command around it, `reconcile`
(the flags of reconcile.manifests.add_local_arguments), which `run_hook_preview` runs: print as a
table or YAML, one line on stderr per error.
"""

from __future__ import annotations

import argparse
import functools
import sys
import threading
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Generic, Protocol, TypeVar

from reconcile.cluster import Kind, Obj, ObjectKey
from reconcile.embedded import EmbeddedCluster
from reconcile.errors import one_line
from reconcile.events import EventRecorder
from reconcile.hooks.build import parse_resolve
from reconcile.idle import run_until_idle
from reconcile.manager import Manager
from reconcile.manifests import Loaded, add_local_arguments, embedded_with, for_display, start_local_run
from reconcile.supervisor import Instance, Supervisor

__all__ = ["LocalRun", "Passes", "add_preview_command", "run_hook_preview", "run_locally"]

GRACE_PERIOD = 5.0  # seconds a pass in flight gets to finish once the run is over

InstanceT = TypeVar("InstanceT", bound=Instance)
K = TypeVar("K", bound=Hashable)
R = TypeVar("R")


class Preview(Protocol):
    errors: list[str]


P = TypeVar("P", bound=Preview)


class Passes(Generic[K, R]):
    """What the passes of a local run reported, from whichever worker ran them: the last result
    or error per key, and in order the results that `changed` something."""

    def __init__(self, changed: Callable[[R], bool]) -> None:
        self.changed = changed
        self.last: dict[K, R | Exception] = {}
        self.changing: list[R] = []
        self._lock = threading.Lock()

    def record(self, key: K, result: R | Exception) -> None:
        with self._lock:
            self.last[key] = result
            if not isinstance(result, Exception) and self.changed(result):
                self.changing.append(result)

    def failures(self, order: Callable[[K], Any]) -> list[tuple[K, Exception]]:
        """The keys whose last pass failed, with why, sorted by `order(key)`."""
        failed = [(key, result) for key, result in self.last.items() if isinstance(result, Exception)]
        return sorted(failed, key=lambda item: order(item[0]))


@dataclass(frozen=True)
class LocalRun(Generic[InstanceT]):
    """A local run as it ended (see the module docstring)."""

    cluster: EmbeddedCluster
    loaded: dict[tuple[Kind, ObjectKey], Loaded]  # every object loaded, and where from
    kind: Kind  # of the hook controller's objects
    instances: dict[str, InstanceT]  # object name -> its instance, as they ran when the run ended
    failed: dict[str, str]  # object name -> why no instance of it could start

    def start_errors(self) -> list[str]:
        """One line per hook controller object that could not start, naming where it was loaded from."""
        return [f"{loaded_as.describe()}: {self.failed[key.name]}" for (kind, key), loaded_as in self.loaded.items()
                if kind == self.kind and key.name in self.failed]

    def describe(self, kind: Kind, key: ObjectKey) -> str:
        """Where the object was loaded from, or (one the controllers made) its kind and key."""
        loaded_as = self.loaded.get((kind, key))
        return loaded_as.describe() if loaded_as is not None else f"{kind.kind} {key}"

    def as_ended(self, kind: Kind, key: ObjectKey, action: str) -> Obj | None:
        """The object a change (`action`) of a pass was about, as it ended, for display; None if
        the change deleted or recreated it, or it is gone."""
        current = self.cluster.get(kind, key)
        return None if current is None or action in ("delete", "recreate") else for_display(current)


def run_locally(crd: Obj, paths: Iterable[str | Path], supervise: Callable[[Manager], Supervisor[InstanceT]], *,
                component: str, timeout: float) -> LocalRun[InstanceT]:
    """Run the hook controller objects among the manifests (see the module docstring); its Events
    are recorded as `component`. Raises ManifestError for a manifest that cannot be loaded, and
    ReconcileError if the controllers do not come to a standstill within `timeout` seconds."""
    cluster, loaded = embedded_with(crd, paths)
    manager = Manager(cluster, events=EventRecorder(cluster, component), grace_period=GRACE_PERIOD,
                      retry_deterministic=False)
    supervisor = supervise(manager)
    manager.add(supervisor.controller())
    try:
        run_until_idle(manager, timeout=timeout)
        instances = dict(supervisor.running)
    finally:
        supervisor.stop_all()
    return LocalRun(cluster, loaded, supervisor.kind, instances, dict(supervisor.failed))


def add_preview_command(parser: argparse.ArgumentParser, *, controllers: str, printed: str, yaml_help: str,
                        reconcile_manifests: Callable[..., P], print_table: Callable[[P, IO[str]], None],
                        print_yaml: Callable[[P, IO[str]], None]) -> None:
    """Give a hook controller's command its `reconcile` subcommand, previewing `controllers` (say
    "MapControllers"): it prints `printed` (what the table shows), or `yaml_help` with `-o yaml`."""
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    reconcile = commands.add_parser(
        "reconcile", help=f"run the {controllers} among manifests over the other objects, no cluster",
        description=f"Load the manifests into an embedded API server, run the {controllers} among them until "
                    f"they are idle, and print {printed}.")
    add_local_arguments(reconcile, yaml_help=yaml_help)
    reconcile.set_defaults(run=functools.partial(run_hook_preview, reconcile_manifests=reconcile_manifests,
                                                 print_table=print_table, print_yaml=print_yaml))


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
