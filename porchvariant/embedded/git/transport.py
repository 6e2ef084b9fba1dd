"""The wire to a remote git server: which URLs are allowed, how credentials reach git, and how one
git command that talks to the server is run.

Owns: `url_problem` (https://, and http:// only to a loopback address; ssh URLs as git/ssh.py
allows them; no credentials in URLs), `BasicAuth` (Porch's `kubernetes.io/basic-auth` Secret:
username, password or token) and, for ssh, `SshAuth` (from git/ssh.py: a private key and known
hosts), and `Transport.run`, which runs one `git fetch`/`git push` against the server with:

* credentials handed over through an anonymous in-memory file (memfd, mode 0600) that only that
  git process tree inherits. Over https a one-line credential helper (`cat /proc/self/fd/N`)
  given on the command line reads it; over ssh, GIT_SSH_COMMAND names the key and the known hosts
  as `/proc/$PPID/fd/N` (why not `self`: git/ssh.py). The password or key is never in an argument
  (`ps`), an environment variable, the URL, a config file or any file on disk; every other
  credential helper, ssh config, agent and known_hosts file is switched off, so none can store
  it. It is asked for afresh on every command, so a rotated Secret is used at once.
* over https, the TLS CA bundle (Porch's `<namespace>-ca-bundle` Secret, key `ca.crt`) the same
  way; over ssh, strict host key checking against the given known hosts only: an unknown or
  changed host key is refused (HostKeyUnknown), and no known hosts at all before connecting;
* an environment built from an allow-list (PATH, HOME, TMPDIR, proxies): nothing inherited can
  turn off TLS checks (GIT_SSL_NO_VERIFY), point git elsewhere or prompt (GIT_ASKPASS); system
  and global git config are not read; no terminal (a new session, stdin from /dev/null);
* bounded time: over https a transfer slower than LOW_SPEED_LIMIT bytes/s for `low_speed_time`
  seconds is dropped by git, over ssh a server that does not answer for about as long (connecting
  or later); the whole command is killed (with its process group) after `timeout`;
* a one-line error (`RemoteError`) that names the URL and says what failed (authentication, TLS,
  host key, unreachable, the server's refusal), with any credential scrubbed from it.

One Transport serves both wires, with the same `run`: the URL chooses (`is_ssh_url`), and the
credentials must fit it (BasicAuth or none for https, SshAuth for ssh). What is particular to ssh
(its URL grammar, its command line, what its errors mean) lives in git/ssh.py.
Does not: know refs, mirrors or Porch's layout (git/mirror.py).
"""

from __future__ import annotations

import ipaddress
import os
import signal
import subprocess
import sys
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field

from porchvariant.embedded.git import ssh
from porchvariant.embedded.git.errors import RemoteError
from porchvariant.embedded.git.ssh import SshAuth, is_ssh_url

LOW_SPEED_LIMIT = 1000  # bytes/s; slower than this for low_speed_time seconds and git gives up
_KEPT_ENV = ("PATH", "HOME", "TMPDIR", "http_proxy", "https_proxy", "HTTPS_PROXY", "no_proxy", "NO_PROXY",
             "all_proxy", "ALL_PROXY", "SSL_CERT_FILE", "SSL_CERT_DIR")
_LOOPBACK_NAMES = ("localhost",)
_COMMON_CONFIG = ("-c", "credential.helper=", "-c", "core.askPass=", "-c", "gc.auto=0", "-c", "maintenance.auto=false",
                  "-c", "core.hooksPath=/dev/null", "-c", "protocol.version=2")


@dataclass(frozen=True, slots=True)
class BasicAuth:
    """A username and a password (or token); the password never shows in repr()."""

    username: str
    password: str = field(repr=False)


@dataclass(frozen=True, slots=True)
class TransportOptions:
    """How long a remote git command may take: `timeout` in all, `low_speed_time` below LOW_SPEED_LIMIT
    (over ssh: connecting, or with a server that does not answer)."""

    timeout: float = 120.0
    low_speed_time: int = 30


def is_remote(url: str) -> bool:
    """Whether `url` names a git server (any scheme but file://, or scp-like user@host:path)."""
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme and len(parsed.scheme) > 1 and parsed.scheme != "file":  # a drive letter is no scheme
        return True
    return "://" not in url and "@" in url.split("/", 1)[0] and ":" in url.split("/", 1)[0]


def url_problem(url: str) -> str | None:
    """Why the embedded Porch will not talk to `url`, or None when it will."""
    if is_ssh_url(url):
        return ssh.ssh_url_problem(url)
    try:
        parsed = urllib.parse.urlsplit(url)
        host = parsed.hostname or ""
        parsed.port  # noqa: B018 (raises ValueError for a bad port)
    except ValueError as err:
        return f"{url!r} is not a valid URL ({err})"
    if parsed.scheme not in ("https", "http"):
        return f"the {parsed.scheme or 'scp-like'} protocol is not supported: use https:// or ssh://"
    if parsed.username is not None or parsed.password is not None:
        return "the URL must not carry credentials: put them in a Secret named by spec.git.secretRef"
    if not host:
        return f"{url!r} names no host"
    if parsed.query or parsed.fragment:
        return f"{url!r}: a git URL takes no query or fragment"
    if parsed.scheme == "http" and not _loopback(host):
        return "plain http:// is allowed only to a loopback address: use https://"
    return None


def _loopback(host: str) -> bool:
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


Credentials = BasicAuth | SshAuth
_Wire = tuple[list[str], dict[str, str], tuple[int, ...]]  # git's -c settings, environment, inherited fds


class Transport:
    """Runs git commands that talk to one https (or loopback http) or ssh URL; see the module doc."""

    def __init__(self, url: str, *, credentials: Callable[[], Credentials | None] = lambda: None,
                 ca_bundle: Callable[[], bytes | None] = lambda: None,
                 options: TransportOptions | None = None) -> None:
        """`credentials` and `ca_bundle` are called before every command (a Secret may change);
        what they raise (a RemoteError for a missing Secret) is the command's error. The CA bundle
        is for https only."""
        if problem := url_problem(url):
            raise RemoteError(f"{url}: {problem}", reason="InvalidURL")
        self.url, self.ssh = url, is_ssh_url(url)
        self._credentials, self._ca_bundle = credentials, ca_bundle
        self.options = options or TransportOptions()

    def run(self, git_dir: str, args: Sequence[str]) -> bytes:
        """`git --git-dir GIT_DIR <transport config> ARGS`, where ARGS name the URL; its stdout.

        RemoteError (one line, credentials scrubbed) for a non-zero exit or a timeout; the error
        carries git's stdout (`.stdout`: a push's porcelain report)."""
        auth = self._credentials()
        with self._invocation(auth) as (config, env, fds):
            command = ["git", "--git-dir", git_dir, *config, *args]
            proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, env=env, pass_fds=fds,
                                    start_new_session=True)
            try:
                out, err = proc.communicate(timeout=self.options.timeout)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                raise RemoteError(f"{self.url}: git {args[0]} took longer than {self.options.timeout:g}s "
                                  "and was stopped", reason="Timeout") from None
        if proc.returncode != 0:
            text = _scrub(err.decode(errors="replace"), auth)
            summary, reason = (ssh.summary(text), ssh.reason(text) or _reason(text)) if self.ssh \
                else (_summary(text), _reason(text))
            raise RemoteError(f"{self.url}: {summary}", reason=reason,
                              stdout=_scrub(out.decode(errors="replace"), auth))
        return out

    @contextmanager
    def _invocation(self, auth: Credentials | None) -> Iterator[_Wire]:
        """git's `-c` settings, environment and inherited descriptors for one command."""
        with ExitStack() as stack:
            config, env, fds = self._ssh_wire(stack, auth) if self.ssh else self._https_wire(stack, auth)
            yield [*_COMMON_CONFIG, *config], {**self._environment(), **env}, fds

    def _https_wire(self, stack: ExitStack, auth: Credentials | None) -> _Wire:
        if isinstance(auth, SshAuth):
            raise RemoteError(f"{self.url}: an ssh key was given for an https URL", reason="SecretError")
        config = ["-c", "http.followRedirects=false", "-c", "http.sslVerify=true",
                  "-c", f"http.lowSpeedLimit={LOW_SPEED_LIMIT}",
                  "-c", f"http.lowSpeedTime={self.options.low_speed_time}"]
        fds: list[int] = []
        if auth is not None:
            fd = stack.enter_context(_memory_file(f"username={auth.username}\npassword={auth.password}\n".encode()))
            fds.append(fd)
            # Asked with "get", "store" or "erase" (and the request on stdin): only "get" answers.
            helper = f'!f() {{ cat >/dev/null; test "$1" = get && cat /proc/self/fd/{fd}; }}; f'
            config += ["-c", f"credential.helper={helper}", "-c", "credential.useHttpPath=false"]
        ca = self._ca_bundle()
        if ca:
            fd = stack.enter_context(_memory_file(ca))
            fds.append(fd)
            config += ["-c", f"http.sslCAInfo=/proc/self/fd/{fd}"]
        return config, {}, tuple(fds)

    def _ssh_wire(self, stack: ExitStack, auth: Credentials | None) -> _Wire:
        """Refused before connecting: no key, or no known hosts (an unknown host is never trusted)."""
        if not isinstance(auth, SshAuth):
            raise RemoteError(f"{self.url}: an ssh repository needs a private key and known hosts",
                              reason="SecretError")
        if problem := ssh.private_key_problem(auth.private_key):
            raise RemoteError(f"{self.url}: {problem}", reason="SecretError")
        if problem := ssh.known_hosts_problem(auth.known_hosts):
            raise RemoteError(f"{self.url}: {problem}", reason="HostKeyUnknown")
        key = stack.enter_context(_memory_file(ssh.as_file(auth.private_key)))
        hosts = stack.enter_context(_memory_file(ssh.as_file(auth.known_hosts)))
        command = ssh.ssh_command(key, hosts, connect_timeout=self.options.low_speed_time)
        return [], {"GIT_SSH_COMMAND": command, "GIT_SSH_VARIANT": "ssh"}, (key, hosts)

    @staticmethod
    def _environment() -> dict[str, str]:
        env = {key: os.environ[key] for key in _KEPT_ENV if key in os.environ}
        env.update(GIT_TERMINAL_PROMPT="0", GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, LC_ALL="C",
                   GIT_OPTIONAL_LOCKS="0")
        return env


@contextmanager
def _memory_file(data: bytes) -> Iterator[int]:
    """A descriptor of an anonymous file holding `data`: in memory, never named on disk, gone at close.
    Children may reopen it as /proc/self/fd/N, each from the start."""
    if not hasattr(os, "memfd_create") or not sys.platform.startswith("linux"):
        raise RemoteError("credentials and CA bundles are handed to git through memfd, which needs Linux",
                          reason="Unsupported")
    fd = os.memfd_create("porchkit-git", 0)  # not inheritable until pass_fds makes it so in the child
    try:
        os.fchmod(fd, 0o600)  # ssh refuses a key file that others could read
        os.write(fd, data)
        yield fd
    finally:
        os.close(fd)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()


def _scrub(text: str, auth: Credentials | None) -> str:
    if isinstance(auth, BasicAuth) and auth.password:
        text = text.replace(auth.password, "***")
    if isinstance(auth, SshAuth):
        for line in auth.private_key.decode(errors="replace").splitlines():
            if len(line.strip()) >= 16 and not line.startswith("-----"):
                text = text.replace(line.strip(), "***")
    return text


def _summary(stderr: str) -> str:
    """git's own one-line reason: the last fatal/error line, else the last line."""
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    for line in reversed(lines):
        if line.startswith(("fatal:", "error:")):
            return line.split(":", 1)[1].strip()[:300]
    return lines[-1][:300] if lines else "git failed without a message"


def _reason(stderr: str) -> str:
    """A condition reason for git's stderr (what Porch would show as the Repository's Ready reason)."""
    text = stderr.lower()
    if "authentication failed" in text or "could not read username" in text or "could not read password" in text:
        return "AuthenticationFailed"
    if "ssl" in text or "certificate" in text or "tls" in text:
        return "TLSError"
    if any(s in text for s in ("could not resolve", "failed to connect", "connection refused", "timed out",
                               "operation too slow", "couldn't connect", "empty reply", "connection reset",
                               "remote end hung up", "rpc failed", "recv failure", "send failure")):
        return "Unreachable"
    if "repository not found" in text or "not found" in text or "404" in text:
        return "NotFound"
    return "Error"
