"""An https git server on 127.0.0.1 for one test: apache2 + `git http-backend`, TLS, basic auth.

    with https_git_server(tmp_path) as server:
        server.create_repo("edge.git", seed=...)   # a bare repository the server serves
        server.url("edge.git")                      # https://127.0.0.1:PORT/git/edge.git
        server.ca_pem, server.username, server.password
        server.set_password("new")                  # apache reads the password file on every request
        server.stop(); server.start()               # a dead server, and back on the same port
        mark = server.log_mark(); ...; server.requests(since=mark).fetches["edge.git"]  # what git asked

Everything lives in a temp dir of its own: a CA and a server certificate made with openssl, the
apache config, its logs (error.log; access.log, one `STATUS REQUEST-LINE` per request, which
`requests()` counts per repository and service) and pid file, the htpasswd file and the
repositories. apache runs in the foreground as this process's child (its own instance, its own
config) and is stopped on exit. Run as root, apache's workers run as `nobody`, so the repositories
are handed to that user and `safe.directory` is opened for the CGI and for `server.git(...)`, the
test's own direct access.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import secrets
import shutil
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.gitservers import APACHE, require_git_servers
from tests.gitservers.served import ServedRepositories, free_port

MODULES = "/usr/lib/apache2/modules"
_USER, _GROUP = "nobody", "nogroup"
_CONFIG = """\
ServerRoot "{root}"
ServerName 127.0.0.1
Listen 127.0.0.1:{port}
PidFile "{root}/httpd.pid"
ErrorLog "{root}/error.log"
LogLevel warn
CustomLog "{root}/access.log" "%>s %r"
DefaultRuntimeDir "{root}"
Mutex file:{root} default
{user}
LoadModule mpm_prefork_module {modules}/mod_mpm_prefork.so
LoadModule authz_core_module {modules}/mod_authz_core.so
LoadModule authz_user_module {modules}/mod_authz_user.so
LoadModule authn_core_module {modules}/mod_authn_core.so
LoadModule authn_file_module {modules}/mod_authn_file.so
LoadModule auth_basic_module {modules}/mod_auth_basic.so
LoadModule alias_module {modules}/mod_alias.so
LoadModule cgi_module {modules}/mod_cgi.so
LoadModule env_module {modules}/mod_env.so
LoadModule ssl_module {modules}/mod_ssl.so
StartServers 2
MinSpareServers 1
MaxSpareServers 4
SSLEngine on
SSLCertificateFile "{root}/server.crt"
SSLCertificateKeyFile "{root}/server.key"
SetEnv GIT_PROJECT_ROOT "{repos}"
SetEnv GIT_HTTP_EXPORT_ALL 1
SetEnv GIT_CONFIG_COUNT 1
SetEnv GIT_CONFIG_KEY_0 safe.directory
SetEnv GIT_CONFIG_VALUE_0 *
ScriptAlias /git/ /usr/lib/git-core/git-http-backend/
<Location /git/>
    AuthType Basic
    AuthName "git"
    AuthBasicProvider file
    AuthUserFile "{root}/htpasswd"
    Require valid-user
</Location>
"""

# An access-log line: `200 GET /git/edge.git/info/refs?service=git-upload-pack HTTP/1.1`.
_REQUEST = re.compile(r"^(\d{3}) (\S+) /git/(.+?)/(info/refs\?service=|)(git-upload-pack|git-receive-pack) ")


@dataclass(slots=True)
class GitRequests:
    """What git asked the server, per repository (its path under `repos`, e.g. `edge.git`), from the
    access log; only answered requests (2xx) count, not the 401 that precedes the credentials.

    `fetches`: ref advertisements for upload-pack (the `info/refs?service=git-upload-pack` GET that
    starts every fetch or ls-remote, one per git command); `upload_packs`: upload-pack POSTs (with
    protocol v2 one `ls-refs`, plus one `fetch` when objects are wanted: one or two per fetch);
    `pushes`: receive-pack POSTs (one per push that sends anything: a push with nothing to send
    stops after its GET, which `push_advertisements` counts)."""

    fetches: Counter[str] = field(default_factory=Counter)
    upload_packs: Counter[str] = field(default_factory=Counter)
    pushes: Counter[str] = field(default_factory=Counter)
    push_advertisements: Counter[str] = field(default_factory=Counter)
    refused: int = 0  # non-2xx answers to git requests (401 before the credentials, errors)


class HttpsGitServer(ServedRepositories):
    """One apache2 serving the bare repositories under `repos`; see the module doc."""

    _name, _pid_file = "apache2", "httpd.pid"

    def __init__(self, root: Path) -> None:
        self.root = root
        self.repos = root / "repos"
        self.repos.mkdir(parents=True)
        self.repos.chmod(0o755)
        self.username, self.password = "porch", "pw-" + secrets.token_hex(12)  # unique: grep-able in leaks
        self.port = free_port()
        self._make_certificates()
        self.ca_file = root / "ca.crt"
        self.ca_pem = self.ca_file.read_bytes()
        self.set_password(self.password)
        user = f"User {_USER}\nGroup {_GROUP}" if os.geteuid() == 0 else ""
        (root / "httpd.conf").write_text(_CONFIG.format(root=root, port=self.port, repos=self.repos,
                                                        modules=MODULES, user=user))
        # The test's own git, in repositories `nobody` owns: safe.directory is honoured only from
        # global or system config by every git process (a `-c` does not reach upload-pack).
        self.gitconfig = root / "test.gitconfig"
        self.gitconfig.write_text("[safe]\n\tdirectory = *\n[user]\n\tname = t\n\temail = t@example.com\n")

    def url(self, repo: str) -> str:
        return f"https://127.0.0.1:{self.port}/git/{repo}"

    def set_password(self, password: str) -> None:
        """Replace the one user's password; apache reads the file on every request."""
        digest = base64.b64encode(hashlib.sha1(password.encode()).digest()).decode()
        path = self.root / "htpasswd"
        path.write_text(f"{self.username}:{{SHA}}{digest}\n")
        path.chmod(0o644)
        self.password = password

    def start(self) -> None:
        self._launch()

    def _command(self) -> list[str]:
        return [APACHE, "-f", str(self.root / "httpd.conf"), "-DFOREGROUND"]

    def _diagnostics(self) -> str:
        return self.error_log()

    def error_log(self) -> str:
        path = self.root / "error.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def log_mark(self) -> int:
        """A position in the access log: `requests(since=mark)` counts what came after it."""
        self._settle_log()
        path = self.root / "access.log"
        return path.stat().st_size if path.exists() else 0

    def requests(self, since: int = 0) -> GitRequests:
        """The git requests in the access log after `since` (a `log_mark()`), per repository. apache
        writes a request's line once it has answered, so this first waits for the log to be still."""
        self._settle_log()
        path, counted = self.root / "access.log", GitRequests()
        if not path.exists():
            return counted
        with path.open("rb") as log:
            log.seek(since)
            lines = log.read().decode(errors="replace").splitlines()
        for line in lines:
            if not (match := _REQUEST.match(line)):
                continue
            status, method, repo, refs, service = match.groups()
            if not status.startswith("2"):
                counted.refused += 1
            elif refs and method == "GET":
                (counted.fetches if service == "git-upload-pack" else counted.push_advertisements)[repo] += 1
            elif not refs and method == "POST":
                (counted.upload_packs if service == "git-upload-pack" else counted.pushes)[repo] += 1
        return counted

    def _settle_log(self, quiet: float = 0.1, limit: float = 2.0) -> None:
        path, deadline = self.root / "access.log", time.monotonic() + limit
        size = path.stat().st_size if path.exists() else -1
        while time.monotonic() < deadline:
            time.sleep(quiet)
            now = path.stat().st_size if path.exists() else -1
            if now == size:
                return
            size = now

    def hand_over(self, path: Path) -> None:
        """Give the server's user a repository the test wrote into directly."""
        if os.geteuid() == 0:
            subprocess.run(["chown", "-R", f"{_USER}:{_GROUP}", str(path)], check=True)

    def _make_certificates(self) -> None:
        r = self.root

        def openssl(*args: str) -> None:
            subprocess.run(["openssl", *args], check=True, capture_output=True)

        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(r / "ca.key"), "-out",
                str(r / "ca.crt"), "-days", "2", "-subj", "/CN=porchkit test CA")
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(r / "server.key"), "-out",
                str(r / "server.csr"), "-subj", "/CN=127.0.0.1")
        (r / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
        openssl("x509", "-req", "-in", str(r / "server.csr"), "-CA", str(r / "ca.crt"), "-CAkey", str(r / "ca.key"),
                "-CAcreateserial", "-out", str(r / "server.crt"), "-days", "2", "-extfile", str(r / "san.ext"))


@contextmanager
def https_git_server() -> Iterator[HttpsGitServer]:
    """A running HttpsGitServer in a temp dir of its own, removed afterwards; skips the test without
    the binaries. (Not under pytest's tmp_path: as root, apache's workers run as `nobody`, who
    cannot enter pytest's 0700 base directory.)"""
    require_git_servers()
    root = Path(tempfile.mkdtemp(prefix="porchkit-https-git-"))
    root.chmod(0o755)
    server = HttpsGitServer(root)
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)

