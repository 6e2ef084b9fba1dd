"""Repositories on git servers, as the embedded Porch serves them: credentials, mirror, schedule, Ready.

Owns, for a Repository whose `spec.git.repo` is an https:// URL (http:// to loopback only) or an
ssh one (`ssh://[user@]host[:port]/path`, `git+ssh://`, scp-like `user@host:path`):
* its credentials, as Porch takes them: `spec.git.secretRef.name` names a Secret in the
  Repository's namespace, read again before every fetch and push, so a rotated Secret is used
  at once. For https, of type `kubernetes.io/basic-auth` (BASIC_AUTH: `username`, `password`; a
  token goes in `password`), and Porch's CA bundle, the Secret `<namespace>-ca-bundle`, key
  `ca.crt`, when there is one. For ssh, of type `kubernetes.io/ssh-auth` (SSH_AUTH: the key in
  `ssh-privatekey`, SSH_PRIVATE_KEY), and the known host keys (ssh's known_hosts format) from
  that Secret's key `known_hosts` (SECRET_KNOWN_HOSTS) if it has one, else from the ConfigMap
  `ssh-known-hosts` (KNOWN_HOSTS_CONFIGMAP) in the Repository's namespace, key `ssh_known_hosts`
  (KNOWN_HOSTS_KEY), also read afresh every time. No known hosts at all, or a server whose key
  they do not hold, is an error: an unknown host key is never accepted. A Secret of the other
  type than the URL needs (basic-auth for ssh, ssh-auth for https) is an error naming both. In a
  shared cluster (RemoteSettings.secrets_name_servers) a Secret is used only for the servers its
  annotation names (_secret_scope.py);
* opening it (`open_remote`: a mirror in the cache directory, fetched) and when to fetch it again
  (`Schedule`: every `fetch_period`, or the Repository's `spec.sync.schedule` where it is a plain
  interval: `@every 30s`, `*/5 * * * *`, `@hourly`...), and the back-off after a failure (1 s,
  doubling, at most BACKOFF_CAP), during which the failure is answered without going to the server;
* the Repository's `Ready` condition, as Porch's repository controller writes it (reason `Ready` or
  `Error`, the message one line naming what failed), written only when it changes, and only while
  RemoteSettings.writes_status allows.

Does not: decide which Repositories are served (_porch_repos.py), talk to git (git/mirror.py,
git/transport.py) or know PackageRevisions.
"""

from __future__ import annotations

import base64
import binascii
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from porchvariant.embedded._secret_scope import secret_problem
from porchvariant.embedded.git.mirror import Mirror, default_cache_dir
from porchvariant.embedded.git.repository import GitPackageRepository, GitRepositoryError, RemoteError
from porchvariant.embedded.git.ssh import SshAuth, is_ssh_url
from porchvariant.embedded.git.transport import BasicAuth, Credentials, Transport, TransportOptions
from reconcile import conditions
from reconcile.cluster import Cluster, Kind, Obj, ObjectKey
from reconcile.errors import ApiError

SECRET = Kind("v1", "Secret")
CONFIG_MAP = Kind("v1", "ConfigMap")
BASIC_AUTH = "kubernetes.io/basic-auth"
SSH_AUTH = "kubernetes.io/ssh-auth"
SSH_PRIVATE_KEY = "ssh-privatekey"  # Kubernetes' key for an ssh-auth Secret
SECRET_KNOWN_HOSTS = "known_hosts"  # in the same Secret, first choice
KNOWN_HOSTS_CONFIGMAP, KNOWN_HOSTS_KEY = "ssh-known-hosts", "ssh_known_hosts"  # else this ConfigMap's key
_WANTED_KEYS = {BASIC_AUTH: "keys username and password", SSH_AUTH: f"key {SSH_PRIVATE_KEY}"}
CA_BUNDLE_SUFFIX = "-ca-bundle"  # Porch: the Secret <namespace>-ca-bundle, key ca.crt
READY = "Ready"
BACKOFF_FIRST, BACKOFF_CAP = 1.0, 60.0
_EVERY = re.compile(r"^@every\s+(\d+)(s|m|h)$")
_STEP_MINUTES = re.compile(r"^\*/(\d+) \* \* \* \*$")
_UNITS = {"s": 1, "m": 60, "h": 3600}
_DESCRIPTORS = {"* * * * *": 60.0, "@hourly": 3600.0, "@daily": 86400.0, "@midnight": 86400.0}


@dataclass(frozen=True, slots=True)
class RemoteSettings:
    """Where mirrors live, how often they are fetched, the limits of one git command, and the clock.

    In a shared cluster (`porchkit manager --porch embedded`): `secrets_name_servers` sends a
    credential Secret only to the git servers its annotation names (_secret_scope.py), and
    `writes_status` says whether this process may write a Repository's Ready condition now (the
    leader may; a standby keeps its mirrors fresh and writes nothing)."""

    cache: Path = field(default_factory=default_cache_dir)
    fetch_period: float = 60.0
    transport: TransportOptions = field(default_factory=TransportOptions)
    clock: Callable[[], float] = time.monotonic
    secrets_name_servers: bool = False
    writes_status: Callable[[], bool] = lambda: True


def fetch_period(repository: Obj, default: float) -> float:
    """Seconds between fetches: `spec.sync.schedule` where it is a plain interval, else `default`."""
    schedule = str(((repository.get("spec") or {}).get("sync") or {}).get("schedule") or "").strip()
    if match := _EVERY.match(schedule):
        return max(1.0, float(int(match[1]) * _UNITS[match[2]]))
    if match := _STEP_MINUTES.match(schedule):
        return max(60.0, int(match[1]) * 60.0)
    return _DESCRIPTORS.get(schedule, default)


def open_remote(cluster: Cluster, repository: Obj, settings: RemoteSettings) -> GitPackageRepository:
    """A handle on the Repository's mirror, fetched now; RemoteError (one line) if it cannot be used,
    NotFound if its branch is missing and not to be created."""
    namespace = str(repository["metadata"].get("namespace") or "")
    git = (repository.get("spec") or {}).get("git") or {}
    secret, url = str((git.get("secretRef") or {}).get("name") or ""), str(git["repo"])
    credentials = _credentials(cluster, namespace, secret, url)
    if settings.secrets_name_servers and secret:
        credentials = _only_to_named_servers(cluster, namespace, secret, url, credentials)
    transport = Transport(url, options=settings.transport, credentials=credentials,
                          ca_bundle=lambda: read_ca_bundle(cluster, namespace))
    branch = str(git.get("branch") or "main")
    return GitPackageRepository("", branch=branch, directory=str(git.get("directory") or ""),
                                author=str(git.get("author") or ""), email=str(git.get("email") or ""),
                                create_branch=bool(git.get("createBranch")),
                                remote=Mirror(settings.cache, transport, branch))


def _credentials(cluster: Cluster, namespace: str, secret: str, url: str) -> Callable[[], Credentials | None]:
    """What the Transport calls before every command: the Secret read afresh (none for https
    without a secretRef; for ssh, the missing secretRef is the command's error)."""
    if is_ssh_url(url):
        return lambda: read_ssh_auth(cluster, namespace, secret)
    return (lambda: read_basic_auth(cluster, namespace, secret)) if secret else lambda: None


def _only_to_named_servers(cluster: Cluster, namespace: str, secret: str, url: str,
                           credentials: Callable[[], Credentials | None]) -> Callable[[], Credentials | None]:
    """`credentials`, once the Secret's own annotation allows `url` (checked afresh every time)."""

    def allowed() -> Credentials | None:
        try:
            found = cluster.get(SECRET, ObjectKey(namespace, secret))
        except ApiError as err:
            raise RemoteError(f"{_where(namespace, secret)} cannot be read: {err}", reason="SecretError") from None
        if found is not None and (problem := secret_problem(found, url)):
            raise RemoteError(problem, reason="SecretNotAllowed")
        return credentials()

    return allowed


def read_basic_auth(cluster: Cluster, namespace: str, name: str) -> BasicAuth:
    """The username and password of a `kubernetes.io/basic-auth` Secret; RemoteError naming what is wrong."""
    secret = _read_secret(cluster, namespace, name, BASIC_AUTH, "an https")
    values = {key: _decoded(secret, key) for key in ("username", "password")}
    missing = [key for key, value in values.items() if not value]
    if missing:
        raise RemoteError(f"{_where(namespace, name)} has no {' or '.join(missing)}", reason="SecretError")
    return BasicAuth(values["username"], values["password"])


def read_ssh_auth(cluster: Cluster, namespace: str, name: str) -> SshAuth:
    """The private key of a `kubernetes.io/ssh-auth` Secret and the known hosts (see the module doc);
    RemoteError naming what is wrong or missing."""
    if not name:
        raise RemoteError(f"an ssh repository needs spec.git.secretRef naming a Secret of type {SSH_AUTH} "
                          f"(key {SSH_PRIVATE_KEY})", reason="SecretError")
    secret = _read_secret(cluster, namespace, name, SSH_AUTH, "an ssh")
    key = _decoded(secret, SSH_PRIVATE_KEY)
    if not key.strip():
        raise RemoteError(f"{_where(namespace, name)} has no {SSH_PRIVATE_KEY}", reason="SecretError")
    known_hosts = _decoded(secret, SECRET_KNOWN_HOSTS) or read_known_hosts(cluster, namespace)
    if not known_hosts.strip():
        raise RemoteError(f"no known host keys for the ssh server: neither {_where(namespace, name)} has key "
                          f"{SECRET_KNOWN_HOSTS} nor ConfigMap {namespace}/{KNOWN_HOSTS_CONFIGMAP} key "
                          f"{KNOWN_HOSTS_KEY} (an unknown host key is never accepted)", reason="HostKeyUnknown")
    return SshAuth(key.encode(), known_hosts.encode())


def read_known_hosts(cluster: Cluster, namespace: str) -> str:
    """The ConfigMap KNOWN_HOSTS_CONFIGMAP's KNOWN_HOSTS_KEY in `namespace` (data or binaryData), or ""."""
    try:
        found = cluster.get(CONFIG_MAP, ObjectKey(namespace, KNOWN_HOSTS_CONFIGMAP))
    except ApiError as err:
        raise RemoteError(f"ConfigMap {namespace}/{KNOWN_HOSTS_CONFIGMAP} cannot be read: {err}",
                          reason="SecretError") from None
    if found is None:
        return ""
    text = (found.get("data") or {}).get(KNOWN_HOSTS_KEY)
    return str(text) if text is not None else _base64_text((found.get("binaryData") or {}).get(KNOWN_HOSTS_KEY))


def _read_secret(cluster: Cluster, namespace: str, name: str, wanted: str, url_kind: str) -> Obj:
    """The Secret `name`, of type `wanted`; RemoteError (one line, naming it) if it is not there or not so."""
    where = _where(namespace, name)
    try:
        secret = cluster.get(SECRET, ObjectKey(namespace, name))
    except ApiError as err:
        raise RemoteError(f"{where} cannot be read: {err}", reason="SecretError") from None
    if secret is None:
        raise RemoteError(f"{where} not found", reason="SecretError")
    if secret.get("type") != wanted:
        raise RemoteError(f"{where} is of type {secret.get('type') or 'Opaque'}, not {wanted} ({url_kind} "
                          f"repository needs {wanted}, {_WANTED_KEYS[wanted]})", reason="SecretError")
    return secret


def _where(namespace: str, name: str) -> str:
    return f"Secret {namespace}/{name} (spec.git.secretRef)"


def read_ca_bundle(cluster: Cluster, namespace: str) -> bytes | None:
    """Porch's CA bundle for the namespace (Secret <namespace>-ca-bundle, key ca.crt), or None."""
    try:
        secret = cluster.get(SECRET, ObjectKey(namespace, namespace + CA_BUNDLE_SUFFIX))
    except ApiError:
        return None
    value = _decoded(secret, "ca.crt") if secret is not None else ""
    return value.encode() if value else None


def _decoded(secret: Obj, key: str) -> str:
    raw = (secret.get("data") or {}).get(key)
    if raw is None:
        return str((secret.get("stringData") or {}).get(key) or "")
    return _base64_text(raw)


def _base64_text(raw: object) -> str:
    if raw is None:
        return ""
    try:
        return base64.b64decode(str(raw), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return ""


@dataclass(slots=True)
class Schedule:
    """When a remote Repository is next fetched or tried, and the failure being answered meanwhile."""

    next_at: float = 0.0
    delay: float = 0.0  # the back-off after the last failure; 0 after a success
    error: GitRepositoryError | None = None

    def due(self, now: float) -> bool:
        return now >= self.next_at

    def succeeded(self, now: float, period: float) -> None:
        self.next_at, self.delay, self.error = now + period, 0.0, None

    def failed(self, now: float, error: GitRepositoryError) -> None:
        self.delay = min(BACKOFF_CAP, self.delay * 2 if self.delay else BACKOFF_FIRST)
        self.next_at, self.error = now + self.delay, error


def write_ready(cluster: Cluster, repository: Obj, error: BaseException | None) -> None:
    """Set the Repository's Ready condition (True/Ready, or False/Error with the error's one line),
    unless it already says so; a write that races another is left to the next change."""
    status: conditions.Status = "True" if error is None else "False"
    reason, message = ("Ready", "Repository Ready") if error is None else ("Error", " ".join(str(error).split()))
    current = conditions.find(conditions.conditions_of(repository), READY)
    if current is not None and (current.get("status"), current.get("reason"), current.get("message")) == \
            (status, reason, message):
        return
    try:
        cluster.update_status(conditions.with_condition(repository, READY, status, reason, message,
                                                                    now=time.time()))
    except ApiError:
        return
