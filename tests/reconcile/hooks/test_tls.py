"""Webhooks over TLS, with client certificates, bearer and basic credentials, and endpointConfigs."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from reconcile import EmbeddedCluster
from reconcile.hooks import Hook, HookConfigError, HookError
from tests.reconcile.hooks.conftest import Certificates, Server, secret, sync_request

MakeHook = Callable[..., Hook]
Serve = Callable[..., Server]

CA_FROM_SECRET = {"secretRef": {"name": "hook-ca", "namespace": "default"}}
CLIENT_TLS = {"secretRef": {"name": "hook-client", "namespace": "default"}}
BEARER = {"secretRef": {"name": "hook-token", "namespace": "default", "key": "token"}}
BASIC = {"secretRef": {"name": "hook-login", "namespace": "default"}}


@pytest.fixture(name="secrets")
def secrets_fixture(cluster: EmbeddedCluster, certs: Certificates) -> EmbeddedCluster:
    """The embedded cluster holding the CA, the client certificate and the credentials."""
    cluster.create(secret("hook-ca", data={"ca.crt": certs.read("ca.crt")}))
    cluster.create(secret("other-ca", data={"ca.crt": certs.read("other-ca.crt")}))
    cluster.create(secret("hook-client", data={"tls.crt": certs.read("client.crt"),
                                               "tls.key": certs.read("client.key")}))
    cluster.create(secret("hook-token", data={"token": "s3cret\n"}))
    cluster.create(secret("wrong-token", data={"token": "guess"}))
    cluster.create(secret("hook-login", data={"username": "hooker", "password": "pa:ss"}))
    cluster.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "hook-ca", "namespace": "default"},
                    "data": {"bundle.pem": certs.read("ca.crt").decode()}})
    return cluster


def tls_server(serve: Serve, certs: Certificates, *options: str) -> Server:
    return serve("--tls", certs.path("server.crt"), certs.path("server.key"), *options)


def headers_seen(hook: Hook) -> dict[str, str]:
    seen: dict[str, str] = hook.call(sync_request())["status"]["headers"]
    return seen


# --- server certificates -------------------------------------------------------------------


def test_a_ca_bundle_from_a_secret_verifies_the_server(serve: Serve, certs: Certificates, secrets: EmbeddedCluster,
                                                       make_hook: MakeHook) -> None:
    server = tls_server(serve, certs)
    hook = make_hook({"webhook": {"url": server.url("/sync"), "caBundle": CA_FROM_SECRET}}, cluster=secrets)
    assert hook.call(sync_request())["labels"] == {"decorated": "yes"}


def test_an_inline_ca_bundle_verifies_the_server(serve: Serve, certs: Certificates, make_hook: MakeHook) -> None:
    server = tls_server(serve, certs)
    hook = make_hook({"webhook": {"url": server.url("/sync"), "caBundle": {"inline": certs.read("ca.crt").decode()}}})
    assert hook.call(sync_request())["labels"] == {"decorated": "yes"}


def test_a_ca_bundle_from_a_config_map_verifies_the_server(serve: Serve, certs: Certificates,
                                                           secrets: EmbeddedCluster, make_hook: MakeHook) -> None:
    server = tls_server(serve, certs)
    bundle = {"configMapRef": {"name": "hook-ca", "namespace": "default", "key": "bundle.pem"}}
    hook = make_hook({"webhook": {"url": server.url("/sync"), "caBundle": bundle}}, cluster=secrets)
    assert hook.call(sync_request())["labels"] == {"decorated": "yes"}


@pytest.mark.parametrize("bundle", [None, {"secretRef": {"name": "other-ca", "namespace": "default"}}])
def test_a_server_certificate_from_an_unknown_ca_is_refused(bundle: dict[str, Any] | None, serve: Serve,
                                                            certs: Certificates, secrets: EmbeddedCluster,
                                                            make_hook: MakeHook) -> None:
    server = tls_server(serve, certs)
    spec = {"url": server.url("/sync"), **({"caBundle": bundle} if bundle else {})}
    hook = make_hook({"webhook": spec}, cluster=secrets)
    with pytest.raises(HookError, match=r"failed: TLS: certificate verify failed"):
        hook.call(sync_request())


def test_resolve_keeps_the_url_host_for_the_tls_name_and_the_host_header(serve: Serve, certs: Certificates,
                                                                           make_hook: MakeHook) -> None:
    server = tls_server(serve, certs)
    spec = {"webhook": {"url": "https://hooks.example/echo", "caBundle": {"inline": certs.read("ca.crt").decode()}}}
    hook = make_hook(spec, resolve={"hooks.example:443": f"127.0.0.1:{server.port}"})
    assert headers_seen(hook)["host"] == "hooks.example"


def test_mutual_tls_presents_the_client_certificate_from_a_secret(serve: Serve, certs: Certificates,
                                                                  secrets: EmbeddedCluster,
                                                                  make_hook: MakeHook) -> None:
    server = tls_server(serve, certs, "--client-ca", certs.path("ca.crt"))
    spec = {"url": server.url("/sync"), "caBundle": CA_FROM_SECRET, "clientTLS": CLIENT_TLS}
    assert make_hook({"webhook": spec}, cluster=secrets).call(sync_request())["labels"] == {"decorated": "yes"}
    without = make_hook({"webhook": {"url": server.url("/sync"), "caBundle": CA_FROM_SECRET}}, cluster=secrets)
    with pytest.raises(HookError, match="failed: TLS: "):
        without.call(sync_request())


def test_the_client_key_leaves_no_file_behind(certs: Certificates, secrets: EmbeddedCluster, make_hook: MakeHook,
                                              tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    make_hook({"webhook": {"url": "https://hooks.example/sync", "clientTLS": CLIENT_TLS}}, cluster=secrets)
    assert list(tmp_path.iterdir()) == []


# --- credentials ---------------------------------------------------------------------------


def test_a_bearer_token_from_a_secret_is_sent_trimmed(serve: Serve, certs: Certificates, secrets: EmbeddedCluster,
                                                      make_hook: MakeHook) -> None:
    server = tls_server(serve, certs, "--token", "s3cret")
    spec = {"url": server.url("/sync"), "caBundle": CA_FROM_SECRET, "authorization": BEARER}
    assert make_hook({"webhook": spec}, cluster=secrets).call(sync_request())["labels"] == {"decorated": "yes"}


def test_a_wrong_token_is_an_error_quoting_the_401(serve: Serve, certs: Certificates, secrets: EmbeddedCluster,
                                                   make_hook: MakeHook) -> None:
    server = tls_server(serve, certs, "--token", "s3cret")
    wrong = {"secretRef": {"name": "wrong-token", "namespace": "default", "key": "token"}}
    spec = {"url": server.url("/sync"), "caBundle": CA_FROM_SECRET, "authorization": wrong}
    with pytest.raises(HookError) as raised:
        make_hook({"webhook": spec}, cluster=secrets).call(sync_request())
    assert str(raised.value) == f'unsupported status code 401 from {server.url("/sync")}: {{"error": "unauthorized"}}'


def test_an_authorization_type_other_than_bearer_is_sent_as_given(plain: Server, secrets: EmbeddedCluster,
                                                                  make_hook: MakeHook) -> None:
    spec = {"url": plain.url("/echo"), "authorization": {**BEARER, "type": "Token"}}
    assert headers_seen(make_hook({"webhook": spec}, cluster=secrets))["authorization"] == "Token s3cret"


def test_basic_auth_sends_username_and_password(serve: Serve, secrets: EmbeddedCluster, make_hook: MakeHook) -> None:
    server = serve("--basic", "hooker:pa:ss")
    spec = {"url": server.url("/sync"), "basicAuth": BASIC}
    assert make_hook({"webhook": spec}, cluster=secrets).call(sync_request())["labels"] == {"decorated": "yes"}


@pytest.mark.parametrize("kind", ["Basic", "basic", "BASIC"])
def test_basic_as_an_authorization_type_is_refused(kind: str, secrets: EmbeddedCluster, make_hook: MakeHook) -> None:
    with pytest.raises(HookConfigError) as raised:
        make_hook({"webhook": {"url": "https://h/sync", "authorization": {**BEARER, "type": kind}}}, cluster=secrets)
    assert raised.value.field == "spec.hooks.sync.webhook.authorization.type"


def test_authorization_and_basic_auth_together_are_refused(secrets: EmbeddedCluster, make_hook: MakeHook) -> None:
    with pytest.raises(HookConfigError) as raised:
        make_hook({"webhook": {"url": "https://h/sync", "authorization": BEARER, "basicAuth": BASIC}}, cluster=secrets)
    assert str(raised.value) == "spec.hooks.sync.webhook: set either authorization or basicAuth, not both"


def test_a_username_with_a_colon_is_refused(secrets: EmbeddedCluster, make_hook: MakeHook) -> None:
    swapped = {**BASIC, "usernameKey": "password", "passwordKey": "username"}
    with pytest.raises(HookConfigError, match="must not contain ':'"):
        make_hook({"webhook": {"url": "https://h/sync", "basicAuth": swapped}}, cluster=secrets)


# --- what cannot be read ---------------------------------------------------------------------


def test_a_missing_secret_is_a_config_error_naming_the_field(secrets: EmbeddedCluster, make_hook: MakeHook) -> None:
    bundle = {"secretRef": {"name": "missing", "namespace": "default"}}
    with pytest.raises(HookConfigError) as raised:
        make_hook({"webhook": {"url": "https://h/sync", "caBundle": bundle}}, cluster=secrets)
    assert str(raised.value) == "spec.hooks.sync.webhook.caBundle.secretRef: Secret default/missing not found"


def test_a_missing_key_is_a_config_error_naming_it(secrets: EmbeddedCluster, make_hook: MakeHook) -> None:
    token = {"secretRef": {"name": "hook-token", "namespace": "default", "key": "nope"}}
    with pytest.raises(HookConfigError) as raised:
        make_hook({"webhook": {"url": "https://h/sync", "authorization": token}}, cluster=secrets)
    assert str(raised.value) == ("spec.hooks.sync.webhook.authorization.secretRef: "
                                 "Secret default/hook-token has no key 'nope'")


def test_a_secret_needs_a_cluster_to_be_read(make_hook: MakeHook) -> None:
    with pytest.raises(HookConfigError, match="no cluster to read it from"):
        make_hook({"webhook": {"url": "https://h/sync", "caBundle": CA_FROM_SECRET}})


def test_an_inline_bundle_that_is_not_pem_is_refused(make_hook: MakeHook) -> None:
    with pytest.raises(HookConfigError) as raised:
        make_hook({"webhook": {"url": "https://h/sync", "caBundle": {"inline": "not a certificate"}}})
    assert raised.value.field == "spec.hooks.sync.webhook.caBundle"


# --- endpointConfigs -------------------------------------------------------------------------


def test_an_endpoint_config_for_the_host_supplies_tls_and_credentials(serve: Serve, certs: Certificates,
                                                                      secrets: EmbeddedCluster,
                                                                      make_hook: MakeHook) -> None:
    server = tls_server(serve, certs, "--token", "s3cret")
    configs = [{"host": "elsewhere:443", "caBundle": {"inline": "not used"}},
               {"host": f"127.0.0.1:{server.port}", "caBundle": CA_FROM_SECRET, "authorization": BEARER},
               {"host": f"127.0.0.1:{server.port}", "authorization": {**BEARER, "key": "missing"}}]
    hook = make_hook({"webhook": {"url": server.url("/sync")}}, cluster=secrets, endpoint_configs=configs)
    assert hook.call(sync_request())["labels"] == {"decorated": "yes"}


@pytest.mark.parametrize("host", ["HOOKS.example", "hooks.example:443"])
def test_endpoint_hosts_match_without_case_or_the_default_port(host: str, serve: Serve, certs: Certificates,
                                                              secrets: EmbeddedCluster, make_hook: MakeHook) -> None:
    server = tls_server(serve, certs, "--token", "s3cret")
    configs = [{"host": host, "caBundle": CA_FROM_SECRET, "authorization": BEARER}]
    hook = make_hook({"webhook": {"url": "https://hooks.example/echo"}}, cluster=secrets, endpoint_configs=configs,
                     resolve={"hooks.example": f"127.0.0.1:{server.port}"})
    assert headers_seen(hook)["authorization"] == "Bearer s3cret"


def test_a_service_webhook_matches_the_endpoint_config_for_name_namespace_port(
        plain: Server, secrets: EmbeddedCluster, make_hook: MakeHook) -> None:
    configs = [{"host": "hooks.default:8080", "authorization": BEARER}]
    spec = {"webhook": {"service": {"name": "hooks", "namespace": "default", "port": 8080}, "path": "/echo"}}
    hook = make_hook(spec, cluster=secrets, endpoint_configs=configs,
                     resolve={"hooks.default:8080": f"127.0.0.1:{plain.port}"})
    assert headers_seen(hook)["authorization"] == "Bearer s3cret"


def test_settings_on_the_webhook_replace_the_endpoint_config_entirely(serve: Serve, certs: Certificates,
                                                                      secrets: EmbeddedCluster,
                                                                      make_hook: MakeHook) -> None:
    server = tls_server(serve, certs, "--token", "s3cret")
    configs = [{"host": f"127.0.0.1:{server.port}", "caBundle": CA_FROM_SECRET}]
    spec = {"webhook": {"url": server.url("/sync"), "authorization": BEARER}}  # so the config's CA is not used
    hook = make_hook(spec, cluster=secrets, endpoint_configs=configs)
    with pytest.raises(HookError, match="certificate verify failed"):
        hook.call(sync_request())


def test_a_bad_endpoint_config_is_named_by_its_index(secrets: EmbeddedCluster, make_hook: MakeHook) -> None:
    configs = [{"host": "h", "caBundle": {"secretRef": {"name": "missing", "namespace": "default"}}}]
    with pytest.raises(HookConfigError) as raised:
        make_hook({"webhook": {"url": "https://h/sync"}}, cluster=secrets, endpoint_configs=configs)
    assert raised.value.field == "spec.endpointConfigs[0].caBundle.secretRef"
