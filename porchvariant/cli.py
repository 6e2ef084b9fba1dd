"""`porchkit variants ...`: PackageVariants and PackageVariantSets on the command line.

    porchkit variants render -f PVS.yaml -f DIR ...   # the PackageVariants the sets would produce

`render` reads every object it is given, renders each PackageVariantSet among them against the
Repositories, PackageRevisions and other objects beside it, and prints the PackageVariants as a
YAML stream. Nothing is written anywhere. Objects without a namespace are read as `default`'s,
as `kubectl apply -f` would place them. An invalid set, a template error or an unreadable file is
one line on stderr and exit status 1.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import yaml

from porchvariant.errors import PorchVariantError
from porchvariant.manifests import Manifest, read_manifests

USER_ERRORS = (PorchVariantError,)

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


def render_files(args: argparse.Namespace) -> int:
    manifests = [_with_namespace(manifest) for manifest in read_manifests(args.files)]
    variants = render_sets(manifests, warn=lambda line: print(f"porchkit: note: {line}", file=sys.stderr))
    yaml.dump_all(variants, sys.stdout, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), sort_keys=False,
                  explicit_start=True)
    return 0


def render_sets(manifests: list[Manifest], *, warn: Any = None) -> list[dict[str, Any]]:
    """The PackageVariants of every PackageVariantSet in `manifests`, set by set.

    Raises PorchVariantError naming the file and the set for an invalid set or a template error.
    A set whose upstream PackageRevision is not among the inputs is rendered with an `upstream`
    that has only the name Porch would give it, and `warn` is told."""
    from porchvariant.render import find_set_upstream, render_package_variants, upstream_not_found_message
    from porchvariant.validation import validate_package_variant_set

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
