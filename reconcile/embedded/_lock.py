"""One owner per state directory: an exclusive `flock` on `<directory>/lock`, held while in use.

Two processes appending to one journal and replacing one snapshot destroy the state between them,
so `DirectoryLock.acquire` refuses a directory someone else holds, at once (it never waits), with
StateInUse naming the holder. The holder writes its pid, host and start time into the file after
locking, for that message.

Why `flock` on a file that is never deleted: the kernel drops the lock when its holder's file is
closed or the process ends in any way (kill -9 included), so a crash never leaves a stale lock
to clean up, and nothing has to guess whether a recorded pid is still alive. Deleting the file
on release would let a third process lock a new file while a second still holds the old one.
A lock is per open file, so a second cluster on the same directory in the same process is
refused too. Local filesystems only: over NFS, `flock` may be emulated or not shared between hosts.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from pathlib import Path

from reconcile.errors import StateInUse

LOCK_FILE = "lock"


class DirectoryLock:
    """An exclusive hold on a state directory, from `acquire` until `release` (or process exit)."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path, self._fd = path, fd

    @classmethod
    def acquire(cls, directory: Path) -> DirectoryLock:
        """Hold `directory` (which must exist); StateInUse naming the holder when another does."""
        path = directory / LOCK_FILE
        # O_CLOEXEC: the git and kpt processes the embedded Porch starts must not inherit the
        # lock and keep holding it after this process is gone
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            _record_holder(fd)
        except BlockingIOError:
            os.close(fd)
            raise StateInUse(f"state directory {directory} is in use by {_holder(path)}") from None
        except BaseException:
            os.close(fd)
            raise
        return cls(path, fd)

    def release(self) -> None:
        """Let the directory go (idempotent)."""
        if self._fd >= 0:
            os.close(self._fd)  # closing the file drops the flock
            self._fd = -1


def _record_holder(fd: int) -> None:
    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    record = json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": since})
    os.ftruncate(fd, 0)
    os.pwrite(fd, record.encode() + b"\n", 0)


def _holder(path: Path) -> str:
    """'pid 12 on host h since <UTC time>' from the lock file, or a vaguer phrase while the holder
    has not written it yet (it writes right after locking)."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        return f"pid {int(record['pid'])} on host {record['host']} since {record['since']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "another process (which has not recorded its pid yet)"
