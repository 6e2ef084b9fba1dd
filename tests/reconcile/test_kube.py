"""KubeCluster end to end, over real HTTP, against EmbeddedCluster behind a loopback API server.

The server (apiserver.py) only translates REST to EmbeddedCluster calls, so these tests check
what KubeCluster adds: configuration and credentials, URLs, discovery, paging, streaming, the
mapping of statuses to reconcile.errors, and releasing connections.
"""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes.config import incluster_config

from reconcile.clock import FakeClock
from reconcile.cluster import Cluster, Kind, ObjectKey, ResourceInfo, WatchEvent
from reconcile.embedded import EmbeddedCluster
from reconcile.errors import (
    AlreadyExists,
    BadRequest,
    Conflict,
    Gone,
    Invalid,
    NotFound,
    ReconcileError,
    ServerError,
    TooManyRequests,
    Unauthorized,
)
from reconcile.kube import KubeCluster, KubeOptions
from tests.reconcile.apiserver import ApiServer, write_kubeconfig
from tests.waiting import eventually

TOKEN = "s3cret-token"
CONFIGMAP = Kind("v1", "ConfigMap")
NAMESPACE = Kind("v1", "Namespace")
CRD = Kind("apiextensions.k8s.io/v1", "CustomResourceDefinition")
WIDGET = Kind("example.com/v1", "Widget")
OPTIONS = KubeOptions(connect_timeout=2.0, request_timeout=5.0, watch_idle_timeout=5.0)


def configmap(name: str, namespace: str = "default", labels: dict[str, str] | None = None,
              **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, **({"labels": labels} if labels else {})},
            "data": data}


def widget_crd() -> dict[str, Any]:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                     "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                                   "schema": {"openAPIV3Schema": {"type": "object",
                                                                  "x-kubernetes-preserve-unknown-fields": True}}}]}}


def widget(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name, "namespace": "default"},
            "spec": spec}


@pytest.fixture
def embedded() -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(bookmark_interval=0.2, history=50) as cluster:
        yield cluster


@pytest.fixture
def server(embedded: EmbeddedCluster) -> Iterator[ApiServer]:
    with ApiServer(embedded, token=TOKEN) as api:
        yield api


@pytest.fixture
def kubeconfig(server: ApiServer, tmp_path: Path) -> Path:
    return write_kubeconfig(tmp_path / "kubeconfig", server.url, token=TOKEN)


@pytest.fixture
def kube(kubeconfig: Path) -> Iterator[KubeCluster]:
    with KubeCluster.from_kubeconfig(kubeconfig, options=OPTIONS) as cluster:
        yield cluster


def test_kube_cluster_satisfies_the_cluster_protocol(kube: KubeCluster) -> None:
    cluster: Cluster = kube  # checked by mypy where tests are type-checked; the calls below at run time
    assert cluster.get(CONFIGMAP, ObjectKey("default", "none")) is None


# configuration

def test_kubeconfig_with_a_token_user_sends_the_token(kube: KubeCluster, server: ApiServer) -> None:
    assert kube.host == server.url
    assert kube.get(NAMESPACE, ObjectKey("", "default")) is not None


def test_a_wrong_token_is_unauthorized(server: ApiServer, tmp_path: Path) -> None:
    path = write_kubeconfig(tmp_path / "kubeconfig", server.url, token="wrong")
    with KubeCluster.from_kubeconfig(path, options=OPTIONS) as cluster, pytest.raises(Unauthorized):
        cluster.get(NAMESPACE, ObjectKey("", "default"))


def test_without_a_path_kubeconfig_comes_from_the_KUBECONFIG_variable(kubeconfig: Path, server: ApiServer,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    for cluster in (KubeCluster.from_kubeconfig(context="porchkit-test", options=OPTIONS),
                    KubeCluster.auto(options=OPTIONS)):
        with cluster:
            assert cluster.host == server.url
            assert cluster.resource(CONFIGMAP).plural == "configmaps"


def test_a_missing_kubeconfig_or_context_is_a_reconcile_error(kubeconfig: Path, tmp_path: Path) -> None:
    with pytest.raises(ReconcileError, match="kubeconfig"):
        KubeCluster.from_kubeconfig(tmp_path / "absent")
    with pytest.raises(ReconcileError, match="kubeconfig"):
        KubeCluster.from_kubeconfig(kubeconfig, context="no-such-context")


def test_in_cluster_outside_a_pod_is_a_reconcile_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(ReconcileError, match="in-cluster"):
        KubeCluster.in_cluster()


def self_signed_certificate(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, made by the openssl command."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("the openssl command is needed to make a certificate for the HTTPS test server")
    cert, key = directory / "ca.crt", directory / "tls.key"
    subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=60)
    return cert, key


def test_in_a_pod_the_service_account_token_and_ca_reach_the_server_over_https(
        embedded: EmbeddedCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cert, key = self_signed_certificate(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    token = tmp_path / "token"
    token.write_text(TOKEN)
    with ApiServer(embedded, token=TOKEN, tls=context) as api:
        monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
        monkeypatch.setenv("KUBERNETES_SERVICE_PORT", api.url.rsplit(":", 1)[1])
        monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(token))
        monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(cert))
        with KubeCluster.auto() as cluster:  # in a pod: the service host is set and the token mounted
            assert cluster.host == api.url
            cluster.create(configmap("from-a-pod", k="v"))
            assert (cluster.get(CONFIGMAP, ObjectKey("default", "from-a-pod")) or {}).get("data") == {"k": "v"}
        # the server refuses any request without the token (see test_a_wrong_token_is_unauthorized)


def test_importing_reconcile_does_not_import_kubernetes() -> None:
    code = "import sys, reconcile, reconcile.embedded; assert 'kubernetes' not in sys.modules, 'imported'"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=30)


# discovery

def test_resource_describes_how_a_kind_is_served(kube: KubeCluster) -> None:
    assert kube.resource(CONFIGMAP) == ResourceInfo(CONFIGMAP, "configmaps", True, frozenset())
    assert kube.resource(NAMESPACE) == ResourceInfo(NAMESPACE, "namespaces", False, frozenset({"status"}))
    deployment = Kind("apps/v1", "Deployment")
    assert kube.resource(deployment) == ResourceInfo(deployment, "deployments", True, frozenset({"status"}))
    with pytest.raises(NotFound):
        kube.resource(Kind("v1", "Gadget"))
    with pytest.raises(NotFound):
        kube.resource(Kind("nowhere.example.com/v1", "Gadget"))


def test_discovery_is_cached(kube: KubeCluster, server: ApiServer) -> None:
    kube.resource(CONFIGMAP)
    before = len(server.requests)
    kube.resource(CONFIGMAP)
    kube.resource(Kind("v1", "Secret"))
    assert len(server.requests) == before


def test_a_kind_a_crd_adds_after_start_becomes_usable(kube: KubeCluster) -> None:
    with pytest.raises(NotFound):
        kube.resource(WIDGET)
    kube.create(widget_crd())
    assert kube.resource(WIDGET) == ResourceInfo(WIDGET, "widgets", True, frozenset({"status"}))
    assert kube.create(widget("w", size=1))["spec"] == {"size": 1}
    assert WIDGET in {info.kind for info in kube.resources()}


def test_deleting_a_crd_through_the_cluster_stops_serving_its_kind(kube: KubeCluster) -> None:
    kube.create(widget_crd())
    assert kube.resource(WIDGET).plural == "widgets"
    kube.delete(CRD, ObjectKey("", "widgets.example.com"))
    with pytest.raises(NotFound):
        kube.resource(WIDGET)


def test_a_kind_that_vanished_behind_its_back_is_forgotten_at_its_first_404(
        kube: KubeCluster, embedded: EmbeddedCluster) -> None:
    kube.create(widget_crd())
    assert kube.resource(WIDGET).plural == "widgets"
    embedded.delete(CRD, ObjectKey("", "widgets.example.com"))  # not through kube: its cache is stale
    assert kube.resource(WIDGET).plural == "widgets"
    with pytest.raises(NotFound):
        kube.list(WIDGET)
    with pytest.raises(NotFound):
        kube.resource(WIDGET)


def test_cached_discovery_is_fetched_again_after_its_ttl(server: ApiServer, kubeconfig: Path) -> None:
    clock = FakeClock()
    options = KubeOptions(discovery_ttl=30.0, clock=clock)
    with KubeCluster.from_kubeconfig(kubeconfig, options=options) as kube:
        kube.resource(CONFIGMAP)
        clock.advance(29)
        kube.resource(CONFIGMAP)
        assert [r.path for r in server.requests] == ["/api/v1"]
        clock.advance(2)
        kube.resource(CONFIGMAP)
        assert [r.path for r in server.requests] == ["/api/v1", "/api/v1"]


def test_resources_lists_every_served_kind(kube: KubeCluster, embedded: EmbeddedCluster) -> None:
    assert kube.resources() == embedded.resources()


# reads and writes

def test_create_get_update_patch_and_delete_round_trip(kube: KubeCluster) -> None:
    created = kube.create(configmap("a", k="1"))
    assert created["kind"] == "ConfigMap" and created["metadata"]["resourceVersion"]
    key = ObjectKey("default", "a")
    got = kube.get(CONFIGMAP, key)
    assert got is not None and got["data"] == {"k": "1"}
    updated = kube.update({**got, "data": {"k": "2"}})
    assert updated["data"] == {"k": "2"}
    merged = kube.patch(CONFIGMAP, key, {"data": {"extra": "x"}})
    assert merged["data"] == {"k": "2", "extra": "x"}
    patched = kube.patch(CONFIGMAP, key, [{"op": "replace", "path": "/data/k", "value": "3"}], patch_type="json")
    assert patched["data"] == {"k": "3", "extra": "x"}
    assert kube.delete(CONFIGMAP, key) is None
    assert kube.get(CONFIGMAP, key) is None


def test_cluster_scoped_objects_are_served_without_a_namespace(kube: KubeCluster) -> None:
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    found = kube.get(NAMESPACE, ObjectKey("", "team"))
    assert found is not None and found["metadata"]["name"] == "team"
    kube.create(configmap("in-team", namespace="team"))
    assert [o["metadata"]["name"] for o in kube.list(CONFIGMAP, namespace="team").items] == ["in-team"]


def test_update_status_and_patching_status_change_only_status(kube: KubeCluster) -> None:
    kube.create(widget_crd())
    created = kube.create(widget("w", size=1))
    with_status = kube.update_status({**created, "status": {"ready": True}, "spec": {"size": 99}})
    assert with_status["status"] == {"ready": True} and with_status["spec"] == {"size": 1}
    patched = kube.patch(WIDGET, ObjectKey("default", "w"), {"status": {"phase": "Up"}}, subresource="status")
    assert patched["status"] == {"ready": True, "phase": "Up"}
    plain = kube.update({**patched, "status": {"ready": False}})
    assert plain["status"] == {"ready": True, "phase": "Up"}


def test_apply_merges_intents_and_reports_conflicts_unless_forced(kube: KubeCluster) -> None:
    mine = kube.apply(configmap("a", k="1"), field_manager="mine")
    assert mine["data"] == {"k": "1"}
    kube.apply(configmap("a", other="x"), field_manager="theirs")
    with pytest.raises(Conflict):
        kube.apply(configmap("a", other="y"), field_manager="mine")
    forced = kube.apply(configmap("a", k="1", other="y"), field_manager="mine", force=True)
    assert forced["data"] == {"k": "1", "other": "y"}


def test_apply_to_the_status_subresource(kube: KubeCluster) -> None:
    kube.create(widget_crd())
    kube.create(widget("w", size=1))
    applied = kube.apply({**widget("w"), "status": {"phase": "Up"}}, field_manager="ctl", subresource="status")
    assert applied["status"] == {"phase": "Up"} and applied["spec"] == {"size": 1}


def test_delete_returns_the_object_while_finalizers_hold_it(kube: KubeCluster) -> None:
    obj = configmap("held")
    obj["metadata"]["finalizers"] = ["example.com/hold"]
    kube.create(obj)
    held = kube.delete(CONFIGMAP, ObjectKey("default", "held"), propagation="Foreground")
    assert held is not None and held["metadata"]["deletionTimestamp"]
    assert held["kind"] == "ConfigMap"
    kube.patch(CONFIGMAP, ObjectKey("default", "held"), {"metadata": {"finalizers": None}})
    assert kube.get(CONFIGMAP, ObjectKey("default", "held")) is None


def test_delete_with_a_failing_precondition_is_a_conflict(kube: KubeCluster) -> None:
    created = kube.create(configmap("a"))
    with pytest.raises(Conflict):
        kube.delete(CONFIGMAP, ObjectKey("default", "a"), preconditions={"uid": "not-the-uid"})
    assert kube.delete(CONFIGMAP, ObjectKey("default", "a"), preconditions={"uid": created["metadata"]["uid"]}) is None


# errors

def test_each_refusal_is_the_matching_error(kube: KubeCluster) -> None:
    first = kube.create(configmap("a", k="1"))
    with pytest.raises(AlreadyExists):
        kube.create(configmap("a"))
    kube.update({**first, "data": {"k": "2"}})
    with pytest.raises(Conflict) as stale:
        kube.update({**first, "data": {"k": "3"}})
    assert type(stale.value) is Conflict and stale.value.status["code"] == 409
    with pytest.raises(Invalid) as invalid:
        kube.create(configmap("Not_A_Name"))
    assert invalid.value.status["code"] == 422 and invalid.value.status["details"]["causes"]
    with pytest.raises(NotFound) as absent:
        kube.delete(CONFIGMAP, ObjectKey("default", "absent"))
    assert absent.value.status["details"]["name"] == "absent"
    with pytest.raises(NotFound):
        kube.update(configmap("absent"))
    with pytest.raises(BadRequest):
        kube.create({"kind": "ConfigMap", "metadata": {"name": "x"}})
    with pytest.raises(BadRequest):
        kube.create(configmap("x", namespace=""))
    with pytest.raises(BadRequest):
        kube.patch(CONFIGMAP, ObjectKey("default", "a"), {"op": "add"}, patch_type="json")


def test_too_many_requests_carries_retry_after(kube: KubeCluster, server: ApiServer) -> None:
    kube.resource(CONFIGMAP)
    server.fail_next(429, "TooManyRequests", "slow down", method="GET", retry_after="7")
    with pytest.raises(TooManyRequests) as err:
        kube.get(CONFIGMAP, ObjectKey("default", "a"))
    assert err.value.retry_after == 7.0 and str(err.value) == "slow down"
    assert kube.get(CONFIGMAP, ObjectKey("default", "a")) is None  # nothing retried it behind our back


def test_server_errors_and_bodies_that_are_not_status_map_by_code(kube: KubeCluster, server: ApiServer) -> None:
    kube.resource(CONFIGMAP)
    server.fail_next(503, "ServiceUnavailable", method="POST")
    with pytest.raises(ServerError):
        kube.create(configmap("a"))
    server.fail_next(410, "Gone", method="GET")
    with pytest.raises(Gone):
        kube.list(CONFIGMAP)


def test_an_unreachable_server_is_a_server_error(server: ApiServer, tmp_path: Path) -> None:
    url = server.url
    server.stop()
    path = write_kubeconfig(tmp_path / "kubeconfig", url, token=TOKEN)
    with KubeCluster.from_kubeconfig(path, options=OPTIONS) as cluster, pytest.raises(ServerError) as err:
        cluster.get(CONFIGMAP, ObjectKey("default", "a"))
    assert err.value.status["reason"] == "ServiceUnavailable" and url in str(err.value)


# list

def test_list_filters_by_label_and_field_selectors_and_fills_in_kind(kube: KubeCluster) -> None:
    kube.create(configmap("a", labels={"app": "web", "tier": "front"}))
    kube.create(configmap("b", labels={"app": "web", "tier": "back"}))
    kube.create(configmap("c", labels={"app": "db"}))

    def names(**selectors: Any) -> list[str]:
        return [o["metadata"]["name"] for o in kube.list(CONFIGMAP, namespace="default", **selectors).items]

    assert names(labels="app=web") == ["a", "b"]
    assert names(labels={"matchLabels": {"app": "web"},
                         "matchExpressions": [{"key": "tier", "operator": "In", "values": ["back"]}]}) == ["b"]
    assert names(fields="metadata.name!=a") == ["b", "c"]
    result = kube.list(CONFIGMAP)
    assert all(o["apiVersion"] == "v1" and o["kind"] == "ConfigMap" for o in result.items)
    assert int(result.resource_version) >= max(int(o["metadata"]["resourceVersion"]) for o in result.items)


def test_list_pages_through_limit_and_continue(server: ApiServer, kubeconfig: Path) -> None:
    with KubeCluster.from_kubeconfig(kubeconfig, options=KubeOptions(page_size=2)) as kube:
        for index in range(5):
            kube.create(configmap(f"cm{index}"))
        server.requests.clear()
        result = kube.list(CONFIGMAP, namespace="default")
    assert [o["metadata"]["name"] for o in result.items] == [f"cm{i}" for i in range(5)]
    pages = [r.query for r in server.requests if r.path == "/api/v1/namespaces/default/configmaps"]
    assert [p["limit"] for p in pages] == ["2", "2", "2"]
    assert ["continue" in p for p in pages] == [False, True, True]


def test_an_expired_continue_token_lists_again_from_the_start_still_in_pages(server: ApiServer,
                                                                            kubeconfig: Path) -> None:
    with KubeCluster.from_kubeconfig(kubeconfig, options=KubeOptions(page_size=2)) as kube:
        for index in range(3):
            kube.create(configmap(f"cm{index}"))
        expired: list[bool] = []

        def expire_once(request: Any) -> None:
            if "continue" in request.query and not expired:
                expired.append(True)
                server.expire_continue_tokens()
        server.requests.clear()
        server.on_request = expire_once
        result = kube.list(CONFIGMAP, namespace="default")
    assert [o["metadata"]["name"] for o in result.items] == ["cm0", "cm1", "cm2"]
    pages = [r.query for r in server.requests if r.path == "/api/v1/namespaces/default/configmaps"]
    assert [("continue" in p, p.get("limit")) for p in pages] == [(False, "2"), (True, "2"), (False, "2"), (True, "2")]


def test_a_continue_token_expiring_twice_in_one_list_is_gone(server: ApiServer, kubeconfig: Path) -> None:
    with KubeCluster.from_kubeconfig(kubeconfig, options=KubeOptions(page_size=2)) as kube:
        for index in range(3):
            kube.create(configmap(f"cm{index}"))
        server.on_request = lambda request: server.expire_continue_tokens() if "continue" in request.query else None
        with pytest.raises(Gone):
            kube.list(CONFIGMAP, namespace="default")


# watch

def events_until(stream: Iterator[WatchEvent], count: int) -> list[tuple[str, str]]:
    """(type, name) of the next `count` events that are not bookmarks."""
    seen: list[tuple[str, str]] = []
    for event in stream:
        if event.type != "BOOKMARK":
            seen.append((event.type, event.object["metadata"]["name"]))
            if len(seen) == count:
                break
    return seen


@pytest.mark.parametrize("start", ["", "0"])
def test_watch_from_empty_or_zero_starts_with_current_objects_as_added(kube: KubeCluster, start: str) -> None:
    kube.create(configmap("a"))
    kube.create(configmap("b"))
    with kube.watch(CONFIGMAP, resource_version=start, namespace="default", timeout=5) as stream:
        assert events_until(stream, 2) == [("ADDED", "a"), ("ADDED", "b")]
        kube.patch(CONFIGMAP, ObjectKey("default", "a"), {"data": {"k": "v"}})
        assert events_until(stream, 1) == [("MODIFIED", "a")]


def test_watch_from_a_list_sees_only_later_changes_with_bookmarks(kube: KubeCluster) -> None:
    kube.create(configmap("old"))
    listed = kube.list(CONFIGMAP, namespace="default")
    kube.create(configmap("new", labels={"app": "web"}))
    kube.delete(CONFIGMAP, ObjectKey("default", "old"))
    with kube.watch(CONFIGMAP, resource_version=listed.resource_version, namespace="default", timeout=5) as stream:
        events = [stream.__next__() for _ in range(3)]
        assert [(e.type, e.object["metadata"].get("name")) for e in events] == [
            ("ADDED", "new"), ("DELETED", "old"), ("BOOKMARK", None)]
        assert events[0].object["kind"] == "ConfigMap"
        assert events[2].object["metadata"]["resourceVersion"]
    with kube.watch(CONFIGMAP, resource_version=listed.resource_version, labels="app=web", timeout=5) as stream:
        assert events_until(stream, 1) == [("ADDED", "new")]


def test_watch_ends_when_the_server_timeout_passes(kube: KubeCluster, server: ApiServer) -> None:
    started = time.monotonic()
    events = list(kube.watch(CONFIGMAP, resource_version="", timeout=0.5))
    assert 0.5 <= time.monotonic() - started < 4
    assert {e.type for e in events} <= {"BOOKMARK"}
    assert server.requests[-1].query["timeoutSeconds"] == "1"
    assert server.requests[-1].query["allowWatchBookmarks"] == "true"


def test_watch_from_an_expired_version_raises_gone(kube: KubeCluster) -> None:
    for index in range(60):  # more changes than the embedded cluster's history of 50
        kube.create(configmap(f"cm{index}"))
    stream = kube.watch(CONFIGMAP, resource_version="2", timeout=5)
    with pytest.raises(Gone) as err:
        next(stream)
    assert err.value.status["code"] == 410


def test_closing_a_watch_releases_its_connection(kube: KubeCluster, server: ApiServer,
                                                 embedded: EmbeddedCluster) -> None:
    stream = kube.watch(CONFIGMAP, resource_version="", namespace="default")
    eventually(lambda: server.watching() == 1 and embedded.watchers() == 1)
    ended = threading.Event()

    def consume() -> None:
        for _ in stream:
            pass
        ended.set()

    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    eventually(lambda: _reading_a_socket(reader), what="the reader to block reading the stream")
    stream.close()
    assert ended.wait(2), "a reader blocked on the stream must wake when it is closed"
    reader.join(2)
    eventually(lambda: server.watching() == 0 and embedded.watchers() == 0)
    assert kube.get(CONFIGMAP, ObjectKey("default", "a")) is None  # the pool still serves requests


def test_a_silent_watch_raises_server_error(tmp_path: Path) -> None:
    with EmbeddedCluster(bookmark_interval=60) as quiet, ApiServer(quiet) as server:
        path = write_kubeconfig(tmp_path / "kubeconfig", server.url, token="unused")
        with KubeCluster.from_kubeconfig(path, options=KubeOptions(watch_idle_timeout=0.3)) as kube:
            stream = kube.watch(CONFIGMAP, resource_version="1")
            started = time.monotonic()
            with pytest.raises(ServerError, match="received nothing"):
                next(stream)
            assert time.monotonic() - started < 3


def test_an_informer_lists_page_by_page_and_asks_for_metadata_alone(server: ApiServer, kubeconfig: Path) -> None:
    from reconcile.informer import Informer

    with KubeCluster.from_kubeconfig(kubeconfig, options=KubeOptions(page_size=2)) as kube:
        for index in range(5):
            kube.create(configmap(f"cm{index}", payload="x" * 100))
        server.requests.clear()
        informer = Informer(kube, CONFIGMAP, namespace="default", metadata=True)
        stop = threading.Event()
        thread = threading.Thread(target=informer.run, args=(stop,), daemon=True)
        thread.start()
        try:
            assert informer.synced.wait(10)
            cached = sorted(informer.list(), key=lambda o: o["metadata"]["name"])
            assert [(o["kind"], o["metadata"]["name"]) for o in cached] == [("ConfigMap", f"cm{i}") for i in range(5)]
            assert all("data" not in o for o in cached)
            pages = [r.query for r in server.requests
                     if r.path == "/api/v1/namespaces/default/configmaps" and "watch" not in r.query]
            assert [(p["limit"], "continue" in p) for p in pages] == [("2", False), ("2", True), ("2", True)]
        finally:
            stop.set()
            informer.wake()
            thread.join(10)


def _reading_a_socket(thread: threading.Thread) -> bool:
    """Whether `thread` is inside a socket read (where a closed stream must wake it)."""
    frame = sys._current_frames().get(thread.ident or 0)
    while frame is not None:
        if frame.f_code.co_filename == socket.__file__ and frame.f_code.co_name in {"readinto", "recv_into"}:
            return True
        frame = frame.f_back
    return False
