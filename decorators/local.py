"""Local runs: the DecoratorControllers among some manifests, over the other objects among them, no cluster.

`reconcile_manifests(paths)` loads every object into an `EmbeddedCluster` (the
DecoratorController CRD installed first, then the manifests' CRDs and Namespaces, then the
rest; a namespaced object without a namespace goes to `default`, as `kubectl apply -f` puts
it; kustomization files are skipped), runs the DecoratorControllers on it until they are idle
(reconcile.local.run_until_idle),
and returns a `Preview`: what each pass did to targets and attachments, the objects as they
ended up, and one line per DecoratorController that could not start or target whose last pass
failed. Webhooks are called for real (`resolve` points in-cluster service names at local
servers); python and pipeline hooks run in-process. `resyncPeriodSeconds` and
`resyncAfterSeconds` are not followed: a preview is one pass to a standstill.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from decorators.crds import decorator_controller_crd
from decorators.instance import Options
from decorators.spec import DECORATOR_CONTROLLER
from decorators.supervisor import Decorators
from decorators.sync import SyncResult
from deltapipe.manifests import ManifestError, load_yaml, manifest_texts
from reconcile import objects
from reconcile.cluster import Kind, Obj, ObjectKey
from reconcile.embedded import EmbeddedCluster
from reconcile.errors import AlreadyExists, ApiError, NotFound, ReconcileError
from reconcile.events import EventRecorder
from reconcile.local import run_until_idle
from reconcile.manager import Manager

NAMESPACE = Kind("v1", "Namespace")
CRD = Kind("apiextensions.k8s.io/v1", "CustomResourceDefinition")
KUSTOMIZATION_FILES = frozenset(("kustomization.yaml", "kustomization.yml", "Kustomization"))


class LocalError(ReconcileError):
    """A manifest cannot be loaded: unreadable, not an object, or of a kind nobody serves."""


@dataclass(frozen=True)
class Loaded:
    obj: Obj
    source: str

    def describe(self) -> str:
        key = ObjectKey.of(self.obj)
        return f"{self.source}: {self.obj.get('kind') or 'object'} {key or '(unnamed)'}"


@dataclass
class Preview:
    """The outcome of a local run."""

    passes: list[SyncResult] = field(default_factory=list)  # the passes that changed something, in order
    targets: dict[tuple[Kind, ObjectKey], Obj] = field(default_factory=dict)  # changed targets, as they ended
    attachments: dict[tuple[Kind, ObjectKey], Obj | None] = field(default_factory=dict)  # None: deleted
    errors: list[str] = field(default_factory=list)


def reconcile_manifests(paths: Iterable[str | Path], *, resolve: Mapping[str, str] | None = None,
                        timeout: float = 600.0) -> Preview:
    """Run the manifests' DecoratorControllers over their other objects; see the module docstring."""
    manifests = read(paths)
    cluster = EmbeddedCluster()
    cluster.create(decorator_controller_crd())
    loaded = _load(cluster, manifests)
    results: dict[tuple[str, Kind, ObjectKey], SyncResult | Exception] = {}
    passes: list[SyncResult] = []
    lock = threading.Lock()

    def report(decorator: str, kind: Kind, key: ObjectKey, result: SyncResult | Exception) -> None:
        with lock:
            results[(decorator, kind, key)] = result
            if isinstance(result, SyncResult) and (result.target_changed or result.changes):
                passes.append(result)

    manager = Manager(cluster, events=EventRecorder(cluster, "porchkit-decorators"), grace_period=5.0)
    decorators = Decorators(manager, Options(resolve=dict(resolve or {}), follow_resync=False, report=report))
    manager.add(decorators.controller())
    try:
        run_until_idle(manager, timeout=timeout)
    finally:
        decorators.stop_all()
    return _preview(cluster, loaded, decorators, results, passes)


def read(paths: Iterable[str | Path]) -> list[Loaded]:
    """Every object in the files, directories or `-` given, with where it came from."""
    found = []
    try:
        for source, text in manifest_texts(paths, sys.stdin):
            if Path(source).name in KUSTOMIZATION_FILES:
                continue  # kustomize's own file beside the manifests (Metacontroller's examples have them)
            documents = load_yaml(text, source)
            for number, doc in enumerate(documents, start=1):
                where = source if len(documents) == 1 else f"{source} (document {number})"
                items = doc.get("items") if isinstance(doc, dict) and doc.get("kind") == "List" else [doc]
                for item in items if isinstance(items, list) else [items]:
                    if not isinstance(item, dict):
                        raise LocalError(f"{where}: expected an object, not {type(item).__name__}")
                    found.append(Loaded(item, where))
    except ManifestError as err:
        raise LocalError(str(err)) from None
    return found


def _load(cluster: EmbeddedCluster, manifests: list[Loaded]) -> dict[tuple[Kind, ObjectKey], Loaded]:
    order = {"CustomResourceDefinition": 0, "Namespace": 1}
    loaded: dict[tuple[Kind, ObjectKey], Loaded] = {}
    for manifest in sorted(manifests, key=lambda m: order.get(str(m.obj.get("kind")), 2)):
        obj = dict(manifest.obj)
        if not obj.get("apiVersion") or not obj.get("kind") or not isinstance(obj.get("metadata"), dict):
            raise LocalError(f"{manifest.describe()}: needs apiVersion, kind and metadata")
        kind = Kind.of(obj)
        if kind == CRD and obj.get("metadata", {}).get("name") == decorator_controller_crd()["metadata"]["name"]:
            continue  # installed already
        try:
            namespaced = cluster.resource(kind).namespaced
        except NotFound:
            raise LocalError(f"{manifest.describe()}: the embedded API server does not serve {kind.kind} in "
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
            raise LocalError(f"{manifest.describe()}: {err}") from None
        loaded[(kind, ObjectKey.of(stored))] = Loaded(stored, manifest.source)
    return loaded


def _ensure_namespace(cluster: EmbeddedCluster, name: str) -> None:
    with contextlib.suppress(AlreadyExists):
        cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


def _preview(cluster: EmbeddedCluster, loaded: Mapping[tuple[Kind, ObjectKey], Loaded], decorators: Decorators,
             results: Mapping[tuple[str, Kind, ObjectKey], SyncResult | Exception],
             passes: list[SyncResult]) -> Preview:
    preview = Preview(passes=passes)
    for (kind, key), loaded_as in loaded.items():
        if kind == DECORATOR_CONTROLLER and key.name in decorators.failed:
            preview.errors.append(f"{loaded_as.describe()}: {decorators.failed[key.name]}")
    for (decorator, kind, key), result in sorted(results.items(), key=lambda item: (item[0][0], str(item[0][1]),
                                                                                      item[0][2])):
        if isinstance(result, Exception):
            where = loaded.get((kind, key))
            name = where.describe() if where is not None else f"{kind.kind} {key}"
            preview.errors.append(f"{name}: DecoratorController {decorator}: {result}")
    for result in passes:
        if result.target_changed:
            obj = cluster.get(result.target, result.key)
            if obj is not None:
                preview.targets[(result.target, result.key)] = objects_for_display(obj)
        for change in result.changes:
            current = cluster.get(change.kind, change.key)
            preview.attachments[(change.kind, change.key)] = (
                None if current is None or change.action in ("delete", "recreate") else objects_for_display(current))
    return preview


def objects_for_display(obj: Obj) -> Obj:
    """The object without the fields the server manages (uid, resourceVersion, managedFields...)."""
    out = dict(obj)
    meta = {k: v for k, v in objects.metadata(obj).items()
            if k not in ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields")}
    out["metadata"] = meta
    return out
