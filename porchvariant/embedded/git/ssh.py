"""The ssh side of the wire to a git server: which ssh URLs are allowed, and the ssh that git runs.

Owns:
* the URL grammar git uses for ssh: `ssh://[user@]host[:port]/path` (also `git+ssh://` and
  `ssh+git://`) and scp-like `user@host:path`, where the host may be `[bracketed]` and there is no
  port (git reads `user@host:2222/r.git` as the path `2222/r.git` on port 22). Refused: a password
  in the URL, a user or host starting with `-` (ssh would take it for an option), no host, no path;
* `SshAuth`: the private key (Kubernetes' `kubernetes.io/ssh-auth` Secret, key `ssh-privatekey`) and
  the known hosts to check the server's key against; an empty known hosts is refused before
  anything runs (`known_hosts_problem`), never replaced by "accept what the server says";
* `ssh_command`, the GIT_SSH_COMMAND: no ssh config, no agent, no prompt, only the given key,
  only the given known hosts, strict host key checking that never writes a known_hosts file, and
  time limits (connect, and a server that stops answering);
* what ssh's stderr means: `reason` (HostKeyUnknown, AuthenticationFailed, Unreachable,
  GitNotFound) and `summary`, its one line.

Why /proc/$PPID/fd/N: ssh closes every descriptor above 2 as it starts, so the key and known hosts
handed down as descriptors are gone by the time ssh reads its files; the path names the copy the
git process that started ssh still holds (git runs GIT_SSH_COMMAND through `sh -c`, which
expands $PPID to that git's process id). The key's text is in no argument and no variable.

Does not: run git or make the descriptors (git/transport.py), read Secrets (_porch_remotes.py).
"""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass, field

SCHEMES = ("ssh", "git+ssh", "ssh+git")
_SCP_LIKE = re.compile(r"^(?:(?P<user>[^@/]+)@)?(?P<host>\[[^\]/]+\]|[^:/\[\]]+):(?P<path>.*)$")
# Phrases of ssh's failures (and git's, over ssh) → the condition reason, looked for in this order.
_REASONS = (("HostKeyUnknown", ("host key verification failed", "host key is known for",
                                "has changed and you have requested strict checking")),
            ("AuthenticationFailed", ("permission denied (", "load key", "too many authentication failures")),
            ("Unreachable", ("could not resolve hostname", "connection refused", "connection timed out",
                             "no route to host", "connection closed by", "connection reset",
                             "timeout, server", "kex_exchange_identification", "broken pipe")),
            ("NotFound", ("does not appear to be a git repository",)))
# git's own words after any failure of the ssh connection; they say nothing about which one.
_BOILERPLATE = ("could not read from remote repository", "please make sure you have the correct access rights",
                "and the repository exists")


@dataclass(frozen=True, slots=True)
class SshAuth:
    """A private key (OpenSSH or PEM, no passphrase) and known hosts (ssh's known_hosts format);
    the key never shows in repr()."""

    private_key: bytes = field(repr=False)
    known_hosts: bytes


@dataclass(frozen=True, slots=True)
class SshUrl:
    """What an ssh URL names; `port` None for ssh's default (always so in the scp-like form)."""

    user: str
    host: str
    port: int | None
    path: str


def is_ssh_url(url: str) -> bool:
    """Whether `url` is an ssh URL: one of SCHEMES, or scp-like `user@host:path`."""
    if "://" in url:
        return url.split("://", 1)[0].lower() in SCHEMES
    head = url.split("/", 1)[0]
    return "@" in head and ":" in head


def parse_ssh_url(url: str) -> SshUrl:
    """The parts of an ssh URL (see the module doc); ValueError saying what is wrong with it."""
    if "://" in url:
        found = _parse_scheme_url(url)
    elif match := _SCP_LIKE.match(url):
        found = SshUrl(match["user"] or "", match["host"].strip("[]"), None, match["path"])
    else:
        raise ValueError(f"{url!r} is neither ssh://host/path nor user@host:path")
    if ":" in found.user:
        raise ValueError("the URL must not carry credentials: put the key in a Secret named by spec.git.secretRef")
    if not found.host:
        raise ValueError(f"{url!r} names no host")
    if found.host.startswith("-") or found.user.startswith("-"):
        raise ValueError(f"{url!r}: a host or user starting with '-' is refused (ssh would read it as an option)")
    if found.path.strip("/") == "":
        raise ValueError(f"{url!r} names no repository path")
    return found


def _parse_scheme_url(url: str) -> SshUrl:
    try:
        parsed = urllib.parse.urlsplit(url)
        port = parsed.port
    except ValueError as err:
        raise ValueError(f"{url!r} is not a valid URL ({err})") from None
    if parsed.password is not None:
        raise ValueError("the URL must not carry credentials: put the key in a Secret named by spec.git.secretRef")
    if parsed.query or parsed.fragment:
        raise ValueError(f"{url!r}: a git URL takes no query or fragment")
    return SshUrl(urllib.parse.unquote(parsed.username or ""), parsed.hostname or "", port, parsed.path)


def ssh_url_problem(url: str) -> str | None:
    """Why the embedded Porch will not talk to the ssh URL `url`, or None when it will."""
    try:
        parse_ssh_url(url)
    except ValueError as err:
        return str(err)
    return None


def known_hosts_problem(known_hosts: bytes) -> str | None:
    """Why `known_hosts` cannot check any server's key (no entry at all), or None."""
    entries = [line for line in known_hosts.splitlines() if line.strip() and not line.strip().startswith(b"#")]
    return None if entries else "no known host keys were given, and an unknown host key is never accepted"


def private_key_problem(private_key: bytes) -> str | None:
    """Why `private_key` is not a private key ssh can load, as far as can be told without loading it."""
    return None if b"PRIVATE KEY-----" in private_key else "the private key is not in OpenSSH or PEM format"


def as_file(text: bytes) -> bytes:
    """`text` as ssh reads files: LF line ends and a final newline (ssh refuses a key without one)."""
    text = text.replace(b"\r\n", b"\n")
    return text if text.endswith(b"\n") else text + b"\n"


def ssh_command(key_fd: int, known_hosts_fd: int, *, connect_timeout: int) -> str:
    """GIT_SSH_COMMAND reading the key and known hosts from descriptors of the git that runs it; a
    server silent for about `connect_timeout` seconds, connecting or later, is given up."""
    alive = max(1, connect_timeout // 3)
    options = {"BatchMode": "yes", "IdentitiesOnly": "yes", "IdentityAgent": "none",
               "IdentityFile": f"/proc/$PPID/fd/{key_fd}", "UserKnownHostsFile": f"/proc/$PPID/fd/{known_hosts_fd}",
               "GlobalKnownHostsFile": "/dev/null", "StrictHostKeyChecking": "yes", "UpdateHostKeys": "no",
               "HashKnownHosts": "no", "CheckHostIP": "no", "PreferredAuthentications": "publickey",
               "ConnectTimeout": str(connect_timeout), "ServerAliveInterval": str(alive), "ServerAliveCountMax": "3",
               "ControlMaster": "no", "ControlPath": "none", "LogLevel": "ERROR"}
    return "ssh -F /dev/null " + " ".join(f"-o {key}={value}" for key, value in options.items())


def reason(stderr: str) -> str | None:
    """The condition reason for a failure ssh reported in `stderr`, or None if ssh reported none."""
    text = stderr.lower()
    for found, phrases in _REASONS:
        if any(phrase in text for phrase in phrases):
            return found
    return None


def summary(stderr: str) -> str:
    """One line for git-over-ssh's stderr: git's own fatal line when it has a specific one (a
    missing repository), else ssh's lines that say what failed (no banner, no advice), joined."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    said = [line for line in lines if not line.lower().removeprefix("fatal:").strip().startswith(_BOILERPLATE)]
    for line in reversed(said):
        if line.startswith(("fatal:", "error:")):
            return line.split(":", 1)[1].strip()[:300]
    verdicts = [line for line in said if not line.startswith("@") and reason(line) is not None]
    return " ".join(verdicts or said[-1:] or ["git failed without a message"])[:300]
