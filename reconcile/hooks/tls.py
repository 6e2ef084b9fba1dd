"""TLS and credentials of one webhook, resolved once from its spec and the cluster's Secrets.

A webhook may name a CA bundle (`caBundle`: inline PEM, or a key of a Secret or ConfigMap), a
client certificate for mutual TLS (`clientTLS`: a `kubernetes.io/tls`-style Secret), and one of
`authorization` (a token from a Secret, sent as "<type> <token>", Bearer by default) or
`basicAuth` (username and password from a Secret). When the webhook sets none of these four,
the first of the controller's `spec.endpointConfigs[]` whose `host` is the URL's host supplies
them (hosts compare case-insensitively; ":443" for https and ":80" for http equal no port).

`resolve_security` reads every Secret and ConfigMap once, through `Cluster.get`, and returns a
`Security` value: an `ssl.SSLContext` (TLS 1.2 or later; the bundle's CAs replace the system's
when a bundle is given) and the Authorization header. Secrets are not watched: a rotated
certificate or token takes effect when the hook is built again (as in Metacontroller).

What the process's HookPolicy (policy.py) allows is checked before anything is read: credentials
(`authorization`, `basicAuth`, `clientTLS`) with a plain http:// URL are refused, unless the
policy allows plain http to loopback and the address connected to (after `resolve`) is one; and
every Secret or ConfigMap named (the CA bundle's included: reading one still tells whoever wrote
the spec what exists) must be in a namespace the policy allows. A refusal is a HookRefused naming
the field, and the object is never read.

Promises: the private key touches the disk only for the moment `ssl` loads it, in a private
temporary directory removed at once. Does not: open connections (webhook.py does).
"""

from __future__ import annotations

import base64
import binascii
import ssl
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from reconcile.cluster import Cluster, Kind, ObjectKey
from reconcile.errors import ApiError
from reconcile.hooks.base import HookConfigError, HookRefused, json_type, mapping_at, string_at
from reconcile.hooks.policy import HookPolicy

ENDPOINT_CONFIGS_FIELD = "spec.endpointConfigs"
SECURITY_FIELDS = ("caBundle", "clientTLS", "authorization", "basicAuth")
CREDENTIAL_FIELDS = ("authorization", "basicAuth", "clientTLS")
DEFAULT_PORTS = {"http": ":80", "https": ":443"}

SECRET = Kind("v1", "Secret")
CONFIG_MAP = Kind("v1", "ConfigMap")


@dataclass(frozen=True, slots=True)
class Security:
    """How to talk to one webhook: the TLS context for https URLs, and the Authorization header."""

    ssl_context: ssl.SSLContext
    authorization: str | None = None


def resolve_security(webhook: Mapping[str, Any], *, scheme: str, host: str, address: str, field: str,
                     policy: HookPolicy, endpoint_configs: Sequence[Mapping[str, Any]] = (),
                     cluster: Cluster | None = None) -> Security:
    """The TLS context and Authorization header for a webhook at `scheme://host`, reached at
    `address` (the host connected to), from the webhook spec (at `field`) or else from the
    matching endpoint config. Raises HookRefused when `policy` does not allow them, HookConfigError
    naming the field at fault otherwise (a missing Secret, key or ConfigMap included)."""
    settings, where = webhook, field
    if not any(webhook.get(name) is not None for name in SECURITY_FIELDS):
        settings, where = match_endpoint_config(endpoint_configs, scheme=scheme, host=host)
    _refuse_plain_http_credentials(settings, where, scheme=scheme, host=host, address=address, policy=policy)
    reader = _Reader(cluster, policy)
    return Security(_ssl_context(settings, where, reader), _authorization(settings, where, reader))


def _refuse_plain_http_credentials(settings: Mapping[str, Any], where: str, *, scheme: str, host: str,
                                   address: str, policy: HookPolicy) -> None:
    """HookRefused when credentials would go over plain http to an address the policy does not
    allow it for; decided before any Secret is read."""
    named = [name for name in CREDENTIAL_FIELDS if settings.get(name) is not None]
    if scheme == "https" or not named or policy.allows_plain_http_to(address):
        return
    hostname = urlsplit(f"//{host}").hostname or host
    sent_to = "" if address == hostname else f" (sent to {address})"
    allowed = "https (or, in a local run, plain http to a loopback address)" if policy.loopback_plain_http else "https"
    raise HookRefused(f"{where}.{named[0]}", f"refused: credentials are sent only over {allowed}, not to "
                      f"{scheme}://{host}{sent_to}; use an https:// URL")


def match_endpoint_config(endpoint_configs: Sequence[Mapping[str, Any]], *, scheme: str,
                          host: str) -> tuple[Mapping[str, Any], str]:
    """The first endpoint config for `host` and its field path; ({}, "") when none matches."""
    wanted = host_key(host, scheme)
    for index, config in enumerate(endpoint_configs):
        where = f"{ENDPOINT_CONFIGS_FIELD}[{index}]"
        if not isinstance(config, Mapping):
            raise HookConfigError(where, f"expected a map, got {json_type(config)}")
        candidate = string_at(config, "host", where)
        if candidate and host_key(candidate, scheme) == wanted:
            return config, where
    return {}, ""


def host_key(host: str, scheme: str) -> str:
    """A host as endpoint configs compare it: lower case, without the scheme's default port."""
    host = host.lower()
    default = DEFAULT_PORTS.get(scheme.lower())
    return host[: -len(default)] if default and host.endswith(default) else host


# ---------------------------------------------------------------------------------------------
# TLS


def _ssl_context(settings: Mapping[str, Any], where: str, reader: _Reader) -> ssl.SSLContext:
    bundle = mapping_at(settings, "caBundle", where)
    if bundle is None:
        context = ssl.create_default_context()
    else:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies certificates and host names
        pem = _ca_bundle(bundle, f"{where}.caBundle", reader)
        try:
            context.load_verify_locations(cadata=pem)
        except (ssl.SSLError, ValueError) as err:
            raise HookConfigError(f"{where}.caBundle", f"not a PEM certificate bundle ({_reason(err)})") from None
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    client = mapping_at(settings, "clientTLS", where)
    if client is not None:
        _load_client_certificate(context, client, f"{where}.clientTLS", reader)
    return context


def _ca_bundle(bundle: Mapping[str, Any], field: str, reader: _Reader) -> str:
    inline = string_at(bundle, "inline", field)
    if inline:
        return inline
    secret_ref = mapping_at(bundle, "secretRef", field)
    if secret_ref is not None:
        key = string_at(secret_ref, "key", f"{field}.secretRef", default="ca.crt") or "ca.crt"
        return _text(reader.secret_value(secret_ref, key, f"{field}.secretRef"), f"{field}.secretRef")
    config_map_ref = mapping_at(bundle, "configMapRef", field)
    if config_map_ref is not None:
        key = string_at(config_map_ref, "key", f"{field}.configMapRef", default="ca.crt") or "ca.crt"
        return _text(reader.config_map_value(config_map_ref, key, f"{field}.configMapRef"),
                     f"{field}.configMapRef")
    raise HookConfigError(field, "set one of inline, secretRef or configMapRef")


def _load_client_certificate(context: ssl.SSLContext, client: Mapping[str, Any], field: str,
                             reader: _Reader) -> None:
    (cert_key, certificate), (private_key_key, private_key) = _secret_pair(
        client, field, reader, "the client certificate and key", ("certKey", "tls.crt"), ("privateKeyKey", "tls.key"))
    # ssl can only load a certificate chain from files: keep them in a private directory just
    # long enough to load them.
    with tempfile.TemporaryDirectory(prefix="porchkit-hook-") as directory:
        cert_path, key_path = Path(directory, "tls.crt"), Path(directory, "tls.key")
        cert_path.write_bytes(certificate)
        key_path.touch(mode=0o600)
        key_path.write_bytes(private_key)
        try:
            context.load_cert_chain(cert_path, key_path)
        except ssl.SSLError as err:
            raise HookConfigError(field, f"the certificate ({cert_key}) and key ({private_key_key}) do not load "
                                  f"({_reason(err)})") from None


# ---------------------------------------------------------------------------------------------
# Authorization


def _authorization(settings: Mapping[str, Any], where: str, reader: _Reader) -> str | None:
    authorization = mapping_at(settings, "authorization", where)
    basic = mapping_at(settings, "basicAuth", where)
    if authorization is not None and basic is not None:
        raise HookConfigError(where, "set either authorization or basicAuth, not both")
    if authorization is not None:
        return _token_header(authorization, f"{where}.authorization", reader)
    if basic is not None:
        return _basic_header(basic, f"{where}.basicAuth", reader)
    return None


def _token_header(authorization: Mapping[str, Any], field: str, reader: _Reader) -> str:
    scheme = (string_at(authorization, "type", field) or "").strip() or "Bearer"
    if scheme.lower() == "basic":
        raise HookConfigError(f"{field}.type", "Basic is not allowed here; use basicAuth with a username and password")
    secret_ref = mapping_at(authorization, "secretRef", field)
    if secret_ref is None:
        raise HookConfigError(f"{field}.secretRef", "required: the Secret holding the token")
    key = string_at(secret_ref, "key", f"{field}.secretRef")
    if not key:
        raise HookConfigError(f"{field}.secretRef.key", "required: the Secret's key holding the token")
    token = _text(reader.secret_value(secret_ref, key, f"{field}.secretRef"), f"{field}.secretRef").strip()
    if "\n" in token or "\r" in token:
        raise HookConfigError(f"{field}.secretRef", f"the token (key {key!r}) must be a single line")
    return f"{scheme} {token}"


def _basic_header(basic: Mapping[str, Any], field: str, reader: _Reader) -> str:
    (username_key, username), (_, password) = _secret_pair(
        basic, field, reader, "the username and password", ("usernameKey", "username"), ("passwordKey", "password"))
    if b":" in username:
        raise HookConfigError(f"{field}.secretRef", f"the username (key {username_key!r}) must not contain ':'")
    return "Basic " + base64.b64encode(username + b":" + password).decode("ascii")


# ---------------------------------------------------------------------------------------------
# Reading Secrets and ConfigMaps


def _secret_pair(settings: Mapping[str, Any], field: str, reader: _Reader, holding: str,
                 *keys: tuple[str, str]) -> list[tuple[str, bytes]]:
    """The values of two keys of the Secret `settings.secretRef` names (one per (setting, default)
    of `keys`: the setting names the key), each with its key. HookConfigError when there is no
    secretRef (the Secret holding `holding`) or a value cannot be read."""
    secret_ref = mapping_at(settings, "secretRef", field)
    if secret_ref is None:
        raise HookConfigError(f"{field}.secretRef", f"required: the Secret holding {holding}")
    named = [string_at(settings, setting, field, default=default) or default for setting, default in keys]
    return [(key, reader.secret_value(secret_ref, key, f"{field}.secretRef")) for key in named]


class _Reader:
    """Reads each referenced Secret or ConfigMap once per resolution, from the namespaces the
    policy allows only."""

    def __init__(self, cluster: Cluster | None, policy: HookPolicy) -> None:
        self.cluster, self.policy = cluster, policy
        self._seen: dict[tuple[Kind, ObjectKey], dict[str, Any]] = {}

    def secret_value(self, ref: Mapping[str, Any], key: str, field: str) -> bytes:
        secret = self._get(SECRET, ref, field)
        data = secret.get("data") or {}
        if key not in data:
            raise HookConfigError(field, f"Secret {_describe(secret)} has no key {key!r}")
        try:
            return base64.b64decode(data[key] or "", validate=True)
        except (binascii.Error, TypeError):
            raise HookConfigError(field, f"Secret {_describe(secret)}: data.{key} is not base64") from None

    def config_map_value(self, ref: Mapping[str, Any], key: str, field: str) -> bytes:
        config_map = self._get(CONFIG_MAP, ref, field)
        data = config_map.get("data") or {}
        if isinstance(data.get(key), str):
            return str(data[key]).encode()
        binary = config_map.get("binaryData") or {}
        if key in binary:
            try:
                return base64.b64decode(binary[key] or "", validate=True)
            except (binascii.Error, TypeError):
                raise HookConfigError(field, f"ConfigMap {_describe(config_map)}: binaryData.{key} is not "
                                      "base64") from None
        raise HookConfigError(field, f"ConfigMap {_describe(config_map)} has no key {key!r}")

    def _get(self, kind: Kind, ref: Mapping[str, Any], field: str) -> dict[str, Any]:
        name = string_at(ref, "name", field)
        namespace = string_at(ref, "namespace", field)
        if not name:
            raise HookConfigError(f"{field}.name", f"required: the {kind.kind}'s name")
        if not namespace:
            raise HookConfigError(f"{field}.namespace", f"required: the {kind.kind}'s namespace")
        key = ObjectKey(namespace, name)
        if not self.policy.allows_namespace(namespace):
            raise HookRefused(f"{field}.namespace", f"refused: {kind.kind} {key} is in namespace {namespace!r}; "
                              f"hook TLS material and credentials are read from {self.policy.describe_namespaces()}")
        if (kind, key) in self._seen:
            return self._seen[kind, key]
        if self.cluster is None:
            raise HookConfigError(field, f"cannot read {kind.kind} {key}: no cluster to read it from")
        try:
            found = self.cluster.get(kind, key)
        except ApiError as err:
            raise HookConfigError(field, f"cannot read {kind.kind} {key}: {err}") from None
        if found is None:
            raise HookConfigError(field, f"{kind.kind} {key} not found")
        self._seen[kind, key] = found
        return found


def _text(value: bytes, field: str) -> str:
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        raise HookConfigError(field, "the value is not UTF-8 text") from None


def _describe(obj: Mapping[str, Any]) -> str:
    return str(ObjectKey.of(obj))


def _reason(err: Exception) -> str:
    reason = getattr(err, "reason", None)
    return str(reason or err).lower()
