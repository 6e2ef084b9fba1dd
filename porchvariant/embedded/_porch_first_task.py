"""A new PackageRevision's first task (init, clone, edit, upgrade): the revisions it names, and its files.

Owns: Porch's API rules about a first task's sources: the revisions it names must exist in the
namespace, may not be a placeholder (Porch's messages), an edit copies a published revision of
the same package, an upgrade is `resource-merge` only; and which task function of _porch_tasks.py
makes the new package's files (a clone into a deployment Repository also gets its package context).
Every refusal is a BadRequest. The placeholder and edit refusals carry the messages Porch gives
(pkg/task/edit.go, clone.go, upgrade.go), though Porch wraps a task's error in a 500 InternalError
("Internal error occurred: <message>"): a refused task is the client's error here. A source that
does not exist, or an upgrade strategy other than resource-merge, is refused in porchkit's words.
Does not: write anything (porch.py stores the files, after rendering them).
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Any

from porchvariant.embedded import _porch_tasks as tasks
from porchvariant.embedded._porch_repos import Found, Repo, Repositories
from porchvariant.embedded.git.repository import Lifecycle
from reconcile.errors import BadRequest


class FirstTasks:
    """Runs first tasks against one EmbeddedPorch's Repositories (it holds what clones share)."""

    def __init__(self, repos: Repositories) -> None:
        self._repos = repos
        self._clones = tasks.Clones()

    def run(self, repo: Repo, package: str, task: Mapping[str, Any], repos: list[Repo]) -> dict[str, str]:
        """The files of a new revision of `package` (spec.packageName) in `repo` made by `task`,
        whose sources are among `repos` (those of the namespace)."""
        kind = task.get("type")
        try:
            if kind == "init":
                return tasks.init_package(posixpath.basename(package), task)
            if kind == "clone":
                files = self._clone(repo, package, task.get("clone") or {}, repos)
                return tasks.with_package_context(files, package) if repo.deployment else files
            if kind == "edit":
                return _edit(self._repos, repos, repo, package, task.get("edit") or {})
            if kind == "upgrade":
                return _upgrade(self._repos, repos, repo, task.get("upgrade") or {})
        except tasks.TaskError as err:
            raise BadRequest(str(err)) from err
        raise BadRequest(f"unsupported first task type {kind!r} (init, clone, edit, upgrade)")

    def _clone(self, repo: Repo, package: str, clone_spec: Mapping[str, Any], repos: list[Repo]) -> dict[str, str]:
        upstream_ref = clone_spec.get("upstreamRef") or {}
        name = posixpath.basename(package)
        if (upstream_ref.get("upstreamRef") or {}).get("name"):
            source = _source(self._repos, repos, repo.namespace, upstream_ref["upstreamRef"]["name"], "upstream")
            revision = source.revision
            upstream = tasks.Upstream(tasks.repo_url(source.repo.url), revision.package, _short_ref(revision.ref),
                                      revision.commit)
            return self._clones.cloned(source.repo.git.read_resources(revision), upstream, name=name)
        git = upstream_ref.get("git") or {}
        if upstream_ref.get("type") == "git" or git:
            if not git.get("repo") or not git.get("ref"):
                raise BadRequest("clone from git needs upstreamRef.git.repo and upstreamRef.git.ref")
            directory = str(git.get("directory") or "").strip("/")
            files, commit = tasks.read_git_package(git["repo"], git["ref"], directory)
            return self._clones.cloned(files, tasks.Upstream(git["repo"], directory, git["ref"], commit), name=name)
        raise BadRequest("clone task needs upstreamRef.upstreamRef.name or upstreamRef.git")


def _edit(served: Repositories, repos: list[Repo], repo: Repo, package: str, edit: Mapping[str, Any]) -> dict[str, str]:
    # Porch's editPackageMutation.apply (pkg/task/edit.go) checks in this order: same package,
    # not the placeholder, published.
    source_name = str((edit.get("sourceRef") or {}).get("name") or "")
    source = _source(served, repos, repo.namespace, source_name, "source", placeholder_ok=True)
    if source.repo.name != repo.name or source.revision.name != package:
        raise BadRequest(f"source revision must be from same package {repo.name}/{package}")
    _refuse_placeholder(source, source_name, "source")
    if source.revision.lifecycle not in (Lifecycle.PUBLISHED, Lifecycle.DELETION_PROPOSED):
        raise BadRequest("source revision must be published")
    return source.repo.git.read_resources(source.revision)


def _upgrade(served: Repositories, repos: list[Repo], repo: Repo, upgrade: Mapping[str, Any]) -> dict[str, str]:
    strategy = upgrade.get("strategy") or "resource-merge"
    if strategy != "resource-merge":
        raise BadRequest(f"upgrade strategy {strategy!r} is not supported by the embedded Porch (resource-merge)")
    names = [str((upgrade.get(f) or {}).get("name") or "")
             for f in ("oldUpstreamRef", "newUpstreamRef", "localPackageRevisionRef")]
    old, new = (_source(served, repos, repo.namespace, n, "upstream") for n in names[:2])
    local = _source(served, repos, repo.namespace, names[2], "source")
    upstream = tasks.Upstream(tasks.repo_url(new.repo.url), new.revision.package, _short_ref(new.revision.ref),
                              new.revision.commit)
    return tasks.upgraded(old.repo.git.read_resources(old.revision), new.repo.git.read_resources(new.revision),
                          local.repo.git.read_resources(local.revision), upstream)


def _source(served: Repositories, repos: list[Repo], namespace: str, name: str, role: str, *,
            placeholder_ok: bool = False) -> Found:
    found = served.find(repos, name) if name else None
    if found is None:
        raise BadRequest(f"{role} package revision {name!r} not found in namespace {namespace!r}")
    if not placeholder_ok:
        _refuse_placeholder(found, name, role)
    return found


def _refuse_placeholder(found: Found, name: str, role: str) -> None:
    if found.repo.is_placeholder(found.revision):
        raise BadRequest(f"{role} revision may not be the placeholder package revision {found.repo.name}/{name}")


def _short_ref(ref: str) -> str:
    """A tag or branch ref as Porch records it in upstream.git.ref ("web/v1", "main")."""
    for prefix in ("refs/tags/", "refs/heads/"):
        if ref.startswith(prefix):
            return ref[len(prefix):]
    return ref
