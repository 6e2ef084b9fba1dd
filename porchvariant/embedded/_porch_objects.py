"""The PackageRevision and PackageRevisionResources objects of the embedded Porch, built from git.

Owns: the API shape of a revision. Names are Porch's `<repo>.<package, / → .>.<workspace>`; UIDs
are Porch's (`porch_uid`: the same name in the same namespace has the same UID); creationTimestamp
is the revision's commit time; labels, annotations, ownerReferences and finalizers come from the
metadata git keeps for the revision (`GitPackageRepository.write_metadata`), plus Porch's computed
label LATEST_REVISION on the latest published revision of each package (never stored); spec.tasks
(the first task alone, as Porch shows it) from the commits' `kpt:` trailers; status (upstreamLock,
conditions) and spec.readinessGates from the Kptfile; publishedBy and publishTimestamp from the
commit that published it (`GitPackageRepository.publication`).

Promises: an object is built once per state of the revision, the state being what git holds for
it (ref, commit, tree, lifecycle, metadata blob) plus a pending deletionTimestamp and whether it
is its package's latest revision; until that
state changes every request gets the same object, with the same resourceVersion (`History`).
The objects handed out by `Objects` are shared: callers copy them before they leave the server.
Does not: find revisions (_porch_repos.py) or decide anything (porch.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from porchvariant.embedded import _porch_tasks as tasks
from porchvariant.embedded._porch_events import History
from porchvariant.embedded._porch_repos import Found
from porchvariant.embedded.git.repository import Lifecycle, Revision
from porchvariant.porch_client import PACKAGE_REVISION, PACKAGE_REVISION_RESOURCES
from reconcile.cluster import Kind, Obj

# Porch's GenerateUid (pkg/util/util.go): a name-based (SHA-1, version 5) UUID in this namespace.
_UID_NAMESPACE = uuid.UUID("aac71d91-5c67-456f-8fd2-902ef6da820e")
_UID_PREFIX = "packagerevision:"  # what Porch's PackageRevisions (git, caches) pass as the prefix
LATEST_REVISION = "kpt.dev/latest-revision"  # Porch's LatestPackageRevisionKey (api/porch/v1alpha1/types.go)
_PUBLISHED = (Lifecycle.PUBLISHED, Lifecycle.DELETION_PROPOSED)
_CACHE_LIMIT = 100_000
_KPTFILE_CACHE_LIMIT = 1000


@dataclass(slots=True)
class _Built:
    state: Any
    version: int
    revision: Obj
    resources: Obj | None = None  # built on first use: a list of PackageRevisions never needs it


class Objects:
    """Built objects by (namespace, name), each kept for as long as its revision's state."""

    def __init__(self, history: History) -> None:
        self._history = history
        self._built: dict[tuple[str, str], _Built] = {}
        self._kptfiles: dict[str, dict[str, Any]] = {}  # Kptfile text -> its data (fan-outs share a few)

    def get(self, kind: Kind, found: Found, deleting: str | None = None, *, latest: bool = False) -> Obj:
        """The PackageRevision (or, for that kind, PackageRevisionResources) of `found`; shared.
        `latest`: it is its package's latest revision (the LATEST_REVISION label)."""
        repo, revision = found.repo, found.revision
        key = (repo.namespace, repo.object_name(revision))
        state = (revision, found.metadata, deleting, latest)
        version = self._history.version(key[0], key[1], state)
        built = self._built.get(key)
        if built is None or built.state != state or built.version != version:
            if len(self._built) >= _CACHE_LIMIT:
                self._built.clear()
            built = self._built[key] = _Built(state, version, self._revision(found, version, deleting, latest))
        if kind != PACKAGE_REVISION_RESOURCES:
            return built.revision
        if built.resources is None:
            built.resources = _resources(found, built.revision["metadata"])
        return built.resources

    def forget(self, namespace: str, name: str) -> None:
        self._built.pop((namespace, name), None)

    def _revision(self, found: Found, version: int, deleting: str | None, latest: bool) -> Obj:
        text = found.repo.git.read_resources(found.revision).get(tasks.KPTFILE, "")
        kptfile = self._kptfiles.get(text)
        if kptfile is None:
            if len(self._kptfiles) >= _KPTFILE_CACHE_LIMIT:
                self._kptfiles.clear()
            kptfile = self._kptfiles[text] = tasks.kptfile_data({tasks.KPTFILE: text})
        return _revision(found, version, deleting, kptfile, latest)


def porch_uid(prefix: str, namespace: str, name: str) -> str:
    """The UID Porch gives an object: uuid5 of `prefix`, the API group/version `porch.kpt.dev/v1alpha1`,
    and `/namespace/name` in lower case, so a revision has the same UID here as in Porch, and
    keeps it across restarts (Porch's PackageRevisionResources share their revision's)."""
    return str(uuid.uuid5(_UID_NAMESPACE, f"{prefix}{PACKAGE_REVISION.api_version}/{namespace.lower()}/{name.lower()}"))


def timestamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def latest_revisions(revisions: Iterable[Revision]) -> dict[str, int]:
    """For each package (full path), the number of its revision that gets the LATEST_REVISION
    label: the highest of its published (or DeletionProposed) revisions, -1 never (Porch's
    identifyLatestRevisions; Porch's git cache keys packages by their last path segment, its
    database cache, like this, by the whole path)."""
    latest: dict[str, int] = {}
    for revision in revisions:
        if revision.revision >= 1 and revision.lifecycle in _PUBLISHED:
            latest[revision.package] = max(latest.get(revision.package, 0), revision.revision)
    return latest


def without_latest_label(labels: Mapping[str, Any] | None) -> dict[str, Any]:
    """`labels` without LATEST_REVISION, which Porch computes and never stores."""
    return {key: value for key, value in (labels or {}).items() if key != LATEST_REVISION}


def _revision(found: Found, version: int, deleting: str | None, kptfile: dict[str, Any], latest: bool) -> Obj:
    repo, revision = found.repo, found.revision
    name = repo.object_name(revision)
    stored = repo.git.read_metadata(revision, blob=found.metadata)
    labels = without_latest_label(stored.get("labels"))
    if latest:
        labels[LATEST_REVISION] = "true"
    stored.pop("labels", None)
    metadata: dict[str, Any] = {
        "name": name, "namespace": repo.namespace,
        "uid": porch_uid(_UID_PREFIX, repo.namespace, name),
        "resourceVersion": str(version),
        "creationTimestamp": timestamp(revision.author_time),
        **({"labels": labels} if labels else {}), **stored}
    if deleting:
        metadata["deletionTimestamp"] = deleting
    spec: dict[str, Any] = {"packageName": revision.name, "workspaceName": revision.workspace,
                            "revision": revision.revision, "repository": repo.name,
                            "lifecycle": str(revision.lifecycle), "tasks": repo.git.tasks(revision)}
    gates = (kptfile.get("info") or {}).get("readinessGates")
    if gates:
        spec["readinessGates"] = gates
    status: dict[str, Any] = {}
    if kptfile.get("upstreamLock"):
        status["upstreamLock"] = kptfile["upstreamLock"]
    conditions = (kptfile.get("status") or {}).get("conditions")
    if conditions:
        status["conditions"] = conditions
    publication = repo.git.publication(revision)
    if publication is not None:
        email, when = publication
        if email:
            status["publishedBy"] = email
        if when:
            status["publishTimestamp"] = timestamp(when)
    return {"apiVersion": PACKAGE_REVISION.api_version, "kind": PACKAGE_REVISION.kind, "metadata": metadata,
            "spec": spec, "status": status}


def _resources(found: Found, metadata: Obj) -> Obj:
    revision = found.revision
    spec = {"packageName": revision.name, "workspaceName": revision.workspace, "revision": revision.revision,
            "repository": found.repo.name, "resources": found.repo.git.read_resources(revision)}
    return {"apiVersion": PACKAGE_REVISION_RESOURCES.api_version, "kind": PACKAGE_REVISION_RESOURCES.kind,
            "metadata": metadata, "spec": spec, "status": {}}
