"""The DecoratorController CRD: deploy/crds holds what decorators/crds.py builds, and it keeps
every field of Metacontroller's manifests (a real API server prunes what a schema leaves out)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from decorators.crds import decorator_controller_crd
from decorators.spec import DECORATOR_CONTROLLER, parse_decorator
from reconcile.cluster import ObjectKey
from reconcile.embedded import EmbeddedCluster

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "deploy" / "crds" / "metacontroller.k8s.io_decoratorcontrollers.yaml"

EVERY_FIELD: dict[str, Any] = {
    "apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "DecoratorController",
    "metadata": {"name": "everything"},
    "spec": {
        "resources": [{"apiVersion": "apps/v1", "resource": "statefulsets",
                       "labelSelector": {"matchLabels": {"a": "b"},
                                         "matchExpressions": [{"key": "c", "operator": "In", "values": ["d"]}]},
                       "annotationSelector": {"matchAnnotations": {"e": "f"},
                                              "matchExpressions": [{"key": "g", "operator": "Exists"}]},
                       "ignoreStatusChanges": True}],
        "attachments": [{"apiVersion": "v1", "resource": "services", "updateStrategy": {"method": "RollingInPlace"}}],
        "resyncPeriodSeconds": 30,
        "hooks": {
            "sync": {"version": "v2", "webhook": {
                "url": "https://hooks.example/sync", "timeout": "5s", "responseUnMarshallMode": "loose",
                "etag": {"enabled": True, "cacheTimeoutSeconds": 60, "cacheCleanupSeconds": 30},
                "caBundle": {"secretRef": {"name": "ca", "namespace": "hooks", "key": "ca.crt"}},
                "clientTLS": {"secretRef": {"name": "client", "namespace": "hooks"}, "certKey": "tls.crt",
                              "privateKeyKey": "tls.key"},
                "authorization": {"type": "Bearer", "secretRef": {"name": "token", "namespace": "hooks",
                                                                  "key": "token"}}}},
            "finalize": {"webhook": {"service": {"name": "hooks", "namespace": "hooks", "port": 8080,
                                                 "protocol": "http"}, "path": "/finalize",
                                     "basicAuth": {"secretRef": {"name": "basic", "namespace": "hooks"},
                                                   "usernameKey": "user", "passwordKey": "pass"}}},
            "customize": {"python": {"function": "hooks.module:customize", "timeout": "2s"}},
        },
        "endpointConfigs": [{"host": "hooks.example", "caBundle": {"inline": "-----BEGIN CERTIFICATE-----"}}],
    },
}


def test_the_shipped_crd_is_the_one_the_code_builds() -> None:
    [shipped] = [doc for doc in yaml.safe_load_all(SHIPPED.read_text(encoding="utf-8")) if doc]
    assert shipped == decorator_controller_crd()


def test_metacontrollers_names_and_scope() -> None:
    spec = decorator_controller_crd()["spec"]
    assert (spec["group"], spec["scope"], spec["names"]["plural"]) == (
        "metacontroller.k8s.io", "Cluster", "decoratorcontrollers")
    assert spec["names"]["shortNames"] == ["dec", "decorators"]
    assert [v["name"] for v in spec["versions"]] == ["v1alpha1"] and spec["versions"][0]["subresources"] == {
        "status": {}}


def test_a_decorator_using_every_field_survives_the_schema_whole() -> None:
    cluster = EmbeddedCluster()
    cluster.create(decorator_controller_crd())
    cluster.create(EVERY_FIELD)
    stored = cluster.get(DECORATOR_CONTROLLER, ObjectKey("", "everything"))
    assert stored is not None and stored["spec"] == EVERY_FIELD["spec"]
    assert parse_decorator(stored).attachments[0].method == "InPlace"


def test_a_pipeline_hook_is_kept_whole() -> None:
    cluster = EmbeddedCluster()
    cluster.create(decorator_controller_crd())
    pipeline = {"pipeline": [{"@project": {"metadata": {"name": {"@concat": ["$.metadata.name", "-x"]}}}}],
                "target": {"apiVersion": "v1", "kind": "ConfigMap"}}
    cluster.create({**EVERY_FIELD, "metadata": {"name": "piped"},
                    "spec": {"resources": [{"apiVersion": "v1", "resource": "secrets"}],
                             "hooks": {"sync": {"pipeline": pipeline}}}})
    stored = cluster.get(DECORATOR_CONTROLLER, ObjectKey("", "piped"))
    assert stored is not None
    assert stored["spec"]["hooks"]["sync"]["pipeline"] == pipeline
