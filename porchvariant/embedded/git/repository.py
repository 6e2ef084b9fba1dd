"""Package revisions in one local git repository, laid out exactly as Porch lays them out.

Owns: the git side of the embedded Porch for one Repository (a git repository, a branch B and an
optional directory D): finding packages and their revisions in refs (read by git/listing.py),
reading and writing a revision's files, moving revisions through their lifecycle, and the
PackageRevision metadata Porch keeps outside git. What never changes about a git object (a
commit's author and tasks, a tree's files) is read once and remembered (git/facts.py), so a handle
reads git again only for where refs point now. Leaves to its neighbours: the API objects (names,
UIDs, status), tasks (clone, edit, upgrade), rendering, and Porch's API-level rules such as
"approve only Proposed".

Layout (spec porchvariant.md (d), Porch's pkg/externalrepo/git; git/refs.py has the ref names,
git/messages.py the message bytes). A package is any directory under D holding a Kptfile (not
looked for inside another package). Published revision N of package P is the lightweight tag
`P/vN` on an approval commit on B; a tag `P/<x>` with x not a number is published with revision
-1 and workspace x; tags without "/" are ignored. Drafts and Proposed revisions are the branches
`drafts/P/<ws>` and `proposed/P/<ws>`; `deletionProposed/P/vN` marks a published revision
DeletionProposed. Every package on B is also its placeholder revision (-1, workspace B). Every
write is one commit holding the whole package directory, the rest of the tree untouched.

Direct, no cache clone. The repository is a local path or file:// URL (bare or not), so porchkit
works on its git directory itself: a clone would double the storage and add a fetch/push cycle,
while `git update-ref` transactions with expected old values give the same compare-and-swap
Porch gets from a push. In a non-bare repository git's own rule for pushes applies: the branch
checked out in a working tree is not moved unless `receive.denyCurrentBranch` is `ignore` or
`warn` (the working tree is never touched).

Remote repositories. Given a `remote` (a mirror.Mirror), the handle works on that local
mirror exactly as on a local repository, fetches it when opened (and on `fetch()`), and before
any of its refs move, `_move_refs` pushes the same change to the server, atomically and with a
lease on every ref's old value (git/mirror.py); only after the server took it do the mirror's
refs move (each from the value the server had), so a write is visible only once it is on the
server. A draft's creation and a write of its resources are checked against the mirror with the
handle's lock held but push after letting it go, so that writers in several threads push at
once, their changes joined into one push per mirror at a time (`Mirror.push_together`);
every other write pushes with the lock held. When the server moved first (a lost lease), the
mirror is fetched and the whole operation runs again on what is there now, up to PUSH_ATTEMPTS
times, then GitConflict; a value the caller brought (the draft it read) that is no longer the
server's fails with GitConflict, at once, or after that fetch when the mirror lagged. `verify`
lines are checked against the mirror only (a push cannot verify a ref it does not change).

Crash safety. Every change writes its objects first (blobs, trees, commit; unreferenced until the
end, so invisible) and then moves all of its refs in one `git update-ref` transaction,
each ref with its expected old value. A process killed before the transaction leaves only
unreferenced objects, which `git gc` prunes; a ref that moved in between makes the whole
transaction fail with GitConflict. (Git's files backend commits a transaction by renaming one lock
file per ref; only a crash inside those few renames can apply part of it, e.g. an approval's tag
without the draft branch's deletion. Nothing is ever half-written.)

Locks. Writers take a per-handle thread lock and then an exclusive flock(2) on
`<git dir>/porchkit.lock`, so two handles on one repository, in one process or in two, never
interleave a read-compute-write; the old-value checks catch any other writer (Porch, git push).
For a remote, the lock covers the mirror (reading and planning, the check of the caller's values,
moving its refs, fetching), not the push of a draft's creation or resources write, for which the
server's leases are the compare-and-swap. Readers take no lock: the handle's caches (git/facts.py)
and git pipes (git/commands.py) may be used by several threads at once.

Metadata (labels, annotations, ownerReferences, finalizers) is kept in git, so it survives a
restart and travels with the repository: one ref per revision, `refs/porchkit/metadata/<P>/<ws>`
(each part percent-escaped into one component), pointing at a JSON blob. Why not git notes keyed
by commit: a revision's commit changes with every draft write and again at approval, and one
commit can carry several revisions (B's tip is every package's placeholder and, right after an
approval, also the new tag), so notes would have to be copied forward on every write and would
still be ambiguous. (P, ws) is what names a PackageRevision and it stays the same from Draft to
Published; deleting a revision deletes its metadata ref in the same transaction. Porch fetches
only refs/heads and refs/tags, kpt fetches the ref it is asked for, and refs to blobs are skipped
by `git log --all` and allowed by fsck outside refs/heads, so the namespace disturbs neither.

Files. `read_resources` gives the UTF-8 text files as `{path: text}`, which is all Porch's
PackageRevisionResources can carry; files that are not UTF-8 (binary), symlinks and submodule
links are left out rather than mangled (Porch would hand out their bytes as a Go string, and
write them back broken). `read_files` gives every regular file's bytes. `write_resources`
replaces the package with the given files but keeps the entries `read_resources` cannot show
unless told not to (`keep_binary=False`) or given a new content for them, and keeps a file's
executable bit when its path survives; new files are 100644, as Porch writes them.

Deviations from Porch, all deliberate: the executable bit and binary files above; a directory
left empty by deleting a package is removed rather than kept as an empty tree; a Kptfile at D
itself (a package with no name) is not listed; the git layer approves a Draft as well as a
Proposed revision (the API layer enforces Porch's rule).
"""

from __future__ import annotations

import fcntl
import functools
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

from porchvariant.embedded.git import messages, refs
from porchvariant.embedded.git.commands import Git, checked_out_branches, open_git_dir
from porchvariant.embedded.git.errors import (
    GitCommandError,
    GitConflict,
    GitInvalidRequest,
    GitNotFound,
    GitRepositoryError,
    RemoteError,
)
from porchvariant.embedded.git.facts import ObjectFacts, metadata_bytes, text_of
from porchvariant.embedded.git.listing import Lifecycle, Probe, Revision, RevisionReader, package_name
from porchvariant.embedded.git.messages import PORCH_SIGNATURE, Signature, Task
from porchvariant.embedded.git.mirror import Mirror, PushRejected, RefUpdate
from porchvariant.embedded.git.objects import EXEC_MODE, FILE_MODE, FILE_MODES, ObjectStore, Plan
from porchvariant.embedded.git.refs import KPTFILE

__all__ = [
    "METADATA_FIELDS",
    "GitConflict",
    "GitCommandError",
    "GitPackageRepository",
    "GitRepositoryError",
    "GitInvalidRequest",
    "Lifecycle",
    "GitNotFound",
    "Probe",
    "RemoteError",
    "Revision",
    "Signature",
]

LOCK_FILE = "porchkit.lock"
PUSH_ATTEMPTS = 3  # a write whose push lost a race is run again on a fresh fetch, at most this often
METADATA_FIELDS = ("labels", "annotations", "ownerReferences", "finalizers")

_DENY_OFF = frozenset({"ignore", "warn", "false", "no", "off", "0"})

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _retried_on_lost_push(method: Callable[Concatenate[GitPackageRepository, _P], _R],
                          ) -> Callable[Concatenate[GitPackageRepository, _P], _R]:
    """Run a write again on a fresh fetch when its push lost a race (see the module doc)."""

    @functools.wraps(method)
    def wrapper(self: GitPackageRepository, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        for attempt in range(1, PUSH_ATTEMPTS + 1):
            try:
                return method(self, *args, **kwargs)
            except PushRejected as err:
                self.fetch()
                if attempt == PUSH_ATTEMPTS:
                    raise GitConflict(f"{err} ({PUSH_ATTEMPTS} attempts); try again") from err
        raise AssertionError("unreachable")

    return wrapper


class GitPackageRepository:
    """Porch's view of one git repository + branch + directory; use with `with` or call close()."""

    def __init__(
        self,
        location: str | os.PathLike[str],
        *,
        branch: str = "main",
        directory: str = "",
        author: str = "",
        email: str = "",
        create_branch: bool = False,
        remote: Mirror | None = None,
    ) -> None:
        """Open `location` (a path or file:// URL); GitNotFound if it or the branch is missing.

        With `remote`, `location` is ignored: the handle works on the remote's mirror, fetched
        now (RemoteError if the server cannot be used), and pushes every write there first.

        `author`/`email` are the Repository's spec.git.author/email; either one set makes every
        commit's author (the name falls back to the email, as in Porch), otherwise commits are
        authored by Porch's own signature. `create_branch` is spec.git.createBranch.
        """
        self._remote = remote
        self.location = remote.url if remote is not None else os.fspath(location)
        self.branch = branch
        self.directory = directory.strip("/")
        if problem := refs.path_problem(branch, "branch"):
            raise GitInvalidRequest(problem)
        if self.directory and (problem := refs.path_problem(self.directory, "directory")):
            raise GitInvalidRequest(problem)
        name, mail = messages.clean_identity(author), messages.clean_identity(email)
        self.author = Signature(name or mail, mail) if (name or mail) else PORCH_SIGNATURE
        found = open_git_dir(str(remote.path) if remote is not None else self.location)
        self.git_dir, self.bare = found.path, found.bare
        self._git = Git(self.git_dir)
        self._objects = ObjectStore(self._git, found.algorithm, found.objects)
        self._zero = "0" * (self._objects.hash_size * 2)
        self._lock = threading.RLock()
        self._lock_depth = 0
        self._facts = ObjectFacts(self._git, self._objects, self.directory, METADATA_FIELDS)
        self._reader = RevisionReader(self._git, self._facts, branch, self.directory)
        try:
            if remote is not None:
                self.fetch()
            if self._read_ref(refs.branch_ref(branch)) is None:
                if not create_branch:
                    raise GitNotFound(f"branch {branch!r} does not exist in {self.location}")
                self._create_branch()
        except BaseException:
            self.close()
            raise

    # Handle ------------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop this handle's git processes; idempotent (a later call would start them again)."""
        self._git.close()

    @property
    def is_remote(self) -> bool:
        return self._remote is not None

    def fetch(self) -> None:
        """Make the mirror the remote's refs (a no-op for a local repository); RemoteError if the
        server cannot be used. Takes the write lock, so no write of this handle sees it half done."""
        if self._remote is None:
            return
        with self._exclusive():
            self._remote.fetch()

    def __enter__(self) -> GitPackageRepository:
        return self

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"GitPackageRepository({self.location!r}, branch={self.branch!r}, directory={self.directory!r})"

    # Reading -----------------------------------------------------------------------------------

    def list_revisions(self, package: str | None = None) -> list[Revision]:
        """Every revision under the directory (or of the one package P), sorted by (P, revision, ws).

        One `git for-each-ref` for all refs (what they point at is read once, ever), the packages
        on B (one `git ls-tree` per tip), and one pipelined `cat-file --batch-check` for the
        Kptfile of every tag and draft not seen before.
        """
        return self._reader.revisions(package)

    def list_packages(self) -> list[str]:
        """The full paths of the packages that have at least one revision."""
        return sorted({revision.package for revision in self.list_revisions()})

    def get_revision(self, package: str, workspace: str) -> Revision:
        """The revision of P with workspace ws; GitNotFound if there is none."""
        for revision in self.list_revisions(package):
            if revision.workspace == workspace:
                return revision
        raise GitNotFound(f"package revision {package}/{workspace} not found in {self.location}")

    def read_files(self, revision: Revision) -> dict[str, bytes]:
        """Every regular file of the revision, path relative to the package → bytes."""
        return {path: data for path, _, data in self._objects.files(revision.tree)}

    def read_resources(self, revision: Revision) -> dict[str, str]:
        """The revision's UTF-8 text files as {path: text}; binary files are left out (see the module doc)."""
        return self._facts.text_files(revision.tree)

    def tasks(self, revision: Revision) -> list[Task]:
        """The revision's first task alone (or []), from the `kpt:` trailers in its history (Porch's loadTasks)."""
        return self._facts.tasks(revision.commit, revision.package, revision.workspace)

    def publication(self, revision: Revision) -> tuple[str, int] | None:
        """Who published the revision and when (author email, author time); None if unknown or not
        published. For the placeholder: the newest commit on B whose `kpt:` trailer names P."""
        return self._reader.publication(revision)

    def read_metadata(self, revision: Revision, *, blob: str | None = None) -> dict[str, Any]:
        """The metadata stored for (P, ws): a dict with any of METADATA_FIELDS, {} if none.

        `blob` is the id of its metadata blob when the caller has it (from `probe` or
        `metadata_blobs`; "" for none): then nothing is read that was read before.
        """
        if blob is None:
            blob = self.metadata_blobs([revision])[0]
        return self._facts.metadata(blob) if blob else {}

    def probe(self, revision: Revision) -> Probe:
        """Whether git still holds `revision` as it was read, and its metadata blob, in one query.

        Current means: its ref still points where it did (for the placeholder: B has not moved)
        and, for a published revision, its deletionProposed marker is there exactly when it is
        DeletionProposed. Costs one round trip to a running `git cat-file`, no new process.
        """
        return self._reader.probe(revision)

    def metadata_blobs(self, revisions: Sequence[Revision]) -> list[str]:
        """The id of each revision's metadata blob, "" where it has none; one batched query."""
        return self._reader.metadata_blobs(revisions)

    def metadata_blob(self, metadata: Mapping[str, Any]) -> str:
        """The id of the blob `write_metadata(…, metadata)` stores, "" for none (computed, not read)."""
        kept = _kept_metadata(metadata)
        return self._objects.plan().blob(metadata_bytes(kept)) if kept else ""

    def claimed(self, package: str, workspace: str) -> bool:
        """Whether git has a ref a new revision (P, ws) would take: its draft or proposed branch,
        the tag P/ws, or, ws being B, P on B (the placeholder). One batch query; a tag P/vN of a
        revision published as ws is not looked for (`list_revisions(P)` finds those)."""
        specs = [refs.draft_ref(package, workspace), refs.proposed_ref(package, workspace),
                 refs.tag_ref(package, workspace)]
        if workspace == self.branch:
            specs.append(f"{refs.branch_ref(self.branch)}:{package}/{KPTFILE}")
        return any(found is not None for found in self._git.object_info(specs))

    # Writing -----------------------------------------------------------------------------------

    @_retried_on_lost_push
    def create_draft(self, package: str, workspace: str, files: Mapping[str, str | bytes],
                     *, task: Task | None = None, metadata: Mapping[str, Any] | None = None) -> Revision:
        """A new Draft `drafts/P/ws`: one commit on B's tip holding exactly `files` at P.

        `files` must include a Kptfile. GitConflict if a Draft or Proposed (P, ws) already exists.
        With B missing (an empty repository), the commit has no parent, as in Porch. `metadata`
        (as for `write_metadata`) is stored in the same transaction.
        """
        self._check_new(package, workspace)
        contents = _encode_files(files)
        kept = _kept_metadata(metadata or {})
        with self._exclusive():
            tip = self._read_ref(refs.branch_ref(self.branch))
            plan = self._objects.plan()
            tree = self._package_tree({path: (FILE_MODE, plan.blob(data)) for path, data in contents.items()}, plan)
            root = self._objects.replace(self._objects.root_tree(tip), package, tree, plan)
            message = messages.write_message(package, workspace, task)
            commit, when = plan.commit(root, [tip] if tip else [], message, self.author)
            blob = plan.blob(metadata_bytes(kept)) if kept else ""
            self._objects.store(plan)
            ref = refs.draft_ref(package, workspace)
            metadata_ref = refs.metadata_ref(package, workspace)
            pushed = self._move_refs([f"create {ref} {commit}",
                                      f"verify {refs.proposed_ref(package, workspace)} {self._zero}",
                                      f"update {metadata_ref} {blob}" if blob else f"delete {metadata_ref}"],
                                     push_later=True)
        self._publish(pushed, together=True)  # a remote's push, outside the lock (see the module doc)
        self._facts.made(commit, [tip] if tip else [], self.author.email, when, message, package, workspace, tree)
        return self._new_revision(package, workspace, 0, Lifecycle.DRAFT, "", ref, commit, tree, when)

    @_retried_on_lost_push
    def write_resources(self, revision: Revision, files: Mapping[str, str | bytes], *,
                        task: Task | None = None, keep_binary: bool = True) -> Revision:
        """One commit on a Draft's branch replacing the package with `files`; the new Revision.

        GitConflict if the draft moved since `revision` was read. See the module doc for what
        `keep_binary` keeps.
        """
        self._require(revision, Lifecycle.DRAFT, "write to")
        contents = _encode_files(files)
        with self._exclusive():
            plan = self._objects.plan()
            entries: dict[str, tuple[str, str]] = {}
            for path, mode, oid in self._objects.walk(revision.tree):
                if path in contents:
                    entries[path] = (EXEC_MODE if mode == EXEC_MODE else FILE_MODE, "")
                elif keep_binary and (mode not in FILE_MODES or text_of(self._objects.blob(oid)) is None):
                    entries[path] = (mode, oid)  # kept as it is, by id
            for path, data in contents.items():
                entries[path] = (entries.get(path, (FILE_MODE, ""))[0], plan.blob(data))
            tree = self._package_tree(entries, plan)
            root = self._objects.replace(self._objects.root_tree(revision.commit), revision.package, tree, plan)
            message = messages.write_message(revision.package, revision.workspace, task)
            commit, when = plan.commit(root, [revision.commit], message, self.author)
            self._objects.store(plan)
            pushed = self._move_refs([f"update {revision.ref} {commit} {revision.commit}"], push_later=True)
        self._publish(pushed, together=True)  # a remote's push, outside the lock (see the module doc)
        self._facts.made(commit, [revision.commit], self.author.email, when, message, revision.package,
                         revision.workspace, tree)
        return self._new_revision(revision.package, revision.workspace, 0, Lifecycle.DRAFT, "",
                                  revision.ref, commit, tree, when)

    @_retried_on_lost_push
    def propose(self, revision: Revision) -> Revision:
        """Draft → Proposed: `drafts/P/ws` becomes `proposed/P/ws` (same commit)."""
        self._require(revision, Lifecycle.DRAFT, "propose")
        return self._rename(revision, refs.proposed_ref(revision.package, revision.workspace), Lifecycle.PROPOSED)

    @_retried_on_lost_push
    def reject(self, revision: Revision) -> Revision:
        """Proposed → Draft: `proposed/P/ws` becomes `drafts/P/ws` again."""
        self._require(revision, Lifecycle.PROPOSED, "reject")
        return self._rename(revision, refs.draft_ref(revision.package, revision.workspace), Lifecycle.DRAFT)

    @_retried_on_lost_push
    def approve(self, revision: Revision) -> Revision:
        """Publish a Draft or Proposed revision as `P/vN`, N = highest published N of P + 1.

        One commit on B (first parent B's tip, second the revision's commit, as Porch's
        commitPackageToMain makes it, which is what lets `tasks` find the draft's trailers)
        whose tree is B's with P replaced by the revision's package; B and the new tag move to it
        and the draft/proposed branch is deleted, all in one transaction.
        """
        if revision.lifecycle not in (Lifecycle.DRAFT, Lifecycle.PROPOSED):
            raise GitInvalidRequest(f"cannot approve {revision.package}/{revision.workspace}: "
                                    f"it is {revision.lifecycle}")
        branch_ref = refs.branch_ref(self.branch)
        with self._exclusive():
            tip = self._read_ref(branch_ref)
            if tip is None:
                raise GitNotFound(f"cannot approve: branch {self.branch!r} does not exist")
            number = self._next_revision(revision.package)
            plan = self._objects.plan()
            root = self._objects.replace(self._objects.root_tree(tip), revision.package, revision.tree, plan)
            message = messages.approval_message(revision.package, revision.workspace, number)
            commit, when = plan.commit(root, [tip, revision.commit], message, self.author)
            self._objects.store(plan)
            tag = refs.tag_ref(revision.package, f"v{number}")
            self._move_refs([f"update {branch_ref} {commit} {tip}", f"create {tag} {commit}",
                             f"delete {revision.ref} {revision.commit}"])
        self._facts.made(commit, [tip, revision.commit], self.author.email, when, message, revision.package,
                         revision.workspace, revision.tree)
        return self._new_revision(revision.package, revision.workspace, number, Lifecycle.PUBLISHED,
                                  f"v{number}", tag, commit, revision.tree, when)

    @_retried_on_lost_push
    def propose_deletion(self, revision: Revision) -> Revision:
        """Published → DeletionProposed: branch `deletionProposed/P/<version>` at the revision's commit."""
        self._require(revision, Lifecycle.PUBLISHED, "propose deletion of")
        marker = refs.deletion_proposed_ref(revision.package, revision.version)
        with self._exclusive():
            self._move_refs([f"create {marker} {revision.commit}"])
        return replace(revision, lifecycle=Lifecycle.DELETION_PROPOSED)

    @_retried_on_lost_push
    def reject_deletion(self, revision: Revision) -> Revision:
        """DeletionProposed → Published: the marker branch is deleted."""
        self._require(revision, Lifecycle.DELETION_PROPOSED, "reject deletion of")
        with self._exclusive():
            self._move_refs([f"delete {refs.deletion_proposed_ref(revision.package, revision.version)}"])
        return replace(revision, lifecycle=Lifecycle.PUBLISHED)

    @_retried_on_lost_push
    def delete(self, revision: Revision) -> None:
        """Delete a revision and its metadata, as Porch's DeletePackageRevision does.

        Published (a tag): the tag and its deletionProposed branch go; B is untouched, so the
        placeholder keeps the last approved content. Draft/Proposed: the branch goes. The
        placeholder: a commit `Delete P` on B removes the package directory.
        """
        metadata = f"delete {refs.metadata_ref(revision.package, revision.workspace)}"
        marker = f"delete {refs.deletion_proposed_ref(revision.package, revision.version)}"
        with self._exclusive():
            if revision.ref.startswith(refs.TAGS):
                self._move_refs([f"delete {revision.ref} {revision.ref_target}", marker, metadata])
            elif not revision.is_placeholder:
                self._move_refs([f"delete {revision.ref} {revision.commit}", metadata])
            else:
                self._delete_placeholder(revision, [marker, metadata])

    @_retried_on_lost_push
    def write_metadata(self, revision: Revision, metadata: Mapping[str, Any]) -> str:
        """Store (P, ws)'s metadata in git, replacing what was there; an all-empty dict removes it.

        Only METADATA_FIELDS are kept (GitInvalidRequest for any other key). The last writer wins;
        the API layer checks resourceVersions before it gets here. Returns the id of the blob
        now holding it, "" when there is none.
        """
        kept = _kept_metadata(metadata)
        ref = refs.metadata_ref(revision.package, revision.workspace)
        with self._exclusive():
            if not kept:
                self._move_refs([f"delete {ref}"])
                return ""
            plan = self._objects.plan()
            blob = plan.blob(metadata_bytes(kept))
            self._objects.store(plan)
            self._move_refs([f"update {ref} {blob}"])
        return blob

    # Internals: refs ---------------------------------------------------------------------------

    def _read_ref(self, name: str) -> str | None:
        """What the full ref `name` points at, asked of the running `cat-file` (no new process)."""
        found = self._git.object_info([name])[0]
        return found[0] if found is not None else None

    def _next_revision(self, package: str) -> int:
        prefix = refs.TAGS + package + "/"
        out = self._git.run("for-each-ref", "--format=%(refname)", refs.TAGS + package)
        numbers = [refs.revision_number(name[len(prefix):]) for name in out.decode().splitlines()
                   if name.startswith(prefix) and "/" not in name[len(prefix):]]
        return max([0, *numbers]) + 1

    def _move_refs(self, lines: list[str], *, push_later: bool = False) -> list[RefUpdate] | None:
        """The one place refs move (the commit point of every change); a transaction or nothing.
        Called with the lock held. A local repository's refs move now. A remote's changes are
        checked against the mirror (a stale value the caller brought fails here, before the
        network), then pushed and moved in the mirror (`_publish`), now or, with `push_later`,
        by the caller once it let the lock go: the changes to publish are returned."""
        if not self.bare:
            touched = {line.split()[1] for line in lines if not line.startswith("verify")}
            checked_out = touched & checked_out_branches(self.git_dir)
            if checked_out and self._deny_current_branch():
                raise GitInvalidRequest(
                    f"branch {sorted(checked_out)[0]} is checked out in a working tree of {self.location}; "
                    "use a bare repository or set receive.denyCurrentBranch=ignore")
        if self._remote is None:
            self._git.update_refs(lines)
            return None
        if checks := [check for line in lines if (check := _verify_line(line, self._zero))]:
            self._git.update_refs(checks)
        updates = self._push_updates(lines)
        if push_later:
            return updates
        self._publish(updates)
        return None

    def _publish(self, updates: list[RefUpdate] | None, *, together: bool = False) -> None:
        """A remote's staged changes pushed to the server (PushRejected if it moved first), then
        the mirror's refs moved to them: a write is visible once the server has it. With or
        without the lock held; the mirror's refs move under it, each from the value the server
        had (so a fetch in between, which brought them already, is not undone). `together`
        (without the lock): in one push with other threads' changes (`Mirror.push_together`)."""
        if not updates:
            return  # a local repository's (moved already), or no change on the server
        assert self._remote is not None
        if together:
            self._remote.push_together(updates)
        else:
            self._remote.push(updates)
        with self._exclusive():
            try:
                self._git.update_refs([_mirror_line(update) for update in updates])
            except GitConflict:
                self._remote.fetch()  # a fetch came first (or a writer outside this process): the server is right

    def _push_updates(self, lines: list[str]) -> list[RefUpdate]:
        """The server-side changes of an update-ref transaction, each with the value the mirror
        holds now where the line names none (`verify` lines push nothing; deleting an absent ref
        is no change)."""
        words = [line.split() for line in lines if not line.startswith("verify ")]
        unnamed = [w[1] for w in words if (w[0] == "update" and len(w) == 3) or (w[0] == "delete" and len(w) == 2)]
        current = dict(zip(unnamed, [f[0] if f else None for f in self._git.object_info(unnamed)], strict=True))
        updates = []
        for word in words:
            op, ref = word[0], word[1]
            if op == "create":
                updates.append(RefUpdate(ref, word[2], None))
            elif op == "update":
                updates.append(RefUpdate(ref, word[2], word[3] if len(word) == 4 else current[ref]))
            elif (old := word[2] if len(word) == 3 else current[ref]) is not None:  # delete
                updates.append(RefUpdate(ref, None, old))
        return updates

    def _deny_current_branch(self) -> bool:
        try:
            value = self._git.run("config", "--get", "receive.denyCurrentBranch").decode().strip().lower()
        except GitCommandError:
            return True  # unset: git's default is "refuse"
        return value not in _DENY_OFF

    def _rename(self, revision: Revision, new_ref: str, lifecycle: Lifecycle) -> Revision:
        with self._exclusive():
            self._move_refs([f"create {new_ref} {revision.commit}", f"delete {revision.ref} {revision.commit}"])
        return replace(revision, ref=new_ref, ref_target=revision.commit, lifecycle=lifecycle)

    @contextmanager
    def _exclusive(self) -> Iterator[None]:
        """Thread lock, then flock on the git dir's lock file; re-entrant within one handle."""
        with self._lock:
            if self._lock_depth:
                self._lock_depth += 1
                try:
                    yield
                finally:
                    self._lock_depth -= 1
                return
            fd = os.open(os.path.join(self.git_dir, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o666)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                self._lock_depth = 1
                yield
            finally:
                self._lock_depth = 0
                os.close(fd)  # closing the descriptor releases the flock

    # Internals: packages and trees -------------------------------------------------------------

    def _delete_placeholder(self, revision: Revision, also: list[str]) -> None:
        branch_ref = refs.branch_ref(self.branch)
        tip = self._read_ref(branch_ref)
        lines = list(also)
        if tip is not None and self._facts.package_trees([(tip, revision.package)])[0] is not None:
            plan = self._objects.plan()
            root = self._objects.replace(self._objects.root_tree(tip), revision.package, None, plan)
            commit, _ = plan.commit(root, [tip], messages.delete_message(revision.package), self.author)
            self._objects.store(plan)
            lines.insert(0, f"update {branch_ref} {commit} {tip}")
        self._move_refs(lines)

    @_retried_on_lost_push
    def _create_branch(self) -> None:
        """Porch's createBranch: a root commit holding README.md, by Porch's own signature."""
        branch_ref = refs.branch_ref(self.branch)
        with self._exclusive():
            if self._read_ref(branch_ref) is not None:
                return
            plan = self._objects.plan()
            tree = plan.tree([(FILE_MODE, messages.README_NAME, plan.blob(messages.README_TEXT.encode()))])
            commit, _ = plan.commit(tree, [], messages.INITIAL_COMMIT_MESSAGE, PORCH_SIGNATURE)
            self._objects.store(plan)
            self._move_refs([f"create {branch_ref} {commit}"])

    def _package_tree(self, files: Mapping[str, tuple[str, str]], plan: Plan) -> str:
        if KPTFILE not in files:
            # Porch reads no package back without one (UpdateDraftResources refuses the same).
            raise GitInvalidRequest("package must contain a Kptfile at its root")
        return self._objects.directory_tree(files, plan)

    # Internals: checks and values --------------------------------------------------------------

    def _check_new(self, package: str, workspace: str) -> None:
        if problem := refs.path_problem(package, "package"):
            raise GitInvalidRequest(problem)
        if not refs.in_directory(package, self.directory):
            raise GitInvalidRequest(f"package {package!r} is not under the repository's directory {self.directory!r}")
        if problem := refs.path_problem(workspace, "workspace"):
            raise GitInvalidRequest(problem)
        if "/" in workspace:
            raise GitInvalidRequest(f"workspace {workspace!r} must not contain '/'")

    @staticmethod
    def _require(revision: Revision, lifecycle: Lifecycle, action: str) -> None:
        if revision.lifecycle != lifecycle:
            raise GitInvalidRequest(f"cannot {action} {revision.package}/{revision.workspace}: "
                                 f"it is {revision.lifecycle}, not {lifecycle}")

    def _new_revision(self, package: str, workspace: str, number: int, lifecycle: Lifecycle, version: str,
                      ref: str, commit: str, tree: str, when: int) -> Revision:
        return Revision(package, package_name(package, self.directory), workspace, number, lifecycle, version, ref,
                        commit, commit, tree, self.author.email, when)



def _mirror_line(update: RefUpdate) -> str:
    """The update-ref line that moves the mirror's ref as `update` moved the server's."""
    if update.new is None:
        return f"delete {update.ref} {update.old}"
    if update.old is None:
        return f"create {update.ref} {update.new}"
    return f"update {update.ref} {update.new} {update.old}"


def _verify_line(line: str, zero: str) -> str:
    """The `verify` that checks the old value a transaction line names ("" when it names none)."""
    word = line.split()
    if word[0] == "create":
        return f"verify {word[1]} {zero}"
    if word[0] == "update" and len(word) == 4:
        return f"verify {word[1]} {word[3]}"
    if word[0] in ("delete", "verify") and len(word) == 3:
        return f"verify {word[1]} {word[2]}"
    return ""


def _kept_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(metadata) - set(METADATA_FIELDS))
    if unknown:
        raise GitInvalidRequest(f"metadata fields {unknown} are not kept; only {list(METADATA_FIELDS)}")
    return {key: metadata[key] for key in METADATA_FIELDS if metadata.get(key)}


def _encode_files(files: Mapping[str, str | bytes]) -> dict[str, bytes]:
    out = {}
    for path, value in files.items():
        if problem := _file_path_problem(path):
            raise GitInvalidRequest(problem)
        out[path] = value.encode() if isinstance(value, str) else bytes(value)
    return out


def _file_path_problem(path: str) -> str | None:
    parts = path.split("/")
    if not path or path.startswith("/") or any(p in ("", ".", "..", ".git") or "\0" in p for p in parts):
        return f"file path {path!r} must be relative, without empty, '.', '..' or '.git' parts"
    return None
