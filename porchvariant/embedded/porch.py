"""`EmbeddedPorch`: Porch's `porch.kpt.dev/v1alpha1` API served from local git repositories.

Owns: the PackageRevision and PackageRevisionResources kinds of one `EmbeddedCluster`, served
through the cluster's storage seam (`reconcile.embedded.storage`) from the git repositories its
`config.porch.kpt.dev/v1alpha1` Repositories name. Every request lists the Repositories of its
namespace from the cluster, so what is served is always current; a Repository is served when it is
`spec.type: git` and `spec.git.repo` is a local path or file:// URL (a remote URL is skipped:
porchkit does not fetch). Names are Porch's `<repo>.<package, / → .>.<workspace>`; UIDs are
uuid5 of namespace and name, creationTimestamp the revision's commit time, and labels, annotations,
ownerReferences and finalizers live in git (`GitPackageRepository.write_metadata`), so a new
EmbeddedPorch over the same repositories serves the same objects.

Promises (Porch's rules): a revision is created with one first task (init, clone, edit, upgrade;
none means init), in the Draft lifecycle, named by the server; clone, edit and upgrade refuse a
placeholder source with Porch's messages; Draft ⇄ Proposed, Published ⇄ DeletionProposed by
update; Proposed → Published only through the `approval` subresource; resources change only in
a Draft, rendered by the `Renderer` on the way in; Published revisions are deleted only once
DeletionProposed; a stale resourceVersion is a Conflict. resourceVersions are integers of this
process (`_porch_events`), and watches replay this process's changes.

Deviations from Porch: no `kpt.dev/latest-revision` label, `spec.packageMetadata`, `selfLock`
or `deployment` status; server-side apply and status updates are refused (MethodNotAllowed);
the clone's Kptfile `metadata.name` is the last segment of the package path; a deletionTimestamp
(a delete waiting on finalizers) is kept in memory only, so after a restart the revision is
served again without it (the finalizers themselves are in git); changes made to git behind the
server's back get new resourceVersions when read but no watch events.
"""

from __future__ import annotations

import builtins
import contextlib
import json
import posixpath
import threading
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, NamedTuple, Protocol

from porchvariant.embedded import _porch_tasks as tasks
from porchvariant.embedded import gitrepo
from porchvariant.embedded._porch_events import Change, History, WatchStream
from porchvariant.embedded.gitrepo import GitPackageRepository, Lifecycle, Revision
from porchvariant.porch_client import PACKAGE_REVISION, PACKAGE_REVISION_RESOURCES, REPOSITORY
from reconcile.cluster import (
    Kind,
    LabelSelector,
    ListResult,
    Obj,
    ObjectKey,
    PatchType,
    Propagation,
    ResourceInfo,
    WatchEvent,
)
from reconcile.embedded import EmbeddedCluster
from reconcile.errors import (
    AlreadyExists,
    ApiError,
    BadRequest,
    Conflict,
    Invalid,
    MethodNotAllowed,
    NotFound,
    ServerError,
)
from reconcile.patching import apply_patch, clone
from reconcile.selectors import parse_fields, parse_labels

__all__ = ["PACKAGE_REVISION_INFO", "PACKAGE_REVISION_RESOURCES_INFO", "PUSH_ON_RENDER_FAILURE",
           "EmbeddedPorch", "RenderContext", "Renderer", "no_render"]

PACKAGE_REVISION_INFO = ResourceInfo(PACKAGE_REVISION, "packagerevisions", True, frozenset({"approval"}))
PACKAGE_REVISION_RESOURCES_INFO = ResourceInfo(PACKAGE_REVISION_RESOURCES, "packagerevisionresources", True)
PUSH_ON_RENDER_FAILURE = "porch.kpt.dev/push-on-render-failure"
_GROUP = "porch.kpt.dev"
_PLURALS = {PACKAGE_REVISION: "packagerevisions", PACKAGE_REVISION_RESOURCES: "packagerevisionresources"}
_UID_NAMESPACE = uuid.UUID("6f0c6d2e-8f55-5b1e-9d0a-706f7263686b")


class RenderContext(NamedTuple):
    """What a renderer is told about the package it renders."""

    namespace: str
    name: str  # the PackageRevision's name
    repository: str
    package: str  # spec.packageName
    workspace: str


class Renderer(Protocol):
    """Runs the Kptfile pipeline: (rendered files, renderStatus `{error, result}`); a non-empty
    `error` is a failed render."""

    def __call__(self, files: Mapping[str, str], context: RenderContext) -> tuple[dict[str, str], dict[str, Any]]: ...


def no_render(files: Mapping[str, str], context: RenderContext) -> tuple[dict[str, str], dict[str, Any]]:
    """The default renderer: the files unchanged, an empty renderStatus."""
    return dict(files), {}


@dataclass(frozen=True, slots=True)
class _Repo:
    namespace: str
    name: str
    url: str  # spec.git.repo as written
    branch: str
    deployment: bool
    git: GitPackageRepository

    def object_name(self, revision: Revision) -> str:
        return f"{self.name}.{revision.name.replace('/', '.')}.{revision.workspace}"

    def is_placeholder(self, revision: Revision) -> bool:
        return revision.revision == -1 and revision.workspace == self.branch


class EmbeddedPorch:
    """The PackageRevision storage of one cluster; `close()` it (or use `with`)."""

    def __init__(self, cluster: EmbeddedCluster, *, renderer: Renderer | None = None, history: int = 1000) -> None:
        self.cluster = cluster
        self.renderer: Renderer = renderer or no_render
        self._lock = threading.RLock()
        self._history = History(history)
        self._open: dict[tuple[str, str], tuple[str, _Repo]] = {}  # (ns, repo) -> (spec key, repo)
        self._deleting: dict[tuple[str, str], str] = {}  # (ns, name) -> deletionTimestamp
        for info in (PACKAGE_REVISION_INFO, PACKAGE_REVISION_RESOURCES_INFO):
            try:
                cluster.resource(info.kind)
                cluster.serve(info.kind, self)  # already defined (a CRD): take it over
            except NotFound:
                cluster.serve(info, self)

    def close(self) -> None:
        """End every watch and close every git repository."""
        self._history.close()
        with self._lock:
            for _, repo in self._open.values():
                repo.git.close()
            self._open.clear()

    def __enter__(self) -> EmbeddedPorch:
        return self

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    # --- reads ----------------------------------------------------------------------------------

    def get(self, kind: Kind, key: ObjectKey) -> Obj | None:
        with self._lock, _git_errors():
            found = self._find(key.namespace, key.name)
            if found is None:
                return None
            return self._object(kind, *found)

    def list(self, kind: Kind, *, namespace: str = "", labels: LabelSelector = None,
             fields: str | None = None) -> ListResult:
        label_selector, field_selector = parse_labels(labels), parse_fields(fields)
        with self._lock, _git_errors():
            items = []
            for repo in self._repos(namespace):
                for revision in repo.git.list_revisions():
                    obj = self._object(kind, repo, revision)
                    if label_selector.matches(obj["metadata"].get("labels")) and field_selector.matches(obj):
                        items.append(obj)
            items.sort(key=lambda o: (o["metadata"]["namespace"], o["metadata"]["name"]))
            return ListResult(items, str(self._history.current))

    def watch(self, kind: Kind, *, resource_version: str, namespace: str = "", labels: LabelSelector = None,
              fields: str | None = None, timeout: float | None = None) -> Iterator[WatchEvent]:
        label_selector, field_selector = parse_labels(labels), parse_fields(fields)

        def accept(change: Change) -> bool:
            meta = change.object["metadata"]
            return (change.kind == kind and (not namespace or meta.get("namespace") == namespace)
                    and label_selector.matches(meta.get("labels")) and field_selector.matches(change.object))

        with self._lock:
            backlog: list[WatchEvent] = []
            if resource_version in ("", "0"):
                listed = self.list(kind, namespace=namespace, labels=labels, fields=fields)
                after = int(listed.resource_version)
                backlog = [WatchEvent("ADDED", obj) for obj in
                           sorted(listed.items, key=lambda o: int(o["metadata"]["resourceVersion"]))]
            else:
                after = self._history.start(resource_version)
            stream: WatchStream = self._history.stream(after, backlog, accept, timeout)
        return stream

    # --- writes ---------------------------------------------------------------------------------

    def create(self, obj: Obj) -> Obj:
        if Kind.of(obj) != PACKAGE_REVISION:
            raise MethodNotAllowed(f"{Kind.of(obj).kind} cannot be created; create a PackageRevision")
        with self._lock, _git_errors():
            return self._create(obj)

    def update(self, obj: Obj) -> Obj:
        with self._lock, _git_errors():
            if Kind.of(obj) == PACKAGE_REVISION_RESOURCES:
                return self._update_resources(obj)
            return self._update_revision(obj, subresource=None)

    def update_status(self, obj: Obj) -> Obj:
        raise MethodNotAllowed("the embedded Porch computes status from the package; it cannot be updated")

    def patch(self, kind: Kind, key: ObjectKey, patch: Any, *, patch_type: PatchType = "merge",
              subresource: str | None = None) -> Obj:
        if subresource not in (None, "approval") or (subresource and kind != PACKAGE_REVISION):
            raise MethodNotAllowed(f"{_plural(kind)} has no subresource {subresource!r}")
        with self._lock, _git_errors():
            current = self.get(kind, key)
            if current is None:
                raise _not_found(kind, key.name)
            body = apply_patch(clone(current), patch, patch_type)
            if kind == PACKAGE_REVISION_RESOURCES:
                return self._update_resources(body)
            return self._update_revision(body, subresource=subresource)

    def apply(self, obj: Obj, *, field_manager: str, force: bool = False, subresource: str | None = None) -> Obj:
        raise MethodNotAllowed("the embedded Porch does not support server-side apply; use create, update or patch")

    def delete(self, kind: Kind, key: ObjectKey, *, propagation: Propagation = "Background",
               preconditions: Mapping[str, str] | None = None) -> Obj | None:
        if kind != PACKAGE_REVISION:
            raise MethodNotAllowed(f"{_plural(kind)} cannot be deleted; delete the PackageRevision")
        with self._lock, _git_errors():
            found = self._find(key.namespace, key.name)
            if found is None:
                raise _not_found(kind, key.name)
            repo, revision = found
            current = self._object(kind, repo, revision)
            for field, wanted in (preconditions or {}).items():
                if wanted and current["metadata"].get(field) != wanted:
                    raise Conflict(f"Precondition failed: {field} in precondition: {wanted}, "
                                   f"{field} in object meta: {current['metadata'].get(field)}")
            if revision.lifecycle == Lifecycle.PUBLISHED and not repo.is_placeholder(revision):
                raise BadRequest(f"cannot delete a package revision with lifecycle value {revision.lifecycle}; "
                                 f"propose its deletion first ({Lifecycle.DELETION_PROPOSED})")
            if current["metadata"].get("finalizers"):
                if "deletionTimestamp" not in current["metadata"]:
                    self._deleting[(key.namespace, key.name)] = _timestamp(datetime.now(UTC).timestamp())
                    current = self._object(kind, repo, revision)
                    self._history.record(kind, "MODIFIED", current)
                return current
            self._remove(repo, revision, current)
            return None

    # --- create -----------------------------------------------------------------------------------

    def _create(self, obj: Obj) -> Obj:
        meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
        namespace = str(meta.get("namespace") or "")
        package, repository = str(spec.get("packageName") or ""), str(spec.get("repository") or "")
        workspace = str(spec.get("workspaceName") or "")
        missing = [f"spec.{f}" for f, v in (("packageName", package), ("repository", repository),
                                             ("workspaceName", workspace)) if not v]
        if missing:
            raise Invalid(f"PackageRevision is invalid: {', '.join(missing)} must be set")
        if spec.get("lifecycle") not in (None, "", Lifecycle.DRAFT):
            raise Invalid(f"a new PackageRevision must be a Draft, not {spec.get('lifecycle')}")
        task_list = list(spec.get("tasks") or [{"type": "init", "init": {}}])
        if len(task_list) != 1:
            raise BadRequest(f"a new PackageRevision takes exactly one first task, not {len(task_list)}")
        task = dict(task_list[0])
        repo = self._repo(namespace, repository)
        name = f"{repository}.{package.replace('/', '.')}.{workspace}"
        if meta.get("name") and meta["name"] != name:
            raise Invalid(f'metadata.name {meta["name"]!r} must be empty or {name!r}, the name Porch gives it')
        if self._find(namespace, name) is not None:
            raise AlreadyExists(f'{_plural(PACKAGE_REVISION)}.{_GROUP} "{name}" already exists')
        files = self._run_task(repo, package, task)
        context = RenderContext(namespace, name, repository, package, workspace)
        files, _ = self._render(files, context, meta.get("annotations") or {})
        path = posixpath.join(repo.git.directory, package) if repo.git.directory else package
        revision = repo.git.create_draft(path, workspace, files, task=task)
        kept = {f: meta[f] for f in gitrepo.METADATA_FIELDS if meta.get(f)}
        if kept:
            repo.git.write_metadata(revision, kept)
        created = self._object(PACKAGE_REVISION, repo, revision)
        self._history.record(PACKAGE_REVISION, "ADDED", created)
        resources = self._object(PACKAGE_REVISION_RESOURCES, repo, revision)
        self._history.record(PACKAGE_REVISION_RESOURCES, "ADDED", resources)
        return created

    def _run_task(self, repo: _Repo, package: str, task: Mapping[str, Any]) -> dict[str, str]:
        kind = task.get("type")
        try:
            if kind == "init":
                return tasks.init_package(posixpath.basename(package), task)
            if kind == "clone":
                files = self._clone(repo, package, task.get("clone") or {})
                return tasks.with_package_context(files, posixpath.basename(package)) if repo.deployment else files
            if kind == "edit":
                return self._edit(repo, package, task.get("edit") or {})
            if kind == "upgrade":
                return self._upgrade(repo, task.get("upgrade") or {})
        except tasks.TaskError as err:
            raise BadRequest(str(err)) from err
        raise BadRequest(f"unsupported first task type {kind!r} (init, clone, edit, upgrade)")

    def _clone(self, repo: _Repo, package: str, clone_spec: Mapping[str, Any]) -> dict[str, str]:
        upstream_ref = clone_spec.get("upstreamRef") or {}
        name = posixpath.basename(package)
        if (upstream_ref.get("upstreamRef") or {}).get("name"):
            source, revision = self._source(repo.namespace, upstream_ref["upstreamRef"]["name"], "upstream")
            upstream = tasks.Upstream(tasks.repo_url(source.url), revision.package, _short_ref(revision.ref),
                                      revision.commit)
            return tasks.cloned(source.git.read_resources(revision), upstream, name=name)
        git = upstream_ref.get("git") or {}
        if upstream_ref.get("type") == "git" or git:
            if not git.get("repo") or not git.get("ref"):
                raise BadRequest("clone from git needs upstreamRef.git.repo and upstreamRef.git.ref")
            directory = str(git.get("directory") or "").strip("/")
            files, commit = tasks.read_git_package(git["repo"], git["ref"], directory)
            return tasks.cloned(files, tasks.Upstream(git["repo"], directory, git["ref"], commit), name=name)
        raise BadRequest("clone task needs upstreamRef.upstreamRef.name or upstreamRef.git")

    def _edit(self, repo: _Repo, package: str, edit: Mapping[str, Any]) -> dict[str, str]:
        source_name = str((edit.get("sourceRef") or {}).get("name") or "")
        source, revision = self._source(repo.namespace, source_name, "source")
        if source.name != repo.name or revision.name != package:
            raise BadRequest(f"source revision {source_name} is not of package {repo.name}/{package}")
        if revision.lifecycle not in (Lifecycle.PUBLISHED, Lifecycle.DELETION_PROPOSED):
            raise BadRequest("source revision must be published")
        return source.git.read_resources(revision)

    def _upgrade(self, repo: _Repo, upgrade: Mapping[str, Any]) -> dict[str, str]:
        strategy = upgrade.get("strategy") or "resource-merge"
        if strategy != "resource-merge":
            raise BadRequest(f"upgrade strategy {strategy!r} is not supported by the embedded Porch (resource-merge)")
        names = [str((upgrade.get(f) or {}).get("name") or "")
                 for f in ("oldUpstreamRef", "newUpstreamRef", "localPackageRevisionRef")]
        (old_repo, old), (new_repo, new) = (self._source(repo.namespace, n, "upstream") for n in names[:2])
        local_repo, local = self._source(repo.namespace, names[2], "source")
        upstream = tasks.Upstream(tasks.repo_url(new_repo.url), new.package, _short_ref(new.ref), new.commit)
        return tasks.upgraded(old_repo.git.read_resources(old), new_repo.git.read_resources(new),
                              local_repo.git.read_resources(local), upstream)

    def _source(self, namespace: str, name: str, role: str) -> tuple[_Repo, Revision]:
        found = self._find(namespace, name) if name else None
        if found is None:
            raise BadRequest(f"{role} package revision {name!r} not found in namespace {namespace!r}")
        source, revision = found
        if source.is_placeholder(revision):
            raise BadRequest(f"{role} revision may not be the placeholder package revision {source.name}/{name}")
        return found

    # --- update -----------------------------------------------------------------------------------

    def _update_revision(self, obj: Obj, *, subresource: str | None) -> Obj:
        key = ObjectKey.of(obj)
        found = self._find(key.namespace, key.name)
        if found is None:
            raise _not_found(PACKAGE_REVISION, key.name)
        repo, revision = found
        current = self._object(PACKAGE_REVISION, repo, revision)
        _check_version(PACKAGE_REVISION, obj, current)
        spec, current_spec = obj.get("spec") or {}, current["spec"]
        for field in ("packageName", "repository", "workspaceName"):
            if spec.get(field, current_spec[field]) != current_spec[field]:
                raise Invalid(f"spec.{field} is immutable: {current_spec[field]!r}")
        step = _lifecycle_step(revision.lifecycle, str(spec.get("lifecycle") or revision.lifecycle), subresource)
        changed = False
        if subresource is None:
            meta = obj.get("metadata") or {}
            wanted = {f: meta[f] for f in gitrepo.METADATA_FIELDS if meta.get(f)}
            if wanted != {f: current["metadata"][f] for f in gitrepo.METADATA_FIELDS if current["metadata"].get(f)}:
                repo.git.write_metadata(revision, wanted)
                changed = True
        if step is not None:
            revision = getattr(repo.git, step)(revision)
            changed = True
        updated = self._object(PACKAGE_REVISION, repo, revision)
        if (key.namespace, key.name) in self._deleting and not updated["metadata"].get("finalizers"):
            self._remove(repo, revision, updated)
            return updated
        if changed:
            self._history.record(PACKAGE_REVISION, "MODIFIED", updated)
            if step is not None:
                self._history.record(PACKAGE_REVISION_RESOURCES, "MODIFIED",
                                     self._object(PACKAGE_REVISION_RESOURCES, repo, revision))
        return updated

    def _update_resources(self, obj: Obj) -> Obj:
        key = ObjectKey.of(obj)
        found = self._find(key.namespace, key.name)
        if found is None:
            raise _not_found(PACKAGE_REVISION_RESOURCES, key.name)
        repo, revision = found
        _check_version(PACKAGE_REVISION_RESOURCES, obj, self._object(PACKAGE_REVISION_RESOURCES, repo, revision))
        if revision.lifecycle != Lifecycle.DRAFT:
            raise BadRequest(f"cannot update a package revision with lifecycle value {revision.lifecycle}; "
                             "package must be Draft")
        resources = (obj.get("spec") or {}).get("resources")
        if not isinstance(resources, Mapping) or not all(isinstance(v, str) for v in resources.values()):
            raise Invalid("spec.resources must be a map of file paths to file texts")
        annotations = self._object(PACKAGE_REVISION, repo, revision)["metadata"].get("annotations") or {}
        context = RenderContext(key.namespace, key.name, repo.name, revision.name, revision.workspace)
        files, status = self._render(resources, context, annotations)
        revision = repo.git.write_resources(revision, files)
        updated = self._object(PACKAGE_REVISION_RESOURCES, repo, revision)
        self._history.record(PACKAGE_REVISION_RESOURCES, "MODIFIED", updated)
        self._history.record(PACKAGE_REVISION, "MODIFIED", self._object(PACKAGE_REVISION, repo, revision))
        return {**updated, "status": {"renderStatus": status}}

    def _render(self, files: Mapping[str, str], context: RenderContext,
                annotations: Mapping[str, str]) -> tuple[dict[str, str], dict[str, Any]]:
        """Rendered files and the renderStatus; a failed render is refused unless the revision asks
        to be pushed anyway (then its files are stored unrendered)."""
        rendered, status = self.renderer(files, context)
        if status.get("error"):
            if annotations.get(PUSH_ON_RENDER_FAILURE) == "true":
                return dict(files), dict(status)
            raise Invalid(f"error rendering package {context.name}: {status['error']}")
        return rendered, dict(status)

    def _remove(self, repo: _Repo, revision: Revision, last: Obj) -> None:
        resources = self._object(PACKAGE_REVISION_RESOURCES, repo, revision)
        repo.git.delete(revision)
        namespace, name = last["metadata"]["namespace"], last["metadata"]["name"]
        self._deleting.pop((namespace, name), None)
        self._history.forget(namespace, name)
        version = str(self._history.bump())
        for kind, gone in ((PACKAGE_REVISION, last), (PACKAGE_REVISION_RESOURCES, resources)):
            stamped = {**gone["metadata"], "resourceVersion": version}
            self._history.record(kind, "DELETED", {**gone, "metadata": stamped})

    # --- repositories and objects -----------------------------------------------------------------

    def _repos(self, namespace: str) -> builtins.list[_Repo]:
        """The served Repositories of the namespace ("" for all), opened on first use."""
        try:
            listed = self.cluster.list(REPOSITORY, namespace=namespace).items
        except NotFound:
            return []  # the Repository kind is not defined in this cluster
        repos = []
        for item in listed:
            spec = item.get("spec") or {}
            git = spec.get("git") or {}
            if spec.get("type") != "git" or not git.get("repo") or tasks.local_path(str(git["repo"])) is None:
                continue
            meta = item["metadata"]
            where = (str(meta.get("namespace") or ""), str(meta["name"]))
            spec_key = json.dumps([git, bool(spec.get("deployment"))], sort_keys=True)
            known = self._open.get(where)
            if known is None or known[0] != spec_key:
                if known is not None:
                    known[1].git.close()
                    del self._open[where]
                try:
                    handle = GitPackageRepository(
                        tasks.local_path(str(git["repo"])) or "", branch=str(git.get("branch") or "main"),
                        directory=str(git.get("directory") or ""), author=str(git.get("author") or ""),
                        email=str(git.get("email") or ""), create_branch=bool(git.get("createBranch")))
                except gitrepo.GitRepositoryError:
                    continue  # not (yet) a usable repository: nothing to serve from it
                known = (spec_key, _Repo(where[0], where[1], str(git["repo"]), handle.branch,
                                         bool(spec.get("deployment")), handle))
                self._open[where] = known
            repos.append(known[1])
        return repos

    def _repo(self, namespace: str, name: str) -> _Repo:
        for repo in self._repos(namespace):
            if repo.name == name:
                return repo
        raise NotFound(f'repositories.config.porch.kpt.dev "{name}" not found '
                       "(or not a local git repository the embedded Porch serves)")

    def _find(self, namespace: str, name: str) -> tuple[_Repo, Revision] | None:
        for repo in self._repos(namespace):
            if name.startswith(repo.name + "."):
                for revision in repo.git.list_revisions():
                    if repo.object_name(revision) == name:
                        return repo, revision
        return None

    def _object(self, kind: Kind, repo: _Repo, revision: Revision) -> Obj:
        name = repo.object_name(revision)
        stored = repo.git.read_metadata(revision)
        deleting = self._deleting.get((repo.namespace, name))
        fingerprint = (revision.ref, revision.commit, str(revision.lifecycle),
                       json.dumps(stored, sort_keys=True), deleting)
        metadata: dict[str, Any] = {
            "name": name, "namespace": repo.namespace,
            "uid": str(uuid.uuid5(_UID_NAMESPACE, f"{repo.namespace}/{name}")),
            "resourceVersion": str(self._history.version(repo.namespace, name, fingerprint)),
            "creationTimestamp": _timestamp(revision.author_time), **clone(stored)}
        if deleting:
            metadata["deletionTimestamp"] = deleting
        spec: dict[str, Any] = {"packageName": revision.name, "workspaceName": revision.workspace,
                                "revision": revision.revision, "repository": repo.name}
        files = repo.git.read_resources(revision)
        if kind == PACKAGE_REVISION_RESOURCES:
            return {"apiVersion": kind.api_version, "kind": kind.kind, "metadata": metadata,
                    "spec": {**spec, "resources": files}, "status": {}}
        kptfile = tasks.kptfile_data(files)
        spec["lifecycle"] = str(revision.lifecycle)
        spec["tasks"] = repo.git.tasks(revision)
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
            status["publishTimestamp"] = _timestamp(revision.author_time)
        return {"apiVersion": kind.api_version, "kind": kind.kind, "metadata": metadata, "spec": spec,
                "status": status}


# --- helpers --------------------------------------------------------------------------------------

_UPDATE_STEPS = {(Lifecycle.DRAFT, Lifecycle.PROPOSED): "propose", (Lifecycle.PROPOSED, Lifecycle.DRAFT): "reject",
                 (Lifecycle.PUBLISHED, Lifecycle.DELETION_PROPOSED): "propose_deletion",
                 (Lifecycle.DELETION_PROPOSED, Lifecycle.PUBLISHED): "reject_deletion"}
_APPROVAL_STEPS = {(Lifecycle.PROPOSED, Lifecycle.PUBLISHED): "approve",
                   (Lifecycle.PUBLISHED, Lifecycle.DELETION_PROPOSED): "propose_deletion",
                   (Lifecycle.DELETION_PROPOSED, Lifecycle.PUBLISHED): "reject_deletion"}


def _lifecycle_step(current: str, wanted: str, subresource: str | None) -> str | None:
    """The GitPackageRepository method that moves `current` to `wanted`, None for no move."""
    if wanted == current:
        return None
    if wanted not in set(Lifecycle):
        raise Invalid(f"spec.lifecycle: unsupported value {wanted!r}")
    key = (Lifecycle(current), Lifecycle(wanted))
    if subresource == "approval":
        if key not in _APPROVAL_STEPS:
            raise BadRequest(f"cannot change approval from {current} to {wanted}")
        return _APPROVAL_STEPS[key]
    if key not in _UPDATE_STEPS:
        if wanted == Lifecycle.PUBLISHED:
            raise BadRequest("spec.lifecycle cannot be set to Published by an update; "
                             "approve through the approval subresource")
        raise BadRequest(f"cannot change lifecycle from {current} to {wanted}")
    return _UPDATE_STEPS[key]


def _check_version(kind: Kind, obj: Obj, current: Obj) -> None:
    given = str((obj.get("metadata") or {}).get("resourceVersion") or "")
    if given and given != current["metadata"]["resourceVersion"]:
        raise Conflict(f'Operation cannot be fulfilled on {_plural(kind)}.{_GROUP} "{current["metadata"]["name"]}": '
                       "the object has been modified; please apply your changes to the latest version and try again")


def _short_ref(ref: str) -> str:
    for prefix in ("refs/tags/", "refs/heads/"):
        if ref.startswith(prefix):
            return ref[len(prefix):]
    return ref


def _plural(kind: Kind) -> str:
    return _PLURALS.get(kind, kind.kind.lower() + "s")


def _not_found(kind: Kind, name: str) -> NotFound:
    return NotFound(f'{_plural(kind)}.{_GROUP} "{name}" not found')


def _timestamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@contextlib.contextmanager
def _git_errors() -> Iterator[None]:
    """The git layer's errors as the API's."""
    try:
        yield
    except ApiError:
        raise
    except gitrepo.NotFound as err:
        raise NotFound(str(err)) from err
    except gitrepo.Conflict as err:
        raise Conflict(str(err)) from err
    except gitrepo.InvalidRequest as err:
        raise Invalid(str(err)) from err
    except gitrepo.GitRepositoryError as err:
        raise ServerError(str(err)) from err

