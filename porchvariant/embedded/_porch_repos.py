"""The Repositories an `EmbeddedPorch` serves, and the package revisions each one holds.

Owns: turning the cluster's `config.porch.kpt.dev` Repository objects into open git handles
(`Repo`), and finding a revision by its PackageRevision name. A Repository is served when it is
`spec.type: git` and `spec.git.repo` is a local path, a file:// URL or an https:// URL (a git
server: _porch_remotes.py has its credentials, mirror, fetch schedule, back-off and Ready
condition); its handle is opened on first use and reopened only when `spec.git` changes. A
remote one is fetched again when its period is over, on the first call that lists it then.
The Repository objects are read by `listing` (without the caller's lock: the cluster has
its own), and `of` turns them into Repos, reusing the last ones for as long as the Repositories
keep their resourceVersions (one that could not be opened, e.g. whose branch does not exist yet,
is tried again every time).

Freshness, against changes made to git behind the server's back (a `git push`, another process):
`listed` asks git for every ref of the repository (one `git for-each-ref`), so a list sees
everything. `find` answers from each repository's `Index` (its revisions as last listed, kept
current by this process's own writes through `remember` and `forget`) once
`GitPackageRepository.probe` has confirmed, in one round trip to a running `git cat-file`, that
the revision's refs are where they were; a name it does not know, or a revision that moved, makes
it list the repository first. So a get or a write never acts on a revision git no longer holds,
and starts no git process when nothing moved. `name_taken` (before a create) trusts the index
for revisions published earlier (the repository is listed once first), and asks git directly
about the refs the new revision would take.

Threads: only `listing` may be called without the EmbeddedPorch's lock. The git handles of the
Repos handed out are also used by EmbeddedPorch writes outside it (git/repository.py's handles allow
that); a handle closed meanwhile (its Repository changed or went) starts git processes again for
that write, which its garbage collection stops.

Does not: build API objects (_porch_objects.py) or apply Porch's API rules (porch.py).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from porchvariant.embedded import _porch_remotes as remotes
from porchvariant.embedded import _porch_tasks as tasks
from porchvariant.embedded._porch_remotes import RemoteSettings, Schedule
from porchvariant.embedded.git import repository as gitrepo
from porchvariant.embedded.git.repository import GitPackageRepository, Revision
from porchvariant.embedded.git.transport import is_remote
from porchvariant.porch_client import REPOSITORY
from reconcile.cluster import Cluster, Obj
from reconcile.errors import NotFound
from reconcile.informer import Informer

WATCH_SECONDS = 30.0  # a watch of Repositories is renewed this often, and closing waits for it at most
ALLOW_EXEC_ANNOTATION = "porchkit.dev/allow-exec-functions"


@dataclass(slots=True)
class Index:
    """A repository's revisions by PackageRevision name, as last listed and since written here."""

    by_name: dict[str, Revision] = field(default_factory=dict)
    listed: bool = False  # listed whole at least once since the handle was opened


@dataclass(frozen=True, slots=True)
class Repo:
    """One served Repository, as of its resourceVersion, and its open git handle."""

    namespace: str
    name: str
    url: str  # spec.git.repo as written
    branch: str
    deployment: bool
    allow_exec: bool  # annotation ALLOW_EXEC_ANNOTATION is "true" (Porch's Repository has no such field)
    git: GitPackageRepository
    # Shared by every Repo of the same Repository while its handle is open, so it outlives a
    # change of the Repository's other fields.
    index: Index = field(compare=False, repr=False)

    def object_name(self, revision: Revision) -> str:
        return f"{self.name}.{revision.name.replace('/', '.')}.{revision.workspace}"

    def is_placeholder(self, revision: Revision) -> bool:
        return revision.revision == -1 and revision.workspace == self.branch


class Found(NamedTuple):
    """A revision, the Repository it is in, and the id of its metadata blob ("" for none)."""

    repo: Repo
    revision: Revision
    metadata: str


@dataclass(slots=True)
class _Handle:
    key: str  # spec.git, as JSON: a change reopens the handle
    git: GitPackageRepository
    index: Index = field(default_factory=Index)
    schedule: Schedule | None = None  # a remote's next fetch; None for a local repository


class Repositories:
    """The served Repositories of one cluster; not thread-safe (EmbeddedPorch holds its lock),
    except `listing`."""

    def __init__(self, cluster: Cluster, remotes: RemoteSettings | None = None, *, watched: bool = False) -> None:
        """`watched`: keep the Repository objects in an informer (a list and a watch) rather than
        list them on every request, for a `cluster` that is a real API server."""
        self.cluster = cluster  # where the Repository objects (and their Secrets) are read
        self.remotes = remotes or RemoteSettings()
        self._handles: dict[tuple[str, str], _Handle] = {}  # (namespace, name)
        self._failing: dict[tuple[str, str], tuple[str, Schedule]] = {}  # remotes that could not be opened
        self._last: dict[str, tuple[tuple[tuple[str, str, str], ...], list[Repo]]] = {}
        self._informer: Informer | None = None
        self._stop = threading.Event()
        if watched:
            self._informer = Informer(cluster, REPOSITORY, watch_timeout=WATCH_SECONDS)
            self._watching = threading.Thread(target=self._informer.run, args=(self._stop,), name="porch-repositories",
                                              daemon=True)
            self._watching.start()

    def close(self) -> None:
        if self._informer is not None:
            self._stop.set()
            self._informer.wake()
            self._watching.join(WATCH_SECONDS + 5)
        for handle in self._handles.values():
            handle.git.close()
        self._handles.clear()
        self._last.clear()

    def listing(self, namespace: str) -> list[Obj]:
        """The Repository objects of the namespace ("" for all), as the cluster has them now (as
        the informer has them, once it has listed them)."""
        if self._informer is not None and self._informer.synced.is_set():
            return sorted(self._informer.list(namespace), key=lambda o: (o["metadata"].get("namespace") or "",
                                                                        o["metadata"]["name"]))
        try:
            return self.cluster.list(REPOSITORY, namespace=namespace).items
        except NotFound:
            return []  # the Repository kind is not defined in this cluster

    def of(self, namespace: str, listing: list[Obj]) -> list[Repo]:
        """The served Repositories of `listing` (that of `namespace`), in its order."""
        stamp = tuple((str(item["metadata"].get("namespace") or ""), str(item["metadata"]["name"]),
                       str(item["metadata"].get("resourceVersion") or "")) for item in listing)
        last = self._last.get(namespace)
        if last is not None and last[0] == stamp and not self._fetch_due(last[1]):
            return last[1]
        repos: list[Repo] = []
        complete = True
        for item in listing:
            try:
                repo = self._repo(item)
            except gitrepo.GitRepositoryError:
                complete = False  # not (yet) a usable repository: nothing to serve from it, this time
                continue
            if repo is not None:
                repos.append(repo)
        self._close_unlisted(namespace, {(ns, name) for ns, name, _ in stamp})
        if complete:
            self._last[namespace] = (stamp, repos)
        else:
            self._last.pop(namespace, None)
        return repos

    @staticmethod
    def named(repos: list[Repo], name: str) -> Repo:
        for repo in repos:
            if repo.name == name:
                return repo
        raise NotFound(f'repositories.config.porch.kpt.dev "{name}" not found '
                       "(or not served by the embedded Porch now: see the Repository's Ready condition)")

    def listed(self, repo: Repo) -> list[Found]:
        """Every revision of the repository as git holds it now; the index is replaced by them."""
        revisions = repo.git.list_revisions()
        found = [Found(repo, revision, blob)
                 for revision, blob in zip(revisions, repo.git.metadata_blobs(revisions), strict=True)]
        repo.index.by_name.clear()
        for revision in revisions:
            repo.index.by_name.setdefault(repo.object_name(revision), revision)  # the first listed wins
        repo.index.listed = True
        return found

    def find(self, repos: list[Repo], name: str) -> Found | None:
        """The revision of that PackageRevision name among `repos` as git holds it now, or None."""
        for repo in repos:
            if not name.startswith(repo.name + "."):
                continue
            revision = repo.index.by_name.get(name)
            if revision is not None:
                probe = repo.git.probe(revision)
                if probe.current:
                    return Found(repo, revision, probe.metadata)
            for found in self.listed(repo):
                if repo.object_name(found.revision) == name:
                    return found
        return None

    def name_taken(self, repo: Repo, package: str, workspace: str, name: str) -> bool:
        """Whether PackageRevision `name`, of a new revision (P, ws) in `repo`, is taken.

        Taken: by a revision the index knows and git still holds, or by one whose refs (P's draft
        or proposed branch, the tag P/ws, P on B when ws is B) are in git. A revision published
        as (P, ws) behind the server's back since the repository was listed is not seen.
        """
        if not repo.index.listed:
            self.listed(repo)
        known = repo.index.by_name.get(name)
        if known is not None and repo.git.probe(known).current:
            return True
        if known is None and not repo.git.claimed(package, workspace):
            return False
        # Something moved, or refs are there that may or may not make a revision: ask git.
        revisions = repo.git.list_revisions(package)
        for stale in [n for n, r in repo.index.by_name.items() if r.package == package]:
            del repo.index.by_name[stale]
        for revision in revisions:
            repo.index.by_name.setdefault(repo.object_name(revision), revision)
        return name in repo.index.by_name

    @staticmethod
    def remember(repo: Repo, revision: Revision, metadata: str) -> Found:
        """Record a revision this process just wrote, with the id of its metadata blob."""
        repo.index.by_name[repo.object_name(revision)] = revision
        return Found(repo, revision, metadata)

    @staticmethod
    def forget(repo: Repo, revision: Revision) -> None:
        repo.index.by_name.pop(repo.object_name(revision), None)

    def _repo(self, item: Obj) -> Repo | None:
        spec = item.get("spec") or {}
        git = spec.get("git") or {}
        url = str(git.get("repo") or "")
        remote = bool(url) and is_remote(url)
        path = tasks.local_path(url) if url and not remote else None
        if spec.get("type") != "git" or (path is None and not remote):
            return None
        meta = item["metadata"]
        where = (str(meta.get("namespace") or ""), str(meta["name"]))
        key = json.dumps(git, sort_keys=True)
        handle = self._handles.get(where)
        if handle is None or handle.key != key:
            if handle is not None:
                handle.git.close()
                del self._handles[where]
            handle = self._open_remote(where, key, item) if remote else _Handle(key, _open(str(path), git))
            self._handles[where] = handle
        elif handle.schedule is not None:
            self._fetch_if_due(handle, item)
        annotations = meta.get("annotations") or {}
        return Repo(where[0], where[1], url, handle.git.branch, bool(spec.get("deployment")),
                    annotations.get(ALLOW_EXEC_ANNOTATION) == "true", handle.git, handle.index)

    def _open_remote(self, where: tuple[str, str], key: str, item: Obj) -> _Handle:
        """Open (fetch) a remote Repository, unless it failed with this spec and its back-off is
        not over: then its last error again, without going to the server."""
        now = self.remotes.clock()
        failing = self._failing.get(where)
        schedule = failing[1] if failing is not None and failing[0] == key else Schedule()
        if schedule.error is not None and not schedule.due(now):
            self._report(item, schedule.error)  # a new leader says so at once; otherwise no write
            raise schedule.error
        try:
            git = remotes.open_remote(self.cluster, item, self.remotes)
        except gitrepo.GitRepositoryError as err:
            schedule.failed(now, err)
            self._failing[where] = (key, schedule)
            self._report(item, err)
            raise
        self._failing.pop(where, None)
        schedule.succeeded(now, remotes.fetch_period(item, self.remotes.fetch_period))
        self._report(item, None)
        return _Handle(key, git, schedule=schedule)

    def _fetch_if_due(self, handle: _Handle, item: Obj) -> None:
        """Fetch an open remote whose period (or back-off) is over; a failure keeps the mirror's
        content served, sets Ready=False and is tried again after the back-off."""
        assert handle.schedule is not None
        now = self.remotes.clock()
        if handle.schedule.due(now):
            try:
                handle.git.fetch()
            except gitrepo.GitRepositoryError as err:
                handle.schedule.failed(now, err)
            else:
                handle.schedule.succeeded(now, remotes.fetch_period(item, self.remotes.fetch_period))
        self._report(item, handle.schedule.error)

    def _report(self, item: Obj, error: BaseException | None) -> None:
        if self.remotes.writes_status():
            remotes.write_ready(self.cluster, item, error)

    def _fetch_due(self, repos: list[Repo]) -> bool:
        now = self.remotes.clock()
        return any(handle.schedule is not None and handle.schedule.due(now)
                   for handle in (self._handles.get((repo.namespace, repo.name)) for repo in repos)
                   if handle is not None)

    def _close_unlisted(self, namespace: str, listed: set[tuple[str, str]]) -> None:
        for where in [w for w in self._failing if (not namespace or w[0] == namespace) and w not in listed]:
            del self._failing[where]
        for where in [w for w in self._handles if (not namespace or w[0] == namespace) and w not in listed]:
            self._handles.pop(where).git.close()
            for scope in [s for s in self._last if not s or s == where[0]]:
                del self._last[scope]


def _open(path: str, git: dict[str, Any]) -> GitPackageRepository:
    return GitPackageRepository(path, branch=str(git.get("branch") or "main"),
                                directory=str(git.get("directory") or ""), author=str(git.get("author") or ""),
                                email=str(git.get("email") or ""), create_branch=bool(git.get("createBranch")))
