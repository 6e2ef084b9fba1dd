"""Facts about immutable git objects under the embedded Porch, read once and then remembered.

Owns the read side's caches of one repository handle. Every fact is keyed by object ids (a
commit, a tree, a blob), alone or with a package path, so an entry is never stale, only bounded
(a cache that is full is emptied):

* what a ref target is: its commit, author and message (a commit, or an annotated tag of one);
* whether package P is at a commit (its tree, if P/Kptfile is a file there), and which packages
  are on a commit (one `git ls-tree -r`, kept for the last commit asked about: B's tip);
* a tree's UTF-8 text files, and a metadata blob's content;
* a commit's tasks for (P, ws), from the `kpt:` trailers of its history (`git log`);
* for B's tip, the newest commit of its history whose trailer names each package (who published
  the placeholder, and when), read again only from where B moved (`git log new ^old`).

`made` records what a write just produced (its commit, its package tree, its tasks, derived from
its parent's when it has one parent), so that nothing this process wrote is read back from git.
Reads go through the handle's running `git cat-file` processes; only `git log`, `ls-tree` and
`for-each-ref` start a process.

Threads: the handle's readers and writers may use one ObjectFacts at once (the embedded Porch
writes a repository outside its own lock). Every cache entry is set whole, never changed, and a
method answers from what it read or computed itself, never by reading back an entry another
thread may meanwhile have dropped (a full cache is emptied) or replaced (the per-tip entries); two
threads may compute the same fact twice, which is harmless. Git serialises its own pipes.
Does not: know where refs point now (git/repository.py asks git that every time) or Porch's layout.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, NamedTuple

from porchvariant.embedded.git import messages, refs
from porchvariant.embedded.git.commands import Git
from porchvariant.embedded.git.errors import GitCommandError
from porchvariant.embedded.git.messages import Task
from porchvariant.embedded.git.objects import ObjectStore
from porchvariant.embedded.git.refs import KPTFILE
from reconcile.patching import clone

_PACKAGE_CACHE_LIMIT = 100_000
_MISSING: Any = object()  # not in a cache (None is a remembered answer)
_CACHE_LIMIT = 10_000

Target = tuple[str, str, int, str]  # commit, author email, author time, message
_LOG_FIELDS = 4  # committer time, author email, author time, message (_PUBLICATION_FORMAT)
_PUBLICATION_FORMAT = "--format=%ct%x00%ae%x00%at%x00%B%x00"


class Publication(NamedTuple):
    """A commit whose `kpt:` trailer names a package: its committer time (what orders history),
    and its author's email and time (what Porch shows as publishedBy and publishTimestamp)."""

    committed: int
    email: str
    when: int


class ObjectFacts:
    """The remembered facts of one repository; safe for use by several threads at once (see the
    module doc)."""

    def __init__(self, git: Git, objects: ObjectStore, directory: str, metadata_fields: Iterable[str]) -> None:
        self._git, self._objects, self._directory = git, objects, directory
        self._metadata_fields = tuple(metadata_fields)
        self._targets: dict[str, Target | None] = {}
        self._package_trees: dict[tuple[str, str], str | None] = {}  # (commit, P) -> tree
        self._packages: tuple[str, list[tuple[str, str]]] = ("", [])  # commit -> [(P, tree)]
        self._files: dict[str, dict[str, str]] = {}  # tree -> text files
        self._tasks: dict[tuple[str, str, str], list[Task]] = {}  # (commit, P, ws) -> tasks
        self._metadata: dict[str, dict[str, Any]] = {}  # blob -> metadata
        self._publications: tuple[str, dict[str, Publication]] = ("", {})  # B's tip -> P -> newest naming P

    def ref_infos(self, patterns: list[str]) -> Iterator[refs.RefInfo]:
        """The refs matching `patterns` that end at a commit (refs to trees and blobs are skipped).

        `git for-each-ref` is asked for names and targets only: what a target is never changes,
        so each is read once, through the running `cat-file`, rather than by every listing.
        """
        targets = refs.parse_ref_targets(self._git.run("for-each-ref", f"--format={refs.TARGET_FORMAT}", *patterns))
        for target in dict.fromkeys(t for _, t in targets if t not in self._targets):
            _remember(self._targets, target, self._read_target(target))
        for name, target in targets:
            found = self._targets.get(target) or self._read_target(target)
            if found is not None:
                yield refs.RefInfo(name, target, *found)

    def package_trees(self, pairs: list[tuple[str, str]]) -> list[str | None]:
        """For each (commit, P): P's tree if P/Kptfile is a file at that commit, else None."""
        # Answered from `known`, not the cache, which another thread may empty meanwhile.
        known = {pair: self._package_trees.get(pair, _MISSING) for pair in pairs}
        todo = sorted(pair for pair, tree in known.items() if tree is _MISSING)
        if todo and len(self._package_trees) + len(todo) > _PACKAGE_CACHE_LIMIT:
            self._package_trees.clear()
        if todo:
            specs = [spec for commit, path in todo for spec in (f"{commit}:{path}", f"{commit}:{path}/{KPTFILE}")]
            answers = self._git.object_info(specs)
            for index, pair in enumerate(todo):
                tree, kptfile = answers[2 * index], answers[2 * index + 1]
                ok = tree is not None and tree[1] == "tree" and kptfile is not None and kptfile[1] == "blob"
                known[pair] = self._package_trees[pair] = tree[0] if ok and tree is not None else None
        return [known[pair] for pair in pairs]

    def packages(self, commit: str) -> list[tuple[str, str]]:
        """(P, tree) of every package on `commit` under the directory (one `git ls-tree -r`)."""
        held, found = self._packages  # one read: another thread may replace it meanwhile
        if held != commit:  # only B's latest tip is asked for
            args = ["ls-tree", "-r", "-t", "-z", commit] + (["--", self._directory] if self._directory else [])
            found = refs.discover_packages(self._git.run(*args), self._directory)
            self._packages = (commit, found)
        return found

    def text_files(self, tree: str) -> dict[str, str]:
        """The UTF-8 text files under `tree` as {path: text} (a new dict; binary files left out)."""
        files = self._files.get(tree)
        if files is None:
            decoded = ((path, text_of(data)) for path, _, data in self._objects.files(tree))
            files = {path: text for path, text in decoded if text is not None}
            _remember(self._files, tree, files)
        return dict(files)

    def metadata(self, blob: str) -> dict[str, Any]:
        """The metadata fields a metadata blob holds (a new dict); {} for a blob that is not there."""
        data = self._metadata.get(blob)
        if data is None:
            found = self._git.read_object(blob)
            if found is None or found[0] != "blob":
                return {}
            stored = json.loads(found[1])
            data = {key: stored[key] for key in self._metadata_fields if key in stored}
            _remember(self._metadata, blob, data)
        return clone(data)

    def tasks(self, commit: str, package: str, workspace: str) -> list[Task]:
        """The tasks Porch's loadTasks gives (P, ws) at `commit`: its first task alone, or [].

        Whole chains of tasks (`messages.task_chain`) are what is remembered, since a chain
        extends by a commit's own tasks; the first task is taken from it on the way out."""
        key = (commit, package, workspace)
        found = self._tasks.get(key)
        if found is None:
            found = self._walk_tasks(commit, package, workspace)
            _remember(self._tasks, key, found)
        return clone(messages.first_task(found))

    def _walk_tasks(self, commit: str, package: str, workspace: str) -> list[Task]:
        """What `git log` would give, found by following single parents through the running
        `cat-file` (a draft's history is a chain back to its clone or init); `git log` itself
        from the first merge on, whose parents' histories it interleaves by date."""
        newer: list[list[Task]] = []  # each commit's own tasks, newest commit first
        current: str | None = commit
        while current is not None:
            known = self._tasks.get((current, package, workspace))
            if known is not None:
                return _joined(known, newer)
            found = self._git.read_object(current)
            parents = messages.commit_parents(found[1]) if found is not None and found[0] == "commit" else []
            if found is None or len(parents) > 1:
                with self._git.stream("log", "--no-color", "--format=%B%x00", current) as out:
                    return _joined(messages.task_chain(_records(out), package, workspace), newer)
            own = messages.task_chain([messages.parse_commit(found[1])[2]], package, workspace)
            newer.append(own)
            if any(task.get("type") in ("clone", "init") for task in own):
                return _joined([], newer)
            current = parents[0] if parents else None
        return _joined([], newer)

    def publications(self, tip: str) -> dict[str, Publication]:
        """For each package P a `kpt:` trailer names in the history of `tip`: the newest such commit
        (the greatest committer time; Porch's findLatestPackageCommit walks `git log` in that
        order and stops at the first). Shared: callers do not change it.

        Kept for the last tip asked about (B's). When B has moved on from it (it is an ancestor
        of the new tip, as after an approval or a fetch), only the new commits are read; otherwise
        the whole history is. `git log --grep` leaves out commits without a trailer.
        """
        held_tip, held = self._publications
        if tip == held_tip:
            return held
        if held_tip and self._is_ancestor(held_tip, tip):
            found = dict(held)
            for package, newer in self._named(tip, "^" + held_tip).items():
                if package not in found or newer.committed >= found[package].committed:
                    found[package] = newer
        else:
            found = self._named(tip)
        self._publications = (tip, found)
        return found

    def made(self, commit: str, parents: list[str], author_email: str, when: int, message: str,
             package: str, workspace: str, tree: str) -> None:
        """Remember a commit just written for (P, ws), holding P as `tree` (with its Kptfile, as
        every write has one)."""
        _remember(self._targets, commit, (commit, author_email, when, message))
        if len(self._package_trees) >= _PACKAGE_CACHE_LIMIT:
            self._package_trees.clear()
        self._package_trees[(commit, package)] = tree
        if len(parents) > 1:
            return  # `git log` interleaves the parents' histories by date: let `tasks` ask it
        # `git log` of a commit with one parent is the commit, then the parent's log; and it stops
        # at the first clone or init task (task_chain).
        task = next((note.get("task") for note in messages.kpt_annotations(message)), None)
        own = [task] if isinstance(task, dict) else []
        if not parents or (own and own[0].get("type") in ("clone", "init")):
            found = own
        else:
            before = self._tasks.get((parents[0], package, workspace))
            if before is None:
                return
            found = before + own
        _remember(self._tasks, (commit, package, workspace), found)

    def _named(self, *revisions: str) -> dict[str, Publication]:
        found: dict[str, Publication] = {}
        with self._git.stream("log", "--no-color", "--grep=kpt:", _PUBLICATION_FORMAT, *revisions) as out:
            fields = _records(out)
            for committed, email, when, message in _groups(fields, _LOG_FIELDS):
                entry = Publication(_number(committed), email, _number(when))
                for note in messages.kpt_annotations(message):
                    package = note.get("package")
                    if isinstance(package, str) and (package not in found
                                                     or entry.committed > found[package].committed):
                        found[package] = entry
        return found

    def _is_ancestor(self, older: str, newer: str) -> bool:
        try:
            self._git.run("merge-base", "--is-ancestor", older, newer)
        except GitCommandError:  # exit 1: not an ancestor; or an object git does not have
            return False
        return True

    def _read_target(self, target: str) -> Target | None:
        found = self._git.read_object(target)
        commit = target
        if found is not None and found[0] == "tag":
            commit, kind = messages.tag_target(found[1])
            found = self._git.read_object(commit) if kind == "commit" else None
        if found is None or found[0] != "commit":
            return None
        return (commit, *messages.parse_commit(found[1]))


def _joined(oldest: list[Task], newer: list[list[Task]]) -> list[Task]:
    """The tasks of a history: those of its oldest part, then each newer commit's own, oldest first."""
    return [*oldest, *(task for own in reversed(newer) for task in own)]


def text_of(data: bytes) -> str | None:
    """`data` as UTF-8 text, None if it is not."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def metadata_bytes(kept: Mapping[str, Any]) -> bytes:
    """The content of a metadata blob."""
    return (json.dumps(kept, sort_keys=True, separators=(",", ":")) + "\n").encode()


def _remember(cache: dict[Any, Any], key: Any, value: Any) -> None:
    """cache[key] = value, the cache emptied first when it is full (every entry is cheap to redo)."""
    if len(cache) >= _CACHE_LIMIT:
        cache.clear()
    cache[key] = value


def _groups(fields: Iterator[str], size: int) -> Iterator[list[str]]:
    """Consecutive groups of `size` fields (a last, incomplete one is dropped)."""
    while len(group := list(itertools.islice(fields, size))) == size:
        yield group


def _number(text: str) -> int:
    return int(text) if text.strip().isdigit() else 0


def _records(stream: Iterable[bytes]) -> Iterator[str]:
    """NUL-terminated records of `git log --format=%B%x00`, decoded, as they arrive."""
    pending = b""
    for chunk in stream:
        pending += chunk
        *complete, pending = pending.split(b"\0")
        for record in complete:
            yield record.lstrip(b"\n").decode("utf-8", "replace")
