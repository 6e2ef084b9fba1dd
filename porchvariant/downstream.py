"""A PackageVariant's downstreams: which PackageRevisions are its own, what to write, what to create.

The decisions of Porch's `getDownstreamPRs`, `deleteOrOrphan`, the draft templates, the deletion
path and `status.downstreamTargets` (spec b.5-b.9) as pure functions over plain dicts. Inputs are
never modified; every PackageRevision to write is a new dict, ready for an update (a copy of the
listed one with the change made) or a create (no name: Porch names it).

* `plan_downstreams(pv, revisions)` → `DownstreamPlan`: the targets and the writes Porch makes
  while listing (adoptions, deletions and orphanings of owned revisions of another repository or
  package, DeletionProposed targets published again);
* `needs_upgrade(downstream, upstream)`: b.6, with Porch's error for a stale draft;
* `clone_draft`, `edit_draft`, `upgrade_draft`: the PackageRevisions to create (b.7), named by
  `new_workspace_name`;
* `deletion_plan(pv, revisions)` → `DeletionPlan` for a PackageVariant being deleted (b.8);
* `downstream_targets(previous, targets, render_statuses)`: `status.downstreamTargets` (b.9).

Only revisions in the PackageVariant's namespace count (Porch lists no others). The controller
runs a plan's writes as Porch does: the adoptions and disposals log their errors and go on, a
failed republish is an error. A PackageRevision is in at most one of a plan's `to_*` lists.

Differences from Porch, each because Porch's behaviour is a bug or an accident:
* At most one draft per PackageVariant and downstream (Porch targets every owned draft, and users
  saw hundreds of `packagevariant-N` drafts, nephio#687): when several drafts are ours, the one
  with the highest workspace number (`packagevariant-N`, anything else counting as 0; the first
  in list order among equals) is the target, and each other one is disposed of as the deletion
  policy says (`extra_drafts` gives the reasons). An unowned draft that adoptExisting would have
  adopted is left alone instead (neither adopted nor deleted). A plan with a target never calls
  for a clone, so no reconcile adds a draft beside an existing one.
* A DeletionProposed target that is also adopted is written once, with both changes.
* An owned Published revision of a PackageVariant being deleted is written once, DeletionProposed
  and orphaned together; Porch writes it twice with the same end result.
* The owner reference falls back to `config.porch.kpt.dev/v1alpha1` / `PackageVariant` when the
  PackageVariant dict has no apiVersion or kind; Porch copies empty strings. A PackageVariant
  without a UID owns nothing; Porch would claim every owner reference without one.

Does not: look up the upstream or judge upstreamLocks (upstream.py), mutate package files
(mutations.py), or read or write the cluster.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from porchvariant.api import (
    ADOPT_EXISTING,
    DELETE,
    ORPHAN,
    PACKAGE_VARIANT_API_VERSION,
    effective_adoption_policy,
    effective_deletion_policy,
)
from porchvariant.errors import PorchVariantError
from porchvariant.porch_client import (
    DELETION_PROPOSED,
    DRAFT,
    PACKAGE_REVISION,
    PROPOSED,
    PUBLISHED,
    PUBLISHED_LIFECYCLES,
    clone_task,
    edit_task,
    upgrade_task,
)
from porchvariant.upstream import check_clonable, is_up_to_date

__all__ = [
    "WORKSPACE_PREFIX",
    "DeletionPlan",
    "DownstreamNotPublished",
    "DownstreamPlan",
    "ExtraDraft",
    "clone_draft",
    "deletion_plan",
    "downstream_targets",
    "edit_draft",
    "is_owned",
    "needs_upgrade",
    "new_workspace_name",
    "owner_reference",
    "plan_downstreams",
    "upgrade_draft",
    "workspace_number",
]

Obj = Mapping[str, Any]

WORKSPACE_PREFIX = "packagevariant-"
_GO_INT = re.compile(r"[+-]?[0-9]+\Z")


class DownstreamNotPublished(PorchVariantError):
    """The downstream draft is based on another upstream; Porch only upgrades published revisions."""


@dataclass(frozen=True, slots=True)
class ExtraDraft:
    """An owned (or adoptable) draft beyond the one a PackageVariant keeps, and what happens to it."""

    pr: Obj
    reason: str


@dataclass(frozen=True, slots=True)
class DownstreamPlan:
    """What `plan_downstreams` found: the target revisions and the writes to make first.

    `targets`: one draft, else the latest published revision, else none (`needs_clone`), as they
    will be once written. `to_adopt`, `to_orphan`, `to_mark_deletion_proposed`, `to_republish`:
    PackageRevisions to update (new dicts, none shared with another field); `to_delete`: the
    listed PackageRevisions to delete. `extra_drafts`: the drafts beyond the kept one, for logs."""

    targets: tuple[dict[str, Any], ...] = ()
    to_adopt: tuple[dict[str, Any], ...] = ()
    to_delete: tuple[Obj, ...] = ()
    to_orphan: tuple[dict[str, Any], ...] = ()
    to_mark_deletion_proposed: tuple[dict[str, Any], ...] = ()
    to_republish: tuple[dict[str, Any], ...] = ()
    extra_drafts: tuple[ExtraDraft, ...] = ()

    @property
    def needs_clone(self) -> bool:
        return not self.targets


@dataclass(frozen=True, slots=True)
class DeletionPlan:
    """The writes for a PackageVariant being deleted; an entry of `to_mark_deletion_proposed` is
    also orphaned, so garbage collection does not delete it behind the approver's back."""

    to_delete: tuple[Obj, ...] = ()
    to_orphan: tuple[dict[str, Any], ...] = ()
    to_mark_deletion_proposed: tuple[dict[str, Any], ...] = ()


def plan_downstreams(pv: Obj, revisions: Sequence[Obj]) -> DownstreamPlan:
    """Porch's `getDownstreamPRs` over the namespace's revisions, in list order: owned (by UID) or,
    with adoptExisting, adoptable revisions of the downstream repository and package; owned ones
    elsewhere are deleted or orphaned. Drafts beat published revisions; among published ones the
    highest revision wins (strictly greater, so a revision -1 never does)."""
    spec = _spec(pv)
    downstream = spec.get("downstream") or {}
    adopt = effective_adoption_policy(spec) == ADOPT_EXISTING
    disposals = _Disposals(effective_deletion_policy(spec), _metadata(pv).get("uid"))
    matching: list[Obj] = []
    drafts: list[Obj] = []
    latest: Obj | None = None
    latest_revision = -1
    for pr in _in_namespace(pv, revisions):
        owned = is_owned(pr, pv)
        if not owned and not adopt:
            continue
        if (_spec(pr).get("repository"), _spec(pr).get("packageName")) != (downstream.get("repo"),
                                                                           downstream.get("package")):
            if owned:
                disposals.delete_or_orphan(pr)
            continue
        matching.append(pr)
        if not _is_published(pr):
            drafts.append(pr)
            continue
        revision = _spec(pr).get("revision") or 0
        if isinstance(revision, int) and revision > latest_revision:
            latest, latest_revision = pr, revision
    target = max(drafts, key=lambda pr: workspace_number(_spec(pr).get("workspaceName"))) if drafts else latest
    extras = [_extra_draft(pv, pr, target, disposals) for pr in drafts if pr is not target]
    left_alone = {id(extra.pr) for extra in extras if not is_owned(extra.pr, pv)}
    adopted = {id(pr): _adopted(pr, pv) for pr in matching if not is_owned(pr, pv) and id(pr) not in left_alone}
    targets: tuple[dict[str, Any], ...] = ()
    republish: tuple[dict[str, Any], ...] = ()
    if target is not None:
        written = adopted.get(id(target)) or copy.deepcopy(dict(target))
        if _spec(target).get("lifecycle") == DELETION_PROPOSED:
            written["spec"]["lifecycle"] = PUBLISHED
            republish = (written,)
            adopted.pop(id(target), None)
        targets = (copy.deepcopy(written),)
    return DownstreamPlan(targets, tuple(adopted.values()), tuple(disposals.deleted), tuple(disposals.orphaned),
                          tuple(disposals.proposed), republish, tuple(extras))


def needs_upgrade(downstream: Obj, upstream: Obj) -> bool:
    """b.6: False when `downstream` is up to date with `upstream` (upstream.is_up_to_date); True
    when it is published and needs an upgrade draft. Raises DownstreamNotPublished for a draft."""
    if is_up_to_date(downstream, upstream):
        return False
    if not _is_published(downstream):
        raise DownstreamNotPublished(f'cannot update upstream of downstream "{_name(downstream)}" '
                                     "when it is not published")
    return True


def clone_draft(pv: Obj, upstream_pr: Obj, revisions: Sequence[Obj]) -> dict[str, Any]:
    """The first downstream: a clone of `upstream_pr` into spec.downstream (lifecycle left to
    Porch, which makes it a Draft). Raises PlaceholderUpstream for a placeholder upstream."""
    check_clonable(pv, upstream_pr)
    downstream = _spec(pv).get("downstream") or {}
    repo, package = str(downstream.get("repo") or ""), str(downstream.get("package") or "")
    namespace = _metadata(pv).get("namespace")
    return {"apiVersion": PACKAGE_REVISION.api_version, "kind": PACKAGE_REVISION.kind,
            "metadata": _draft_metadata(pv, namespace),
            "spec": {"packageName": package, "repository": repo,
                     "workspaceName": new_workspace_name(_in_namespace(pv, revisions), package, repo),
                     "tasks": [clone_task(_name(upstream_pr))]}}


def edit_draft(pv: Obj, source_pr: Obj, revisions: Sequence[Obj]) -> dict[str, Any]:
    """A new Draft copying the published `source_pr`, for mutations that changed its package."""
    return _draft_template(pv, source_pr, revisions, edit_task(_name(source_pr)))


def upgrade_draft(pv: Obj, source_pr: Obj, old_upstream_pr: Obj, new_upstream_pr: Obj,
                  revisions: Sequence[Obj]) -> dict[str, Any]:
    """A new Draft upgrading the published `source_pr` from `old_upstream_pr` to `new_upstream_pr`
    (resource-merge). Raises PlaceholderUpstream if either upstream is a placeholder."""
    check_clonable(pv, new_upstream_pr)
    check_clonable(pv, old_upstream_pr, role="old upstream")
    task = upgrade_task(_name(old_upstream_pr), _name(new_upstream_pr), _name(source_pr))
    return _draft_template(pv, source_pr, revisions, task)


def new_workspace_name(revisions: Sequence[Obj], package: str, repo: str) -> str:
    """`packagevariant-<N+1>`, N the highest workspace number of the package's revisions in the repo.
    A revision without spec.packageName or spec.repository (or with null) has "" there, as Porch's
    Go structs read it."""
    numbers = [workspace_number(_spec(pr).get("workspaceName")) for pr in revisions
               if (_spec(pr).get("packageName") or "") == package and (_spec(pr).get("repository") or "") == repo]
    return f"{WORKSPACE_PREFIX}{max([0, *numbers]) + 1}"


def workspace_number(workspace: Any) -> int:
    """N of `packagevariant-N` (a Go int: optional sign, digits); 0 for anything else."""
    text = workspace if isinstance(workspace, str) else ""
    if not text.startswith(WORKSPACE_PREFIX) or not _GO_INT.match(text[len(WORKSPACE_PREFIX):]):
        return 0
    return int(text[len(WORKSPACE_PREFIX):])


def deletion_plan(pv: Obj, revisions: Sequence[Obj]) -> DeletionPlan:
    """b.8 for a PackageVariant being deleted: every owned revision, of any repository or package,
    is deleted or orphaned by the deletion policy (as given: not defaulted by validation, an
    invalid one does nothing), and one that is then DeletionProposed is orphaned as well."""
    disposals = _Disposals(_spec(pv).get("deletionPolicy") or DELETE, _metadata(pv).get("uid"))
    for pr in _in_namespace(pv, revisions):
        if is_owned(pr, pv):
            disposals.delete_or_orphan(pr, orphan_deletion_proposed=True)
    return DeletionPlan(tuple(disposals.deleted), tuple(disposals.orphaned), tuple(disposals.proposed))


def downstream_targets(previous: Sequence[Obj] | None, targets: Sequence[Obj],
                       render_statuses: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """status.downstreamTargets: one entry per target, in order; the previous entry of that name is
    kept (the first, copied), with the renderStatus of this run's resources update if there was
    one; a new target gets `{name}` (and its renderStatus)."""
    statuses = render_statuses or {}
    out = []
    for target in targets:
        name = _name(target)
        entry = next((dict(copy.deepcopy(e)) for e in previous or () if e.get("name") == name), {"name": name})
        if name in statuses:
            entry["renderStatus"] = copy.deepcopy(statuses[name])
        out.append(entry)
    return out


def owner_reference(pv: Obj) -> dict[str, Any]:
    """The owner reference Porch puts on the revisions a PackageVariant creates or adopts."""
    metadata = _metadata(pv)
    return {"apiVersion": pv.get("apiVersion") or PACKAGE_VARIANT_API_VERSION,
            "kind": pv.get("kind") or "PackageVariant", "name": metadata.get("name"),
            "uid": metadata.get("uid"), "controller": True}


def is_owned(pr: Obj, pv: Obj) -> bool:
    """Whether any owner reference of `pr` has the PackageVariant's UID (name and kind do not count).
    A PackageVariant without a UID owns nothing (Porch would match owner references without one)."""
    uid = _metadata(pv).get("uid")
    return bool(uid) and any(ref.get("uid") == uid for ref in _metadata(pr).get("ownerReferences") or ())


class _Disposals:
    """Porch's `deleteOrOrphan`, collecting the writes instead of making them."""

    def __init__(self, policy: str, uid: Any) -> None:
        self.policy, self.uid = policy, uid
        self.deleted: list[Obj] = []
        self.orphaned: list[dict[str, Any]] = []
        self.proposed: list[dict[str, Any]] = []

    def delete_or_orphan(self, pr: Obj, *, orphan_deletion_proposed: bool = False) -> str:
        lifecycle = _spec(pr).get("lifecycle") or ""
        if self.policy == ORPHAN or (orphan_deletion_proposed and lifecycle == DELETION_PROPOSED):
            self.orphaned.append(self._orphaned(pr))
            return "orphaned"
        if self.policy != DELETE:
            return "kept (invalid deletion policy)"
        if lifecycle in ("", DRAFT, PROPOSED):
            self.deleted.append(pr)
            return "deleted"
        if lifecycle == PUBLISHED:
            proposed = self._orphaned(pr) if orphan_deletion_proposed else copy.deepcopy(dict(pr))
            proposed["spec"]["lifecycle"] = DELETION_PROPOSED
            self.proposed.append(proposed)
            return "proposed for deletion"
        return "kept"

    def _orphaned(self, pr: Obj) -> dict[str, Any]:
        out = copy.deepcopy(dict(pr))
        refs = [ref for ref in out["metadata"].get("ownerReferences") or () if ref.get("uid") != self.uid]
        if refs:
            out["metadata"]["ownerReferences"] = refs
        else:
            out["metadata"].pop("ownerReferences", None)
        return out


def _extra_draft(pv: Obj, pr: Obj, kept: Obj | None, disposals: _Disposals) -> ExtraDraft:
    what = disposals.delete_or_orphan(pr) if is_owned(pr, pv) else "not adopted"
    return ExtraDraft(pr, f'{what}: package variant "{_name(pv)}" keeps one draft per downstream, "{_name(kept)}"')


def _adopted(pr: Obj, pv: Obj) -> dict[str, Any]:
    out = copy.deepcopy(dict(pr))
    metadata = out.setdefault("metadata", {})
    metadata["ownerReferences"] = [*(metadata.get("ownerReferences") or ()), owner_reference(pv)]
    for key in ("labels", "annotations"):
        if values := _spec(pv).get(key):
            metadata[key] = {**(metadata.get(key) or {}), **values}
    return out


def _draft_template(pv: Obj, source: Obj, revisions: Sequence[Obj], task: dict[str, Any]) -> dict[str, Any]:
    spec = copy.deepcopy(dict(_spec(source)))
    namespace = _metadata(source).get("namespace")
    in_namespace = [pr for pr in revisions if (_metadata(pr).get("namespace") or "") == (namespace or "")]
    spec.update(revision=0, lifecycle=DRAFT, tasks=[task],
                workspaceName=new_workspace_name(in_namespace, str(spec.get("packageName") or ""),
                                                  str(spec.get("repository") or "")))
    return {"apiVersion": PACKAGE_REVISION.api_version, "kind": PACKAGE_REVISION.kind,
            "metadata": _draft_metadata(pv, namespace), "spec": spec}


def _draft_metadata(pv: Obj, namespace: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"namespace": namespace, "ownerReferences": [owner_reference(pv)]}
    for key in ("labels", "annotations"):
        if values := _spec(pv).get(key):
            metadata[key] = dict(values)
    return metadata


def _in_namespace(pv: Obj, revisions: Sequence[Obj]) -> list[Obj]:
    namespace = _metadata(pv).get("namespace") or ""
    return [pr for pr in revisions if (_metadata(pr).get("namespace") or "") == namespace]


def _name(obj: Obj | None) -> str:
    return str(_metadata(obj).get("name") or "") if obj is not None else ""


def _metadata(obj: Obj | None) -> Mapping[str, Any]:
    return (obj.get("metadata") if obj is not None else None) or {}


def _spec(obj: Obj | None) -> Mapping[str, Any]:
    return (obj.get("spec") if obj is not None else None) or {}


def _is_published(pr: Mapping[str, Any]) -> bool:
    # porch_client.is_published, for any mapping: Published or DeletionProposed.
    return _spec(pr).get("lifecycle") in PUBLISHED_LIFECYCLES
