"""A client for Porch's API, over `reconcile.Cluster`: package revisions, their resources, repositories.

The same calls talk to a real Porch (through `KubeCluster`, to Porch's aggregated API server) and to
porchkit's embedded Porch (served on `EmbeddedCluster` from git repositories). Objects are the plain
dicts the API server sends; this module only knows the shapes of Porch's requests:

* PackageRevision (`porch.kpt.dev/v1alpha1`): created with one first task (clone, edit, upgrade,
  init), moved through its lifecycle (Draft → Proposed → Published; Published → DeletionProposed)
  by updates, except approval, which Porch only accepts through the `approval` subresource;
* PackageRevisionResources: the package's files as `{path: text}`; an update makes the server
  render the Kptfile pipeline, and the response carries the render status;
* Repository (`config.porch.kpt.dev/v1alpha1`): read only.

Does not: decide anything (that is the controllers' business), retry, or cache; reads are live
unless the caller passes a cache's list.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from reconcile.cluster import Cluster, Kind, Obj, ObjectKey

PACKAGE_REVISION = Kind("porch.kpt.dev/v1alpha1", "PackageRevision")
PACKAGE_REVISION_RESOURCES = Kind("porch.kpt.dev/v1alpha1", "PackageRevisionResources")
REPOSITORY = Kind("config.porch.kpt.dev/v1alpha1", "Repository")

DRAFT, PROPOSED, PUBLISHED, DELETION_PROPOSED = "Draft", "Proposed", "Published", "DeletionProposed"
PUBLISHED_LIFECYCLES = frozenset({PUBLISHED, DELETION_PROPOSED})


def clone_task(upstream_name: str) -> dict[str, Any]:
    """The first task of a revision cloned from another PackageRevision, by name."""
    return {"type": "clone", "clone": {"upstreamRef": {"upstreamRef": {"name": upstream_name}}}}


def clone_git_task(repo: str, ref: str, directory: str = "/") -> dict[str, Any]:
    """The first task of a revision cloned from a git repository at `ref`."""
    return {"type": "clone", "clone": {"upstreamRef": {"type": "git",
                                                       "git": {"repo": repo, "ref": ref, "directory": directory}}}}


def edit_task(source_name: str) -> dict[str, Any]:
    """The first task of a new revision copied from a published revision of the same package."""
    return {"type": "edit", "edit": {"sourceRef": {"name": source_name}}}


def upgrade_task(old_upstream: str, new_upstream: str, local: str, strategy: str = "resource-merge") -> dict[str, Any]:
    """The first task of a revision upgrading `local` from `old_upstream` to `new_upstream` (3-way merge)."""
    return {"type": "upgrade", "upgrade": {"oldUpstreamRef": {"name": old_upstream},
                                           "newUpstreamRef": {"name": new_upstream},
                                           "localPackageRevisionRef": {"name": local}, "strategy": strategy}}


def is_published(revision: Obj) -> bool:
    """Published or DeletionProposed: what Porch's controllers count as published."""
    return (revision.get("spec") or {}).get("lifecycle") in PUBLISHED_LIFECYCLES


def unmet_readiness_gates(revision: Obj) -> list[str]:
    """The readiness gates of a revision whose condition is not True (porchctl's approval rule)."""
    found = {c.get("type"): c.get("status") for c in (revision.get("status") or {}).get("conditions") or ()}
    return [str(g.get("conditionType")) for g in (revision.get("spec") or {}).get("readinessGates") or ()
            if found.get(g.get("conditionType")) != "True"]


class PorchClient:
    """Porch's API on one cluster."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    # --- reading ---

    def revisions(self, namespace: str, *, repository: str | None = None,
                  package: str | None = None) -> list[Obj]:
        """The namespace's PackageRevisions, optionally of one repository and/or package, in list order."""
        items = self.cluster.list(PACKAGE_REVISION, namespace=namespace).items
        return [item for item in items
                if (repository is None or (item.get("spec") or {}).get("repository") == repository)
                and (package is None or (item.get("spec") or {}).get("packageName") == package)]

    def revision(self, namespace: str, name: str) -> Obj | None:
        return self.cluster.get(PACKAGE_REVISION, ObjectKey(namespace, name))

    def repository(self, namespace: str, name: str) -> Obj | None:
        return self.cluster.get(REPOSITORY, ObjectKey(namespace, name))

    def repositories(self, namespace: str) -> list[Obj]:
        return self.cluster.list(REPOSITORY, namespace=namespace).items

    def resources(self, revision: Obj) -> Obj | None:
        """The PackageRevisionResources of a revision (same namespace and name), or None."""
        return self.cluster.get(PACKAGE_REVISION_RESOURCES, _key(revision))

    # --- writing ---

    def create_revision(self, namespace: str, *, repository: str, package: str, workspace: str,
                        task: Mapping[str, Any], labels: Mapping[str, str] | None = None,
                        annotations: Mapping[str, str] | None = None,
                        owner_references: Sequence[Mapping[str, Any]] = ()) -> Obj:
        """A new Draft revision with one first task; the server names it and runs the task."""
        metadata: dict[str, Any] = {"namespace": namespace}
        if labels:
            metadata["labels"] = dict(labels)
        if annotations:
            metadata["annotations"] = dict(annotations)
        if owner_references:
            metadata["ownerReferences"] = [dict(ref) for ref in owner_references]
        return self.cluster.create({
            "apiVersion": PACKAGE_REVISION.api_version, "kind": PACKAGE_REVISION.kind, "metadata": metadata,
            "spec": {"packageName": package, "repository": repository, "workspaceName": workspace,
                     "lifecycle": DRAFT, "tasks": [dict(task)]}})

    def update_revision(self, revision: Obj) -> Obj:
        """Replace a revision (metadata, lifecycle short of approval); Conflict if it is stale."""
        return self.cluster.update(revision)

    def update_resources(self, resources_object: Obj, files: Mapping[str, str]) -> tuple[Obj, dict[str, Any]]:
        """Write a revision's files; returns the updated object and the server's render status."""
        body = {**resources_object, "spec": {**(resources_object.get("spec") or {}), "resources": dict(files)}}
        updated = self.cluster.update(body)
        return updated, dict((updated.get("status") or {}).get("renderStatus") or {})

    def propose(self, revision: Obj) -> Obj:
        return self._set_lifecycle(revision, PROPOSED)

    def approve(self, revision: Obj) -> Obj:
        """Publish a Proposed revision: Porch takes this only through the `approval` subresource.

        A patch, because that subresource has Get and Update in Porch, which is all the API
        server needs to serve PATCH, and a patch cannot send back a stale object."""
        return self.cluster.patch(PACKAGE_REVISION, _key(revision), {"spec": {"lifecycle": PUBLISHED}},
                                  subresource="approval")

    def propose_deletion(self, revision: Obj) -> Obj:
        return self._set_lifecycle(revision, DELETION_PROPOSED)

    def delete(self, revision: Obj) -> None:
        self.cluster.delete(PACKAGE_REVISION, _key(revision))

    def _set_lifecycle(self, revision: Obj, lifecycle: str) -> Obj:
        return self.cluster.update({**revision, "spec": {**(revision.get("spec") or {}), "lifecycle": lifecycle}})


def _key(obj: Obj) -> ObjectKey:
    metadata = obj.get("metadata") or {}
    return ObjectKey(metadata.get("namespace", ""), metadata.get("name", ""))
