"""The PackageRevision and PackageRevisionResources objects of the embedded Porch, built from git.

Owns: the API shape of a revision. Names are Porch's `<repo>.<package, / → .>.<workspace>`; UIDs
are uuid5 of namespace and name; creationTimestamp is the revision's commit time; labels,
annotations, ownerReferences and finalizers come from the metadata git keeps for the revision
(`GitPackageRepository.write_metadata`); spec.tasks from the commits' `kpt:` trailers; status
(upstreamLock, conditions, publishedBy, publishTimestamp) and spec.readinessGates from the
Kptfile and the commit.

Promises: an object is built once per state of the revision, the state being what git holds for
it (ref, commit, tree, lifecycle, metadata blob) plus a pending deletionTimestamp; until that
state changes every request gets the same object, with the same resourceVersion (`History`).
The objects handed out by `Objects` are shared: callers copy them before they leave the server.
Does not: find revisions (_porch_repos.py) or decide anything (porch.py).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from porchvariant.embedded import _porch_tasks as tasks
from porchvariant.embedded._porch_events import History
from porchvariant.embedded._porch_repos import Found
from porchvariant.embedded.gitrepo import Lifecycle
from porchvariant.porch_client import PACKAGE_REVISION, PACKAGE_REVISION_RESOURCES
from reconcile.cluster import Kind, Obj

_UID_NAMESPACE = uuid.UUID("6f0c6d2e-8f55-5b1e-9d0a-706f7263686b")
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

    def get(self, kind: Kind, found: Found, deleting: str | None = None) -> Obj:
        """The PackageRevision (or, for that kind, PackageRevisionResources) of `found`; shared."""
        repo, revision = found.repo, found.revision
        key = (repo.namespace, repo.object_name(revision))
        state = (revision, found.metadata, deleting)
        version = self._history.version(key[0], key[1], state)
        built = self._built.get(key)
        if built is None or built.state != state or built.version != version:
            if len(self._built) >= _CACHE_LIMIT:
                self._built.clear()
            built = self._built[key] = _Built(state, version, self._revision(found, version, deleting))
        if kind != PACKAGE_REVISION_RESOURCES:
            return built.revision
        if built.resources is None:
            built.resources = _resources(found, built.revision["metadata"])
        return built.resources

    def forget(self, namespace: str, name: str) -> None:
        self._built.pop((namespace, name), None)

    def _revision(self, found: Found, version: int, deleting: str | None) -> Obj:
        text = found.repo.git.read_resources(found.revision).get(tasks.KPTFILE, "")
        kptfile = self._kptfiles.get(text)
        if kptfile is None:
            if len(self._kptfiles) >= _KPTFILE_CACHE_LIMIT:
                self._kptfiles.clear()
            kptfile = self._kptfiles[text] = tasks.kptfile_data({tasks.KPTFILE: text})
        return _revision(found, version, deleting, kptfile)


def timestamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _revision(found: Found, version: int, deleting: str | None, kptfile: dict[str, Any]) -> Obj:
    repo, revision = found.repo, found.revision
    name = repo.object_name(revision)
    metadata: dict[str, Any] = {
        "name": name, "namespace": repo.namespace,
        "uid": str(uuid.uuid5(_UID_NAMESPACE, f"{repo.namespace}/{name}")),
        "resourceVersion": str(version),
        "creationTimestamp": timestamp(revision.author_time),
        **repo.git.read_metadata(revision, blob=found.metadata)}
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
    if revision.lifecycle in (Lifecycle.PUBLISHED, Lifecycle.DELETION_PROPOSED) and revision.revision > 0:
        status["publishedBy"] = revision.author_email
        status["publishTimestamp"] = timestamp(revision.author_time)
    return {"apiVersion": PACKAGE_REVISION.api_version, "kind": PACKAGE_REVISION.kind, "metadata": metadata,
            "spec": spec, "status": status}


def _resources(found: Found, metadata: Obj) -> Obj:
    revision = found.revision
    spec = {"packageName": revision.name, "workspaceName": revision.workspace, "revision": revision.revision,
            "repository": found.repo.name, "resources": found.repo.git.read_resources(revision)}
    return {"apiVersion": PACKAGE_REVISION_RESOURCES.api_version, "kind": PACKAGE_REVISION_RESOURCES.kind,
            "metadata": metadata, "spec": spec, "status": {}}
