"""What the test git servers share: a server process of their own and the bare repositories it serves.

`ServedRepositories` (a base class) starts the server as a new process group and waits until it
listens on its loopback port (`_launch`), kills the whole group at once as a crash would (`stop`),
and gives the test direct access to the repositories on disk (`create_repo`, `git`, `refs`,
`work_git`). A subclass sets `root`, `repos`, `port`, `gitconfig`, and says what its process is
(`_command`, `_name`, `_pid_file`, `_diagnostics`) and whom the repositories must belong to
(`hand_over`).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
from contextlib import suppress
from pathlib import Path

from tests.waiting import eventually

START_TIMEOUT = 10.0  # seconds for a server to listen


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ServedRepositories:
    """See the module doc."""

    root: Path
    repos: Path
    port: int
    gitconfig: Path
    _proc: subprocess.Popen[bytes] | None = None
    _name = "server"
    _pid_file = "server.pid"

    def url(self, repo: str) -> str:
        """The URL git clones `repo` (a repository under `repos`) from."""
        raise NotImplementedError

    def _command(self) -> list[str]:
        raise NotImplementedError

    def _diagnostics(self) -> str:
        """Whatever the server logged, for a start that failed."""
        return ""

    def _launch(self) -> None:
        proc = self._proc = subprocess.Popen(self._command(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                             start_new_session=True)

        def listening() -> bool:
            if proc.poll() is not None:
                stderr = proc.stderr.read().decode() if proc.stderr else ""
                raise RuntimeError(f"{self._name} exited: {stderr}{self._diagnostics()}")
            with socket.socket() as probe:
                return probe.connect_ex(("127.0.0.1", self.port)) == 0
        eventually(listening, START_TIMEOUT, interval=0.02, what=f"{self._name} listening on {self.port}",
                   show=self._diagnostics)

    def stop(self) -> None:
        """Kill the server and every process it forked (its process group) at once, as a crash would."""
        if self._proc is None:
            return
        with suppress(ProcessLookupError):
            os.killpg(self._proc.pid, signal.SIGKILL)
        self._proc.wait()
        if self._proc.stderr is not None:
            self._proc.stderr.close()
        self._proc = None
        (self.root / self._pid_file).unlink(missing_ok=True)

    def hand_over(self, path: Path) -> None:
        """Give the server's user a repository the test wrote into directly (nothing to do when the
        server runs as the test's own user)."""

    def create_repo(self, name: str, *, files: dict[str, str] | None = None, branch: str = "main") -> Path:
        """A bare repository served as `name`: empty, or one commit on `branch` holding `files`."""
        path = self.repos / name
        subprocess.run(["git", "init", "--quiet", "--bare", "--initial-branch", branch, str(path)], check=True)
        if files:
            work = self.root / f"seed-{name}"
            subprocess.run(["git", "init", "--quiet", "--initial-branch", branch, str(work)], check=True)
            for relative, text in files.items():
                (work / relative).parent.mkdir(parents=True, exist_ok=True)
                (work / relative).write_text(text)
            self.work_git(work, "add", "-A")
            self.work_git(work, "commit", "--quiet", "-m", "seed")
            self.work_git(work, "push", "--quiet", str(path), f"{branch}:refs/heads/{branch}")
            shutil.rmtree(work)
        self.hand_over(path)
        return path

    def git(self, repo: str, *args: str) -> str:
        """A reading git command in a served repository, directly on disk (not through the server,
        and safe while it serves: nothing is written there); stdout."""
        done = subprocess.run(["git", "--git-dir", str(self.repos / repo), *args], capture_output=True, text=True,
                              check=True, env={**os.environ, "GIT_CONFIG_GLOBAL": str(self.gitconfig),
                                               "GIT_OPTIONAL_LOCKS": "0"})
        return done.stdout

    def refs(self, repo: str) -> dict[str, str]:
        """Every ref of a served repository → the object it points at."""
        out = self.git(repo, "for-each-ref", "--format=%(refname) %(objectname)")
        return {name: oid for name, oid in (line.split(" ") for line in out.splitlines())}

    def work_git(self, work: Path, *args: str) -> str:
        """git in a working directory of the test's (pushing straight into the served repositories)."""
        env = {**os.environ, "GIT_CONFIG_GLOBAL": str(self.gitconfig)}
        return subprocess.run(["git", "-C", str(work), *args], capture_output=True, text=True, check=True,
                              env=env).stdout
