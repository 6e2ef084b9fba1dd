"""Package revisions read from refs, as Porch lays them out (git/repository.py's module doc has the layout).

Owns: the `Revision` and `Lifecycle` values, and reading them back from one repository's refs
for a branch B and a directory D: one `git for-each-ref` over B, drafts/, proposed/,
deletionProposed/ and tags/ (or just one package's), the packages on B (placeholders), and
whether each tag and draft holds a Kptfile (Porch lists nothing else); `probe`, the cheap
check that a revision read earlier is still where it was; and `publication`, who published a
revision and when. What never changes about the objects involved is remembered by git/facts.py.
Does not: write anything, or lock (git/repository.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple

from porchvariant.embedded.git import messages, refs
from porchvariant.embedded.git.commands import Git
from porchvariant.embedded.git.facts import ObjectFacts
from porchvariant.embedded.git.refs import KPTFILE


class Lifecycle(StrEnum):
    DRAFT = "Draft"
    PROPOSED = "Proposed"
    PUBLISHED = "Published"
    DELETION_PROPOSED = "DeletionProposed"


@dataclass(frozen=True, slots=True)
class Revision:
    """One package revision as git holds it; `commit` doubles as its resourceVersion, as in Porch.

    package      P, the package's full path in the repository (the directory D included)
    name         P relative to D: the PackageRevision's spec.packageName
    workspace    the workspace name (B for the placeholder, the trailer's for a tag)
    revision     N for a published `P/vN`, 0 for a Draft or Proposed, -1 for the placeholder and
                 for a tag whose last part is not a number
    version      the tag's last part ("v3", "v2.0.0"), B for the placeholder, "" otherwise
    ref          the full ref it lives on; ref_target what that ref points at (the commit, or an
                 annotated tag object)
    tree         the package directory's tree; author_email / author_time the ref's commit's author
    """

    package: str
    name: str
    workspace: str
    revision: int
    lifecycle: Lifecycle
    version: str
    ref: str
    ref_target: str
    commit: str
    tree: str
    author_email: str
    author_time: int

    @property
    def is_placeholder(self) -> bool:
        return self.ref.startswith(refs.HEADS) and self.lifecycle in (Lifecycle.PUBLISHED, Lifecycle.DELETION_PROPOSED)


class Probe(NamedTuple):
    """What `probe` found: whether the revision is as it was read, and its metadata blob ("" for none)."""

    current: bool
    metadata: str


class RevisionReader:
    """The revisions of one repository + branch + directory, read from git as it is now."""

    def __init__(self, git: Git, facts: ObjectFacts, branch: str, directory: str) -> None:
        self._git, self._facts, self.branch, self.directory = git, facts, branch, directory

    def revisions(self, package: str | None = None) -> list[Revision]:
        """Every revision under the directory (or of the one package P), sorted by (P, revision, ws).

        One `git for-each-ref` for all refs, one `git ls-tree` for B's packages (cached per
        commit), and one pipelined `cat-file --batch-check` for the Kptfile of every tag and draft.
        """
        branch_ref = refs.branch_ref(self.branch)
        patterns = [branch_ref, refs.DRAFTS.rstrip("/"), refs.PROPOSED.rstrip("/"),
                    refs.DELETION_PROPOSED.rstrip("/"), refs.TAGS.rstrip("/")]
        if package is not None:
            patterns = [branch_ref] + [prefix + package for prefix in
                                       (refs.DRAFTS, refs.PROPOSED, refs.DELETION_PROPOSED, refs.TAGS)]
        tip: refs.RefInfo | None = None
        deletion_proposed: set[str] = set()
        found: list[tuple[refs.RefInfo, str, str, int, Lifecycle, str]] = []  # ref, P, ws, revision, lifecycle, version
        for ref in self._facts.ref_infos(patterns):
            if ref.name == branch_ref:
                tip = ref
            elif ref.name.startswith(refs.DELETION_PROPOSED):
                deletion_proposed.add(ref.name[len(refs.DELETION_PROPOSED):])
            elif ref.name.startswith((refs.DRAFTS, refs.PROPOSED)):
                draft = ref.name.startswith(refs.DRAFTS)
                parts = refs.split_package_ref(ref.name[len(refs.DRAFTS if draft else refs.PROPOSED):])
                if parts and self._wanted(parts[0], package):
                    found.append((ref, parts[0], parts[1], 0, Lifecycle.DRAFT if draft else Lifecycle.PROPOSED, ""))
            elif ref.name.startswith(refs.TAGS):
                parts = refs.split_package_ref(ref.name[len(refs.TAGS):])
                if parts and self._wanted(parts[0], package):
                    path, version = parts
                    number = refs.revision_number(version)
                    if number == -1:
                        workspace = version
                    else:
                        workspace = messages.trailer_workspace(ref.message, path) or f"v{number}"
                    found.append((ref, path, workspace, number, Lifecycle.PUBLISHED, version))
        trees = self._facts.package_trees([(ref.commit, path) for ref, path, *_ in found])
        result = []
        for (ref, path, workspace, number, lifecycle, version), tree in zip(found, trees, strict=True):
            if tree is None:
                continue  # no Kptfile there: not a package revision (Porch skips it too)
            if version and f"{path}/{version}" in deletion_proposed:
                lifecycle = Lifecycle.DELETION_PROPOSED
            result.append(self._revision(path, workspace, number, lifecycle, version, ref, tree))
        if tip is not None:
            for path, tree in self._placeholders(tip.commit, package):
                dp = f"{path}/{self.branch}" in deletion_proposed
                lifecycle = Lifecycle.DELETION_PROPOSED if dp else Lifecycle.PUBLISHED
                result.append(self._revision(path, self.branch, -1, lifecycle, self.branch, tip, tree))
        return sorted(result, key=lambda r: (r.package, r.revision, r.workspace, r.ref))

    def probe(self, revision: Revision) -> Probe:
        """Whether git still holds `revision` as it was read, and its metadata blob, in one query.

        Current means: its ref still points where it did (for the placeholder: B has not moved)
        and, for a published revision, its deletionProposed marker is there exactly when it is
        DeletionProposed. Costs one round trip to a running `git cat-file`, no new process.
        """
        specs = [revision.ref, refs.metadata_ref(revision.package, revision.workspace)]
        if revision.version:
            specs.append(refs.deletion_proposed_ref(revision.package, revision.version))
        answers = self._git.object_info(specs)
        target, metadata = answers[0], answers[1]
        current = target is not None and target[0] == revision.ref_target
        if revision.version:
            current = current and (answers[2] is not None) == (revision.lifecycle == Lifecycle.DELETION_PROPOSED)
        blob = metadata[0] if metadata is not None and metadata[1] == "blob" else ""
        return Probe(current, blob)

    def publication(self, revision: Revision) -> tuple[str, int] | None:
        """Who published the revision and when (author email, author time), as Porch's
        status.publishedBy and publishTimestamp show them (buildGitPackageRevision): for a tag,
        its commit's author; for the placeholder, the author of the newest commit in B's history
        whose `kpt:` trailer names the package, None when no trailer does; None for a revision
        that is not published."""
        if revision.lifecycle not in (Lifecycle.PUBLISHED, Lifecycle.DELETION_PROPOSED):
            return None
        if not revision.is_placeholder:
            return revision.author_email, revision.author_time
        found = self._facts.publications(revision.commit).get(revision.package)
        return None if found is None else (found.email, found.when)

    def metadata_blobs(self, revisions: Sequence[Revision]) -> list[str]:
        """The id of each revision's metadata blob, "" where it has none; one batched query."""
        answers = self._git.object_info([refs.metadata_ref(r.package, r.workspace) for r in revisions])
        return [found[0] if found is not None and found[1] == "blob" else "" for found in answers]

    def _wanted(self, package: str, only: str | None) -> bool:
        return refs.in_directory(package, self.directory) and (only is None or package == only)

    def _placeholders(self, commit: str, only: str | None) -> list[tuple[str, str]]:
        if only is not None:
            if not self._wanted(only, None):
                return []
            # Porch does not look for packages inside packages: no ancestor from D down may have one.
            parts = only.split("/")
            start = len(self.directory.split("/")) if self.directory else 0
            ancestors = ["/".join(parts[:i]) for i in range(start, len(parts))]
            specs = [f"{commit}:{a}/{KPTFILE}" if a else f"{commit}:{KPTFILE}" for a in ancestors]
            if any(info is not None and info[1] == "blob" for info in self._git.object_info(specs)):
                return []
            tree = self._facts.package_trees([(commit, only)])[0]
            return [(only, tree)] if tree else []
        return self._facts.packages(commit)

    def _revision(self, package: str, workspace: str, number: int, lifecycle: Lifecycle, version: str,
                  ref: refs.RefInfo, tree: str) -> Revision:
        return Revision(package, package_name(package, self.directory), workspace, number, lifecycle, version, ref.name,
                        ref.target, ref.commit, tree, ref.author_email, ref.author_time)


def package_name(package: str, directory: str) -> str:
    """P relative to D: the PackageRevision's spec.packageName."""
    return package[len(directory) + 1:] if directory else package
