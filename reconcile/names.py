"""Object names as the API server checks them, with the server's own wording.

`name_problem(name, rule)` says why a name is not valid under one of the rules kinds follow: a DNS
subdomain (most kinds, and every kind a CustomResourceDefinition defines), an RFC 1123 label
(Namespaces), an RFC 1035 label (Services) or a path segment (RBAC objects). The embedded API
server applies them per kind (reconcile.embedded); others use them to refuse a name before an
object reaches a server, or to check a name they build.
"""

from __future__ import annotations

import re
from typing import Literal

__all__ = ["NameRule", "name_problem"]

NameRule = Literal["subdomain", "label", "dns1035", "segment"]

_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
_DNS1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?\Z")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")

_RULES: dict[str, tuple[re.Pattern[str], int, str]] = {
    "subdomain": (_SUBDOMAIN, 253, "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                  "characters, '-' or '.', and must start and end with an alphanumeric character (e.g. "
                  "'example.com', regex used for validation is "
                  "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"),
    "label": (_LABEL, 63, "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
              "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used "
              "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"),
    "dns1035": (_DNS1035, 63, "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start "
                "with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
                "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"),
}


def name_problem(name: str, rule: NameRule = "subdomain") -> str | None:
    """Why `name` is not a valid object name under `rule`, or None. The length is checked first,
    so a name too long is never matched against a pattern."""
    if rule == "segment":
        if name in (".", ".."):
            return f"may not be '{name}'"
        for char in "/%":
            if char in name:
                return f"may not contain '{char}'"
        return None
    pattern, limit, text = _RULES[rule]
    if len(name) > limit:
        return f"must be no more than {limit} characters"
    return None if pattern.match(name) else text
