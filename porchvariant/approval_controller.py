"""The approval controller: publishes the drafts whose approval policy says so, as Nephio's does.

A PackageRevision annotated `approval.nephio.org/policy: initial` (a PackageVariant puts it there
through its `spec.annotations`) is proposed and approved once
* it is a Draft or Proposed, not being deleted;
* every readiness gate of its spec has a True condition (the rule porchctl approves by; a draft
  whose mutations failed has a False one, see packagevariant_controller);
* if a PackageVariant owns it, that variant is Ready for its current generation and lists it among
  its downstreamTargets: its mutations are written (the draft exists before they are);
* no revision of its package in its Repository is published yet (`initial`: later revisions are
  left to a person, so an upstream change never reaches a deployment unreviewed);
* and, beyond Nephio, its Repository allows the policy: the annotation APPROVAL_POLICIES_ANNOTATION
  on the Repository lists it. Whoever may edit a PackageRevision's annotations may not be allowed
  to approve it (`packagerevisions/approval`); the Repository's author decides whether revisions
  there may be approved by policy.

`initial` is the only policy, as in Nephio. Any other value is told once as a Warning Event on the
revision and otherwise ignored. Nephio's `approval.nephio.org/delay` is not read.

Reads PackageRevisions, Repositories and PackageVariants (cached); writes the revision's lifecycle (an update to
Proposed, then the approval subresource) and Events.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

from porchvariant.packagevariant_controller import PACKAGE_VARIANT
from porchvariant.porch_client import (
    DRAFT,
    PACKAGE_REVISION,
    PROPOSED,
    REPOSITORY,
    PorchClient,
    is_published,
    unmet_readiness_gates,
)
from reconcile import conditions
from reconcile.cache import InformerCache
from reconcile.clock import Clock
from reconcile.cluster import Cluster, Obj, ObjectKey
from reconcile.controller import Controller, Watches
from reconcile.outcome import Done

__all__ = ["APPROVAL_POLICIES_ANNOTATION", "POLICY_ANNOTATION", "approval_controller", "approval_decision"]

POLICY_ANNOTATION = "approval.nephio.org/policy"
APPROVAL_POLICIES_ANNOTATION = "porchkit.dev/approval-policies"
INITIAL = "initial"
POLICIES = frozenset({INITIAL})

log = logging.getLogger("porchkit.approval")


def approval_decision(revision: Obj, repository: Obj | None, siblings: list[Obj],
                      variants: Mapping[str, Obj] | None = None) -> str | None:
    """Why `revision` is not to be approved now, or None when it is. `siblings`: the revisions of
    its namespace (of any package; those of its own package and Repository are looked at);
    `variants`: the PackageVariants of its namespace by name (those owning it are looked at)."""
    meta, spec = revision.get("metadata") or {}, revision.get("spec") or {}
    policy = str((meta.get("annotations") or {}).get(POLICY_ANNOTATION) or "")
    if not policy:
        return "no approval policy"
    if policy not in POLICIES:
        return f"unknown approval policy {policy!r} ({POLICY_ANNOTATION}); the only one is {INITIAL!r}"
    if spec.get("lifecycle") not in (DRAFT, PROPOSED) or meta.get("deletionTimestamp"):
        return "not a draft or proposal"
    if repository is None:
        return f"repository {spec.get('repository')!r} not found"
    if policy not in _allowed(repository):
        return (f"repository {spec.get('repository')!r} does not allow the approval policy {policy!r} "
                f"(annotation {APPROVAL_POLICIES_ANNOTATION})")
    if unmet := unmet_readiness_gates(revision):
        return f"readiness gates not met: {', '.join(unmet)}"
    if why := _owner_unsettled(revision, variants or {}):
        return why
    same_package = (spec.get("repository"), spec.get("packageName"))
    if any(is_published(other) and _package(other) == same_package for other in siblings):
        return f"package {spec.get('packageName')!r} is published already (policy {INITIAL!r})"
    return None


def approval_controller(cluster: Cluster, cache: InformerCache, clock: Clock, *, workers: int = 2) -> Controller:
    """The controller, woken by every PackageRevision, by its Repository's changes and by its
    PackageVariant's."""
    client = PorchClient(cluster)
    told: set[tuple[str, str, str]] = set()  # (namespace, name, policy) warned about once

    def reconcile(key: ObjectKey) -> Done:
        revision = cache.get(PACKAGE_REVISION, key)
        if revision is None:
            return Done()
        spec = revision.get("spec") or {}
        repository = cache.get(REPOSITORY, ObjectKey(key.namespace, str(spec.get("repository") or "")))
        variants = {pv["metadata"]["name"]: pv for pv in cache.list(PACKAGE_VARIANT, key.namespace)}
        why = approval_decision(revision, repository, cache.list(PACKAGE_REVISION, key.namespace), variants)
        if why is None:
            _approve(client, revision)
            log.info("approved %s (policy %s)", key, INITIAL)
        elif why.startswith("unknown approval policy") and controller.events is not None:
            policy = str(revision["metadata"]["annotations"][POLICY_ANNOTATION])
            if (key.namespace, key.name, policy) not in told:
                told.add((key.namespace, key.name, policy))
                controller.events.record(PACKAGE_REVISION, key, "Warning", "UnknownApprovalPolicy", why)
        return Done()

    def of_repository(repository: Obj) -> list[ObjectKey]:
        name = repository["metadata"]["name"]
        return [ObjectKey.of(pr) for pr in cache.list(PACKAGE_REVISION, repository["metadata"].get("namespace", ""))
                if (pr.get("spec") or {}).get("repository") == name]

    def targets_of(variant: Obj) -> list[ObjectKey]:
        namespace = str(variant["metadata"].get("namespace") or "")
        return [ObjectKey(namespace, str(t.get("name"))) for t in (variant.get("status") or {}).get("downstreamTargets")
                or () if isinstance(t, Mapping) and t.get("name")]

    controller = Controller("approval", PACKAGE_REVISION, reconcile, watches=[
        Watches(REPOSITORY, of_repository), Watches(PACKAGE_VARIANT, targets_of)], workers=workers, clock=clock)
    return controller


def _owner_unsettled(revision: Obj, variants: Mapping[str, Obj]) -> str | None:
    name = revision["metadata"].get("name")
    for owner in _variant_owners(revision):
        variant = variants.get(owner)
        if variant is None:
            return f"package variant {owner!r} not found"
        ready = conditions.find(conditions.conditions_of(variant), "Ready") or {}
        generation = (variant.get("metadata") or {}).get("generation")
        if ready.get("status") != "True" or ready.get("observedGeneration") != generation:
            return f"package variant {owner!r} is not Ready yet"
        if name not in {t.get("name") for t in (variant.get("status") or {}).get("downstreamTargets") or ()}:
            return f"package variant {owner!r} does not list it as a downstream target yet"
    return None


def _variant_owners(revision: Obj) -> list[str]:
    return [str(ref.get("name")) for ref in (revision.get("metadata") or {}).get("ownerReferences") or ()
            if ref.get("kind") == PACKAGE_VARIANT.kind and str(ref.get("apiVersion", "")).startswith(
                PACKAGE_VARIANT.group + "/")]


def _approve(client: PorchClient, revision: Obj) -> None:
    if revision["spec"]["lifecycle"] == DRAFT:
        revision = client.propose(revision)
    client.approve(revision)


def _allowed(repository: Mapping[str, Any]) -> set[str]:
    listed = str(((repository.get("metadata") or {}).get("annotations") or {}).get(APPROVAL_POLICIES_ANNOTATION) or "")
    return {word for word in re.split(r"[\s,]+", listed) if word}


def _package(revision: Obj) -> tuple[Any, Any]:
    spec = revision.get("spec") or {}
    return spec.get("repository"), spec.get("packageName")
