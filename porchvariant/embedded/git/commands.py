"""The git CLI under the embedded Porch: one-shot commands and two long-lived `git cat-file`s.

Owns every git process git/repository.py starts. One-shot commands (`for-each-ref`, `ls-tree`, `log`)
run to completion and are waited for. Object reads go through a persistent `git cat-file --batch`
(contents) and `--batch-check` (ids and types), and ref transactions through a persistent `git
update-ref --stdin`, each started on first use and stopped by `close()`, by leaving a `with`
block, or, as a last resort, when the `Git` object is garbage-collected. So a `Git` holds at
most three children between calls and none once closed.

Why the CLI and not GitPython's object database: ecosystem.md §6 measured it (listing 1000
packed tags: 651 ms against 5.5 ms with `for-each-ref`; two `cat-file` children per live Repo
that leak unless closed). The CLI also reads every repository format git itself reads.

Does not: know Porch's layout (git/repository.py, git/refs.py) or lock anything (git/repository.py holds the
locks; this module only serialises use of its own pipes).
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import threading
import urllib.parse
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, NamedTuple

from porchvariant.embedded.git.errors import GitCommandError, GitConflict, GitInvalidRequest, GitNotFound

# A clean environment: nothing inherited may point git at another repository, index or tree.
_DROPPED_ENV = (
    "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_NAMESPACE",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_COMMON_DIR", "GIT_CEILING_DIRECTORIES", "GIT_PREFIX",
)
_REMOTE_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://|^[^/]+@[^/]+:")
_BATCH_CHUNK = 200  # --batch-check queries in flight at once: far below a pipe buffer of answers
UPDATE_REF = "update-ref"  # the key of the persistent `git update-ref --stdin` among Git's processes


def git_environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _DROPPED_ENV}
    env.update(GIT_TERMINAL_PROMPT="0", LC_ALL="C", GIT_OPTIONAL_LOCKS="0")
    return env


def run_git(args: Sequence[str], *, cwd: str | None = None, input: bytes | None = None) -> bytes:
    """Run `git args`, return stdout; GitCommandError on a non-zero exit."""
    done = subprocess.run(["git", *args], cwd=cwd, input=input, capture_output=True, env=git_environment())
    if done.returncode != 0:
        raise GitCommandError(args, done.returncode, done.stderr.decode(errors="replace"))
    return done.stdout


def _found(header: list[bytes]) -> bool:
    """Whether a cat-file answer line is "<id> <type> <size>" rather than "<spec> missing"."""
    return len(header) == 3 and header[1] in (b"blob", b"tree", b"commit", b"tag") and header[2].isdigit()


class GitDir(NamedTuple):
    """Where a repository lives: its git directory, whether it is bare, its object format
    ("sha1" or "sha256"), and the directory its objects are written to (the common directory's,
    for a linked worktree)."""

    path: str
    bare: bool
    algorithm: str
    objects: str


def open_git_dir(location: str) -> GitDir:
    """The git directory of a local path or file:// URL.

    GitNotFound unless `location` itself is a git directory or holds `.git`: git is never allowed
    to search upwards, which would silently open an enclosing repository.
    """
    if location.startswith("file://"):
        path = urllib.parse.unquote(urllib.parse.urlparse(location).path)
    elif _REMOTE_URL.match(location):
        raise GitInvalidRequest(f"{location}: only local repositories (a path or file:// URL) are supported")
    else:
        path = location
    path = os.path.abspath(path)
    if not os.path.isdir(path):
        raise GitNotFound(f"{location}: no such directory")
    non_bare = os.path.exists(os.path.join(path, ".git"))
    args = ["rev-parse", "--absolute-git-dir", "--show-object-format", "--git-common-dir"]
    try:
        out = run_git(args, cwd=path) if non_bare else run_git(["--git-dir", path, *args])
    except GitCommandError as err:
        raise GitNotFound(f"{location}: not a git repository") from err
    git_dir, algorithm, common = out.decode().splitlines()
    common = os.path.normpath(os.path.join(path if non_bare else os.getcwd(), common))
    return GitDir(git_dir, not non_bare, algorithm, os.path.join(common, "objects"))


def checked_out_branches(git_dir: str) -> set[str]:
    """The refs HEAD of the main working tree and of every linked worktree points at."""
    found = set()
    for head in [Path(git_dir, "HEAD"), *Path(git_dir, "worktrees").glob("*/HEAD")]:
        try:
            text = head.read_text().strip()
        except OSError:
            continue
        if text.startswith("ref: "):
            found.add(text[5:])
    return found


class _Batch:
    """One persistent git process reading commands on stdin (`cat-file --batch`, `update-ref
    --stdin`); callers hold Git's lock around every exchange. When its stderr is wanted, it goes
    to a temporary file, never to a pipe nobody reads (a full pipe would stall the process)."""

    def __init__(self, git_dir: str, args: Sequence[str], *, keep_stderr: bool = False) -> None:
        # Closed by stop(), when the process is done with it: no `with` block spans that.
        self.stderr = tempfile.TemporaryFile() if keep_stderr else None  # noqa: SIM115
        self.proc = subprocess.Popen(
            ["git", "--git-dir", git_dir, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr if self.stderr is not None else subprocess.DEVNULL,
            env=git_environment(),
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin: IO[bytes] = self.proc.stdin
        self.stdout: IO[bytes] = self.proc.stdout

    def stop(self) -> str:
        """Close stdin (the process exits on EOF), reap it, killing a straggler; its stderr."""
        with suppress(OSError):
            self.stdin.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.stdout.close()
        if self.stderr is None:
            return ""
        self.stderr.seek(0)
        text = self.stderr.read().decode(errors="replace")
        self.stderr.close()
        return text


def _stop(batches: dict[str, _Batch]) -> None:
    for batch in list(batches.values()):
        batch.stop()
    batches.clear()


class Git:
    """git commands against one git directory (`--git-dir`, never a working tree)."""

    def __init__(self, git_dir: str) -> None:
        self.git_dir = git_dir
        self._lock = threading.Lock()
        self._batches: dict[str, _Batch] = {}
        # Reaps the cat-files if the owner forgets close(); holds the dict, never self.
        self._finalizer = weakref.finalize(self, _stop, self._batches)

    def close(self) -> None:
        with self._lock:
            _stop(self._batches)

    def run(self, *args: str, input: bytes | None = None, env: dict[str, str] | None = None) -> bytes:
        full = ["--git-dir", self.git_dir, *args]
        environment = git_environment() | (env or {})
        done = subprocess.run(["git", *full], input=input, capture_output=True, env=environment)
        if done.returncode != 0:
            raise GitCommandError(args, done.returncode, done.stderr.decode(errors="replace"))
        return done.stdout

    @contextmanager
    def stream(self, *args: str) -> Iterator[IO[bytes]]:
        """stdout of a long command, read as far as the caller likes; the process is always reaped."""
        proc = subprocess.Popen(
            ["git", "--git-dir", self.git_dir, *args],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=git_environment(),
        )
        assert proc.stdout is not None
        try:
            yield proc.stdout
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.stdout.close()
            proc.wait()

    def update_refs(self, lines: Sequence[str]) -> None:
        """One ref transaction: every line applies, or none does.

        Lines are `update REF NEW OLD`, `create REF NEW`, `delete REF [OLD]`, `verify REF OLD`.
        A ref that is not at its expected value (or exists where `create` wants none) raises
        GitConflict and leaves every ref as it was.

        The transaction goes to a running `git update-ref --stdin` (start, the lines, prepare,
        commit; git answers "start: ok" and so on), which saves starting a process per write.
        Git locks and checks each ref on disk when it prepares, so what other processes did in
        between is seen. Any failure ends that process (git dies on it); the next call starts
        another. A process found dead before it took the transaction is replaced, once.
        """
        script = "".join(f"{line}\n" for line in ("start", *lines, "prepare", "commit")).encode()
        with self._lock:
            for attempt in (1, 2):
                batch = self._batch(UPDATE_REF)
                try:
                    batch.stdin.write(script)
                    batch.stdin.flush()
                    answers = [batch.stdout.readline() for _ in range(3)]
                except OSError:
                    answers = []
                if answers == [b"start: ok\n", b"prepare: ok\n", b"commit: ok\n"]:
                    return
                stderr = self._batches.pop(UPDATE_REF).stop()
                if answers[:1] == [b"start: ok\n"] or stderr.strip() or attempt == 2:
                    break
        code = batch.proc.returncode
        if "cannot lock ref" in stderr or "reference already exists" in stderr:
            raise GitConflict(f"a ref moved since it was read: {stderr.strip().splitlines()[-1]}")
        raise GitCommandError(("update-ref", "--stdin"), code if code is not None else -1, stderr)

    # cat-file ----------------------------------------------------------------------------------

    def _batch(self, mode: str) -> _Batch:
        batch = self._batches.get(mode)
        if batch is None or batch.proc.poll() is not None:
            if batch is not None:
                batch.stop()
            if mode == UPDATE_REF:
                batch = _Batch(self.git_dir, ["update-ref", "--stdin"], keep_stderr=True)
            else:
                batch = _Batch(self.git_dir, ["cat-file", mode])
            self._batches[mode] = batch
        return batch

    def read_object(self, spec: str) -> tuple[str, bytes] | None:
        """(type, content) of the object `spec` names (an id or `<commit>:<path>`), None if missing."""
        with self._lock:
            batch = self._batch("--batch")
            batch.stdin.write(spec.encode() + b"\n")
            batch.stdin.flush()
            header = batch.stdout.readline().split()
            if not _found(header):  # "<spec> missing" / "<spec> ambiguous"
                return None
            size = int(header[2])
            data = batch.stdout.read(size + 1)[:size]  # content, then a newline
            return header[1].decode(), data

    def object_info(self, specs: Sequence[str]) -> list[tuple[str, str] | None]:
        """(id, type) for each spec, None where it names nothing; answered in one process."""
        answers: list[tuple[str, str] | None] = []
        with self._lock:
            batch = self._batch("--batch-check")
            for start in range(0, len(specs), _BATCH_CHUNK):
                chunk = specs[start : start + _BATCH_CHUNK]
                batch.stdin.write(b"".join(s.encode() + b"\n" for s in chunk))
                batch.stdin.flush()
                for _ in chunk:
                    parts = batch.stdout.readline().split()
                    answers.append((parts[0].decode(), parts[1].decode()) if _found(parts) else None)
        return answers
