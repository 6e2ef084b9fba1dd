"""`porchkit variants ...`: PackageVariants and PackageVariantSets on the command line.

    porchkit variants render -f PVS.yaml -f DIR ...   # the PackageVariants the sets would produce
    porchkit variants reconcile -f DIR [--state DIR] [--approve] [-o table|yaml] [-v]   # the controllers, over git
        [--git-cache DIR] [--git-fetch-period 60s]     # mirrors of Repositories on git servers

`render` reads every object it is given, renders each PackageVariantSet among them against the
Repositories, PackageRevisions and other objects beside it, and prints the PackageVariants as a
YAML stream. Nothing is written anywhere. Objects without a namespace are read as `default`'s,
as `kubectl apply -f` would place them. An invalid set, a template error or an unreadable file is
one line on stderr and exit status 1, and so, for both commands, is a PackageVariant or set whose
name is not an object name or whose upstream revision is not one Porch could have (before
anything is printed or written).

`reconcile` runs the PackageVariant and PackageVariantSet controllers over the objects in the
manifests, with the package revisions served from the git repositories their Repositories name
(porchvariant.local_run), prints a table of the package revisions created or changed (or, with
`-o yaml`, those revisions as they ended up), and exits 1 if a PackageVariant or set is Stalled
or not Ready (each named on stderr). It takes the flags of the other local `... reconcile`
commands (reconcile.manifests): `-v` logs every pass and retry on stderr, which are otherwise
left out. Kptfile pipelines run through kpt when it is on PATH, else porchkit's own functions
run in-process (`in_process_functions`, a function porchkit's face hands over).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import IO, TYPE_CHECKING, Any

import krmyaml
from porchvariant.errors import PorchVariantError
from porchvariant.manifests import Manifest, check_variants, read_manifests
from porchvariant.porch_flags import add_git_arguments, remote_settings, renderer
from reconcile.errors import ReconcileError, one_line
from reconcile.manifests import add_local_arguments, print_columns, start_local_run, state_directory

if TYPE_CHECKING:
    from porchvariant.local_run import RevisionChange

USER_ERRORS: tuple[type[BaseException], ...] = (PorchVariantError, ReconcileError)

NAMESPACED = {"PackageVariantSet", "PackageVariant", "Repository", "PackageRevision"}


def add_commands(parser: argparse.ArgumentParser) -> None:
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    render = commands.add_parser(
        "render", help="print the PackageVariants that PackageVariantSets would produce",
        description="Print the PackageVariants each PackageVariantSet among the inputs would produce, "
                    "rendered against the Repositories, PackageRevisions and other objects given beside it.")
    render.add_argument("-f", "--filename", dest="files", action="append", required=True, metavar="PATH",
                        help="a manifest file, a directory (read recursively), or - for stdin; repeatable")
    render.set_defaults(run=render_files)
    reconcile = commands.add_parser(
        "reconcile", help="run the PackageVariant controllers over manifests and local git repositories",
        description="Load the manifests into an embedded API server, serve Porch's API from the git "
                    "repositories their Repositories name, run the PackageVariant and PackageVariantSet "
                    "controllers until they are idle, and print the package revisions they created or changed.")
    add_local_arguments(reconcile, yaml_help="the package revisions created or changed", webhooks=False)
    reconcile.add_argument("--state", type=state_directory, metavar="DIR",
                           help="keep the embedded API server's objects in DIR between runs (without it, "
                                "each run starts from the manifests alone and cannot tell its own "
                                "package revisions from others')")
    reconcile.add_argument("--approve", action="store_true",
                           help="propose and approve the drafts of Ready PackageVariants whose readiness gates are met")
    add_git_arguments(reconcile.add_argument_group("Repositories on git servers"))
    reconcile.set_defaults(run=reconcile_files)


def render_files(args: argparse.Namespace) -> int:
    manifests = [_with_namespace(manifest) for manifest in read_manifests(args.files)]
    variants = render_sets(manifests, warn=lambda line: print(f"porchkit: note: {one_line(line)}", file=sys.stderr))
    _dump(variants, sys.stdout)
    return 0


def reconcile_files(args: argparse.Namespace) -> int:
    from porchvariant.local_run import reconcile_manifests

    start_local_run(args.verbose)
    manifests = read_manifests(args.files)
    run = reconcile_manifests(manifests, state=args.state, approve=args.approve, renderer=renderer(args),
                              timeout=args.timeout, remotes=remote_settings(args))
    for note in run.notes:
        print(f"porchkit: note: {one_line(note)}", file=sys.stderr)
    if args.output == "yaml":
        _dump(run.revisions, sys.stdout)
    else:
        print_changes(run.changes, sys.stdout)
    if args.state is None and run.changes:
        print("porchkit: note: without --state, a later run cannot tell these package revisions are its "
              "variants' own, and makes new ones", file=sys.stderr)
    for problem in run.problems:
        print(f"porchkit: {one_line(problem)}", file=sys.stderr)
    return 1 if run.problems else 0


def _dump(documents: Sequence[dict[str, Any]], out: IO[str]) -> None:
    krmyaml.dump_all(documents, out, explicit_start=True)


def print_changes(changes: Sequence[RevisionChange], out: IO[str]) -> None:
    """The table of changed package revisions, or one line saying there were none."""
    rows = [(c.repository, c.package, c.workspace, str(c.revision or "-"), c.lifecycle, "yes" if c.ready else "no",
             c.change, c.variant or "-") for c in changes]
    header = ("REPOSITORY", "PACKAGE", "WORKSPACE", "REVISION", "LIFECYCLE", "READY", "CHANGE", "VARIANT")
    print_columns(header, rows, out, "no package revisions created or changed")


def render_sets(manifests: list[Manifest], *, warn: Any = None) -> list[dict[str, Any]]:
    """The PackageVariants of every PackageVariantSet in `manifests`, set by set.

    Raises PorchVariantError naming the file and the set for an invalid set or a template error,
    and naming the file and the object for a PackageVariant or set that cannot be loaded at all
    (check_variants), before any set is rendered. A set whose upstream PackageRevision is not
    among the inputs is rendered with an `upstream` that has only the name Porch would give it,
    and `warn` is told."""
    from porchvariant.render import find_set_upstream, render_package_variants, upstream_not_found_message
    from porchvariant.validation import validate_package_variant_set

    check_variants(manifests)
    objects = [manifest.obj for manifest in manifests]
    repositories = [obj for obj in objects if obj.get("kind") == "Repository"]
    revisions = [obj for obj in objects if obj.get("kind") == "PackageRevision"]
    variants: list[dict[str, Any]] = []
    for manifest in manifests:
        if manifest.kind != "PackageVariantSet":
            continue
        problems = validate_package_variant_set(manifest.obj)
        if problems:
            raise PorchVariantError(f"{manifest.describe()}: {'; '.join(problems)}")
        upstream = find_set_upstream(manifest.obj, revisions)
        if upstream is None:
            upstream = _assumed_upstream(manifest.obj)
            if warn is not None:
                warn(f"{manifest.describe()}: {upstream_not_found_message(manifest.obj)} among the inputs; "
                     f"`upstream` is taken to be {upstream['metadata']['name']}")
        try:
            variants.extend(render_package_variants(manifest.obj, upstream, repositories, objects))
        except PorchVariantError as err:
            raise PorchVariantError(f"{manifest.source}: {err}") from None
    return variants


def _assumed_upstream(pvs: dict[str, Any]) -> dict[str, Any]:
    """The upstream PackageRevision's view as Porch would name it: `<repo>.<package>.<workspace>`."""
    upstream = (pvs.get("spec") or {}).get("upstream") or {}
    workspace = upstream.get("workspaceName") or f"v{upstream.get('revision') or 0}"
    name = ".".join((upstream.get("repo", ""), str(upstream.get("package", "")).replace("/", "."), workspace))
    return {"metadata": {"name": name, "namespace": (pvs.get("metadata") or {}).get("namespace", "")}}


def _with_namespace(manifest: Manifest) -> Manifest:
    metadata = manifest.obj.get("metadata")
    if manifest.kind in NAMESPACED and isinstance(metadata, dict) and not metadata.get("namespace"):
        obj = {**manifest.obj, "metadata": {**metadata, "namespace": "default"}}
        return Manifest(obj, manifest.source)
    return manifest
