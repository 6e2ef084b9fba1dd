"""`HookPolicy`: what the operator of a process lets hooks do, decided once, at start-up.

A hook spec is written by whoever may create a DecoratorController or a MapController; the code
it runs and the credentials it uses belong to the process that runs it (a manager's service
account, its files, its network). So the spec only asks, and the policy answers:

* which Python modules a python hook may name (`python_prefixes`: a module is allowed when it is
  one of them or inside one, compared by whole dotted components; None means any module);
* which namespaces the Secrets and ConfigMaps a webhook names for TLS and credentials may be read
  from (`secret_namespaces`; None means any);
* whether credentials may go over plain http to a loopback address (`loopback_plain_http`; never
  to anything else).

`porchkit manager` builds one from its flags (--python-hooks, --secret-namespaces), closed by
default; local runs (`... reconcile -f`) use `HookPolicy.local()`, as they run the user's own files
with the user's own rights. `HookPolicy()` allows nothing. The checks that use it live where the
thing is done (python.py, tls.py), before anything is imported or read; the errors they raise are
`HookRefused`. docs/security.md ("Hooks: code and credentials") is the threat model.
"""

from __future__ import annotations

import ipaddress
import keyword
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class HookPolicy:
    """What hooks may do in one process; see the module docstring."""

    python_prefixes: tuple[str, ...] | None = ()  # None: any module
    secret_namespaces: frozenset[str] | None = frozenset()  # None: any namespace
    loopback_plain_http: bool = False  # credentials over http:// to 127.0.0.0/8, ::1 or localhost

    @classmethod
    def local(cls) -> HookPolicy:
        """A local run's policy: any module, any namespace, credentials over http to loopback."""
        return cls(python_prefixes=None, secret_namespaces=None, loopback_plain_http=True)

    @classmethod
    def for_manager(cls, python_prefixes: Iterable[str], secret_namespaces: Iterable[str]) -> HookPolicy:
        """A manager's policy: exactly the prefixes and namespaces named, no plain-http credentials.
        Raises ValueError naming a prefix that is not an absolute dotted module name."""
        prefixes = tuple(dict.fromkeys(python_prefixes))
        for prefix in prefixes:
            if not is_module_name(prefix):
                raise ValueError(f"{prefix!r} is not a module name (dotted identifiers, like mycompany.hooks)")
        return cls(python_prefixes=prefixes, secret_namespaces=frozenset(secret_namespaces))

    def allows_module(self, module: str) -> bool:
        """Whether `module` is one of the allowed prefixes or inside one: "a.b" allows "a.b" and
        "a.b.c", never "a.bc"."""
        if self.python_prefixes is None:
            return True
        return any(module == prefix or module.startswith(prefix + ".") for prefix in self.python_prefixes)

    def allows_namespace(self, namespace: str) -> bool:
        return self.secret_namespaces is None or namespace in self.secret_namespaces

    def allows_plain_http_to(self, host: str) -> bool:
        """Whether credentials may be sent over plain http to `host` (the address connected to)."""
        return self.loopback_plain_http and is_loopback(host)

    def describe_modules(self) -> str:
        """For messages: which modules python hooks may come from."""
        if self.python_prefixes is None:
            return "any module"
        if not self.python_prefixes:
            return "none: python hooks are off in this manager (--python-hooks PREFIX allows modules under PREFIX)"
        return "modules under " + ", ".join(self.python_prefixes) + " (--python-hooks)"

    def describe_namespaces(self) -> str:
        """For messages: which namespaces hook TLS material and credentials may be read from."""
        if self.secret_namespaces is None:
            return "any namespace"
        if not self.secret_namespaces:
            return "no namespace (--secret-namespaces NS allows NS)"
        return "namespace " + ", ".join(sorted(self.secret_namespaces)) + " (--secret-namespaces)"


def is_module_name(name: str) -> bool:
    """An absolute dotted module name whose parts are plain names (see `is_plain_name`)."""
    return all(is_plain_name(part) for part in name.split("."))


def is_plain_name(name: str) -> bool:
    """An ASCII identifier that is neither a keyword nor a dunder (`pkg.__main__` would run a
    package's command line, `pkg.__init__` its code a second time, `__getattr__` is a protocol)."""
    return name.isascii() and name.isidentifier() and not keyword.iskeyword(name) and not name.startswith("__")


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 (also as an IPv4-mapped address) and the name localhost."""
    if host.lower() == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback
