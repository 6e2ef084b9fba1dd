"""Local runs: the DecoratorControllers among some manifests, over the other objects among them, no cluster.

`reconcile_manifests(paths)` loads every object into an `EmbeddedCluster` (the
DecoratorController CRD installed first, then the manifests' CRDs and Namespaces, then the
rest; a namespaced object without a namespace goes to `default`, as `kubectl apply -f` puts
it; kustomization files are skipped), runs the DecoratorControllers on it until they are idle
(reconcile.idle.run_until_idle),
and returns a `Preview`: what each pass did to targets and attachments, the objects as they
ended up, and one line per DecoratorController that could not start or target whose last pass
failed. Webhooks are called for real (`resolve` points in-cluster service names at local
servers); python and pipeline hooks run in-process, under `HookPolicy.local()`: the manifests are
the user's own, so a python hook may come from any module and credentials from any namespace, and
may go over plain http to loopback. `resyncPeriodSeconds` and
`resyncAfterSeconds` are not followed: a preview is one pass to a standstill. An error that would
only come back (deterministic, reconcile.errors: a resource not served, a hook's answer that
cannot be used) is not retried; a hook that cannot be reached or fails is, while the run lasts.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from decorators.crds import decorator_controller_crd
from decorators.instance import Options
from decorators.spec import DECORATOR_CONTROLLER
from decorators.supervisor import Decorators
from decorators.sync import SyncResult
from reconcile.cluster import Kind, Obj, ObjectKey
from reconcile.embedded import EmbeddedCluster
from reconcile.events import EventRecorder
from reconcile.hooks import HookPolicy
from reconcile.idle import run_until_idle
from reconcile.manager import Manager
from reconcile.manifests import Loaded, embedded_with, for_display


@dataclass
class Preview:
    """The outcome of a local run."""

    passes: list[SyncResult] = field(default_factory=list)  # the passes that changed something, in order
    targets: dict[tuple[Kind, ObjectKey], Obj] = field(default_factory=dict)  # changed targets, as they ended
    attachments: dict[tuple[Kind, ObjectKey], Obj | None] = field(default_factory=dict)  # None: deleted
    errors: list[str] = field(default_factory=list)


def reconcile_manifests(paths: Iterable[str | Path], *, resolve: Mapping[str, str] | None = None,
                        timeout: float = 600.0) -> Preview:
    """Run the manifests' DecoratorControllers over their other objects; see the module docstring.
    Raises ManifestError for a manifest that cannot be loaded."""
    cluster, loaded = embedded_with(decorator_controller_crd(), paths)
    results: dict[tuple[str, Kind, ObjectKey], SyncResult | Exception] = {}
    passes: list[SyncResult] = []
    lock = threading.Lock()

    def report(decorator: str, kind: Kind, key: ObjectKey, result: SyncResult | Exception) -> None:
        with lock:
            results[(decorator, kind, key)] = result
            if isinstance(result, SyncResult) and (result.target_changed or result.changes):
                passes.append(result)

    manager = Manager(cluster, events=EventRecorder(cluster, "porchkit-decorators"), grace_period=5.0,
                      retry_deterministic=False)
    options = Options(resolve=dict(resolve or {}), hook_policy=HookPolicy.local(), follow_resync=False, report=report)
    decorators = Decorators(manager, options)
    manager.add(decorators.controller())
    try:
        run_until_idle(manager, timeout=timeout)
    finally:
        decorators.stop_all()
    return _preview(cluster, loaded, decorators, results, passes)


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
                preview.targets[(result.target, result.key)] = for_display(obj)
        for change in result.changes:
            current = cluster.get(change.kind, change.key)
            preview.attachments[(change.kind, change.key)] = (
                None if current is None or change.action in ("delete", "recreate") else for_display(current))
    return preview
