"""`EmbeddedPorch`: Porch's `porch.kpt.dev/v1alpha1` API served from local git repositories.

Owns: the PackageRevision and PackageRevisionResources kinds of one `EmbeddedCluster`, served
through the cluster's storage seam (`reconcile.embedded.storage`) from the git repositories its
`config.porch.kpt.dev/v1alpha1` Repositories name, and Porch's API rules over them. Which
Repositories are served and how a revision is found is _porch_repos.py's; the objects' shape
(names, UIDs, metadata kept in git, status) is _porch_objects.py's; a first task's sources are
_porch_first_task.py's; resourceVersions and watches are _porch_events.py's. A new EmbeddedPorch
over the same repositories serves the same objects.

Promises (Porch's rules): a revision is created with one first task (init, clone, edit, upgrade;
none means init), in the Draft lifecycle, named by the server; clone, edit and upgrade refuse a
placeholder source with Porch's messages; a clone into a `spec.deployment` Repository gets its
package context (package-context.yaml beside every Kptfile, with data.name and
data.package-path); Draft ⇄ Proposed, Published ⇄ DeletionProposed by update; Proposed →
Published only through the `approval` subresource; resources change only in a Draft, rendered by
the `Renderer` on the way in (on create too), and a failed render refuses the write unless the
revision is annotated PUSH_ON_RENDER_FAILURE; the renderer may run `exec:` functions only for a
Repository annotated ALLOW_EXEC_ANNOTATION: "true"; a Published revision, the placeholder
included, is deleted only once DeletionProposed (403 Forbidden, Porch's words); the latest
published revision of each package carries LATEST_REVISION, which clients may not set or change
(422, Porch's words since v1.5.4); a stale resourceVersion is a Conflict. resourceVersions are
integers of this process (`_porch_events`), and watches replay this process's changes.

Speed: a get, and every write, reads git through running `git cat-file` and `git update-ref`
processes and caches (objects are rebuilt only when what git holds for them changed, and are
copied outside the lock); a list asks git for every ref; the Repository objects are read before
the lock is taken.

Locks. `_lock` guards the in-memory state (the Repositories and their indexes, the built
objects, pending deletions) and is held by every read. A write first takes the writer lock of its
PackageRevision's name (one write of a revision at a time, from its checks to its events; taken
before `_lock`, never while holding it). A create and a resources update are checked under
`_lock`, then rendered and written to git (a remote's push included) without it, then remembered
and announced under it again; every other write runs whole under `_lock`. So writes to different
revisions, in one repository or several, render and push at once. A read in between may see the
new revision in git already, and give it a version: the write's events are then recorded once (not
again when the announce loop recorded them first), with a version renewed if changes with newer
versions were recorded meanwhile (`History.renew`), so that the versions recorded only grow.
`close` waits for the writes in flight.

Deviations from Porch: no `spec.packageMetadata`, `selfLock` or `deployment` status; a refused
first task is a 400 BadRequest with Porch's message (Porch answers 500 InternalError); an
approval announces (MODIFIED) the revision that lost LATEST_REVISION, which Porch leaves unsaid;
server-side apply and status updates are refused (MethodNotAllowed); the clone's Kptfile
`metadata.name` is the last segment of the package path; a deletionTimestamp (a delete waiting
on finalizers) is kept in memory only, so after a restart the revision is
served again without it (the finalizers themselves are in git); changes made to git behind the
server's back (or fetched from a git server) get new resourceVersions when read but no watch
events, and so do the revisions of a Repository registered after a watch began, unless
`announce_every` is set (a list shows them; Porch announces them); a create
does not see a revision published behind its back, under the same workspace name, since it last
listed that repository (Porch's own check reads its cache, which can be as old).
"""

from __future__ import annotations

import builtins
import contextlib
import posixpath
import threading
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, NamedTuple

from porchvariant.embedded._porch_events import Change, History, WatchStream
from porchvariant.embedded._porch_first_task import FirstTasks
from porchvariant.embedded._porch_objects import (
    LATEST_REVISION,
    Objects,
    latest_revisions,
    timestamp,
    without_latest_label,
)
from porchvariant.embedded._porch_remotes import RemoteSettings
from porchvariant.embedded._porch_repos import ALLOW_EXEC_ANNOTATION, Found, Repo, Repositories
from porchvariant.embedded.git import repository as gitrepo
from porchvariant.embedded.git.repository import Lifecycle
from porchvariant.embedded.render.renderer import RenderContext, Renderer, no_render
from porchvariant.porch_client import PACKAGE_REVISION, PACKAGE_REVISION_RESOURCES
from reconcile.cluster import (
    Cluster,
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
    Forbidden,
    Invalid,
    MethodNotAllowed,
    NotFound,
    ServerError,
    make_status,
)
from reconcile.patching import apply_patch, clone
from reconcile.selectors import parse_fields, parse_labels

__all__ = ["ALLOW_EXEC_ANNOTATION", "PACKAGE_REVISION_INFO", "PACKAGE_REVISION_RESOURCES_INFO",
           "PUSH_ON_RENDER_FAILURE", "EmbeddedPorch", "RenderContext", "Renderer", "no_render"]

PACKAGE_REVISION_INFO = ResourceInfo(PACKAGE_REVISION, "packagerevisions", True, frozenset({"approval"}))
PACKAGE_REVISION_RESOURCES_INFO = ResourceInfo(PACKAGE_REVISION_RESOURCES, "packagerevisionresources", True)
PUSH_ON_RENDER_FAILURE = "porch.kpt.dev/push-on-render-failure"
_GROUP = "porch.kpt.dev"
# Porch's words (pkg/registry/porch/packagecommon.go, validateDelete), answered with 403 Forbidden.
_PROPOSE_DELETION_FIRST = ("published PackageRevisions must be proposed for deletion by setting spec.lifecycle "
                           "to 'DeletionProposed' prior to deletion")
_PLURALS = {PACKAGE_REVISION: "packagerevisions", PACKAGE_REVISION_RESOURCES: "packagerevisionresources"}


class EmbeddedPorch:
    """The PackageRevision storage of one cluster; `close()` it (or use `with`)."""

    def __init__(self, cluster: EmbeddedCluster, *, renderer: Renderer | None = None, history: int = 1000,
                 repositories_from: Cluster | None = None, announce_every: float | None = None,
                 remotes: RemoteSettings | None = None) -> None:
        """Serve on `cluster` the revisions of the Repositories listed in `repositories_from`
        (default: `cluster` itself; a real API server's, when its porch.kpt.dev group is routed
        here by a reconcile.routing.RoutedCluster, whose namespaces `cluster` then does not check).
        With `announce_every` (seconds), a thread calls `announce_repositories` that often, for
        servers whose Repositories come and go while informers watch, or whose git servers others
        push to. `remotes`: where the mirrors
        of Repositories on git servers live and how often they are fetched."""
        self.cluster = cluster
        self.renderer: Renderer = renderer or no_render
        self._lock = threading.RLock()  # the in-memory state (see "Locks" in the module doc)
        self._writers = threading.Condition()  # guards _writing
        self._writing: dict[tuple[str, str], _NameLock] = {}  # (namespace, name) -> its writers' lock
        self._history = History(history)
        elsewhere = repositories_from is not None and repositories_from is not cluster
        # Another server's Repositories are watched, not listed on every request.
        self._repos = Repositories(repositories_from if repositories_from is not None else cluster, remotes,
                                   watched=elsewhere)
        self._objects = Objects(self._history)
        self._first_tasks = FirstTasks(self._repos)
        self._deleting: dict[tuple[str, str], str] = {}  # (ns, name) -> deletionTimestamp
        for info in (PACKAGE_REVISION_INFO, PACKAGE_REVISION_RESOURCES_INFO):
            try:
                cluster.resource(info.kind)
                served: Kind | ResourceInfo = info.kind  # already defined (a CRD): take it over
            except NotFound:
                served = info
            cluster.serve(served, self, namespaces_elsewhere=elsewhere)
        self._announced: dict[tuple[Kind, str, str], Obj] | None = None
        self._stop = threading.Event()
        if announce_every is not None:
            self.announce_repositories()  # what is served now is what watchers can list
            threading.Thread(target=self._announce_loop, args=(announce_every,), name="porch-announce",
                             daemon=True).start()

    def close(self) -> None:
        """End every watch and close every git repository."""
        self._stop.set()
        self._history.close()
        with self._writers:  # writes in flight use their handles outside the lock: let them end
            self._writers.wait_for(lambda: not self._writing)
        with self._lock:
            self._repos.close()

    def announce_repositories(self) -> None:
        """Watch events for every revision that appeared (ADDED), changed (MODIFIED) or went
        (DELETED) since the last call other than through this server's own writes (which record
        their events themselves): a Repository registered or removed, a git server fetched, a
        `git push` behind its back. The first call only takes note of what is served. Porch
        announces these too; without this, a watch never sees them."""
        listing = self._repos.listing("")
        with self._lock, _git_errors():
            sources = {(kind, found.repo.namespace, found.repo.object_name(found.revision)): (found, latest)
                       for repo in self._repos.of("", listing)
                       for found, latest in _with_latest(self._repos.listed(repo))
                       for kind in (PACKAGE_REVISION, PACKAGE_REVISION_RESOURCES)}
            served = {key: self._object(key[0], found, latest=latest) for key, (found, latest) in sources.items()}
            if self._announced is not None:
                self._announce_changes(self._announced, served, sources)
            self._announced = served

    def _announce_changes(self, before: dict[tuple[Kind, str, str], Obj], after: dict[tuple[Kind, str, str], Obj],
                          sources: dict[tuple[Kind, str, str], tuple[Found, bool]]) -> None:
        for key in after:
            found, latest = sources[key]
            # Built again: announcing its other kind may have renewed the version.
            obj = after[key] = self._object(key[0], found, latest=latest)
            last = self._history.last(*key)
            known = last[1] if last is not None and last[0] != "DELETED" else (
                int(before[key]["metadata"]["resourceVersion"]) if key in before and last is None else None)
            if known != int(obj["metadata"]["resourceVersion"]):
                if self._history.renew(key[1], key[2]):  # a read handed its version out before newer changes
                    obj = after[key] = self._object(key[0], found, latest=latest)
                self._history.record(key[0], "ADDED" if known is None else "MODIFIED", obj)
        versions: dict[tuple[str, str], str] = {}  # one per revision, shared by its two kinds
        # By revision, so that the versions recorded only grow: a watch skips what is older than
        # the last version it saw, and would miss a deletion recorded after a newer one.
        for key in sorted(before.keys() - after.keys(), key=lambda gone: gone[1:]):
            last = self._history.last(*key)
            if last is not None and last[0] == "DELETED":
                continue  # deleted through this server, which said so
            obj = before[key]
            deleted_version = versions.setdefault(key[1:], str(self._history.bump()))
            gone = {**obj, "metadata": {**obj["metadata"], "resourceVersion": deleted_version}}
            self._history.record(key[0], "DELETED", gone)

    def _announce_loop(self, interval: float) -> None:
        while not self._stop.wait(interval):
            try:
                self.announce_repositories()
            except ApiError:  # the Repositories could not be listed this time; try again next time
                continue

    def __enter__(self) -> EmbeddedPorch:
        return self

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    # --- reads ----------------------------------------------------------------------------------

    # Built objects are never changed, only replaced, so they are copied after the lock is let go.

    def get(self, kind: Kind, key: ObjectKey) -> Obj | None:
        listing = self._repos.listing(key.namespace)
        with self._lock, _git_errors():
            found = self._repos.find(self._repos.of(key.namespace, listing), key.name)
            shared = None if found is None else self._object(kind, found)
        return None if shared is None else clone(shared)

    def list(self, kind: Kind, *, namespace: str = "", labels: LabelSelector = None,
             fields: str | None = None) -> ListResult:
        label_selector, field_selector = parse_labels(labels), parse_fields(fields)
        listing = self._repos.listing(namespace)
        with self._lock, _git_errors():
            shared = []
            for repo in self._repos.of(namespace, listing):
                for found, latest in _with_latest(self._repos.listed(repo)):
                    obj = self._object(kind, found, latest=latest)
                    if label_selector.matches(obj["metadata"].get("labels")) and field_selector.matches(obj):
                        shared.append(obj)
            version = str(self._history.current)
        shared.sort(key=lambda o: (o["metadata"]["namespace"], o["metadata"]["name"]))
        return ListResult([clone(obj) for obj in shared], version)

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
        namespace = str((obj.get("metadata") or {}).get("namespace") or "")
        listing = self._repos.listing(namespace)
        with self._written(namespace, _created_name(obj)):
            with self._lock, _git_errors():
                new = self._new_revision(obj, self._repos.of(namespace, listing))
            files, _ = self._render(new.files, new.context, new.annotations)
            with _git_errors():
                try:
                    revision = new.repo.git.create_draft(new.path, new.context.workspace, files, task=new.task,
                                                         metadata=new.kept)
                except gitrepo.GitConflict as err:  # its draft or proposed branch appeared in the meantime
                    raise AlreadyExists(f'{_plural(PACKAGE_REVISION)}.{_GROUP} "{new.context.name}" '
                                        "already exists") from err
            with self._lock, _git_errors():
                found = self._repos.remember(new.repo, revision, new.repo.git.metadata_blob(new.kept))
                return clone(self._record_write("ADDED", found, (PACKAGE_REVISION, PACKAGE_REVISION_RESOURCES))[0])

    def update(self, obj: Obj) -> Obj:
        key = ObjectKey.of(obj)
        listing = self._repos.listing(key.namespace)
        with self._written(key.namespace, key.name):
            with self._lock, _git_errors():
                found = self._find(Kind.of(obj), key, self._repos.of(key.namespace, listing))
                if Kind.of(obj) != PACKAGE_REVISION_RESOURCES:
                    return clone(self._update_revision(obj, found, subresource=None))
                write = self._resources_write(obj, found)
            return self._write_resources(write)

    def update_status(self, obj: Obj) -> Obj:
        raise MethodNotAllowed("the embedded Porch computes status from the package; it cannot be updated")

    def patch(self, kind: Kind, key: ObjectKey, patch: Any, *, patch_type: PatchType = "merge",
              subresource: str | None = None) -> Obj:
        if subresource not in (None, "approval") or (subresource and kind != PACKAGE_REVISION):
            raise MethodNotAllowed(f"{_plural(kind)} has no subresource {subresource!r}")
        listing = self._repos.listing(key.namespace)
        with self._written(key.namespace, key.name):
            with self._lock, _git_errors():
                found = self._find(kind, key, self._repos.of(key.namespace, listing))
                body = apply_patch(clone(self._object(kind, found)), patch, patch_type)
                if kind != PACKAGE_REVISION_RESOURCES:
                    return clone(self._update_revision(body, found, subresource=subresource))
                write = self._resources_write(body, found)
            return self._write_resources(write)

    def apply(self, obj: Obj, *, field_manager: str, force: bool = False, subresource: str | None = None) -> Obj:
        raise MethodNotAllowed("the embedded Porch does not support server-side apply; use create, update or patch")

    def delete(self, kind: Kind, key: ObjectKey, *, propagation: Propagation = "Background",
               preconditions: Mapping[str, str] | None = None) -> Obj | None:
        if kind != PACKAGE_REVISION:
            raise MethodNotAllowed(f"{_plural(kind)} cannot be deleted; delete the PackageRevision")
        listing = self._repos.listing(key.namespace)
        with self._written(key.namespace, key.name), self._lock, _git_errors():
            found = self._find(kind, key, self._repos.of(key.namespace, listing))
            current = self._object(kind, found)
            if found.revision.lifecycle == Lifecycle.PUBLISHED:  # the placeholder too (Porch's validateDelete)
                raise _forbidden(key.name, _PROPOSE_DELETION_FIRST)
            for field, wanted in (preconditions or {}).items():
                if wanted and current["metadata"].get(field) != wanted:
                    raise Conflict(f"Precondition failed: {field} in precondition: {wanted}, "
                                   f"{field} in object meta: {current['metadata'].get(field)}")
            if downstream := self._referenced_by(key, self._repos.of(key.namespace, listing)):
                raise _forbidden(key.name, f"cannot delete package revision, it is referenced as upstream by: "
                                           f"{downstream}")
            if current["metadata"].get("finalizers"):
                if "deletionTimestamp" not in current["metadata"]:
                    self._deleting[(key.namespace, key.name)] = timestamp(datetime.now(UTC).timestamp())
                    current = self._object(kind, found)
                    self._history.record(kind, "MODIFIED", current)
                return clone(current)
            self._remove(found, current)
            return None

    def _referenced_by(self, key: ObjectKey, repos: builtins.list[Repo]) -> str:
        """The first revision of the namespace (not a placeholder) whose first task clones from or
        upgrades to `key`'s revision, or "": Porch (v1.5.8, PR #453) will not delete such an upstream."""
        for repo in repos:
            for found in self._repos.listed(repo):
                if repo.is_placeholder(found.revision):
                    continue
                obj = self._object(PACKAGE_REVISION, found)
                for task in obj["spec"].get("tasks") or ():
                    upstream = (((task.get("clone") or {}).get("upstreamRef") or {}).get("upstreamRef") or {}
                                if task.get("type") == "clone" else
                                (task.get("upgrade") or {}).get("newUpstreamRef") or {}
                                if task.get("type") == "upgrade" else {})
                    if upstream.get("name") == key.name:
                        return str(obj["metadata"]["name"])
        return ""

    # --- create -----------------------------------------------------------------------------------

    def _new_revision(self, obj: Obj, repos: builtins.list[Repo]) -> _NewRevision:
        """What creating `obj` writes, checked by Porch's rules: its first task run, not yet rendered."""
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
        if LATEST_REVISION in (meta.get("labels") or {}):
            raise _latest_label_refused(str(meta.get("name") or ""), "set")
        task_list = list(spec.get("tasks") or [{"type": "init", "init": {}}])
        if len(task_list) != 1:
            raise BadRequest(f"a new PackageRevision takes exactly one first task, not {len(task_list)}")
        task = dict(task_list[0])
        repo = self._repos.named(repos, repository)
        name = f"{repository}.{package.replace('/', '.')}.{workspace}"
        if meta.get("name") and meta["name"] != name:
            raise Invalid(f'metadata.name {meta["name"]!r} must be empty or {name!r}, the name Porch gives it')
        path = posixpath.join(repo.git.directory, package) if repo.git.directory else package
        if self._repos.name_taken(repo, path, workspace, name):
            raise AlreadyExists(f'{_plural(PACKAGE_REVISION)}.{_GROUP} "{name}" already exists')
        files = self._first_tasks.run(repo, package, task, repos)
        context = RenderContext(namespace, name, repository, package, workspace, repo.allow_exec)
        return _NewRevision(repo, path, task, files, context, dict(meta.get("annotations") or {}),
                            _kept_metadata(meta))

    # --- update -----------------------------------------------------------------------------------

    def _update_revision(self, obj: Obj, found: Found, *, subresource: str | None) -> Obj:
        key = ObjectKey.of(obj)
        repo, revision, metadata = found.repo, found.revision, found.metadata
        current = self._object(PACKAGE_REVISION, found)
        _check_version(PACKAGE_REVISION, obj, current)
        spec, current_spec = obj.get("spec") or {}, current["spec"]
        for field in ("packageName", "repository", "workspaceName"):
            if spec.get(field, current_spec[field]) != current_spec[field]:
                raise Invalid(f"spec.{field} is immutable: {current_spec[field]!r}")
        step = _lifecycle_step(revision.lifecycle, str(spec.get("lifecycle") or revision.lifecycle), subresource)
        changed = False
        if subresource is None:
            meta = obj.get("metadata") or {}
            if (meta.get("labels") or {}).get(LATEST_REVISION, "") != (current["metadata"].get("labels") or {}).get(
                    LATEST_REVISION, ""):
                raise _latest_label_refused(key.name, "modified")
            wanted = _kept_metadata(meta)
            if wanted != _kept_metadata(current["metadata"]):
                metadata = repo.git.write_metadata(revision, wanted)
                changed = True
        latest_before = self._latest_name(repo, revision.package) if step == "approve" else None
        if step is not None:
            revision = getattr(repo.git, step)(revision)
            changed = True
        if changed:
            found = self._repos.remember(repo, revision, metadata)
        updated = self._object(PACKAGE_REVISION, found)
        if (key.namespace, key.name) in self._deleting and not updated["metadata"].get("finalizers"):
            self._remove(found, updated)
            return updated
        if changed:
            self._history.record(PACKAGE_REVISION, "MODIFIED", updated)
            if step is not None:
                self._history.record(PACKAGE_REVISION_RESOURCES, "MODIFIED",
                                     self._object(PACKAGE_REVISION_RESOURCES, found))
            if step == "approve":
                self._announce_latest(repo, revision.package, latest_before, key.name)
        return updated

    def _resources_write(self, obj: Obj, found: Found) -> _ResourcesWrite:
        """What updating `found`'s PackageRevisionResources to `obj` writes, checked, not yet rendered."""
        key = ObjectKey.of(obj)
        repo, revision = found.repo, found.revision
        _check_version(PACKAGE_REVISION_RESOURCES, obj, self._object(PACKAGE_REVISION_RESOURCES, found))
        if revision.lifecycle != Lifecycle.DRAFT:
            raise BadRequest(f"cannot update a package revision with lifecycle value {revision.lifecycle}; "
                             "package must be Draft")
        resources = (obj.get("spec") or {}).get("resources")
        if not isinstance(resources, Mapping) or not all(isinstance(v, str) for v in resources.values()):
            raise Invalid("spec.resources must be a map of file paths to file texts")
        annotations = self._object(PACKAGE_REVISION, found)["metadata"].get("annotations") or {}
        context = RenderContext(key.namespace, key.name, repo.name, revision.name, revision.workspace,
                                repo.allow_exec)
        return _ResourcesWrite(found, dict(resources), context, dict(annotations))

    def _write_resources(self, write: _ResourcesWrite) -> Obj:
        """Render and write `write` without the lock (its name's writer lock held), then record it."""
        files, status = self._render(write.resources, write.context, write.annotations)
        repo = write.found.repo
        with _git_errors():
            revision = repo.git.write_resources(write.found.revision, files)
        with self._lock, _git_errors():
            found = self._repos.remember(repo, revision, write.found.metadata)
            updated = self._record_write("MODIFIED", found, (PACKAGE_REVISION_RESOURCES, PACKAGE_REVISION))[0]
            return {**clone(updated), "status": {"renderStatus": status}}

    def _record_write(self, event: str, found: Found, kinds: tuple[Kind, ...]) -> builtins.list[Obj]:
        """The objects of `found`, which a write through this server just made, and their `event`
        recorded, once: not again when the announce loop saw the write first and recorded it, and
        with a fresh version when a read handed the current one out before changes recorded since
        (see "Locks" in the module doc)."""
        objs = [self._object(kind, found) for kind in kinds]
        versions = [(kind, int(obj["metadata"]["resourceVersion"])) for kind, obj in zip(kinds, objs, strict=True)]
        namespace, name = found.repo.namespace, found.repo.object_name(found.revision)
        recorded = [self._history.last(kind, namespace, name) for kind in kinds]
        already = [last is not None and last[0] != "DELETED" and last[1] == version
                   for last, (_, version) in zip(recorded, versions, strict=True)]
        if all(already):
            return objs
        if self._history.renew(namespace, name):
            objs = [self._object(kind, found) for kind in kinds]
            already = [False] * len(kinds)
        for kind, obj, done in zip(kinds, objs, already, strict=True):
            if not done:
                self._history.record(kind, event, obj)
        return objs

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

    def _remove(self, found: Found, last: Obj) -> None:
        resources = self._object(PACKAGE_REVISION_RESOURCES, found)
        published = found.revision.lifecycle in _PUBLISHED
        latest_before = self._latest_name(found.repo, found.revision.package) if published else None
        found.repo.git.delete(found.revision)
        self._repos.forget(found.repo, found.revision)
        namespace, name = last["metadata"]["namespace"], last["metadata"]["name"]
        self._objects.forget(namespace, name)
        self._deleting.pop((namespace, name), None)
        self._history.forget(namespace, name)
        version = str(self._history.bump())
        for kind, gone in ((PACKAGE_REVISION, last), (PACKAGE_REVISION_RESOURCES, resources)):
            stamped = {**gone["metadata"], "resourceVersion": version}
            self._history.record(kind, "DELETED", {**gone, "metadata": stamped})
        if published:
            self._announce_latest(found.repo, found.revision.package, latest_before, name)

    @contextlib.contextmanager
    def _written(self, namespace: str, name: str) -> Iterator[None]:
        """Hold the writer lock of PackageRevision `name` (taken before `_lock`, never while
        holding it): one write of a revision at a time, from its checks to its events."""
        key = (namespace, name)
        with self._writers:
            entry = self._writing.get(key)
            if entry is None:
                entry = self._writing[key] = _NameLock()
            entry.users += 1
        try:
            with entry.lock:
                yield
        finally:
            with self._writers:
                entry.users -= 1
                if not entry.users:
                    del self._writing[key]
                    self._writers.notify_all()

    # --- revisions and objects --------------------------------------------------------------------

    def _find(self, kind: Kind, key: ObjectKey, repos: builtins.list[Repo]) -> Found:
        found = self._repos.find(repos, key.name)
        if found is None:
            raise _not_found(kind, key.name)
        return found

    def _object(self, kind: Kind, found: Found, *, latest: bool | None = None) -> Obj:
        """The object of `found` (shared: copied before it leaves this class). `latest`: whether it
        is its package's latest revision, when the caller knows (else the repository's index says)."""
        deleting = self._deleting.get((found.repo.namespace, found.repo.object_name(found.revision)))
        if latest is None:
            revision = found.revision
            latest = (revision.revision >= 1 and revision.lifecycle in _PUBLISHED  # else no index scan
                      and self._latest_name(found.repo, revision.package) == found.repo.object_name(revision))
        return self._objects.get(kind, found, deleting, latest=latest)

    def _latest_name(self, repo: Repo, package: str) -> str | None:
        """The name of the package's revision that carries LATEST_REVISION, by the repository's
        index (listed first if it never was), None if it has no published revision."""
        if not repo.index.listed:
            self._repos.listed(repo)
        revisions = [r for r in repo.index.by_name.values() if r.package == package]
        number = latest_revisions(revisions).get(package)
        return next((repo.object_name(r) for r in revisions if number is not None and r.revision == number
                     and r.lifecycle in _PUBLISHED), None)

    def _announce_latest(self, repo: Repo, package: str, before: str | None, written: str) -> None:
        """A MODIFIED event for each revision of `package` whose LATEST_REVISION label a write to
        `written` changed: the one that had it (`before`) and the one that has it now. (Porch
        announces the new latest when the latest is deleted; it leaves the old one unannounced on
        an approval, which would leave informers holding the label on two revisions.)"""
        after = self._latest_name(repo, package)
        if after == before:
            return
        for name in (before, after):
            found = self._repos.find([repo], name) if name is not None and name != written else None
            if found is not None:
                for kind in (PACKAGE_REVISION, PACKAGE_REVISION_RESOURCES):
                    self._history.record(kind, "MODIFIED", self._object(kind, found))


# --- helpers --------------------------------------------------------------------------------------


class _NameLock:
    """The writer lock of one PackageRevision name, kept while some thread waits for or holds it."""

    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.users = 0


class _NewRevision(NamedTuple):
    """A create, checked under the lock, to be rendered and written without it."""

    repo: Repo
    path: str  # the package's full path in the repository
    task: dict[str, Any]
    files: dict[str, str]
    context: RenderContext
    annotations: dict[str, str]
    kept: dict[str, Any]  # the metadata git keeps


class _ResourcesWrite(NamedTuple):
    """A PackageRevisionResources update, checked under the lock, to be rendered and written without it."""

    found: Found
    resources: dict[str, str]
    context: RenderContext
    annotations: dict[str, str]


def _created_name(obj: Obj) -> str:
    """The name Porch gives the PackageRevision `obj` creates (checked later, with the rest)."""
    spec = obj.get("spec") or {}
    package = str(spec.get("packageName") or "")
    return f"{spec.get('repository') or ''}.{package.replace('/', '.')}.{spec.get('workspaceName') or ''}"


_PUBLISHED = (Lifecycle.PUBLISHED, Lifecycle.DELETION_PROPOSED)


def _with_latest(listed: builtins.list[Found]) -> builtins.list[tuple[Found, bool]]:
    """Each revision of a repository's listing, and whether it carries LATEST_REVISION."""
    latest = latest_revisions(found.revision for found in listed)
    return [(found, found.revision.lifecycle in _PUBLISHED
             and latest.get(found.revision.package) == found.revision.revision) for found in listed]


def _kept_metadata(meta: Mapping[str, Any]) -> dict[str, Any]:
    """The metadata git keeps for a revision: METADATA_FIELDS, empty ones and LATEST_REVISION left out."""
    kept = {f: meta[f] for f in gitrepo.METADATA_FIELDS if meta.get(f)}
    labels = without_latest_label(kept.pop("labels", None))
    return {**kept, "labels": labels} if labels else kept


def _latest_label_refused(name: str, done: str) -> Invalid:
    """Porch's refusal (pkg/registry/porch/strategy.go, since v1.5.4) of a client's LATEST_REVISION:
    `done` is "set" on a create, "modified" on an update."""
    field = f"metadata.labels.{LATEST_REVISION}"
    detail = f"Forbidden: label is managed by porch and cannot be {done} by users"
    message = f'{PACKAGE_REVISION.kind}.{_GROUP} "{name}" is invalid: {field}: {detail}'
    causes = [{"reason": "FieldValueForbidden", "message": detail, "field": field}]
    return Invalid(message, status=make_status(422, "Invalid", message, {"name": name, "group": _GROUP,
                                                                        "kind": PACKAGE_REVISION.kind,
                                                                        "causes": causes}))

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


def _plural(kind: Kind) -> str:
    return _PLURALS.get(kind, kind.kind.lower() + "s")


def _not_found(kind: Kind, name: str) -> NotFound:
    return NotFound(f'{_plural(kind)}.{_GROUP} "{name}" not found')


def _forbidden(name: str, why: str) -> Forbidden:
    """kube-apiserver's NewForbidden for a PackageRevision, as Porch raises it."""
    resource = _PLURALS[PACKAGE_REVISION]
    message = f'{resource}.{_GROUP} "{name}" is forbidden: {why}'
    return Forbidden(message, status=make_status(403, "Forbidden", message,
                                                 {"name": name, "group": _GROUP, "kind": resource}))


@contextlib.contextmanager
def _git_errors() -> Iterator[None]:
    """The git layer's errors as the API's."""
    try:
        yield
    except ApiError:
        raise
    except gitrepo.GitNotFound as err:
        raise NotFound(str(err)) from err
    except gitrepo.GitConflict as err:
        raise Conflict(str(err)) from err
    except gitrepo.GitInvalidRequest as err:
        raise Invalid(str(err)) from err
    except gitrepo.GitRepositoryError as err:
        raise ServerError(str(err)) from err

