"""The local mirror of a remote git repository, in a cache directory; the remote is the source of truth.

Layout: one bare repository per (URL, branch), `<cache>/<first 24 hex digits of sha256(URL NUL
branch)>.git`, with `porchkit.url` in its config so a person can tell which is which, and a lock
file `<same>.lock` beside it, held while it is created. The default cache is
`$XDG_CACHE_HOME/porchkit/git` (else `~/.cache/porchkit/git`); in a cluster, a volume. Deleting a
mirror loses nothing: the next open fetches it again.

Promises: `fetch` makes the mirror's refs under refs/heads, refs/tags and refs/porchkit exactly the
remote's (forced, pruned, in one transaction: a force-pushed branch is followed, a deleted one
goes); `push` sends a set of ref changes as one atomic push in which every ref carries a lease on
the value it is expected to have on the server (`--force-with-lease=<ref>:<old>`, empty for "must
not exist"), so nothing is ever overwritten that was not seen, and `PushRejected` says that the
server moved first (nothing was changed there). Any other failure is a RemoteError.
`push_together` is `push` for writers in several threads at once: their changes to distinct refs
go out together, one push at a time per mirror (group commit), each writer with its own
outcome.

Does not: move the mirror's own refs after a push (git/repository.py does, in the same lock), lock the
mirror against concurrent writers (git/repository.py's flock), or choose credentials (git/transport.py).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from porchvariant.embedded.git.commands import run_git
from porchvariant.embedded.git.errors import GitConflict, RemoteError
from porchvariant.embedded.git.transport import Transport

# push_together's pushes on the wire at once, per mirror. One: while it is out, every other writer
# of that repository joins the next, and a push costs about the same for one ref as for forty
# (bench/variants_bench.py: 1,000 drafts went out in about 200 pushes with 1, 315 with 2, and
# the run took a quarter longer with 2).
PUSHES_AT_ONCE = 1
FETCH_REFSPECS = ("+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*", "+refs/porchkit/*:refs/porchkit/*")
# What git's porcelain report says of a ref when another writer got there first: a lease that no
# longer holds, or (the server's side, when two pushes pass their leases at once) a ref the
# server could not lock or update; Porch retries on the same words.
_LOST_RACE = ("stale info", "fetch first", "non-fast-forward", "already exists", "atomic transaction failed",
              "failed to update ref", "failed to lock", "cannot lock ref")


def default_cache_dir() -> Path:
    """$XDG_CACHE_HOME/porchkit/git, else ~/.cache/porchkit/git."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base, "porchkit", "git")


def mirror_path(cache: Path, url: str, branch: str) -> Path:
    digest = hashlib.sha256(f"{url}\0{branch}".encode()).hexdigest()[:24]
    return cache / f"{digest}.git"


@dataclass(frozen=True, slots=True)
class RefUpdate:
    """One ref of a push: `new` None deletes it; `old` None means it must not exist on the server."""

    ref: str
    new: str | None
    old: str | None


class _Waiting:
    """One writer's updates in `Mirror.push_together`, and their outcome once `done`."""

    __slots__ = ("updates", "taken", "done", "error")

    def __init__(self, updates: list[RefUpdate]) -> None:
        self.updates = updates
        self.taken = False  # in a batch a thread pushes (its own or another's)
        self.done = False
        self.error: BaseException | None = None


class PushRejected(GitConflict):
    """The server's refs were not where the lease expected (someone pushed first); nothing changed."""


class Mirror:
    """The mirror of one remote (URL, branch) under `cache`, created on first use."""

    def __init__(self, cache: Path, transport: Transport, branch: str) -> None:
        self.transport = transport
        self.url = transport.url
        self.path = mirror_path(cache, self.url, branch)
        self._group = threading.Condition()  # push_together: the writers waiting, and whether one pushes
        self._queued: list[_Waiting] = []
        self._pushing = 0  # pushes on the wire
        self._create(cache)

    def fetch(self) -> None:
        """Make the mirror's refs the remote's (see the module doc); RemoteError if it cannot."""
        self.transport.run(str(self.path), ["fetch", "--quiet", "--atomic", "--prune", "--no-tags",
                                            "--no-write-fetch-head", self.url, *FETCH_REFSPECS])

    def push_together(self, updates: Sequence[RefUpdate]) -> None:
        """`push`, joined with the updates other threads push to this mirror at the same time (group
        commit). While PUSHES_AT_ONCE pushes are on the wire the others wait; the next to go
        pushes every waiting writer's updates whose refs no other writer it took touches, as one
        atomic push, each ref with its own lease (a writer's updates go out in one push only).
        If that combined push fails (one writer's lease lost, a refusal, the network), each
        writer's updates are pushed again on their own, so that every writer gets its own
        outcome: one writer's lost lease fails none of the others."""
        if not updates:
            return
        mine = _Waiting(list(updates))
        with self._group:
            self._queued.append(mine)
            while not mine.done and (mine.taken or self._pushing >= PUSHES_AT_ONCE):
                self._group.wait()
            leading = not mine.taken  # else another thread pushed it (or failed to)
            if leading:
                batch = self._take(mine)
                self._pushing += 1
        if leading:
            try:
                self._push_batch(batch)
            finally:
                with self._group:
                    self._pushing -= 1
                    self._group.notify_all()
        if mine.error is not None:
            raise mine.error

    def _take(self, mine: _Waiting) -> list[_Waiting]:
        """`mine` and the waiting writers whose refs no writer already taken touches (called with
        the group's lock held); they leave the queue."""
        batch, touched = [mine], {update.ref for update in mine.updates}
        for waiting in self._queued:
            refs = {update.ref for update in waiting.updates}
            if waiting is not mine and not refs & touched:
                batch.append(waiting)
                touched |= refs
        self._queued = [waiting for waiting in self._queued if waiting not in batch]
        for waiting in batch:
            waiting.taken = True
        return batch

    def _push_batch(self, batch: list[_Waiting]) -> None:
        """Every writer of `batch` given its outcome (`error` None: pushed), and `done`."""
        try:
            if len(batch) > 1:
                try:
                    self.push([update for waiting in batch for update in waiting.updates])
                    return
                except (PushRejected, RemoteError):
                    pass  # each on its own below, for its own outcome
            for waiting in batch:
                try:
                    self.push(waiting.updates)
                except (PushRejected, RemoteError) as err:
                    waiting.error = err
                waiting.done = True
        except BaseException as err:  # anything else: no writer left unsettled may think it pushed
            for waiting in batch:
                if not waiting.done:
                    waiting.error = err
            raise
        finally:
            for waiting in batch:  # read by each writer once the group's lock is let go
                waiting.done = True

    def push(self, updates: Sequence[RefUpdate]) -> None:
        """Push every update, atomically, each with its lease. PushRejected when the server moved
        first, RemoteError for anything else; in both cases no ref changed on the server."""
        if not updates:
            return
        leases = [f"--force-with-lease={u.ref}:{u.old or ''}" for u in updates]
        specs = [f"{u.new or ''}:{u.ref}" for u in updates]
        try:
            self.transport.run(str(self.path), ["push", "--quiet", "--atomic", "--porcelain", "--no-verify",
                                                *leases, self.url, *specs])
        except RemoteError as err:
            lost = [line for line in err.stdout.splitlines() if line.startswith("!")
                    and any(reason in line for reason in _LOST_RACE)]
            if lost:
                ref = lost[0].split("\t")[1].split(":")[-1] if "\t" in lost[0] else "a ref"
                raise PushRejected(f"{self.url}: {ref} moved on the server since it was fetched") from err
            refused = [line for line in err.stdout.splitlines() if line.startswith("!")
                       and "atomic push failed" not in line]
            if refused:  # the server's own words (a hook's refusal, a protected branch)
                detail = refused[0].split("\t")[-1].strip()
                raise RemoteError(f"{self.url}: the server refused the push: {detail}", reason="Rejected") from err
            raise

    def _create(self, cache: Path) -> None:
        if (self.path / "HEAD").is_file():
            return
        cache.mkdir(parents=True, exist_ok=True)
        fd = os.open(f"{self.path}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if (self.path / "HEAD").is_file():
                return  # another process made it while this one waited
            partial = self.path.with_name(self.path.name + ".new")
            run_git(["init", "--quiet", "--bare", str(partial)])
            run_git(["--git-dir", str(partial), "config", "porchkit.url", self.url])
            os.rename(partial, self.path)  # appears whole, or not at all
        finally:
            os.close(fd)
