"""`porchkit manager`: run controllers in one process, against a real API server or the embedded one.

    porchkit manager                                   # every known controller, kubeconfig or in-cluster config
    porchkit manager --controllers pv,pvs --leader-elect --leader-election-namespace porch-system
    porchkit manager --embedded --state ./state        # on the embedded API server, kept in ./state

Which controllers exist is the face's business (porchkit/cli.py passes `controller_factories`:
name -> "module:function", the function building a name's controllers from the Manager, as a
parser default set before `add_commands`, whose `--controllers` help lists the names); this
module only checks the names, builds the cluster, the manager and its health server, and runs.
A family of controllers may also bring a `ClusterExtension` (the parser default
`controller_extensions`: name -> extension): flags of its own, and a layer between the API server
and its controllers, set up before they are built and closed after the manager stops (the
PackageVariant controllers' `--porch embedded` serves Porch's API in-process this way).

What hooks may do is the operator's decision, made here once (`hook_policy`): python hooks only
from the module prefixes named by --python-hooks (none by default), and the Secrets and
ConfigMaps of webhook TLS and credentials only from the namespaces named by --secret-namespaces
(by default the manager's own). A factory whose controllers run hooks takes it as its
`hook_policy` keyword (decorators.manager, mapctl.manager).
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import logging
import os
import socket
from collections.abc import Callable, Iterable, Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from reconcile.errors import ReconcileError

if TYPE_CHECKING:
    from reconcile.cluster import Cluster
    from reconcile.controller import Controller
    from reconcile.hooks import HookPolicy
    from reconcile.manager import LeaderElection, Manager

USER_ERRORS: tuple[type[BaseException], ...] = (ReconcileError,)

LOG_LEVELS = ("debug", "info", "warning", "error")
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
DEFAULT_LEADER_ELECTION_ID = "porchkit-manager"
EVENT_COMPONENT = "porchkit-manager"  # source.component of the Events controllers record
POD_NAMESPACE_VARIABLE = "POD_NAMESPACE"  # the pod's namespace, when the downward API sets it

log = logging.getLogger("porchkit.manager")


class ClusterExtension(Protocol):
    """What a family of controllers adds to the manager (see the module doc)."""

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Add its flags to the manager's."""

    def check(self, args: argparse.Namespace) -> None:
        """Refuse flags that do not go together (ReconcileError), before anything starts."""

    def extend(self, args: argparse.Namespace, cluster: Cluster, stack: ExitStack,
               leading: Callable[[], bool]) -> Cluster:
        """The cluster its controllers use, built on `cluster`; what it starts, `stack` stops.
        `leading()` tells, at any time, whether this replica leads (and so may write)."""


def add_commands(parser: argparse.ArgumentParser) -> None:
    """The manager's flags; `--controllers` names what the parser's `controller_factories` default
    (set by the face before this is called) holds."""
    names = ", ".join(parser.get_default("controller_factories") or ()) or "none yet"
    parser.add_argument("--controllers", metavar="NAMES",
                        help=f"comma-separated controllers to run, of: {names} (default: all of them)")
    parser.add_argument("--kubeconfig", metavar="PATH", help="kubeconfig file (default: $KUBECONFIG, "
                        "~/.kube/config, or the in-cluster service account)")
    parser.add_argument("--context", help="kubeconfig context (default: the current one)")
    parser.add_argument("--embedded", action="store_true", help="run on the embedded, in-process API server")
    parser.add_argument("--state", metavar="DIR", type=_state_directory,
                        help="with --embedded: keep its objects in DIR, which this process then holds alone "
                             "(a second process on DIR is refused)")
    parser.add_argument("--leader-elect", action="store_true",
                        help="run only while holding a coordination.k8s.io/v1 Lease (one active replica; past "
                             "its renew deadline a replica makes no write and no hook call)")
    parser.add_argument("--leader-election-namespace", metavar="NS",
                        help="namespace of the Lease (default: the pod's own namespace)")
    parser.add_argument("--leader-election-id", metavar="NAME", default=DEFAULT_LEADER_ELECTION_ID,
                        help=f"name of the Lease (default: {DEFAULT_LEADER_ELECTION_ID})")
    parser.add_argument("--health-addr", metavar="ADDR", default=":8081",
                        help="where to serve /healthz, /readyz and /metrics (default :8081; 0 turns it off)")
    parser.add_argument("--watch-silence", metavar="SECONDS", type=float, default=None,
                        help="/healthz fails when a watch is silent for longer (default 150; 0 never fails)")
    parser.add_argument("--grace-period", metavar="SECONDS", type=float, default=30.0,
                        help="on SIGTERM, how long reconciles in flight may take to finish (default 30)")
    parser.add_argument("--log-format", choices=("text", "json"), default="text", help="log format (default text)")
    parser.add_argument("--log-level", choices=LOG_LEVELS, default="info", help="log level (default info)")
    security = parser.add_argument_group("what hooks may do (DecoratorControllers, MapControllers)")
    security.add_argument("--python-hooks", metavar="PREFIX", action="append", default=[],
                          help="run python hooks only if they are functions of modules under PREFIX, e.g. "
                               "mycompany.hooks (repeatable or comma-separated; default: none, python hooks refused)")
    security.add_argument("--secret-namespaces", metavar="NS", action="append",
                          help="read the Secrets and ConfigMaps a webhook names for TLS and credentials only in NS "
                               "(repeatable or comma-separated; default: the manager's own namespace; '' for none)")
    for extension in _distinct((parser.get_default("controller_extensions") or {}).values()):
        extension.add_arguments(parser)
    parser.set_defaults(run=run_manager)


def run_manager(args: argparse.Namespace) -> int:
    from reconcile import health, logs
    from reconcile.events import EventRecorder
    from reconcile.gctuning import tune_for_controllers
    from reconcile.manager import Manager

    factories: Mapping[str, str] = getattr(args, "controller_factories", None) or {}
    extensions: Mapping[str, ClusterExtension] = getattr(args, "controller_extensions", None) or {}
    _check_flags(args)
    for extension in _distinct(extensions.values()):
        extension.check(args)
    tune_for_controllers()
    names = selected_controllers(args.controllers, factories)
    address = None if args.health_addr in ("0", "") else _address(args.health_addr)
    policy = hook_policy(args.python_hooks, args.secret_namespaces)
    logs.configure(args.log_format, args.log_level)
    log.info("python hooks: %s; hook TLS material and credentials: %s", policy.describe_modules(),
             policy.describe_namespaces())
    election = _leader_election(args)
    with ExitStack() as stack:
        cluster = _cluster(args)
        close = getattr(cluster, "close", None)
        if close is not None:
            stack.callback(close)
        built: list[Manager] = []  # the manager, once there is one, for `leading`
        for extension in _distinct(extensions[name] for name in names if name in extensions):
            cluster = extension.extend(args, cluster, stack, lambda: bool(built) and built[0].leading)
        events = EventRecorder(cluster, EVENT_COMPONENT, instance=socket.gethostname())
        manager = Manager(cluster, events=events, leader_election=election, grace_period=args.grace_period)
        built.append(manager)
        for name in names:
            for controller in build_controllers(factories[name], manager, hook_policy=policy):
                manager.add(controller)
        silence = health.DEFAULT_SILENCE if args.watch_silence is None else args.watch_silence
        server = health.for_manager(manager, address, silence=silence) if address is not None else None
        if server is not None:
            try:
                server.start()
            except OSError as err:
                raise ReconcileError(f"cannot serve health probes on {args.health_addr}: "
                                     f"{err.strerror or err}") from err
        try:
            return manager.run()
        finally:
            if server is not None:
                server.stop()


def selected_controllers(requested: str | None, factories: Mapping[str, str]) -> list[str]:
    """The controller names to run, in order; ReconcileError for an unknown one or none at all."""
    available = ", ".join(sorted(factories)) or "none yet"
    names = list(factories) if requested is None else [n.strip() for n in requested.split(",") if n.strip()]
    unknown = [name for name in names if name not in factories]
    if unknown:
        what = "controller" if len(unknown) == 1 else "controllers"
        raise ReconcileError(f"unknown {what} {', '.join(map(repr, unknown))} (available: {available})")
    if not names:
        raise ReconcileError(f"no controllers to run (available: {available})")
    return list(dict.fromkeys(names))


def build_controllers(spec: str, manager: Manager, *, hook_policy: HookPolicy) -> list[Controller]:
    """Call the factory named by `spec` ("module:function") with the manager, and with
    `hook_policy` when it takes that keyword (its controllers run hooks); it returns one
    Controller or several."""
    module_name, _, function_name = spec.partition(":")
    factory = getattr(importlib.import_module(module_name), function_name)
    if "hook_policy" in inspect.signature(factory).parameters:
        built = factory(manager, hook_policy=hook_policy)
    else:
        built = factory(manager)
    return list(built) if isinstance(built, Iterable) else [built]


def hook_policy(python_hooks: Iterable[str], secret_namespaces: Iterable[str] | None) -> HookPolicy:
    """The manager's HookPolicy from its flags (each value may hold several, comma-separated);
    without --secret-namespaces, the manager's own namespace (`own_namespace`), if it has one.
    ReconcileError for a prefix that is not a module name."""
    from reconcile.hooks import HookPolicy

    if secret_namespaces is None:
        namespaces = [namespace] if (namespace := own_namespace()) else []
    else:
        namespaces = _split(secret_namespaces)
    try:
        return HookPolicy.for_manager(_split(python_hooks), namespaces)
    except ValueError as err:
        raise ReconcileError(f"--python-hooks: {err}") from None


def own_namespace(account_file: Path = SERVICE_ACCOUNT_NAMESPACE, environ: Mapping[str, str] = os.environ) -> str:
    """The namespace the manager runs in: its service account's (in a pod), else $POD_NAMESPACE,
    else "" (outside a cluster)."""
    if account_file.is_file():
        namespace = account_file.read_text(encoding="utf-8").strip()
        if namespace:
            return namespace
    return environ.get(POD_NAMESPACE_VARIABLE, "").strip()


def _distinct(extensions: Iterable[ClusterExtension]) -> list[ClusterExtension]:
    """Each extension once (several controllers share one), in order."""
    return list({id(extension): extension for extension in extensions}.values())


def _split(values: Iterable[str]) -> list[str]:
    """Flag values, each possibly comma-separated, as one list of non-empty names."""
    return [name.strip() for value in values for name in value.split(",") if name.strip()]


def _check_flags(args: argparse.Namespace) -> None:
    if args.state is not None and not args.embedded:
        raise ReconcileError("--state keeps the embedded API server's objects: it needs --embedded")
    if args.embedded and (args.kubeconfig or args.context):
        raise ReconcileError("--embedded runs its own API server: --kubeconfig and --context do not apply")
    if args.grace_period < 0:
        raise ReconcileError(f"--grace-period must be 0 or more, not {args.grace_period:g}")
    if args.leader_election_namespace and not args.leader_elect:
        raise ReconcileError("--leader-election-namespace needs --leader-elect")
    if not args.leader_election_id:
        raise ReconcileError("--leader-election-id must not be empty")


def _state_directory(text: str) -> Path:
    from reconcile.manifests import state_directory

    return state_directory(text)


def _address(text: str) -> tuple[str, int]:
    from reconcile.health import parse_address

    try:
        return parse_address(text)
    except ValueError as err:
        raise ReconcileError(f"--health-addr: {err}") from None


def _leader_election(args: argparse.Namespace) -> LeaderElection | None:
    from reconcile.manager import LeaderElection

    if not args.leader_elect:
        return None
    namespace = args.leader_election_namespace
    if not namespace and SERVICE_ACCOUNT_NAMESPACE.is_file():
        namespace = SERVICE_ACCOUNT_NAMESPACE.read_text(encoding="utf-8").strip()
    if not namespace and args.embedded:
        namespace = "default"
    if not namespace:
        raise ReconcileError("--leader-elect outside a cluster needs --leader-election-namespace")
    return LeaderElection(namespace=namespace, name=args.leader_election_id)


def _cluster(args: argparse.Namespace) -> Any:
    if args.embedded:
        from reconcile.embedded import EmbeddedCluster

        return EmbeddedCluster(persist_to=args.state)
    from reconcile.kube import KubeCluster

    if args.kubeconfig or args.context:  # both raise ReconcileError for a missing or unusable configuration
        return KubeCluster.from_kubeconfig(path=args.kubeconfig, context=args.context)
    return KubeCluster.auto()
