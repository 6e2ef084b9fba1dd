"""Local runs: the MapControllers among some manifests, over the other objects among them, no cluster.

`reconcile_manifests(paths)` loads every object into an `EmbeddedCluster` (the MapController CRD
installed first, then the manifests, as reconcile.manifests loads them), runs the MapControllers
on it until they are idle (reconcile.idle.run_until_idle), and returns a `Preview`: what each
input pass did to outputs, the outputs and parents as they ended up, and one line per
MapController that could not start or input whose last pass failed. Webhooks are called for real
(`resolve` points in-cluster service names at local servers); python and pipeline hooks run
in-process, under `HookPolicy.local()`: the manifests are the user's own, so a python hook may
come from any module and credentials from any namespace, and may go over plain http to loopback.
A parent whose selector cannot be used is an error line too. `resyncPeriodSeconds` and
`resyncAfterSeconds` are not followed: a preview is one pass to a standstill. An error that would
only come back (deterministic, reconcile.errors: a resource not served, a hook's answer that
cannot be used) is not retried; a hook that cannot be reached or fails is, while the run lasts.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from mapctl.context import InputKey
from mapctl.crds import map_controller_crd
from mapctl.inputs import MapResult
from mapctl.instance import Options
from mapctl.parents import condition_type
from mapctl.spec import MAP_CONTROLLER
from mapctl.supervisor import MapControllers
from reconcile import conditions
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

    passes: list[MapResult] = field(default_factory=list)  # the passes that changed something, in order
    outputs: dict[tuple[Kind, ObjectKey], Obj | None] = field(default_factory=dict)  # None: deleted
    parents: dict[tuple[Kind, ObjectKey], Obj] = field(default_factory=dict)  # every parent, as it ended
    errors: list[str] = field(default_factory=list)


def reconcile_manifests(paths: Iterable[str | Path], *, resolve: Mapping[str, str] | None = None,
                        timeout: float = 600.0) -> Preview:
    """Run the manifests' MapControllers over their other objects; see the module docstring.
    Raises ManifestError for a manifest that cannot be loaded."""
    cluster, loaded = embedded_with(map_controller_crd(), paths)
    results: dict[tuple[str, InputKey], MapResult | Exception] = {}
    passes: list[MapResult] = []
    lock = threading.Lock()

    def report(controller: str, key: InputKey, result: MapResult | Exception) -> None:
        with lock:
            results[(controller, key)] = result
            if isinstance(result, MapResult) and result.changes:
                passes.append(result)

    manager = Manager(cluster, events=EventRecorder(cluster, "porchkit-mapctl"), grace_period=5.0,
                      retry_deterministic=False)
    options = Options(resolve=dict(resolve or {}), hook_policy=HookPolicy.local(), follow_resync=False, report=report)
    supervisor = MapControllers(manager, options)
    manager.add(supervisor.controller())
    try:
        run_until_idle(manager, timeout=timeout)
        parent_kinds = {name: instance.context.parent.kind for name, instance in supervisor.running.items()}
    finally:
        supervisor.stop_all()
    return _preview(cluster, loaded, supervisor, parent_kinds, results, passes)


def _preview(cluster: EmbeddedCluster, loaded: Mapping[tuple[Kind, ObjectKey], Loaded], supervisor: MapControllers,
             parent_kinds: Mapping[str, Kind], results: Mapping[tuple[str, InputKey], MapResult | Exception],
             passes: list[MapResult]) -> Preview:
    preview = Preview(passes=passes)
    for (kind, key), loaded_as in loaded.items():
        if kind == MAP_CONTROLLER and key.name in supervisor.failed:
            preview.errors.append(f"{loaded_as.describe()}: {supervisor.failed[key.name]}")
    for (controller, _), result in sorted(results.items(), key=lambda item: (item[0][0], str(item[0][1]))):
        if isinstance(result, Exception):
            preview.errors.append(f"MapController {controller}: {result}")
    for result in passes:
        for change in result.changes:
            current = cluster.get(change.kind, change.key)
            preview.outputs[(change.kind, change.key)] = (
                None if current is None or change.action in ("delete", "recreate") else for_display(current))
    for kind in dict.fromkeys(parent_kinds.values()):
        for parent in cluster.list(kind).items:
            preview.parents[(kind, ObjectKey.of(parent))] = for_display(parent)
    for controller, kind in sorted(parent_kinds.items()):
        for (parent_kind, key), parent in preview.parents.items():
            found = conditions.find(conditions.conditions_of(parent), condition_type(controller))
            if parent_kind == kind and found is not None and found.get("reason") == "InvalidSelector":
                preview.errors.append(f"{kind.kind} {key}: MapController {controller}: {found.get('message')}")
    return preview
