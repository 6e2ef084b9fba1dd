"""The git CLI under the embedded Porch: one-shot commands and two long-lived `git cat-file`s.

Owns every git process gitrepo.py starts. One-shot commands (`for-each-ref`, `ls-tree`,
`hash-object`, `update-ref`, `log`) run to completion and are waited for. Object reads go
through a persistent `git cat-file --batch` (contents) and `--batch-check` (ids and types),
started on first use and stopped by `close()`, by leaving a `with` block, or, as a last resort,
when the `Git` object is garbage-collected. So a `Git` holds at most two children between calls
and none once closed.

Why the CLI and not GitPython's object database: ecosystem.md §6 measured it (listing 1000
packed tags: 651 ms against 5.5 ms with `for-each-ref`; two `cat-file` children per live Repo
that leak unless closed). The CLI also reads every repository format git itself reads.

Does not: know Porch's layout (gitrepo.py, _gitrefs.py) or lock anything (gitrepo.py holds the
locks; this module only serialises use of its own pipes).
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import urllib.parse
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO

from porchvariant.embedded._giterrors import Conflict, GitCommandError, InvalidRequest, NotFound

# A clean environment: nothing inherited may point git at another repository, index or tree.
_DROPPED_ENV = (
    "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_NAMESPACE",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_COMMON_DIR", "GIT_CEILING_DIRECTORIES", "GIT_PREFIX",
)
_REMOTE_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://|^[^/]+@[^/]+:")
_BATCH_CHUNK = 200  # --batch-check queries in flight at once: far below a pipe buffer of answers


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


def open_git_dir(location: str) -> tuple[str, bool, str]:
    """(absolute git dir, bare?, object format) of a local path or file:// URL.

    NotFound unless `location` itself is a git directory or holds `.git`: git is never allowed
    to search upwards, which would silently open an enclosing repository.
    """
    if location.startswith("file://"):
        path = urllib.parse.unquote(urllib.parse.urlparse(location).path)
    elif _REMOTE_URL.match(location):
        raise InvalidRequest(f"{location}: only local repositories (a path or file:// URL) are supported")
    else:
        path = location
    path = os.path.abspath(path)
    if not os.path.isdir(path):
        raise NotFound(f"{location}: no such directory")
    non_bare = os.path.exists(os.path.join(path, ".git"))
    args = ["rev-parse", "--absolute-git-dir", "--show-object-format"]
    try:
        out = run_git(args, cwd=path) if non_bare else run_git(["--git-dir", path, *args])
    except GitCommandError as err:
        raise NotFound(f"{location}: not a git repository") from err
    git_dir, algorithm = out.decode().split()
    return git_dir, not non_bare, algorithm


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
    """One persistent `git cat-file` process; callers hold Git's lock around every exchange."""

    def __init__(self, git_dir: str, mode: str) -> None:
        self.proc = subprocess.Popen(
            ["git", "--git-dir", git_dir, "cat-file", mode],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=git_environment(),
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin: IO[bytes] = self.proc.stdin
        self.stdout: IO[bytes] = self.proc.stdout


def _stop(batches: dict[str, _Batch]) -> None:
    """Close each process's stdin (cat-file exits on EOF), then reap it; kill a straggler."""
    for batch in list(batches.values()):
        with suppress(OSError):
            batch.stdin.close()
        try:
            batch.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            batch.proc.kill()
            batch.proc.wait()
        batch.stdout.close()
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
        """One `git update-ref --stdin` transaction: every line applies, or none does.

        Lines are `update REF NEW OLD`, `create REF NEW`, `delete REF [OLD]`, `verify REF OLD`.
        A ref that is not at its expected value (or exists where `create` wants none) raises
        Conflict and leaves every ref as it was.
        """
        script = "".join(f"{line}\n" for line in ("start", *lines, "prepare", "commit"))
        try:
            self.run("update-ref", "--stdin", input=script.encode())
        except GitCommandError as err:
            if "cannot lock ref" in err.stderr or "reference already exists" in err.stderr:
                raise Conflict(f"a ref moved since it was read: {err.stderr.strip().splitlines()[-1]}") from err
            raise

    # cat-file ----------------------------------------------------------------------------------

    def _batch(self, mode: str) -> _Batch:
        batch = self._batches.get(mode)
        if batch is None or batch.proc.poll() is not None:
            batch = self._batches[mode] = _Batch(self.git_dir, mode)
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

    def child_pids(self) -> list[int]:
        """The persistent processes alive now (for diagnostics and tests)."""
        with self._lock:
            return [b.proc.pid for b in self._batches.values() if b.proc.poll() is None]
