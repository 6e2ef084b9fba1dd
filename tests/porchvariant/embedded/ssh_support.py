"""Shared by the ssh remote-repository tests: Porch's layout on a real ssh git server, and the
checks that a private key leaked nowhere.

`SshServed(server, tmp)` puts the blueprint `catalog` (package `web`, published twice) and empty
deployment repositories onto the server, and gives the manifests that point at them: the
Repositories (ssh:// URLs), the `kubernetes.io/ssh-auth` Secret they name and the
`ssh-known-hosts` ConfigMap. `KeyWatch` polls /proc while a block runs for any process holding a
secret in its arguments or environment; `files_holding` looks for it in files.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from porchvariant.embedded._porch_remotes import KNOWN_HOSTS_CONFIGMAP, KNOWN_HOSTS_KEY, SSH_AUTH, SSH_PRIVATE_KEY
from porchvariant.embedded.git.mirror import Mirror
from porchvariant.embedded.git.repository import GitPackageRepository
from porchvariant.embedded.git.ssh import SshAuth
from porchvariant.embedded.git.transport import Transport
from tests.gitservers.ssh import SshGitServer
from tests.porchvariant.embedded.remote_support import ServedLayout
from tests.porchvariant.variants_support import NS

SECRET = "git-ssh"


class SshServed(ServedLayout):
    """The layout of remote_support.py served by `server` over ssh, with key auth."""

    secret_name = SECRET
    server: SshGitServer

    def __init__(self, server: SshGitServer, tmp: Path, deployments: tuple[str, ...] = ("prod",)) -> None:
        super().__init__(server, tmp, deployments)

    def auth(self) -> SshAuth:
        return SshAuth(self.server.private_key, self.server.known_hosts)

    def secret(self, private_key: bytes | None = None, *, known_hosts: bytes | None = None) -> dict[str, Any]:
        """The ssh-auth Secret (stringData, as a person writes it), with `known_hosts` when given."""
        data = {SSH_PRIVATE_KEY: (private_key or self.server.private_key).decode()}
        if known_hosts is not None:
            data["known_hosts"] = known_hosts.decode()
        return {"apiVersion": "v1", "kind": "Secret", "type": SSH_AUTH, "metadata": {"name": SECRET, "namespace": NS},
                "stringData": data}

    def known_hosts(self, text: bytes | None = None) -> dict[str, Any]:
        """The ConfigMap of known host keys (the server's own unless `text`)."""
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": KNOWN_HOSTS_CONFIGMAP, "namespace": NS},
                "data": {KNOWN_HOSTS_KEY: (text or self.server.known_hosts).decode()}}

    def objects(self) -> list[dict[str, Any]]:
        return [*self.repositories(), self.secret(), self.known_hosts()]

    def open(self, name: str, cache: Path, auth: Any = None, *, url: str | None = None) -> GitPackageRepository:
        """A handle on the served repository through porchkit's own mirror in `cache`; `auth` is
        called before every command (the server's own key and host key unless given)."""
        transport = Transport(url or self.server.url(f"{name}.git"), credentials=auth or self.auth)
        return GitPackageRepository("", remote=Mirror(cache, transport, "main"))

    def key_lines(self, private_key: bytes | None = None) -> list[bytes]:
        """The lines of a private key's body: any of them found anywhere is a leak."""
        key = private_key or self.server.private_key
        return [line for line in key.splitlines() if len(line) >= 20 and not line.startswith(b"-----")]


class KeyWatch:
    """Polls /proc while the block runs: the arguments and environment of every ssh, git and shell
    process (but this one), checked once each for any of `needles`. `ssh` lists the ssh clients'
    arguments seen, so a test can tell the watch saw them."""

    def __init__(self, needles: list[bytes]) -> None:
        self.needles = needles
        self.leaks: list[str] = []
        self.ssh: list[str] = []
        self._seen: set[tuple[str, bytes]] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> KeyWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _poll(self) -> None:
        while not self._stop.is_set():
            for entry in Path("/proc").iterdir():
                if entry.name.isdigit() and int(entry.name) != os.getpid():
                    self._check(entry)
            self._stop.wait(0.002)

    def _check(self, entry: Path) -> None:
        try:
            cmdline, environ = (entry / "cmdline").read_bytes(), (entry / "environ").read_bytes()
        except OSError:
            return
        program = os.path.basename(cmdline.split(b"\0", 1)[0])
        if not (program.startswith((b"git", b"ssh")) or program in (b"sh", b"dash", b"bash")):
            return
        if (entry.name, cmdline) in self._seen:  # a pid is seen again after an exec (sh -c → ssh)
            return
        self._seen.add((entry.name, cmdline))
        argv = cmdline.replace(b"\0", b" ").decode(errors="replace")
        if program == b"ssh":
            self.ssh.append(argv)
        if any(needle in cmdline or needle in environ for needle in self.needles):
            self.leaks.append(argv)


def files_holding(needles: list[bytes], root: Path, *, since: float = 0.0, skip: tuple[Path, ...] = ()) -> list[str]:
    """The files under `root` (changed since `since`, outside `skip`) that hold any of `needles`."""
    found = []
    for directory, _, names in os.walk(root):
        if any(Path(directory).is_relative_to(s) for s in skip):
            continue
        for name in names:
            path = Path(directory, name)
            try:
                if path.is_symlink() or not path.is_file() or path.lstat().st_mtime < since:
                    continue
                content = path.read_bytes()
            except OSError:
                continue
            if any(needle in content for needle in needles):
                found.append(str(path))
    return found
