"""An ssh git server on 127.0.0.1 for one test: its own sshd, public-key authentication only.

    with ssh_git_server() as server:
        server.create_repo("edge.git", files=...)   # a bare repository the server serves
        server.url("edge.git")                       # ssh://USER@127.0.0.1:PORT/<temp dir>/repos/edge.git
        server.private_key, server.known_hosts       # the test's key; `[127.0.0.1]:PORT ssh-ed25519 ...`
        server.authorize(server.new_key()[1])        # replace the key sshd accepts (read per connection)
        server.stop(); server.start()                # a dead server, and back on the same port

Everything lives in a temp dir of its own: the server's host key, its config, pid file and log,
authorized_keys and the repositories. sshd runs in the foreground (`-D -e -f <its config>`) as
this process's child and is stopped on exit; it logs in only the user the tests run as (root in
CI: `PermitRootLogin prohibit-password`), so the served repositories need no hand-over. The
private keys never touch the disk: ssh-keygen writes them, the server reads them back and deletes
the files, so a test can look for a key's text in files left behind.
"""

from __future__ import annotations

import getpass
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.gitservers import SSHD, require_git_servers
from tests.gitservers.served import ServedRepositories, free_port

PRIVSEP_DIR = Path("/run/sshd")  # sshd refuses to start as root without it
_CONFIG = """\
ListenAddress 127.0.0.1:{port}
HostKey {root}/host_ed25519
PidFile {root}/sshd.pid
AuthorizedKeysFile {root}/authorized_keys
AllowUsers {user}
PermitRootLogin prohibit-password
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
AcceptEnv GIT_PROTOCOL
LogLevel ERROR
"""


class SshGitServer(ServedRepositories):
    """One sshd serving the bare repositories under `repos` over ssh://; see the module doc."""

    _name, _pid_file = "sshd", "sshd.pid"

    def __init__(self, root: Path) -> None:
        self.root = root
        self.repos = root / "repos"
        self.repos.mkdir(parents=True)
        self.user = getpass.getuser()
        self.port = free_port()
        host_private, self.host_public = self.new_key("host")
        (root / "host_ed25519").write_bytes(host_private)
        (root / "host_ed25519").chmod(0o600)
        self.known_hosts = f"[127.0.0.1]:{self.port} {self.host_public}".encode()
        self.private_key, public = self.new_key("client")
        self.authorize(public)
        (root / "sshd_config").write_text(_CONFIG.format(root=root, port=self.port, user=self.user))
        self.gitconfig = root / "test.gitconfig"
        self.gitconfig.write_text("[user]\n\tname = t\n\temail = t@example.com\n")

    def url(self, repo: str) -> str:
        return f"ssh://{self.user}@127.0.0.1:{self.port}{self.repos / repo}"

    def new_key(self, name: str = "other") -> tuple[bytes, str]:
        """A fresh ed25519 key pair: the private key (OpenSSH format) and the public key line."""
        path = self.root / f"key-{name}"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"porchkit-test-{name}",
                        "-f", str(path)], check=True, capture_output=True)
        private, public = path.read_bytes(), path.with_suffix(".pub").read_text().strip()
        path.unlink()
        path.with_suffix(".pub").unlink()
        return private, public

    def authorize(self, *public_keys: str) -> None:
        """The keys sshd accepts from now on (read on every connection), without forwarding or a pty."""
        (self.root / "authorized_keys").write_text("".join(f"restrict {key}\n" for key in public_keys))

    def start(self) -> None:
        PRIVSEP_DIR.mkdir(mode=0o755, exist_ok=True)
        self._launch()

    def _command(self) -> list[str]:
        return [SSHD, "-D", "-e", "-f", str(self.root / "sshd_config")]


@contextmanager
def ssh_git_server() -> Iterator[SshGitServer]:
    """A running SshGitServer in a temp dir of its own, removed afterwards; skips the test without
    the binaries."""
    require_git_servers()
    root = Path(tempfile.mkdtemp(prefix="porchkit-ssh-git-"))
    server = SshGitServer(root)
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)

