"""Real git servers on loopback for tests, started by the test process itself (never a system service).

`https_git_server(tmp_path)` (https.py) runs git's smart-HTTP backend behind its own apache2, with
TLS from a throw-away CA and basic auth. An ssh server will join it here. The binaries come from
Debian packages (`tests/gitservers/install.sh`); a test that needs them is marked `gitserver` and
calls `require_git_servers()`, which skips it with the reason when they are missing, or fails it
when REQUIRE_GIT_SERVERS=1 (as the `kpt` marker does with REQUIRE_KPT).
"""

from __future__ import annotations

import os
import shutil

import pytest

REQUIRE_ENV = "REQUIRE_GIT_SERVERS"
APACHE = "/usr/sbin/apache2"
NEEDED = {"apache2": APACHE, "git-http-backend": "/usr/lib/git-core/git-http-backend"}


def require_git_servers() -> None:
    """Skip the calling test when a server binary is missing (fail it if REQUIRE_GIT_SERVERS=1)."""
    missing = [name for name, path in NEEDED.items() if not os.access(path, os.X_OK)]
    if shutil.which("openssl") is None:
        missing.append("openssl")
    if not missing:
        return
    why = f"git server binaries missing: {', '.join(missing)} (tests/gitservers/install.sh installs them)"
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{why}, and {REQUIRE_ENV}=1 requires them")
    pytest.skip(f"{why}; set {REQUIRE_ENV}=1 to make this a failure")
