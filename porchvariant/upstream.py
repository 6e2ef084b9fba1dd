"""A PackageVariant's upstream: which PackageRevision it names, and whether a downstream is based on it.

The decisions of Porch's `getUpstreamPR`, `getPublishedUpstreamByRevision` and `isUpToDate` (spec
b.4, b.6) as pure functions over plain dicts. Every function takes the PackageVariant and the
PackageRevisions listed in its namespace (list order matters: the first match wins, as in Porch);
PackageRevisions of other namespaces are ignored. Nothing given is modified: a PackageRevision
found is handed back as the very dict that was passed in.

* `find_upstream(pv, revisions)`: the upstream PackageRevision, or `UpstreamNotFound`;
* `find_published_upstream_by_revision(pv, revision, revisions)`: a published revision by number;
* `find_locked_upstream(pv, downstream, revisions)`: the upstream a downstream was cloned from or
  last upgraded to (the old upstream of an upgrade);
* `is_up_to_date(downstream, upstream)`: whether the downstream's upstreamLock names `upstream`;
* `is_placeholder(pr)` and `check_clonable(pr)`: Porch refuses to clone from a placeholder.

Differences from Porch, each because Porch's behaviour is a bug or an accident:
* `spec.upstream.revision` is honoured. With `workspaceName` set, Porch's rule applies (the first
  PackageRevision of that workspace, in any lifecycle); otherwise a revision > 0 picks the
  published (or DeletionProposed) revision with that number; with neither, Porch's rule picks the
  placeholder with the literal workspace "main". Porch overwrites the revision with -1 and never
  reads it. Its not-found message shows `Revision:-1` except when the revision was used.
* The placeholder is still found, because a downstream cloned from it before Porch banned that
  may still be up to date, but `check_clonable` (called by the draft builders in downstream.py)
  raises `PlaceholderUpstream`, saying why, before anything is sent to Porch; Porch's server
  refuses the clone or upgrade with a terse message, and the PackageVariant retries it forever.
* Up to date means "the downstream's upstreamLock names this very PackageRevision", decided by
  identity instead of by the number after the last "/" of the lock's ref: the lock ref must be
  the upstream's own ref (`<path>/v<N>` for published revision N, `<path>/<tag>` or `<branch>`
  for a published revision -1, `drafts/<path>/<ws>`, `proposed/<path>/<ws>`), `<path>` must end
  with the upstream's package, and when both the lock and the upstream's `status.selfLock` carry
  a commit, the commits must be equal. So switching between tags such as v2.0.0 and v3.0.0 (both
  revision -1, which Porch finds equal) upgrades, a draft upstream that has not changed is up to
  date (Porch always calls a `drafts/...` ref stale), and a lock of another package (after
  `spec.upstream.package` changed) is stale. `refs/tags/` and `refs/heads/` prefixes are ignored.
  A missing lock or ref still counts as up to date, as in Porch.
* The old upstream of an upgrade is found by the same identity; Porch looks up the published
  revision numbered like the lock's last path segment, which for a tag such as v2.0.0 is -1 and
  finds whichever revision -1 comes first (often the placeholder).

Does not: decide what to do with downstreams or build drafts (downstream.py), read the cluster.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from porchvariant.errors import PorchVariantError
from porchvariant.porch_client import DRAFT, PROPOSED, PUBLISHED_LIFECYCLES

__all__ = [
    "PLACEHOLDER_WORKSPACE",
    "LockedRef",
    "PlaceholderUpstream",
    "UpstreamNotFound",
    "check_clonable",
    "find_locked_upstream",
    "find_published_upstream_by_revision",
    "find_upstream",
    "go_quote",
    "is_placeholder",
    "is_up_to_date",
    "locked_ref",
    "names_revision",
    "revision_from_lock",
]

# Porch's PackageVariant hardcodes the placeholder of a repository whose branch is main.
PLACEHOLDER_WORKSPACE = "main"

_GO_INT = re.compile(r"[+-]?[0-9]+\Z")
_PUBLISHED_NAME = re.compile(r"v([0-9]+)\Z")
_GO_ESCAPES = {"\a": r"\a", "\b": r"\b", "\f": r"\f", "\n": r"\n", "\r": r"\r", "\t": r"\t", "\v": r"\v",
               "\\": r"\\", '"': r"\""}


class UpstreamNotFound(PorchVariantError):
    """No PackageRevision is the PackageVariant's upstream (yet); Porch's message and a retry.

    The message is Porch's: `could not find upstream package revision ` and Go's `%#v` of the
    `v1alpha1.Upstream` struct it searched for."""

    def __init__(self, repo: str, package: str, revision: int, workspace_name: str) -> None:
        self.repo, self.package, self.revision, self.workspace_name = repo, package, revision, workspace_name
        super().__init__("could not find upstream package revision &v1alpha1.Upstream{"
                         f"Repo:{go_quote(repo)}, Package:{go_quote(package)}, Revision:{revision}, "
                         f"WorkspaceName:{go_quote(workspace_name)}}}")


class PlaceholderUpstream(PorchVariantError):
    """The upstream (or the old upstream of an upgrade) is a placeholder, which Porch will not
    clone from or upgrade with; only an edit of the PackageVariant can fix it."""


@dataclass(frozen=True, slots=True)
class LockedRef:
    """What an upstreamLock ref names: `kind` is "published" (`<path>/v<N>`), "tag" (`<path>/<x>`),
    "draft" (`drafts/<path>/<ws>`), "proposed" (`proposed/<path>/<ws>`) or "branch" (no "/": a
    placeholder); `name` is the last segment; `revision` is N for "published", else -1."""

    kind: str
    path: str
    name: str
    revision: int


def find_upstream(pv: Mapping[str, Any], revisions: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    """The PackageRevision `pv.spec.upstream` names: by workspaceName (any lifecycle), else by a
    revision > 0 (published only), else the "main" placeholder; the first in list order.
    Raises UpstreamNotFound."""
    repo, package, workspace, revision = _upstream(pv)
    for pr in _candidates(pv, revisions, repo, package):
        spec = _spec(pr)
        if workspace:
            if spec.get("workspaceName") == workspace:
                return pr
        elif revision > 0:
            if spec.get("revision") == revision and _is_published(pr):
                return pr
        elif spec.get("workspaceName") == PLACEHOLDER_WORKSPACE:
            return pr
    raise UpstreamNotFound(repo, package, revision if revision > 0 and not workspace else -1, workspace)


def find_published_upstream_by_revision(pv: Mapping[str, Any], revision: int,
                                        revisions: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    """Porch's `getPublishedUpstreamByRevision`: the first published (or DeletionProposed) revision
    `revision` of the upstream repository and package, whatever its workspace.
    Raises UpstreamNotFound, or PorchVariantError for revision 0."""
    repo, package, workspace, _ = _upstream(pv)
    if revision == 0:
        raise PorchVariantError("upstream cannot be published with revision number 0")
    for pr in _candidates(pv, revisions, repo, package):
        if _spec(pr).get("revision") == revision and _is_published(pr):
            return pr
    raise UpstreamNotFound(repo, package, revision, workspace)


def find_locked_upstream(pv: Mapping[str, Any], downstream: Mapping[str, Any],
                         revisions: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    """The upstream PackageRevision that `downstream`'s upstreamLock names (the old upstream of an
    upgrade): a published revision by number as Porch finds it, anything else by identity (see
    `names_revision`), in the upstream repository and package. Raises UpstreamNotFound (with
    Porch's number for the ref), or PorchVariantError for a ref ending in `v0`."""
    locked = locked_ref(downstream)
    if locked is not None and locked.kind == "published":
        return find_published_upstream_by_revision(pv, locked.revision, revisions)
    repo, package, workspace, _ = _upstream(pv)
    if locked is not None:
        for pr in _candidates(pv, revisions, repo, package):
            if names_revision(downstream, pr):
                return pr
    raise UpstreamNotFound(repo, package, revision_from_lock(downstream), workspace)


def is_up_to_date(downstream: Mapping[str, Any], upstream: Mapping[str, Any]) -> bool:
    """Whether `downstream` is based on `upstream`: True when its lock has no ref (as in Porch),
    otherwise `names_revision`."""
    return locked_ref(downstream) is None or names_revision(downstream, upstream)


def names_revision(downstream: Mapping[str, Any], upstream: Mapping[str, Any]) -> bool:
    """Whether `downstream.status.upstreamLock` names the PackageRevision `upstream`: the same ref
    (up to the repository directory before the package path) and, when both are known, the same
    commit as `upstream.status.selfLock`. False when the lock has no ref."""
    locked = locked_ref(downstream)
    if locked is None:
        return False
    spec = _spec(upstream)
    package, workspace = str(spec.get("packageName") or ""), str(spec.get("workspaceName") or "")
    lifecycle, revision = spec.get("lifecycle") or DRAFT, spec.get("revision")
    if _is_published(upstream):
        if isinstance(revision, int) and revision > 0:
            same = locked.kind == "published" and locked.revision == revision
        else:
            same = locked.kind in ("tag", "branch") and locked.name == workspace
    else:
        same = locked.kind == ("proposed" if lifecycle == PROPOSED else "draft") and locked.name == workspace
    if not same or not _same_package(locked, _git(downstream, "upstreamLock"), package):
        return False
    ours, theirs = _git(downstream, "upstreamLock").get("commit"), _git(upstream, "selfLock").get("commit")
    return not (ours and theirs and ours != theirs)


def locked_ref(downstream: Mapping[str, Any]) -> LockedRef | None:
    """`downstream.status.upstreamLock.git.ref` parsed, or None when there is none."""
    ref = str(_git(downstream, "upstreamLock").get("ref") or "")
    for prefix in ("refs/tags/", "refs/heads/"):
        ref = ref.removeprefix(prefix)
    if not ref:
        return None
    if "/" not in ref:
        return LockedRef("branch", "", ref, -1)
    kind = "tag"
    for prefix, lifecycle in (("drafts/", "draft"), ("proposed/", "proposed")):
        if ref.startswith(prefix):
            kind, ref = lifecycle, ref.removeprefix(prefix)
    path, _, name = ref.rpartition("/")
    match = _PUBLISHED_NAME.match(name)
    if kind == "tag" and match:
        return LockedRef("published", path, name, int(match[1]))
    return LockedRef(kind, path, name, -1)


def revision_from_lock(downstream: Mapping[str, Any]) -> int:
    """Porch's `revisionFromUpstreamLock`: the lock ref's last path segment without one leading
    "v", as a Go int; -1 when that is not a number."""
    ref = str(_git(downstream, "upstreamLock").get("ref") or "")
    text = ref.rpartition("/")[2].removeprefix("v")
    return int(text) if _GO_INT.match(text) else -1


def is_placeholder(pr: Mapping[str, Any], branch: str = PLACEHOLDER_WORKSPACE) -> bool:
    """Porch's server rule: revision -1 and the workspace named after the repository's branch."""
    spec = _spec(pr)
    return spec.get("revision") == -1 and spec.get("workspaceName") == branch


def check_clonable(pv: Mapping[str, Any], pr: Mapping[str, Any], *, role: str = "upstream") -> None:
    """Raise PlaceholderUpstream if `pr` is a placeholder, which Porch refuses to clone from or
    upgrade with; `role` names it in the message ("upstream", "old upstream")."""
    if not is_placeholder(pr):
        return
    spec, name = _spec(pr), _metadata(pr).get("name", "")
    _, _, workspace, revision = _upstream(pv)
    why = ("" if workspace or revision > 0 else
           f'; PackageVariant "{_metadata(pv).get("name", "")}" names neither spec.upstream.workspaceName '
           f'nor spec.upstream.revision, so it resolves to the "{PLACEHOLDER_WORKSPACE}" placeholder as Porch does')
    raise PlaceholderUpstream(
        f'{role} package revision "{name}" is the placeholder of branch "{spec.get("workspaceName")}" '
        f'in repository "{spec.get("repository")}", which Porch refuses to clone from or upgrade with '
        f'("upstream revision may not be the placeholder package revision"){why}; '
        "set spec.upstream.workspaceName or spec.upstream.revision to a published revision")


def go_quote(text: str) -> str:
    """`text` as Go's strconv.Quote writes it (and so `%#v` of a string field)."""
    out = []
    for char in text:
        if char in _GO_ESCAPES:
            out.append(_GO_ESCAPES[char])
        elif char.isprintable():
            out.append(char)
        elif ord(char) < 0x80:
            out.append(f"\\x{ord(char):02x}")
        elif ord(char) < 0x10000:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(f"\\U{ord(char):08x}")
    return '"' + "".join(out) + '"'


def _upstream(pv: Mapping[str, Any]) -> tuple[str, str, str, int]:
    upstream = _spec(pv).get("upstream") or {}
    revision = upstream.get("revision")
    revision = revision if isinstance(revision, int) and not isinstance(revision, bool) else 0
    return (str(upstream.get("repo") or ""), str(upstream.get("package") or ""),
            str(upstream.get("workspaceName") or ""), revision)


def _candidates(pv: Mapping[str, Any], revisions: Sequence[Mapping[str, Any]], repo: str,
                package: str) -> list[Mapping[str, Any]]:
    namespace = _metadata(pv).get("namespace") or ""
    return [pr for pr in revisions
            if (_metadata(pr).get("namespace") or "") == namespace
            and _spec(pr).get("repository") == repo and _spec(pr).get("packageName") == package]


def _same_package(locked: LockedRef, lock: Mapping[str, Any], package: str) -> bool:
    # A lock's path is the package's path in git: the repository's directory, then the package name.
    path = locked.path if locked.kind != "branch" else str(lock.get("directory") or "").strip("/")
    return (locked.kind == "branch" and not path) or path == package or path.endswith("/" + package)


def _git(pr: Mapping[str, Any], lock: str) -> Mapping[str, Any]:
    return ((pr.get("status") or {}).get(lock) or {}).get("git") or {}


def _metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("spec") or {}


def _is_published(pr: Mapping[str, Any]) -> bool:
    # porch_client.is_published, for any mapping: Published or DeletionProposed.
    return _spec(pr).get("lifecycle") in PUBLISHED_LIFECYCLES
