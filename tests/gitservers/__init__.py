"""Real git servers on loopback for tests, started by the test process itself (never a system service).

`https_git_server()` (https.py) runs git's smart-HTTP backend behind its own apache2, with TLS
from a throw-away CA and basic auth; `ssh_git_server()` (ssh.py) runs its own sshd with a host key
and a client key of its own, public-key authentication only. The binaries come from Debian
packages (`tests/gitservers/install.sh`); a test that needs them is marked `gitserver` and calls
`require_git_servers()`, which skips it with the reason when any is missing, or fails it when
REQUIRE_GIT_SERVERS=1 (as the `kpt` marker does with REQUIRE_KPT).
"""

from __future__ import annotations

import os
import shutil

import pytest

REQUIRE_ENV = "REQUIRE_GIT_SERVERS"
APACHE = "/usr/sbin/apache2"
SSHD = "/usr/sbin/sshd"  # run by absolute path: sshd re-executes itself for every connection
NEEDED = {"apache2": APACHE, "git-http-backend": "/usr/lib/git-core/git-http-backend", "sshd": SSHD}
NEEDED_ON_PATH = ("openssl", "ssh", "ssh-keygen")


def require_git_servers() -> None:
    """Skip the calling test when a server binary is missing (fail it if REQUIRE_GIT_SERVERS=1)."""
    missing = [name for name, path in NEEDED.items() if not os.access(path, os.X_OK)]
    missing += [name for name in NEEDED_ON_PATH if shutil.which(name) is None]
    if not missing:
        return
    why = f"git server binaries missing: {', '.join(missing)} (tests/gitservers/install.sh installs them)"
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{why}, and {REQUIRE_ENV}=1 requires them")
    pytest.skip(f"{why}; set {REQUIRE_ENV}=1 to make this a failure")
