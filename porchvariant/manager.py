"""The Porch controllers of `porchkit manager --controllers packagevariant,packagevariantset,approval`
(approval: approval_controller.py), and where they find Porch's API (`PORCH`, the manager's
`--porch` flag):

* `--porch cluster` (the default in a cluster): the cluster's own Porch server, through the API
  server's aggregation.
* `--porch embedded`: porchkit's embedded Porch, in this process, over the git repositories (local
  paths or git servers) that the cluster's Repository objects name. The manager's requests for
  `porch.kpt.dev` go to it, everything else to the API server (reconcile.routing.RoutedCluster),
  so a team needs no Porch server and no function runner. Repositories, their Secrets and their
  `Ready` conditions are the API server's; a Secret is sent only to the git servers its
  annotation names (embedded/_secret_scope.py), and only the leader writes Ready conditions.
  Kptfile pipelines run porchkit's own functions in-process (or through kpt, if the image has
  it) and `exec` functions where a Repository allows them; an image function is a render error.
* `--embedded` (the embedded API server) has no Porch server: the embedded Porch serves there too,
  with the CRDs the controllers need installed.

`--git-cache` and `--git-fetch-period` set where the mirrors of git servers live and how often
they are fetched, as for `porchkit variants reconcile`. Whatever the embedded Porch starts is
stopped when the manager stops.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import replace

from porchvariant.approval_controller import approval_controller
from porchvariant.packagevariant_controller import package_variant_controller
from porchvariant.packagevariantset_controller import package_variant_set_controller
from porchvariant.porch_client import PACKAGE_REVISION
from porchvariant.porch_flags import DEFAULT_FETCH_PERIOD, add_git_arguments, remote_settings, renderer
from reconcile.cluster import Cluster
from reconcile.controller import Controller
from reconcile.embedded import EmbeddedCluster
from reconcile.errors import ReconcileError
from reconcile.manager import Manager
from reconcile.routing import RoutedCluster

__all__ = ["PORCH", "PorchChoice", "approval_controllers", "package_variant_controllers",
           "package_variant_set_controllers"]

ANNOUNCE_EVERY = 5.0  # seconds between the embedded Porch's looks for Repositories come, gone or fetched
CLUSTER, EMBEDDED = "cluster", "embedded"


def package_variant_controllers(manager: Manager) -> Controller:
    return package_variant_controller(manager.cluster, manager.cache, manager.clock)


def package_variant_set_controllers(manager: Manager) -> Controller:
    return package_variant_set_controller(manager.cluster, manager.cache, manager.clock)


def approval_controllers(manager: Manager) -> Controller:
    return approval_controller(manager.cluster, manager.cache, manager.clock)


class PorchChoice:
    """The manager's `--porch`, `--git-cache` and `--git-fetch-period`, and the cluster the
    PackageVariant controllers then see (a reconcile.cli.ClusterExtension; see the module doc)."""

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        group = parser.add_argument_group("Porch's API (the packagevariant, packagevariantset, approval controllers)")
        group.add_argument("--porch", choices=(CLUSTER, EMBEDDED),
                           help="cluster: the cluster's Porch server (the default); embedded: porchkit's own Porch "
                                "in this process, over the git repositories the Repositories name (the default, "
                                "and the only choice, with --embedded)")
        add_git_arguments(group)

    def check(self, args: argparse.Namespace) -> None:
        if args.embedded and args.porch == CLUSTER:
            raise ReconcileError("--porch cluster: the embedded API server has no Porch server; "
                                 "its Porch is always the embedded one")
        if not _embedded_porch(args) and (args.git_cache or args.git_fetch_period != DEFAULT_FETCH_PERIOD):
            raise ReconcileError("--git-cache and --git-fetch-period are for the embedded Porch: "
                                 "add --porch embedded")

    def extend(self, args: argparse.Namespace, cluster: Cluster, stack: ExitStack,
               leading: Callable[[], bool]) -> Cluster:
        """The cluster the controllers use: `cluster` itself, or it with porch.kpt.dev served by an
        embedded Porch that `stack` closes. In a shared cluster, a Secret goes only to the servers
        it names, and only the leader writes the Repositories' Ready condition."""
        from porchvariant.embedded.porch import EmbeddedPorch
        from porchvariant.local_run import serve_porch

        if not _embedded_porch(args):
            return cluster
        if args.embedded:
            assert isinstance(cluster, EmbeddedCluster)
            # Repositories come and go while the controllers watch: the Porch announces them.
            porch = serve_porch(cluster, renderer(args), announce_every=ANNOUNCE_EVERY, remotes=remote_settings(args))
            stack.callback(porch.close)
            return cluster
        aside = stack.enter_context(EmbeddedCluster())
        shared = replace(remote_settings(args), secrets_name_servers=True, writes_status=leading)
        porch = EmbeddedPorch(aside, renderer=renderer(args), repositories_from=cluster,
                              announce_every=ANNOUNCE_EVERY, remotes=shared)
        stack.callback(porch.close)
        return RoutedCluster(cluster, {PACKAGE_REVISION.group: aside})


PORCH = PorchChoice()


def _embedded_porch(args: argparse.Namespace) -> bool:
    return bool(args.embedded or args.porch == EMBEDDED)

