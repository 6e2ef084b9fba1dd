"""Manifests for local runs: read objects from files and load them into an embedded API server.

What porchkit's `... reconcile -f DIR` commands share (decorators.preview, mapctl.preview):

* `read_manifests(paths)`: every object in the files, directories or `-` given (YAML streams,
  `kind: List` unwrapped), each with where it came from; kustomize's own files beside the
  manifests are skipped;
* `load_manifests(cluster, manifests)`: creates them, CustomResourceDefinitions first, then
  Namespaces, then the rest, as `kubectl apply -f` would: a namespaced object without a
  namespace goes to `default`, and a namespace that does not exist is created;
* `embedded_with(crd, paths)`: an EmbeddedCluster with a controller's CRD installed first, then
  the manifests loaded (a copy of that CRD among them is skipped);
* `for_display(obj)`: an object without the fields the server manages, for printing, and
  `in_key_order(objects)`: objects by kind and key, in the order they are printed;
* `add_local_arguments(parser)` and `start_local_run(verbose)`: the flags those commands take
  (`-f`, `--resolve` and a note on what hooks may do where there are hooks to call, `-o`,
  `--timeout`, `-v`; porchvariant's `variants reconcile` takes them too) and what they do before
  running.

Every problem is a `ManifestError` naming the file and object: unreadable YAML, a document
that is not an object, an object without apiVersion, kind or metadata, or of a kind nobody serves.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TypeVar

from krmyaml import YamlError, dump_all, read_documents
from reconcile import objects
from reconcile.cluster import Cluster, Kind, Obj, ObjectKey
from reconcile.embedded import EmbeddedCluster
from reconcile.errors import AlreadyExists, ApiError, NotFound, ReconcileError

NAMESPACE = Kind("v1", "Namespace")
CRD = Kind("apiextensions.k8s.io/v1", "CustomResourceDefinition")
KUSTOMIZATION_FILES = frozenset(("kustomization.yaml", "kustomization.yml", "Kustomization"))
_SERVER_FIELDS = ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields")
LOCAL_HOOKS_NOTE = (
    "Hooks run here with your rights, for your own manifests: a python hook may name a plain function "
    "(\"package.module:function\") in any importable module, and a webhook's TLS and credentials may come from "
    "Secrets in any namespace and go over plain http to a loopback address (127.0.0.1, ::1, localhost, after "
    "--resolve). `porchkit manager` allows neither unless started with --python-hooks and --secret-namespaces, "
    "and never sends credentials over plain http. Run this only on manifests you trust.")
T = TypeVar("T")


class ManifestError(ReconcileError):
    """A manifest cannot be loaded: unreadable, not an object, or of a kind nobody serves."""


@dataclass(frozen=True)
class Loaded:
    """An object and where it came from (`file`, or `file (document 3)`)."""

    obj: Obj
    source: str

    def describe(self) -> str:
        key = ObjectKey.of(self.obj)
        return f"{self.source}: {self.obj.get('kind') or 'object'} {key or '(unnamed)'}"


def read_manifests(paths: Iterable[str | Path]) -> list[Loaded]:
    """Every object in the files, directories or `-` given, with where it came from."""
    try:
        documents = read_documents(paths, sys.stdin, skip_names=KUSTOMIZATION_FILES)
    except YamlError as err:
        raise ManifestError(str(err)) from None
    return [Loaded(document.obj, document.where) for document in documents]


def load_manifests(cluster: Cluster, manifests: list[Loaded], *,
                   skip: Callable[[Obj], bool] = lambda obj: False) -> dict[tuple[Kind, ObjectKey], Loaded]:
    """Create the manifests (see the module docstring), except those `skip` accepts (a CRD the
    caller installed already, say); returns them as stored, by kind and key."""
    order = {"CustomResourceDefinition": 0, "Namespace": 1}
    loaded: dict[tuple[Kind, ObjectKey], Loaded] = {}
    for manifest in sorted(manifests, key=lambda m: order.get(str(m.obj.get("kind")), 2)):
        obj = dict(manifest.obj)
        if not obj.get("apiVersion") or not obj.get("kind") or not isinstance(obj.get("metadata"), dict):
            raise ManifestError(f"{manifest.describe()}: needs apiVersion, kind and metadata")
        if skip(obj):
            continue
        kind = Kind.of(obj)
        try:
            namespaced = cluster.resource(kind).namespaced
        except NotFound:
            raise ManifestError(f"{manifest.describe()}: the embedded API server does not serve {kind.kind} in "
                                    f"{kind.api_version} (add its CustomResourceDefinition)") from None
        meta = dict(obj["metadata"])
        if namespaced and not meta.get("namespace"):
            meta["namespace"] = "default"
        obj["metadata"] = meta
        try:
            if namespaced:
                _ensure_namespace(cluster, meta["namespace"])
            stored = cluster.create(obj)
        except ApiError as err:
            raise ManifestError(f"{manifest.describe()}: {err}") from None
        loaded[(kind, ObjectKey.of(stored))] = Loaded(stored, manifest.source)
    return loaded


def embedded_with(crd: Obj,
                  paths: Iterable[str | Path]) -> tuple[EmbeddedCluster, dict[tuple[Kind, ObjectKey], Loaded]]:
    """A new EmbeddedCluster serving `crd`, holding the manifests at `paths` (a copy of `crd`
    among them is skipped), and what was loaded. Raises ManifestError."""
    manifests = read_manifests(paths)
    cluster = EmbeddedCluster()
    cluster.create(crd)
    name = objects.metadata(crd).get("name")
    loaded = load_manifests(cluster, manifests,
                            skip=lambda obj: Kind.of(obj) == CRD and objects.metadata(obj).get("name") == name)
    return cluster, loaded


def print_columns(header: Sequence[str], rows: Sequence[Sequence[str]], out: IO[str], empty: str = "") -> None:
    """Rows under their header in left-aligned columns two spaces apart; `empty` (if any) instead
    when there are no rows."""
    if not rows:
        if empty:
            print(empty, file=out)
        return
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    for row in (header, *rows):
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip(), file=out)


def write_manifests(objects: Iterable[Obj], out: IO[str]) -> None:
    """Objects as a YAML stream a person or `kubectl apply -f -` can read, each after a `---`."""
    dump_all(objects, out, explicit_start=True)


def for_display(obj: Obj) -> Obj:
    """The object without the fields the server manages (uid, resourceVersion, managedFields...)."""
    out = dict(obj)
    out["metadata"] = {k: v for k, v in objects.metadata(obj).items() if k not in _SERVER_FIELDS}
    return out


def in_key_order(objects: Mapping[tuple[Kind, ObjectKey], T]) -> list[tuple[tuple[Kind, ObjectKey], T]]:
    """The items sorted by kind and key: a local run prints the same whichever order its
    controllers' workers happened to finish in."""
    return sorted(objects.items(), key=lambda item: (str(item[0][0]), item[0][1]))


def _ensure_namespace(cluster: Cluster, name: str) -> None:
    with contextlib.suppress(AlreadyExists):
        cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


def add_local_arguments(parser: argparse.ArgumentParser, *, yaml_help: str, webhooks: bool = True) -> None:
    """The flags of a local `... reconcile` command; `yaml_help` says what `-o yaml` prints, and
    `webhooks` adds `--resolve` and LOCAL_HOOKS_NOTE for commands whose controllers call hooks."""
    parser.add_argument("-f", "--filename", dest="files", action="append", required=True, metavar="PATH",
                        help="a manifest file, a directory (read recursively), or - for stdin; repeatable")
    if webhooks:
        parser.epilog = LOCAL_HOOKS_NOTE
        parser.add_argument("--resolve", action="append", default=[], metavar="HOST=ADDR",
                            help="call webhooks of HOST (as written in the URL, with or without :port) at ADDR "
                                 "(ip:port) instead, e.g. my-hook.default=127.0.0.1:8080; repeatable")
    parser.add_argument("-o", "--output", choices=("table", "yaml"), default="table",
                        help=f"a table of changes (default), or {yaml_help} as YAML")
    parser.add_argument("--timeout", type=positive_seconds, default=600.0, metavar="SECONDS",
                        help="give up when the controllers are still busy after this long (default 600)")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="log every pass and every retry on stderr (by default only the outcome is printed)")


def positive_seconds(text: str) -> float:
    """An argparse type: a number of seconds above 0 (argparse reports a bad one in one line)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"{text!r} must be more than 0")
    return value


def state_directory(text: str) -> Path:
    """An argparse type: a directory to keep the embedded API server's objects in, which need not
    exist yet but must not be something else."""
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: not a directory (the state is a directory of its own)")
    return path


def start_local_run(verbose: bool) -> None:
    """Tune the garbage collector as controller processes do, and keep the controllers' logs
    for `-v`: each failed pass and its retries are logged, while the command's summary names
    what is left failing, once."""
    from reconcile import logs
    from reconcile.gctuning import tune_for_controllers

    tune_for_controllers()
    logs.configure("text", "info" if verbose else "critical")
