"""Local runs: the MapControllers among some manifests, over the other objects among them, no cluster.

`reconcile_manifests(paths)` loads every object into an `EmbeddedCluster` (the MapController CRD
installed first, then the manifests, as reconcile.manifests loads them), runs the MapControllers
on it until they are idle (reconcile.hooks.preview.run_locally, the runner every hook
controller's preview shares), and returns a `Preview`: what each
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

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from mapctl.context import InputKey
from mapctl.crds import map_controller_crd
from mapctl.inputs import MapResult
from mapctl.instance import MapInstance, Options
from mapctl.parents import condition_type
from mapctl.supervisor import MapControllers
from reconcile import conditions
from reconcile.cluster import Kind, Obj, ObjectKey
from reconcile.hooks import HookPolicy
from reconcile.hooks.preview import LocalRun, Passes, run_locally
from reconcile.manifests import for_display

Pass = tuple[str, InputKey]  # the MapController's name, and the input's key


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
    passes: Passes[Pass, MapResult] = Passes(changed=lambda result: bool(result.changes))
    options = Options(resolve=dict(resolve or {}), hook_policy=HookPolicy.local(), follow_resync=False,
                      report=lambda controller, key, result: passes.record((controller, key), result))
    run = run_locally(map_controller_crd(), paths, lambda manager: MapControllers(manager, options),
                      component="porchkit-mapctl", timeout=timeout)
    return _preview(run, passes)


def _preview(run: LocalRun[MapInstance], passes: Passes[Pass, MapResult]) -> Preview:
    preview = Preview(passes=passes.changing, errors=run.start_errors())
    for (controller, _), error in passes.failures(order=lambda k: (k[0], str(k[1]))):
        preview.errors.append(f"MapController {controller}: {error}")
    for result in passes.changing:
        for change in result.changes:
            preview.outputs[(change.kind, change.key)] = run.as_ended(change.kind, change.key, change.action)
    parent_kinds = {name: instance.context.parent.kind for name, instance in run.instances.items()}
    for kind in dict.fromkeys(parent_kinds.values()):
        for parent in run.cluster.list(kind).items:
            preview.parents[(kind, ObjectKey.of(parent))] = for_display(parent)
    for controller, kind in sorted(parent_kinds.items()):
        for (parent_kind, key), parent in preview.parents.items():
            found = conditions.find(conditions.conditions_of(parent), condition_type(controller))
            if parent_kind == kind and found is not None and found.get("reason") == "InvalidSelector":
                preview.errors.append(f"{kind.kind} {key}: MapController {controller}: {found.get('message')}")
    return preview
