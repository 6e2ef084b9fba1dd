"""DecoratorControllers whose hooks fail: Events, back-off, what is kept, and who keeps going.

One DecoratorController over Deployments calls hookservers/faulty.py (a process of its own) at
`/by-annotation`, so each target chooses how its hook behaves with the annotation `faulty-path`:
a target answered by `/ok` first gets its attachment, then is switched to a fault. The hook
timeout is 300ms. Also: an unreachable hook, and DecoratorControllers that cannot start.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from reconcile import Kind
from reconcile.cluster import Obj
from tests.decorators.hooks_support import (
    DECORATOR_CONTROLLER,
    WAIT,
    HookServer,
    Stage,
    closed_port,
    decorator_controller,
    hook_server,
    stage,
)
from tests.waiting import eventually

__all__ = ["hook_server", "stage"]  # fixtures, imported to be found here

DEPLOYMENT = Kind("apps/v1", "Deployment")
CONFIGMAP = Kind("v1", "ConfigMap")
CRD = Kind("apiextensions.k8s.io/v1", "CustomResourceDefinition")
CLUSTER_ROLE = Kind("rbac.authorization.k8s.io/v1", "ClusterRole")
URL = "http://faulty.hooks/by-annotation"
ERROR_BODY = "internal trouble: this hook fails on purpose"  # what faulty.py's /500 answers

FAULTS = {
    "/slow": rf"Sync error: POST {re.escape(URL)} timed out after 0\.3s",
    "/500": rf"Sync error: unsupported status code 500 from {re.escape(URL)}: {ERROR_BODY}",
    "/garbage": rf"Sync error: bad response from {re.escape(URL)}: invalid JSON: .+",
}


def deployment(name: str, path: str, data: str = "", label: str = "faults") -> Obj:
    return {"apiVersion": DEPLOYMENT.api_version, "kind": DEPLOYMENT.kind,
            "metadata": {"name": name, "namespace": "default", "labels": {label: "yes"},
                         "annotations": {"faulty-path": path, "faulty-data": data}},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "app", "image": "busybox"}]}}}}


def decorator(name: str, url: str, label: str, *, timeout: str = "300ms", **rule: Any) -> Obj:
    return decorator_controller(
        name, resources=[{"apiVersion": "apps/v1", "resource": "deployments",
                          "labelSelector": {"matchLabels": {label: "yes"}}, **rule}],
        attachments=[{"apiVersion": "v1", "resource": "configmaps", "updateStrategy": {"method": "InPlace"}}],
        hooks={"sync": {"webhook": {"url": url, "timeout": timeout}}})


def annotate(**values: str) -> Callable[[Obj], None]:
    return lambda obj: obj["metadata"]["annotations"].update(values)


class Faulty:
    """The stage with the faulty DecoratorController running, and its hook server."""

    def __init__(self, live: Stage, hook: HookServer) -> None:
        self.live, self.hook = live, hook
        live.cluster.create(decorator("faulty", URL, "faults"))

    def attached(self, name: str, data: str = "") -> Obj:
        """A target answered by /ok, once its attachment `<name>-ok` exists and the passes that
        creating it caused are over (so that only the next edit makes the next pass)."""
        self.live.cluster.create(deployment(name, "/ok", data))
        found: Obj = eventually(lambda: self.live.get(CONFIGMAP, f"{name}-ok", "default"), WAIT)
        self.live.wait_idle("faulty")
        return found

    def switch(self, name: str, path: str) -> None:
        self.live.edit(DEPLOYMENT, name, annotate(**{"faulty-path": path}), "default")

    def sync_errors(self, name: str) -> list[Obj]:
        return self.live.events(name, "SyncError")

    def calls(self, path: str, name: str) -> list[float]:
        return self.hook.times(path, f"default/{name}")


@pytest.fixture
def faulty(hook_server: Callable[[str], HookServer], stage: Callable[..., Stage]) -> Faulty:
    hook = hook_server("faulty")
    return Faulty(stage({"faulty.hooks": hook.address}), hook)


class TestFailingHooks:
    @pytest.mark.parametrize("path", list(FAULTS))
    def test_a_failure_is_a_one_line_sync_error_and_earlier_attachments_stay(self, faulty: Faulty,
                                                                             path: str) -> None:
        before = faulty.attached("a", data="from /ok")
        faulty.switch("a", path)
        [event] = eventually(lambda: faulty.sync_errors("a"), WAIT)
        assert event["type"] == "Warning"
        assert event["involvedObject"]["kind"] == "Deployment"
        assert re.fullmatch(FAULTS[path], event["message"]), event["message"]
        assert "\n" not in event["message"]
        eventually(lambda: len(faulty.calls(path, "a")) >= 3, WAIT)  # failed passes since the event
        kept = faulty.live.get(CONFIGMAP, "a-ok", "default")
        assert kept is not None and kept["metadata"]["uid"] == before["metadata"]["uid"]
        assert kept["data"] == {"data": "from /ok"}

    @pytest.mark.parametrize("path", list(FAULTS))
    def test_a_failing_hook_is_called_again_with_back_off(self, faulty: Faulty, path: str) -> None:
        faulty.attached("a")
        faulty.switch("a", path)
        queue = "decorator/faulty/deployments.apps"
        eventually(lambda: len(faulty.calls(path, "a")) >= 3, WAIT)
        calls, retries = len(faulty.calls(path, "a")), faulty.live.metric("workqueue_retries_total", name=queue)
        eventually(lambda: len(faulty.calls(path, "a")) > calls
                   and faulty.live.metric("workqueue_retries_total", name=queue) > retries, WAIT)

    @pytest.mark.parametrize("path", ["/500", "/garbage"])
    def test_the_waits_between_calls_grow(self, faulty: Faulty, path: str) -> None:
        faulty.attached("a")
        faulty.switch("a", path)
        times = eventually(lambda: len(found := faulty.calls(path, "a")) >= 8 and found, WAIT)[:8]
        gaps = [later - earlier for earlier, later in zip(times, times[1:], strict=False)]
        # A gap is a pass's own time plus the wait after the n-th failure, 5ms * 2**(n-1): from
        # 5ms after the first call to 320ms after the seventh. Without back-off they would be alike.
        # (A /slow call lasts its 300ms timeout, which hides this.)
        assert gaps[-1] - gaps[0] >= 0.2, gaps

    @pytest.mark.parametrize("path", list(FAULTS))
    def test_other_targets_of_the_decorator_keep_reconciling(self, faulty: Faulty, path: str) -> None:
        faulty.attached("a")
        faulty.attached("b", data="first")
        faulty.switch("a", path)
        eventually(lambda: faulty.sync_errors("a"), WAIT)
        faulty.live.edit(DEPLOYMENT, "b", annotate(**{"faulty-data": "second"}), "default")
        eventually(lambda: (faulty.live.get(CONFIGMAP, "b-ok", "default") or {}).get("data") == {"data": "second"},
                   WAIT)
        assert faulty.sync_errors("b") == []
        assert len(faulty.calls(path, "a")) >= 1

    def test_a_multi_line_error_page_is_quoted_on_one_line(self, faulty: Faulty) -> None:
        faulty.attached("a")
        faulty.switch("a", "/500-page")
        [event] = eventually(lambda: faulty.sync_errors("a"), WAIT)
        assert event["message"].startswith(f"Sync error: unsupported status code 500 from {URL}: <html>")
        assert "the hook broke" in event["message"] and "\n" not in event["message"]

    def test_a_cluster_scoped_target_has_its_sync_errors_recorded_in_default(self, faulty: Faulty) -> None:
        faulty.live.cluster.create(decorator_controller(
            "roles", resources=[{"apiVersion": CLUSTER_ROLE.api_version, "resource": "clusterroles",
                                 "labelSelector": {"matchLabels": {"faults": "yes"}}}],
            hooks={"sync": {"webhook": {"url": "http://faulty.hooks/500", "timeout": "300ms"}}}))
        faulty.live.cluster.create({"apiVersion": CLUSTER_ROLE.api_version, "kind": CLUSTER_ROLE.kind,
                                    "metadata": {"name": "reader", "labels": {"faults": "yes"}}, "rules": []})
        [event] = eventually(lambda: faulty.live.events("reader", "SyncError", namespace="default"), WAIT)
        assert event["involvedObject"]["kind"] == "ClusterRole"
        assert event["message"] == f"Sync error: unsupported status code 500 from http://faulty.hooks/500: {ERROR_BODY}"

    def test_429_brings_the_target_back_after_retry_after_without_an_error(self, faulty: Faulty) -> None:
        before = faulty.attached("a")
        faulty.switch("a", "/429")
        first, second = eventually(lambda: len(found := faulty.calls("/429", "a")) >= 2 and found[:2], WAIT)
        assert 0.75 <= second - first <= 3.0  # Retry-After: 1 (less a little: the times are the server's)
        assert faulty.sync_errors("a") == []
        kept = faulty.live.get(CONFIGMAP, "a-ok", "default")
        assert kept is not None and kept["metadata"]["uid"] == before["metadata"]["uid"]

    def test_a_hook_nothing_listens_on_is_a_sync_error(self, stage: Callable[..., Stage]) -> None:
        url = f"http://127.0.0.1:{closed_port()}/sync"
        live = stage()
        live.cluster.create(decorator("unreachable", url, "unreachable"))
        live.cluster.create(deployment("a", "/ok", label="unreachable"))
        [event] = eventually(lambda: live.events("a", "SyncError"), WAIT)
        assert event["type"] == "Warning"
        assert re.fullmatch(rf"Sync error: POST {re.escape(url)} failed: .*[Rr]efused.*", event["message"]), \
            event["message"]


INVALID = {
    "operator": ({"annotationSelector": {"matchExpressions": [{"key": "x", "operator": "Gt", "values": ["1"]}]}},
                 "300ms", 'spec.resources[0].annotationSelector.matchExpressions[0].operator: "Gt" is not a '
                          'selector operator (In, NotIn, Exists, DoesNotExist)'),
    "timeout": ({}, "10x", 'spec.hooks.sync.webhook.timeout: "10x" is not a duration'),
}


class TestDecoratorsThatCannotStart:
    @pytest.mark.parametrize("case", list(INVALID))
    def test_an_invalid_spec_is_a_create_error_and_other_decorators_run(self, faulty: Faulty, case: str) -> None:
        rule, timeout, field_message = INVALID[case]
        faulty.live.cluster.create(decorator("broken", URL, "broken", timeout=timeout, **rule))
        [event] = eventually(lambda: faulty.live.events("broken", "CreateError"), WAIT)
        assert event["type"] == "Warning"
        assert event["involvedObject"]["kind"] == "DecoratorController"
        assert event["message"].startswith(f"Cannot create new controller: {field_message}")
        assert "\n" not in event["message"]
        faulty.attached("a")  # the faulty DecoratorController, started before, still runs
        faulty.live.cluster.create(decorator("another", "http://faulty.hooks/ok/another", "another"))
        faulty.live.cluster.create(deployment("c", "/ok", label="another"))
        eventually(lambda: faulty.live.get(CONFIGMAP, "c-another", "default"), WAIT)
        assert "broken" not in faulty.live.decorators.running

        faulty.live.edit(DECORATOR_CONTROLLER, "broken", lambda obj: obj.update(
            spec=decorator("broken", URL, "broken")["spec"]))  # fixed: it starts
        faulty.live.cluster.create(deployment("d", "/ok", label="broken"))
        eventually(lambda: faulty.live.get(CONFIGMAP, "d-ok", "default"), WAIT)

    def test_a_decorator_of_a_kind_not_served_yet_starts_once_its_crd_exists(
            self, stage: Callable[..., Stage], hook_server: Callable[[str], HookServer]) -> None:
        live = stage({"faulty.hooks": hook_server("faulty").address})
        dc = decorator_controller("gadgets", resources=[{"apiVersion": "example.com/v1", "resource": "gadgets"}],
                                  attachments=[{"apiVersion": "v1", "resource": "configmaps"}],
                                  hooks={"sync": {"webhook": {"url": "http://faulty.hooks/ok"}}})
        live.cluster.create(dc)
        [event] = eventually(lambda: live.events("gadgets", "CreateError"), WAIT)
        assert "spec.resources[0]: can't find resource 'gadgets' in apiVersion 'example.com/v1'" in event["message"]
        live.cluster.create({
            "apiVersion": CRD.api_version, "kind": CRD.kind, "metadata": {"name": "gadgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"kind": "Gadget", "listKind": "GadgetList", "plural": "gadgets", "singular": "gadget"},
                     "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                         "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}})
        live.cluster.create({"apiVersion": "example.com/v1", "kind": "Gadget",
                             "metadata": {"name": "g", "namespace": "default"}})
        eventually(lambda: live.get(CONFIGMAP, "g-ok", "default"), WAIT)
