"""Local runs: the DecoratorControllers among some manifests, over the other objects among them, no cluster.

`reconcile_manifests(paths)` loads every object into an `EmbeddedCluster` (the
DecoratorController CRD installed first, then the manifests' CRDs and Namespaces, then the
rest; a namespaced object without a namespace goes to `default`, as `kubectl apply -f` puts
it; kustomization files are skipped), runs the DecoratorControllers on it until they are idle
(reconcile.hooks.preview.run_locally, the runner every hook controller's preview shares),
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

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from decorators.crds import decorator_controller_crd
from decorators.instance import DecoratorInstance, Options
from decorators.supervisor import Decorators
from decorators.sync import SyncResult
from reconcile.cluster import Kind, Obj, ObjectKey
from reconcile.hooks import HookPolicy
from reconcile.hooks.preview import LocalRun, Passes, run_locally
from reconcile.manifests import for_display

Pass = tuple[str, Kind, ObjectKey]  # the decorator's name, and its target's kind and key


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
    passes: Passes[Pass, SyncResult] = Passes(changed=lambda result: result.target_changed or bool(result.changes))
    options = Options(resolve=dict(resolve or {}), hook_policy=HookPolicy.local(), follow_resync=False,
                      report=lambda decorator, kind, key, result: passes.record((decorator, kind, key), result))
    run = run_locally(decorator_controller_crd(), paths, lambda manager: Decorators(manager, options),
                      component="porchkit-decorators", timeout=timeout)
    return _preview(run, passes)


def _preview(run: LocalRun[DecoratorInstance], passes: Passes[Pass, SyncResult]) -> Preview:
    preview = Preview(passes=passes.changing, errors=run.start_errors())
    for (decorator, kind, key), error in passes.failures(order=lambda k: (k[0], str(k[1]), k[2])):
        preview.errors.append(f"{run.describe(kind, key)}: DecoratorController {decorator}: {error}")
    for result in passes.changing:
        if result.target_changed:
            obj = run.cluster.get(result.target, result.key)
            if obj is not None:
                preview.targets[(result.target, result.key)] = for_display(obj)
        for change in result.changes:
            preview.attachments[(change.kind, change.key)] = run.as_ended(change.kind, change.key, change.action)
    return preview
