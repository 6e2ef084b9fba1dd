"""The sync/finalize protocol: request keys per hook version, and what a response may hold."""

from __future__ import annotations

import copy
import json
import math
import subprocess
import sys
import textwrap
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from decorators.protocol import (
    RESPONSE_SHAPE,
    ResponseError,
    SyncResponse,
    build_request,
    group_key,
    parse_response,
)
from reconcile import Kind, ReconcileError

CONTROLLER = {"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "DecoratorController",
              "metadata": {"name": "dc", "uid": "u-dc"}, "spec": {"resources": []},
              "status": {"ignored": True}}


def obj(kind: str, name: str, namespace: str | None = None, api_version: str = "v1") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    return {"apiVersion": api_version, "kind": kind, "metadata": meta}


NS_TARGET = obj("StatefulSet", "nginx", "web", "apps/v1")
CLUSTER_TARGET = obj("ClusterRole", "reader", api_version="rbac.authorization.k8s.io/v1")


def request(target: dict[str, Any], namespaced: bool, version: str, *, attachments: Any = None,
            related: Any = None, finalizing: bool = False) -> dict[str, Any]:
    return build_request(CONTROLLER, target, namespaced, attachments or {}, related or {},
                         finalizing=finalizing, version=version)


class TestGroupKeys:
    @pytest.mark.parametrize(("kind", "key"), [
        (Kind("v1", "Pod"), "Pod.v1"), (Kind("apps/v1", "StatefulSet"), "StatefulSet.apps/v1"),
        (Kind("rbac.authorization.k8s.io/v1", "ClusterRole"), "ClusterRole.rbac.authorization.k8s.io/v1")])
    def test_kind_first_then_the_full_api_version(self, kind: Kind, key: str) -> None:
        assert group_key(kind) == key


class TestRequest:
    def test_a_request_has_exactly_the_five_keys(self) -> None:
        assert set(request(NS_TARGET, True, "v1")) == {"controller", "object", "attachments", "related", "finalizing"}

    def test_the_controller_is_sent_as_a_typed_object_with_an_empty_status(self) -> None:
        sent = request(NS_TARGET, True, "v1")["controller"]
        assert sent == {"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "DecoratorController",
                        "metadata": CONTROLLER["metadata"], "spec": CONTROLLER["spec"], "status": {}}

    def test_the_controller_has_api_version_and_kind_even_when_read_without_them(self) -> None:
        sent = build_request({"metadata": {"name": "dc"}}, NS_TARGET, True, {}, {}, finalizing=False, version="v1")
        assert (sent["controller"]["apiVersion"], sent["controller"]["kind"], sent["controller"]["spec"]) == \
            ("metacontroller.k8s.io/v1alpha1", "DecoratorController", {})

    @pytest.mark.parametrize("finalizing", [False, True])
    def test_finalizing_says_which_hook_is_called(self, finalizing: bool) -> None:
        assert request(NS_TARGET, True, "v2", finalizing=finalizing)["finalizing"] is finalizing

    def test_every_group_given_is_present_even_when_empty(self) -> None:
        sent = request(NS_TARGET, True, "v1", attachments={"Service.v1": [], "ConfigMap.v1": []})
        assert sent["attachments"] == {"Service.v1": {}, "ConfigMap.v1": {}}
        assert sent["related"] == {}

    def test_nothing_is_copied_and_nothing_is_changed(self) -> None:
        svc = obj("Service", "nginx-0", "web")
        target = copy.deepcopy(NS_TARGET)
        before = copy.deepcopy((target, svc, CONTROLLER))
        sent = build_request(CONTROLLER, target, True, {"Service.v1": [svc]}, {}, finalizing=False, version="v1")
        assert sent["object"] is target
        assert sent["attachments"]["Service.v1"]["nginx-0"] is svc
        assert sent["controller"]["metadata"] is CONTROLLER["metadata"]
        assert (target, svc, CONTROLLER) == before

    def test_an_unknown_version_is_a_programming_error(self) -> None:
        with pytest.raises(ValueError, match="v3"):
            request(NS_TARGET, True, "v3")


class TestObjectKeysV1:
    def test_under_a_namespaced_target_objects_are_keyed_by_name(self) -> None:
        sent = request(NS_TARGET, True, "v1", attachments={"Service.v1": [obj("Service", "nginx-0", "web")]})
        assert list(sent["attachments"]["Service.v1"]) == ["nginx-0"]

    def test_under_a_namespaced_target_other_namespaces_and_cluster_objects_are_dropped(self) -> None:
        related = {"ConfigMap.v1": [obj("ConfigMap", "here", "web"), obj("ConfigMap", "there", "other")],
                   "Namespace.v1": [obj("Namespace", "web")]}
        sent = request(NS_TARGET, True, "v1", related=related)
        assert sent["related"] == {"ConfigMap.v1": {"here": related["ConfigMap.v1"][0]}, "Namespace.v1": {}}

    def test_under_a_cluster_target_namespaced_objects_are_keyed_ns_slash_name(self) -> None:
        binding = obj("RoleBinding", "reader", "default", "rbac.authorization.k8s.io/v1")
        role = obj("ClusterRole", "reader-copy", api_version="rbac.authorization.k8s.io/v1")
        sent = request(CLUSTER_TARGET, False, "v1", attachments={"RoleBinding.rbac.authorization.k8s.io/v1": [binding],
                                                                 "ClusterRole.rbac.authorization.k8s.io/v1": [role]})
        assert sent["attachments"] == {"RoleBinding.rbac.authorization.k8s.io/v1": {"default/reader": binding},
                                       "ClusterRole.rbac.authorization.k8s.io/v1": {"reader-copy": role}}


class TestObjectKeysV2:
    def test_namespaced_objects_are_always_keyed_ns_slash_name(self) -> None:
        svc = obj("Service", "nginx-0", "web")
        assert list(request(NS_TARGET, True, "v2", attachments={"Service.v1": [svc]})["attachments"]["Service.v1"]) \
            == ["web/nginx-0"]
        assert list(request(CLUSTER_TARGET, False, "v2", attachments={"Service.v1": [svc]})["attachments"]
                    ["Service.v1"]) == ["web/nginx-0"]

    def test_cluster_objects_are_keyed_by_name_and_nothing_is_dropped(self) -> None:
        related = {"ConfigMap.v1": [obj("ConfigMap", "there", "other")], "Namespace.v1": [obj("Namespace", "web")]}
        sent = request(NS_TARGET, True, "v2", related=related)
        assert {group: list(objs) for group, objs in sent["related"].items()} == \
            {"ConfigMap.v1": ["other/there"], "Namespace.v1": ["web"]}


class TestResponse:
    def test_an_empty_answer_changes_nothing_and_attaches_nothing(self) -> None:
        assert parse_response({}) == SyncResponse(labels=None, annotations=None, status=None, attachments=(),
                                                  resync_after=None, finalized=False)

    def test_a_full_answer_is_read_field_by_field(self) -> None:
        svc = obj("Service", "nginx-0")
        answer = parse_response({"labels": {"a": "1", "b": None}, "annotations": {"c": "2"},
                                 "status": {"ready": True}, "attachments": [svc], "resyncAfterSeconds": 0.5,
                                 "finalized": True})
        assert answer == SyncResponse(labels={"a": "1", "b": None}, annotations={"c": "2"}, status={"ready": True},
                                      attachments=(svc,), resync_after=0.5, finalized=True)

    def test_the_shape_names_every_field_of_the_protocol(self) -> None:
        assert set(RESPONSE_SHAPE) == {"labels", "annotations", "status", "attachments", "resyncAfterSeconds",
                                       "finalized"}
        assert all(type(None) in types for types in RESPONSE_SHAPE.values())

    @pytest.mark.parametrize(("written", "after"), [(0, None), (-3, None), (0.0, None), (0.1, 0.1), (2, 2.0)])
    def test_resync_after_counts_only_when_positive(self, written: float, after: float | None) -> None:
        assert parse_response({"resyncAfterSeconds": written}).resync_after == after

    @pytest.mark.parametrize("written", [True, "5", math.nan, math.inf])
    def test_resync_after_must_be_a_finite_number(self, written: Any) -> None:
        with pytest.raises(ResponseError) as caught:
            parse_response({"resyncAfterSeconds": written})
        assert caught.value.field == "resyncAfterSeconds"

    @pytest.mark.parametrize(("written", "finalized"), [(None, False), (False, False), (True, True)])
    def test_finalized_null_is_false(self, written: bool | None, finalized: bool) -> None:
        assert parse_response({"finalized": written}).finalized is finalized

    def test_finalized_must_be_a_boolean(self) -> None:
        with pytest.raises(ResponseError, match=r"^finalized: must be a boolean or null, not a number$"):
            parse_response({"finalized": 1})

    def test_label_values_are_strings_or_null(self) -> None:
        with pytest.raises(ResponseError) as caught:
            parse_response({"labels": {"ok": "x", "count": 3}})
        assert str(caught.value) == 'labels["count"]: must be a string or null, not a number'

    @pytest.mark.parametrize("field", ["labels", "annotations", "status"])
    def test_maps_must_be_objects(self, field: str) -> None:
        with pytest.raises(ResponseError, match=rf"^{field}: must be an object or null, not a list$"):
            parse_response({field: []})

    def test_attachments_must_be_a_list(self) -> None:
        with pytest.raises(ResponseError, match=r"^attachments: must be a list or null, not an? "):
            parse_response({"attachments": {"Service.v1": {}}})

    @pytest.mark.parametrize(("item", "message"), [
        ("svc", "attachments[2]: must be an object, not a string"),
        ({"kind": "Service", "metadata": {"name": "x"}}, "attachments[2].apiVersion: required"),
        ({"apiVersion": "v1", "kind": 5, "metadata": {"name": "x"}},
         "attachments[2].kind: must be a string, not a number"),
        ({"apiVersion": "v1", "kind": "Service"}, "attachments[2].metadata.name: required"),
        ({"apiVersion": "v1", "kind": "Service", "metadata": {}}, "attachments[2].metadata.name: required"),
        ({"apiVersion": "v1", "kind": "Service", "metadata": []},
         "attachments[2].metadata: must be an object, not a list"),
        ({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x", "namespace": 1}},
         "attachments[2].metadata.namespace: must be a string, not a number"),
    ])
    def test_each_attachment_needs_api_version_kind_and_name(self, item: Any, message: str) -> None:
        good = obj("Service", "ok")
        with pytest.raises(ResponseError) as caught:
            parse_response({"attachments": [good, good, item]})
        assert str(caught.value) == message
        assert isinstance(caught.value, ReconcileError)

    def test_an_attachment_without_namespace_is_accepted(self) -> None:
        assert parse_response({"attachments": [obj("Service", "x")]}).attachments[0]["metadata"] == {"name": "x"}

    def test_unknown_fields_are_left_to_the_hook_client(self) -> None:
        assert parse_response({"children": [obj("Service", "x")]}).attachments == ()


# A third-party hook in the style of Metacontroller's examples (stdlib http.server, HTTP/1.0, no
# Content-Length): crd-roles' sync reads `object`; service-per-pod-v2's sync checks the v2 key
# `<ns>/<sts>-0` in `attachments['Service.v1']`.
HOOK = textwrap.dedent("""
    import json, sys
    from http.server import BaseHTTPRequestHandler, HTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            observed = json.loads(self.rfile.read(int(self.headers['content-length'])))
            target = observed['object']
            name = target['metadata']['name']
            if self.path == '/sync-crd-role':
                desired = {'attachments': [{'apiVersion': 'rbac.authorization.k8s.io/v1', 'kind': 'ClusterRole',
                                            'metadata': {'name': name + '-reader'}, 'rules': []}]}
            else:
                ns = target['metadata']['namespace']
                verified = ns + '/' + name + '-0' in observed['attachments']['Service.v1']
                desired = {'annotations': {'v2-naming-verified': 'true' if verified else 'false'},
                           'attachments': [], 'finalized': observed['finalizing']}
            self.send_response(200)
            self.send_header('Content-type', 'application/json')
            self.end_headers()
            self.wfile.write(json.dumps(desired).encode())

        def log_message(self, *args):
            pass

    server = HTTPServer(('127.0.0.1', 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()
""")


@pytest.fixture(scope="module")
def hook_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    script = Path(tmp_path_factory.mktemp("hook")) / "sync.py"
    script.write_text(HOOK)
    process = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        yield f"http://127.0.0.1:{process.stdout.readline().strip()}"
    finally:
        process.terminate()
        process.wait(timeout=5)
        if process.stdout is not None:
            process.stdout.close()


def call(url: str, body: dict[str, Any]) -> SyncResponse:
    sent = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(sent, timeout=5) as answer:
        return parse_response(json.loads(answer.read()))


class TestWithAMetacontrollerStyleHook:
    def test_a_crd_roles_style_hook_reads_the_object_and_its_attachment_parses(self, hook_url: str) -> None:
        crd = obj("CustomResourceDefinition", "my-tests.ctl.rlg.io", api_version="apiextensions.k8s.io/v1")
        answer = call(f"{hook_url}/sync-crd-role", request(crd, False, "v1", attachments={
            "ClusterRole.rbac.authorization.k8s.io/v1": []}))
        [role] = answer.attachments
        assert (role["kind"], role["metadata"]["name"]) == ("ClusterRole", "my-tests.ctl.rlg.io-reader")

    @pytest.mark.parametrize(("version", "verified"), [("v2", "true"), ("v1", "false")])
    def test_the_v2_example_finds_its_service_only_under_the_uniform_key(self, hook_url: str, version: str,
                                                                       verified: str) -> None:
        services = {"Service.v1": [obj("Service", "nginx-0", "web")]}
        answer = call(f"{hook_url}/sync-service-per-pod", request(NS_TARGET, True, version, attachments=services,
                                                                  finalizing=True))
        assert answer.annotations == {"v2-naming-verified": verified}
        assert answer.finalized and answer.attachments == ()
