"""Local runs: the PackageVariant controllers over manifests and plain git repositories, no cluster.

`reconcile_manifests(manifests, ...)` loads the objects into an `EmbeddedCluster` (kept in a state
directory between runs, if one is given), serves Porch's API from the git repositories its
Repository objects name (`EmbeddedPorch`), runs the PackageVariant and PackageVariantSet
controllers until they are idle (`reconcile.idle.run_until_idle`), optionally proposes and
approves the drafts that are ready, and reports what changed: one `RevisionChange` per package
revision created, changed, published or removed (sorted by namespace and name, so that two runs
print the same), those revisions as they ended up (`revisions`, for `-o yaml`), and one line per
PackageVariant or set that is Stalled or not Ready.

The manifests are the desired state: with a state directory, an object loaded by an earlier run
and no longer among the manifests is deleted (so a PackageVariant taken out of the manifests has
its deletion policy carried out), and one still there is updated to match. CustomResourceDefinitions
and Namespaces are never deleted this way (everything in them would go too), and Repositories only
after the run (a variant removed with its downstream Repository still has revisions to dispose of).
Objects without a namespace go to `default`, as `kubectl apply -f` would put them; missing
namespaces are created. PackageRevisions among the manifests are ignored, with a note saying so:
they come from git.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from porchvariant.crds import crds
from porchvariant.embedded._porch_remotes import RemoteSettings
from porchvariant.embedded.git.transport import is_remote
from porchvariant.embedded.porch import EmbeddedPorch, Renderer
from porchvariant.errors import PorchVariantError
from porchvariant.manifests import Manifest, check_variants
from porchvariant.packagevariant_controller import PACKAGE_VARIANT, package_variant_controller
from porchvariant.packagevariantset_controller import PACKAGE_VARIANT_SET, package_variant_set_controller
from porchvariant.porch_client import (
    DRAFT,
    PACKAGE_REVISION,
    PROPOSED,
    REPOSITORY,
    PorchClient,
    unmet_readiness_gates,
)
from reconcile import conditions
from reconcile.cluster import Kind, Obj, ObjectKey
from reconcile.embedded import EmbeddedCluster
from reconcile.errors import ApiError, NotFound
from reconcile.events import EventRecorder
from reconcile.idle import run_until_idle
from reconcile.manager import Manager
from reconcile.manifests import for_display

__all__ = ["LOADED_FROM", "LocalRun", "RemoteSettings", "RevisionChange", "reconcile_manifests", "serve_porch"]

LOADED_FROM = "porchkit.dev/loaded-from"  # annotation on every object a local run loaded
CRD = Kind("apiextensions.k8s.io/v1", "CustomResourceDefinition")
NAMESPACE = Kind("v1", "Namespace")

log = logging.getLogger("porchkit.variants")


@dataclass(frozen=True, slots=True)
class RevisionChange:
    """A package revision this run created, changed, published or removed."""

    repository: str
    package: str
    workspace: str
    revision: int
    lifecycle: str
    ready: bool
    change: str  # created, updated, published, removed
    variant: str  # the owning PackageVariant, or ""


@dataclass(frozen=True, slots=True)
class LocalRun:
    """What a local run did (`changes`; `revisions`, the package revisions created or changed as
    they ended up, without removed ones), what is wrong (`problems`) and what was ignored
    (`notes`), one line each."""

    changes: list[RevisionChange]
    problems: list[str]
    revisions: list[Obj] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def serve_porch(cluster: EmbeddedCluster, renderer: Renderer | None = None, *,
                announce_every: float | None = None, remotes: RemoteSettings | None = None) -> EmbeddedPorch:
    """Install the CRDs the controllers need (where missing) and serve Porch's API from git
    (`announce_every`, `remotes`: see EmbeddedPorch; a local run registers its Repositories first)."""
    for crd in crds():
        if cluster.get(CRD, ObjectKey("", crd["metadata"]["name"])) is None:
            cluster.create(crd)
    return EmbeddedPorch(cluster, renderer=renderer, announce_every=announce_every, remotes=remotes)


def reconcile_manifests(manifests: Sequence[Manifest], *, state: Path | None = None, approve: bool = False,
                        renderer: Renderer | None = None, timeout: float = 600.0,
                        remotes: RemoteSettings | None = None) -> LocalRun:
    """Run the controllers over `manifests` (see the module docstring). Raises PorchVariantError for
    an object the API server refuses, naming its file, and, before anything is loaded or written,
    for a PackageVariant or set that cannot be loaded at all (manifests.check_variants).
    Repositories on git servers are mirrored under `remotes.cache` and fetched every
    `remotes.fetch_period` seconds; what a fetch finds is announced to the controllers' watches."""
    check_variants(manifests)
    remotes = remotes or RemoteSettings()
    with EmbeddedCluster(persist_to=state) as cluster:
        # Without a git server nothing changes behind the controllers' backs while they run.
        announce = min(5.0, remotes.fetch_period) if any(_on_git_server(m) for m in manifests) else None
        porch = serve_porch(cluster, renderer, remotes=remotes, announce_every=announce)
        try:
            notes = [f"{m.describe()}: ignored: package revisions come from the git repositories"
                     for m in manifests if _served_by_porch(m)]
            wanted = _load(cluster, [m for m in manifests if not _served_by_porch(m)])
            # Repositories go last: a PackageVariant removed with its downstream Repository still
            # needs that Repository's revisions served to carry out its deletion policy.
            _prune(cluster, wanted, keep=lambda kind: (kind.group, kind.kind) == (REPOSITORY.group, REPOSITORY.kind))
            before, variants_before = _revisions(cluster), cluster.list(PACKAGE_VARIANT).items
            _run(cluster, timeout)
            held: list[str] = []
            if approve:
                approved, held = _approve_ready_drafts(cluster)
                if approved:
                    _run(cluster, timeout)
            after = _revisions(cluster)
            variants = cluster.list(PACKAGE_VARIANT).items
            _prune(cluster, wanted)
            changes, revisions = _changes(before, after, [*variants_before, *variants])
            return LocalRun(changes, [*_problems(cluster, variants), *held], revisions, notes)
        finally:
            porch.close()


def _run(cluster: EmbeddedCluster, timeout: float) -> None:
    manager = Manager(cluster, events=EventRecorder(cluster, "porchkit-variants"))
    manager.add(package_variant_controller(manager.cluster, manager.cache, manager.clock))
    manager.add(package_variant_set_controller(manager.cluster, manager.cache, manager.clock))
    run_until_idle(manager, timeout=timeout)


# --- loading ---------------------------------------------------------------------------------------


def _load(cluster: EmbeddedCluster, manifests: Sequence[Manifest]) -> set[tuple[str, str, ObjectKey]]:
    """Create or update the manifests' objects; returns them as (group, kind, key)."""
    ordered = sorted(manifests, key=lambda m: (m.kind != "CustomResourceDefinition", m.kind != "Namespace"))
    wanted: set[tuple[str, str, ObjectKey]] = set()
    for manifest in ordered:
        obj = _prepared(cluster, manifest)
        kind = Kind.of(obj)
        wanted.add((kind.group, kind.kind, ObjectKey.of(obj)))
        try:
            _ensure_namespace(cluster, obj)
            _put(cluster, obj)
        except ApiError as err:
            raise PorchVariantError(f"{manifest.describe()}: {err}") from None
    return wanted


def _on_git_server(manifest: Manifest) -> bool:
    spec = manifest.obj.get("spec")
    git = spec.get("git") if isinstance(spec, dict) else None
    return manifest.kind == "Repository" and isinstance(git, dict) and is_remote(str(git.get("repo") or ""))


def _served_by_porch(manifest: Manifest) -> bool:
    return str(manifest.obj.get("apiVersion", "")).startswith(PACKAGE_REVISION.group + "/")


def _prepared(cluster: EmbeddedCluster, manifest: Manifest) -> dict[str, Any]:
    obj = dict(manifest.obj)
    if not obj.get("apiVersion") or not obj.get("kind"):
        raise PorchVariantError(f"{manifest.describe()}: needs apiVersion and kind")
    metadata = obj.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise PorchVariantError(f"{manifest.describe()}: metadata must be a mapping, not {type(metadata).__name__}")
    for key in ("labels", "annotations"):
        if metadata.get(key) is not None and not isinstance(metadata[key], dict):
            raise PorchVariantError(f"{manifest.describe()}: metadata.{key} must be a mapping, "
                                    f"not {type(metadata[key]).__name__}")
    metadata = dict(metadata)
    try:
        namespaced = cluster.resource(Kind.of(obj)).namespaced
    except NotFound:
        raise PorchVariantError(f"{manifest.describe()}: the embedded API server does not serve "
                                f"{obj['kind']} in {obj['apiVersion']} (add its CustomResourceDefinition)") from None
    if namespaced and not metadata.get("namespace"):
        metadata["namespace"] = "default"
    metadata["annotations"] = {**(metadata.get("annotations") or {}), LOADED_FROM: manifest.source.split(" (")[0]}
    obj["metadata"] = metadata
    return obj


def _ensure_namespace(cluster: EmbeddedCluster, obj: Obj) -> None:
    namespace = (obj.get("metadata") or {}).get("namespace")
    if namespace and cluster.get(NAMESPACE, ObjectKey("", namespace)) is None:
        cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})


def _put(cluster: EmbeddedCluster, obj: dict[str, Any]) -> None:
    """Create the object, or update the one there (keeping its status and server-set fields)."""
    current = cluster.get(Kind.of(obj), ObjectKey.of(obj))
    if current is None:
        cluster.create(obj)
        return
    merged = {**current, **{k: v for k, v in obj.items() if k not in ("metadata", "status")}}
    merged["metadata"] = {k: v for k, v in current["metadata"].items() if k not in ("labels", "annotations")}
    merged["metadata"].update({k: obj["metadata"][k] for k in ("labels", "annotations") if obj["metadata"].get(k)})
    for key in set(current) - set(obj) - {"metadata", "status", "apiVersion", "kind"}:
        merged.pop(key, None)
    if merged != current:
        cluster.update(merged)


def _prune(cluster: EmbeddedCluster, wanted: set[tuple[str, str, ObjectKey]],
           keep: Callable[[Kind], bool] = lambda kind: False) -> None:
    """Delete what an earlier run loaded and the manifests no longer hold. CustomResourceDefinitions
    and Namespaces stay (deleting one takes everything in it along), and so do kinds `keep` names."""
    seen: set[tuple[str, str]] = set()
    for info in cluster.resources():
        kind = info.kind
        if ((kind.group, kind.kind) in seen or kind.group == PACKAGE_REVISION.group or kind in (CRD, NAMESPACE)
                or keep(kind)):
            continue
        seen.add((kind.group, kind.kind))  # one version of each kind lists them all
        try:
            items = cluster.list(kind).items
        except ApiError:
            continue
        for obj in items:
            loaded = ((obj.get("metadata") or {}).get("annotations") or {}).get(LOADED_FROM)
            if loaded and (kind.group, kind.kind, ObjectKey.of(obj)) not in wanted:
                log.info("deleting %s %s: no longer among the manifests", kind.kind, ObjectKey.of(obj))
                with contextlib.suppress(NotFound):
                    cluster.delete(kind, ObjectKey.of(obj))


# --- approving -------------------------------------------------------------------------------------


def _approve_ready_drafts(cluster: EmbeddedCluster) -> tuple[int, list[str]]:
    """Propose and approve every draft a Ready PackageVariant targets whose readiness gates are met.
    Returns how many were approved, and a line for each draft held back by a gate (a variant that
    is not Ready is a problem of its own already)."""
    client = PorchClient(cluster)
    approved, held = 0, []
    for pv in cluster.list(PACKAGE_VARIANT).items:
        if not conditions.is_true(pv, "Ready"):
            continue
        namespace = pv["metadata"]["namespace"]
        for target in (pv.get("status") or {}).get("downstreamTargets") or ():
            revision = client.revision(namespace, str(target.get("name") or ""))
            if revision is None or revision["spec"].get("lifecycle") not in (DRAFT, PROPOSED):
                continue
            if unmet := unmet_readiness_gates(revision):
                held.append(f"PackageRevision {namespace}/{revision['metadata']['name']} of PackageVariant "
                            f"{pv['metadata']['name']} was not approved: readiness gate "
                            f"{', '.join(unmet)} is not True")
                continue
            if revision["spec"]["lifecycle"] == DRAFT:
                revision = client.propose(revision)
            client.approve(revision)
            approved += 1
    return approved, held


# --- reporting -------------------------------------------------------------------------------------


def _revisions(cluster: EmbeddedCluster) -> dict[tuple[str, str], Obj]:
    return {(pr["metadata"]["namespace"], pr["metadata"]["name"]): pr for pr in cluster.list(PACKAGE_REVISION).items}


def _changes(before: Mapping[tuple[str, str], Obj], after: Mapping[tuple[str, str], Obj],
             variants: Sequence[Obj]) -> tuple[list[RevisionChange], list[Obj]]:
    """The changes, in (namespace, name) order, and the revisions created or changed as they ended."""
    ready_uids = {pv["metadata"]["uid"] for pv in variants if conditions.is_true(pv, "Ready")}
    names = {pv["metadata"]["uid"]: pv["metadata"]["name"] for pv in variants}
    out, ended = [], []
    for key in sorted(set(before) | set(after)):
        old, new = before.get(key), after.get(key)
        change = _change(old, new)
        pr = new or old
        assert pr is not None
        owner = _owner_uid(pr)
        if change and not (pr["spec"].get("revision") == -1 and not owner):  # a placeholder: Porch's bookkeeping
            spec = pr["spec"]
            out.append(RevisionChange(spec.get("repository", ""), spec.get("packageName", ""),
                                      spec.get("workspaceName", ""), int(spec.get("revision") or 0),
                                      spec.get("lifecycle", "") if new else "-",
                                      new is not None and owner in ready_uids and not unmet_readiness_gates(new),
                                      change, names.get(owner, "")))
            if new is not None:
                ended.append(for_display(new))
    return out, ended


_LIFECYCLE_CHANGES = {"Published": "published", "Proposed": "proposed", "DeletionProposed": "deletion proposed",
                      "Draft": "back to draft"}


def _change(old: Obj | None, new: Obj | None) -> str:
    if old is None:
        return "created" if new is not None else ""
    if new is None:
        return "removed"
    if old["spec"].get("lifecycle") != new["spec"].get("lifecycle"):
        return _LIFECYCLE_CHANGES.get(new["spec"].get("lifecycle"), "updated")
    return "updated" if old["metadata"].get("resourceVersion") != new["metadata"].get("resourceVersion") else ""


def _owner_uid(pr: Obj) -> str:
    refs = (pr.get("metadata") or {}).get("ownerReferences") or ()
    return next((str(ref.get("uid")) for ref in refs if ref.get("kind") == "PackageVariant"), "")


def _problems(cluster: EmbeddedCluster, variants: Sequence[Obj]) -> list[str]:
    out = []
    for kind, objects in ((PACKAGE_VARIANT_SET, cluster.list(PACKAGE_VARIANT_SET).items), (PACKAGE_VARIANT, variants)):
        for obj in objects:
            where = f"{kind.kind} {obj['metadata']['namespace']}/{obj['metadata']['name']}"
            found = {c.get("type"): c for c in conditions.conditions_of(obj)}
            stalled, ready = found.get("Stalled"), found.get("Ready")
            if stalled is not None and stalled.get("status") == "True":
                out.append(f"{where} is Stalled ({stalled.get('reason')}): {stalled.get('message')}")
            elif ready is None or ready.get("status") != "True":
                why = f"({ready.get('reason')}): {ready.get('message')}" if ready else "(not reconciled)"
                out.append(f"{where} is not Ready {why}")
    return out

