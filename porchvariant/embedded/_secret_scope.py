"""Which git servers a credential Secret may be sent to, in a shared cluster.

A Repository names its Secret (`spec.git.secretRef`) and its URL. Whoever may create Repositories
in a namespace could otherwise point one at a server of their own, name the team's Secret, and
have porchkit send them the team's token or key, without ever being allowed to read that Secret.
So where Repositories come from a shared cluster (`porchkit manager --porch embedded`), a Secret is
used only for the servers its own author named on it, in the annotation SERVERS_ANNOTATION: URLs
or URL prefixes, separated by commas or white space. Someone who can write that annotation can
read the Secret anyway.

A Repository URL is within an entry when scheme (git+ssh is ssh), host and port (each scheme's
default when absent) are the same, the entry names no user or the same user, and the entry's path
is the URL's path or a folder above it (`https://git.example.com/platform` covers
`https://git.example.com/platform/edge.git`, not `.../platform-old/x.git`); a URL whose path has
`.` or `..` segments is never within one. scp-like URLs (`git@host:path`) are read as
`ssh://git@host/path`.

Local runs (`porchkit variants reconcile`, `porchkit manager --embedded`) load every Secret from
the user's own manifests and do not ask for this.
"""

from __future__ import annotations

import re
import urllib.parse
from typing import Any

SERVERS_ANNOTATION = "porchkit.dev/git-servers"
_DEFAULT_PORTS = {"https": 443, "http": 80, "ssh": 22}
_SCP_LIKE = re.compile(r"^(?:(?P<user>[^@/:]+)@)?(?P<host>[^@/:]+):(?P<path>(?!//).*)$")


def secret_problem(secret: dict[str, Any], url: str) -> str | None:
    """Why `secret` may not be sent to `url`, or None when its annotation allows it."""
    meta = secret.get("metadata") or {}
    where = f"Secret {meta.get('namespace')}/{meta.get('name')}"
    listed = str((meta.get("annotations") or {}).get(SERVERS_ANNOTATION) or "")
    entries = [entry for entry in re.split(r"[\s,]+", listed) if entry]
    if not entries:
        return (f"{where} does not name the git servers it may be sent to: add the annotation "
                f"{SERVERS_ANNOTATION} with {_origin(url)!r} (or a URL prefix covering {url!r})")
    target = _parts(url)
    if target is not None and any(_covers(_parts(entry), target) for entry in entries):
        return None
    return f"{where} may not be sent to {url!r}: {SERVERS_ANNOTATION} names {', '.join(entries)}"


def _parts(url: str) -> tuple[str, str, int, str, tuple[str, ...]] | None:
    """(scheme, host, port, user, path segments) of a URL, or None when it cannot be read."""
    if "://" not in url and (match := _SCP_LIKE.match(url)):
        url = f"ssh://{match['user'] + '@' if match['user'] else ''}{match['host']}/{match['path']}"
    try:
        parsed = urllib.parse.urlsplit(url)
        port = parsed.port
    except ValueError:
        return None
    scheme = "ssh" if parsed.scheme == "git+ssh" else parsed.scheme
    if not parsed.hostname or scheme not in _DEFAULT_PORTS:
        return None
    segments = tuple(urllib.parse.unquote(part) for part in parsed.path.split("/") if part)
    if any(part in (".", "..") for part in segments):
        return None  # clients resolve these: the path would not be the one compared
    return scheme, parsed.hostname.lower(), port or _DEFAULT_PORTS[scheme], parsed.username or "", segments


def _covers(entry: tuple[str, str, int, str, tuple[str, ...]] | None,
            target: tuple[str, str, int, str, tuple[str, ...]]) -> bool:
    if entry is None:
        return False
    scheme, host, port, user, path = entry
    return ((scheme, host, port) == target[:3] and user in ("", target[3])
            and target[4][:len(path)] == path)


def _origin(url: str) -> str:
    parts = _parts(url)
    if parts is None:
        return url
    scheme, host, port, user, _ = parts
    shown_port = "" if port == _DEFAULT_PORTS[scheme] else f":{port}"
    return f"{scheme}://{user + '@' if user else ''}{host}{shown_port}/"
