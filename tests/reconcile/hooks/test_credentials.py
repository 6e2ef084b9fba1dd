"""Webhook TLS material and credentials under a HookPolicy: read only from allowed namespaces,
sent only over https (or, in a local run, plain http to the loopback address connected to).

A refusal must come before anything is read or sent: the embedded cluster is seen through
`CountedReads`, which lists every object read, and the hook servers count the connections they
got. The policy is a manager's, `porchkit manager --secret-namespaces porchkit-system`, unless a
test says otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from reconcile import EmbeddedCluster, Kind, ObjectKey
from reconcile.cluster import Obj
from reconcile.hooks import Hook, HookPolicy, HookRefused
from tests.reconcile.hooks.conftest import Certificates, Server, secret, sync_request

MakeHook = Callable[..., Hook]
Serve = Callable[..., Server]

MANAGER = HookPolicy.for_manager([], ["porchkit-system"])
WEBHOOK = "spec.hooks.sync.webhook"
STOLEN = {"name": "admin-token", "namespace": "kube-system"}
OURS = {"name": "hook-token", "namespace": "porchkit-system", "key": "token"}


class CountedReads:
    """The embedded cluster, listing every object read through `get` as "Kind namespace/name"."""

    def __init__(self, cluster: EmbeddedCluster) -> None:
        self.cluster = cluster
        self.reads: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cluster, name)

    def get(self, kind: Kind, key: ObjectKey) -> Obj | None:
        self.reads.append(f"{kind.kind} {key}")
        return self.cluster.get(kind, key)


@pytest.fixture(name="seen")
def seen_fixture(cluster: EmbeddedCluster, certs: Certificates) -> CountedReads:
    """A Secret and a ConfigMap in kube-system that hooks must not get, and a token they may."""
    cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "porchkit-system"}})
    cluster.create(secret("admin-token", "kube-system", data={
        "token": "cluster-admin", "username": "admin", "password": "pw", "ca.crt": certs.read("ca.crt"),
        "tls.crt": certs.read("client.crt"), "tls.key": certs.read("client.key")}))
    cluster.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": STOLEN,
                    "data": {"ca.crt": certs.read("ca.crt").decode()}})
    cluster.create(secret("hook-token", "porchkit-system", data={"token": "s3cret"}))
    return CountedReads(cluster)


# --- namespaces ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("settings", "field", "kind"), [
    ({"authorization": {"secretRef": {**STOLEN, "key": "token"}}}, "authorization.secretRef", "Secret"),
    ({"basicAuth": {"secretRef": STOLEN}}, "basicAuth.secretRef", "Secret"),
    ({"clientTLS": {"secretRef": STOLEN}}, "clientTLS.secretRef", "Secret"),
    ({"caBundle": {"secretRef": STOLEN}}, "caBundle.secretRef", "Secret"),
    ({"caBundle": {"configMapRef": STOLEN}}, "caBundle.configMapRef", "ConfigMap"),
])
def test_a_reference_into_another_namespace_is_refused_without_reading_it(
        settings: dict[str, Any], field: str, kind: str, seen: CountedReads, make_hook: MakeHook) -> None:
    with pytest.raises(HookRefused) as raised:
        make_hook({"webhook": {"url": "https://hooks.example/sync", **settings}}, cluster=seen, policy=MANAGER)
    assert str(raised.value) == (
        f"{WEBHOOK}.{field}.namespace: refused: {kind} kube-system/admin-token is in namespace 'kube-system'; "
        "hook TLS material and credentials are read from namespace porchkit-system (--secret-namespaces)")
    assert seen.reads == []


def test_a_secret_that_does_not_exist_is_refused_the_same_way(seen: CountedReads, make_hook: MakeHook) -> None:
    ref = {"name": "no-such-secret", "namespace": "kube-system", "key": "token"}
    with pytest.raises(HookRefused, match=r"refused: Secret kube-system/no-such-secret is in namespace 'kube-system'"):
        make_hook({"webhook": {"url": "https://hooks.example/sync", "authorization": {"secretRef": ref}}},
                  cluster=seen, policy=MANAGER)
    assert seen.reads == []


def test_an_endpoint_config_into_another_namespace_is_refused(seen: CountedReads, make_hook: MakeHook) -> None:
    configs = [{"host": "hooks.example", "authorization": {"secretRef": {**STOLEN, "key": "token"}}}]
    with pytest.raises(HookRefused) as raised:
        make_hook({"webhook": {"url": "https://hooks.example/sync"}}, cluster=seen, endpoint_configs=configs,
                  policy=MANAGER)
    assert raised.value.field == "spec.endpointConfigs[0].authorization.secretRef.namespace"
    assert seen.reads == []


def test_a_manager_with_no_secret_namespace_reads_none(seen: CountedReads, make_hook: MakeHook) -> None:
    with pytest.raises(HookRefused) as raised:
        make_hook({"webhook": {"url": "https://hooks.example/sync", "authorization": {"secretRef": OURS}}},
                  cluster=seen, policy=HookPolicy())
    assert str(raised.value).endswith("are read from no namespace (--secret-namespaces NS allows NS)")
    assert seen.reads == []


def test_a_token_from_an_allowed_namespace_goes_over_https(serve: Serve, certs: Certificates, seen: CountedReads,
                                                           make_hook: MakeHook) -> None:
    server = serve("--tls", certs.path("server.crt"), certs.path("server.key"), "--token", "s3cret")
    spec = {"url": server.url("/sync"), "caBundle": {"inline": certs.read("ca.crt").decode()},
            "authorization": {"secretRef": OURS}}
    hook = make_hook({"webhook": spec}, cluster=seen, policy=MANAGER)
    assert hook.call(sync_request())["labels"] == {"decorated": "yes"}
    assert seen.reads == ["Secret porchkit-system/hook-token"]


# --- plain http ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("settings", "field"), [
    ({"authorization": {"secretRef": OURS}}, "authorization"),
    ({"basicAuth": {"secretRef": OURS}}, "basicAuth"),
    ({"clientTLS": {"secretRef": OURS}}, "clientTLS"),
])
def test_a_manager_never_sends_credentials_over_plain_http(settings: dict[str, Any], field: str, plain: Server,
                                                           seen: CountedReads, make_hook: MakeHook) -> None:
    url = plain.url("/echo")
    with pytest.raises(HookRefused) as raised:
        make_hook({"webhook": {"url": url, **settings}}, cluster=seen, policy=MANAGER)
    assert str(raised.value) == (f"{WEBHOOK}.{field}: refused: credentials are sent only over https, not to "
                                 f"http://127.0.0.1:{plain.port}; use an https:// URL")
    assert seen.reads == [] and plain.stats()["requests"] == 0


def test_a_service_url_over_http_with_credentials_is_refused(seen: CountedReads, make_hook: MakeHook) -> None:
    spec = {"service": {"name": "hooks", "namespace": "porchkit-system", "protocol": "http"}, "path": "/sync",
            "basicAuth": {"secretRef": OURS}}
    with pytest.raises(HookRefused, match=r"not to http://hooks.porchkit-system:80; use an https:// URL"):
        make_hook({"webhook": spec}, cluster=seen, policy=MANAGER)
    assert seen.reads == []


def test_plain_http_without_credentials_is_allowed(plain: Server, seen: CountedReads, make_hook: MakeHook) -> None:
    hook = make_hook({"webhook": {"url": plain.url("/sync")}}, cluster=seen, policy=MANAGER)
    assert hook.call(sync_request())["labels"] == {"decorated": "yes"}


def test_a_local_run_sends_credentials_over_plain_http_to_loopback(plain: Server, seen: CountedReads,
                                                                   make_hook: MakeHook) -> None:
    spec = {"url": plain.url("/echo"), "authorization": {"secretRef": OURS}}
    hook = make_hook({"webhook": spec}, cluster=seen, policy=HookPolicy.local())
    assert hook.call(sync_request())["status"]["headers"]["authorization"] == "Bearer s3cret"


def test_a_local_run_decides_on_the_address_connected_to(plain: Server, seen: CountedReads,
                                                         make_hook: MakeHook) -> None:
    local, credentials = HookPolicy.local(), {"authorization": {"secretRef": OURS}}
    in_cluster = {"webhook": {"url": "http://hooks.porchkit-system/echo", **credentials}}
    with pytest.raises(HookRefused) as raised:
        make_hook(in_cluster, cluster=seen, policy=local)
    assert str(raised.value) == (
        f"{WEBHOOK}.authorization: refused: credentials are sent only over https (or, in a local run, plain http to "
        "a loopback address), not to http://hooks.porchkit-system; use an https:// URL")

    resolved = make_hook(in_cluster, cluster=seen, policy=local,
                         resolve={"hooks.porchkit-system": f"127.0.0.1:{plain.port}"})
    assert resolved.call(sync_request())["status"]["headers"]["authorization"] == "Bearer s3cret"

    away = {"webhook": {"url": plain.url("/echo"), **credentials}}
    with pytest.raises(HookRefused, match=rf"not to http://127.0.0.1:{plain.port} \(sent to 192.0.2.1\)"):
        make_hook(away, cluster=seen, policy=local, resolve={f"127.0.0.1:{plain.port}": "192.0.2.1:80"})
    assert seen.reads == ["Secret porchkit-system/hook-token"]  # only for the one hook that was built
