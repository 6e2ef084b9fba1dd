"""The DecoratorController examples (testdata/decorators/), run as docs/decorators.md shows them.

The page marks each runnable block with `<!-- example: NAME -->`: a `console` block is one
`$ porchkit ...` line and the table it prints; `crd-roles-hook` starts the webhook example's
server; `crd-roles-controller` is that example's DecoratorController. Each test here runs the
page's command through the real `porchkit` (a process, `python -m porchkit`, from the repository
root) and compares what it prints with the page. The webhook example's server is started as
the page says, on a free loopback port instead of 8080 (the `--resolve` address follows it),
waited for by polling the port, and stopped after the test.

Also: `-o yaml` shows the attachments the README files describe; the service-per-pod example,
live, deletes the Services of replicas scaled away; the python hook's decisions; and the page
itself: every path it names exists, every `porchkit decorators reconcile` command on it is one
run here, and every `decorators.` python hook it names imports.
"""

from __future__ import annotations

import contextlib
import http.client
import importlib
import json
import re
import shlex
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from decorators.examples import service_per_pod
from reconcile import Kind
from reconcile.manifests import load_manifests, read_manifests
from tests.decorators.hooks_support import WAIT, Stage, closed_port, stage
from tests.waiting import eventually

__all__ = ["stage"]  # a fixture, imported to be found here

ROOT = Path(__file__).resolve().parents[2]
DOC_PATH = ROOT / "docs" / "decorators.md"
DOC = DOC_PATH.read_text(encoding="utf-8")
EXAMPLES = ROOT / "testdata" / "decorators"
DOCUMENTED_PORT = "8080"  # the hook's port on the page; the tests use a free one instead

STATEFULSET = Kind("apps/v1", "StatefulSet")
SERVICE = Kind("v1", "Service")
OWNER_ANNOTATION = "metacontroller.k8s.io/decorator-controller"


# --- the page -----------------------------------------------------------------------------------


def block(name: str) -> tuple[str, str]:
    """The language and text of the block marked `<!-- example: NAME -->`."""
    found = re.findall(rf"^<!-- example: {re.escape(name)} -->\n```(\w+)\n(.*?)^```$", DOC, re.S | re.M)
    assert len(found) == 1, f"docs/decorators.md: expected one `{name}` example, found {len(found)}"
    return found[0]


def console(name: str) -> tuple[list[str], list[str]]:
    """The command of a marked console block, as argv, and the lines it shows printed."""
    language, text = block(name)
    assert language == "console", f"`{name}` is a {language} block, not console"
    prompt, *printed = text.splitlines()
    assert prompt.startswith("$ "), f"`{name}` does not start with a `$ ` command line"
    return shlex.split(prompt[2:]), printed


def porchkit(argv: list[str], *extra: str, port: int | None = None) -> subprocess.CompletedProcess[str]:
    """Run a documented `porchkit ...` command from the repository root, `extra` arguments added;
    with `port`, the documented hook port in its arguments is replaced by that one."""
    assert argv[0] == "porchkit", f"not a porchkit command: {argv}"
    args = [arg.replace(f"127.0.0.1:{DOCUMENTED_PORT}", f"127.0.0.1:{port}") if port else arg for arg in argv[1:]]
    return subprocess.run([sys.executable, "-m", "porchkit", *args, *extra], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


def assert_prints_the_page(result: subprocess.CompletedProcess[str], printed: list[str]) -> None:
    """Exit 0, nothing on stderr, and the page's table: its header first, then its rows in any
    order (two targets' passes may interleave)."""
    assert (result.returncode, result.stderr) == (0, ""), result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == printed[0]
    assert sorted(lines[1:]) == sorted(printed[1:])


def documents(result: subprocess.CompletedProcess[str]) -> dict[tuple[str, str], dict[str, Any]]:
    """`-o yaml` output by (kind, namespace/name or name)."""
    assert (result.returncode, result.stderr) == (0, ""), result.stderr
    found = {}
    for doc in yaml.safe_load_all(result.stdout):
        meta = doc["metadata"]
        found[(doc["kind"], "/".join(filter(None, (meta.get("namespace"), meta["name"]))))] = doc
    return found


def owner(obj: dict[str, Any]) -> tuple[str, str]:
    [ref] = [ref for ref in obj["metadata"]["ownerReferences"] if ref.get("controller")]
    return ref["kind"], ref["name"]


# --- the webhook example's server ---------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def wait_listening(port: int, process: subprocess.Popen[bytes]) -> None:
    """Return once 127.0.0.1:`port` accepts a connection; fail if the process exits first."""
    def listening() -> bool:
        assert process.poll() is None, f"the hook exited with {process.returncode} before listening"
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
        return False
    eventually(listening, WAIT, interval=0.02, what=f"a listener on 127.0.0.1:{port}")


@pytest.fixture
def crd_roles_hook(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """The page's `crd-roles-hook` command, run on a free port: (the port, its stderr log)."""
    language, text = block("crd-roles-hook")
    assert language == "sh"
    [command] = [shlex.split(line, comments=True) for line in text.splitlines() if line.strip()]
    assert command[0] == "python3" and command[-1] == DOCUMENTED_PORT, command
    port = free_port()
    log = tmp_path / "hook.stderr"
    with open(log, "wb") as stderr:
        process = subprocess.Popen([sys.executable, *command[1:-1], str(port)], cwd=ROOT,
                                   stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        wait_listening(port, process)
        yield port, log
    finally:
        process.terminate()
        process.wait(timeout=10)


# --- each example, as the page runs it ------------------------------------------------------------


class TestServicePerPod:
    """A python hook: decorators.examples.service_per_pod, no server."""

    def test_the_command_prints_a_service_per_replica_as_the_page_shows(self) -> None:
        command, printed = console("service-per-pod")
        assert_prints_the_page(porchkit(command), printed)

    def test_each_service_selects_its_pod_with_the_containers_ports(self) -> None:
        command, _ = console("service-per-pod")
        found = documents(porchkit(command, "-o", "yaml"))
        assert set(found) == {("Service", f"default/kafka-{i}") for i in range(3)}  # none for cache
        for i in range(3):
            service = found[("Service", f"default/kafka-{i}")]
            assert service["spec"]["selector"] == {"statefulset.kubernetes.io/pod-name": f"kafka-{i}"}
            assert [(p["name"], p["port"], p["targetPort"]) for p in service["spec"]["ports"]] == [
                ("broker", 9092, 9092), ("controller", 9093, 9093)]
            assert owner(service) == ("StatefulSet", "kafka")
            assert service["metadata"]["annotations"][OWNER_ANNOTATION] == "service-per-pod"

    def test_a_statefulset_without_ports_is_one_error_line_naming_the_field(self, tmp_path: Path) -> None:
        shutil.copy(EXAMPLES / "service-per-pod" / "decoratorcontroller.yaml", tmp_path)
        (tmp_path / "portless.yaml").write_text(yaml.safe_dump({
            "apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "quiet", "annotations": {"examples.porchkit.dev/service-per-pod": "true"}},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "quiet"}},
                     "template": {"metadata": {"labels": {"app": "quiet"}},
                                  "spec": {"containers": [{"name": "worker", "image": "busybox"}]}}}}))
        result = porchkit(["porchkit", "decorators", "reconcile", "-f", str(tmp_path)])
        assert result.returncode == 1
        [line] = result.stderr.splitlines()
        assert line.startswith(f"porchkit: {tmp_path / 'portless.yaml'}: StatefulSet default/quiet: ")
        assert "spec.template.spec.containers: no container declares a port" in line


class TestNamespaceIsolation:
    """A pipeline hook: no code, no server."""

    def test_the_command_prints_a_policy_per_labelled_namespace_as_the_page_shows(self) -> None:
        command, printed = console("namespace-isolation")
        assert_prints_the_page(porchkit(command), printed)

    def test_each_policy_admits_its_own_namespace_only(self) -> None:
        command, _ = console("namespace-isolation")
        found = documents(porchkit(command, "-o", "yaml"))
        assert set(found) == {("NetworkPolicy", "team-a/same-namespace-only"),
                              ("NetworkPolicy", "team-b/same-namespace-only")}  # none in shared
        for namespace in ("team-a", "team-b"):
            policy = found[("NetworkPolicy", f"{namespace}/same-namespace-only")]
            assert policy["spec"] == {"podSelector": {}, "policyTypes": ["Ingress"],
                                      "ingress": [{"from": [{"podSelector": {}}]}]}
            assert owner(policy) == ("Namespace", namespace)


class TestCrdRoles:
    """A webhook: testdata/decorators/crd-roles/hook.py, started as the page says."""

    def test_with_the_hook_running_the_command_prints_the_roles_as_the_page_shows(
            self, crd_roles_hook: tuple[int, Path]) -> None:
        port, log = crd_roles_hook
        command, printed = console("crd-roles")
        assert_prints_the_page(porchkit(command, port=port), printed)
        assert '"POST /sync-crd-role HTTP/1.1" 200' in log.read_text()  # the hook answered, at the URL's path

    def test_the_roles_grant_the_crds_resources_and_aggregate_into_the_builtin_roles(
            self, crd_roles_hook: tuple[int, Path]) -> None:
        port, _ = crd_roles_hook
        command, _ = console("crd-roles")
        found = documents(porchkit(command, "-o", "yaml", port=port))
        reads, writes = ["get", "list", "watch"], ["create", "update", "patch", "delete", "deletecollection"]
        expected = {}
        for plural in ("backups", "databases"):  # scratchpads is not annotated
            crd = f"{plural}.examples.porchkit.dev"
            expected[("ClusterRole", f"{crd}-reader")] = (reads, {"view"}, crd, plural)
            expected[("ClusterRole", f"{crd}-editor")] = (reads + writes, {"edit", "admin"}, crd, plural)
        assert set(found) == set(expected)
        for key, (verbs, aggregated, crd, plural) in expected.items():
            role = found[key]
            assert role["rules"] == [{"apiGroups": ["examples.porchkit.dev"], "resources": [plural], "verbs": verbs}]
            assert role["metadata"]["labels"] == {f"rbac.authorization.k8s.io/aggregate-to-{name}": "true"
                                                  for name in aggregated}
            assert owner(role) == ("CustomResourceDefinition", crd)

    def test_without_the_hook_each_target_is_one_connection_refused_line(self) -> None:
        command, _ = console("crd-roles")
        result = porchkit(command, port=closed_port())
        assert result.returncode == 1
        lines = result.stderr.splitlines()
        assert len(lines) == 2 and all("connection refused" in line for line in lines), result.stderr
        named = {match.group(1) for line in lines if (match := re.search(r"CustomResourceDefinition (\S+):", line))}
        assert named == {"backups.examples.porchkit.dev", "databases.examples.porchkit.dev"}

    def test_the_hook_answers_only_at_the_path_of_the_decoratorcontrollers_url(
            self, crd_roles_hook: tuple[int, Path]) -> None:
        port, _ = crd_roles_hook
        for path, body, status in (("/sync", {"object": {}}, 404),
                                   ("/sync-crd-role", {"object": {"kind": "ConfigMap"}}, 400)):
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            try:
                connection.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
                assert connection.getresponse().status == status
            finally:
                connection.close()

    def test_the_page_shows_the_examples_decoratorcontroller(self) -> None:
        language, text = block("crd-roles-controller")
        assert language == "yaml"
        assert yaml.safe_load(text) == yaml.safe_load(
            (EXAMPLES / "crd-roles" / "decoratorcontroller.yaml").read_text())


# --- service-per-pod, live: scaling down ----------------------------------------------------------


def test_scaling_a_statefulset_down_deletes_the_services_of_the_replicas_gone(
        stage: Callable[..., Stage]) -> None:
    running = stage()
    load_manifests(running.cluster, read_manifests([EXAMPLES / "service-per-pod"]))

    def services() -> set[str]:
        return {s["metadata"]["name"] for s in running.cluster.list(SERVICE, namespace="default").items}

    eventually(lambda: services() == {"kafka-0", "kafka-1", "kafka-2"}, timeout=WAIT)
    running.edit(STATEFULSET, "kafka", lambda sts: sts["spec"].update(replicas=1), namespace="default")
    eventually(lambda: services() == {"kafka-0"}, timeout=WAIT)


# --- the python hook's decisions ----------------------------------------------------------------


def statefulset(replicas: Any = 2, containers: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"template": {"spec": {"containers": containers if containers is not None else [
        {"name": "app", "ports": [{"name": "http", "containerPort": 8080}]}]}}}
    if replicas is not None:
        spec["replicas"] = replicas
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"}, "spec": spec}


class TestServicePerPodHook:
    def test_a_statefulset_without_replicas_gets_one_service_as_kubernetes_defaults_to_one(self) -> None:
        assert [s["metadata"]["name"] for s in service_per_pod.services_for(statefulset(replicas=None))] == ["db-0"]

    def test_zero_replicas_get_no_services(self) -> None:
        assert service_per_pod.sync_services({"object": statefulset(replicas=0)}) == {"attachments": []}

    def test_a_port_two_containers_declare_is_exposed_once_and_a_taken_name_is_replaced(self) -> None:
        containers: list[dict[str, Any]] = [
            {"name": "a", "ports": [{"name": "web", "containerPort": 80}, {"containerPort": 53, "protocol": "UDP"}]},
            {"name": "b", "ports": [{"name": "web", "containerPort": 81}, {"containerPort": 80}]}]
        ports = service_per_pod.service_ports(statefulset(containers=containers)["spec"]["template"]["spec"])
        assert [(p["name"], p["port"], p["protocol"]) for p in ports] == [
            ("web", 80, "TCP"), ("port-53", 53, "UDP"), ("port-81", 81, "TCP")]

    @pytest.mark.parametrize(("target", "field"), [
        (statefulset(containers=[{"name": "app"}]), "spec.template.spec.containers: no container declares a port"),
        (statefulset(containers=[{"name": "app", "ports": [{"containerPort": "80"}]}]),
         "spec.template.spec.containers[0].ports[0].containerPort: expected a port number"),
        (statefulset(replicas=-1), "spec.replicas: expected a whole number >= 0"),
        ({"kind": "Deployment", "metadata": {"name": "x"}}, 'object: expected a StatefulSet, got "Deployment"'),
    ])
    def test_an_unusable_target_is_an_error_naming_the_field(self, target: dict[str, Any], field: str) -> None:
        with pytest.raises(ValueError, match=re.escape(field)):
            service_per_pod.services_for(target)

    def test_the_answer_shares_nothing_with_the_request(self) -> None:
        target = statefulset(replicas=2)
        first, second = service_per_pod.services_for(target)
        first["spec"]["ports"][0]["port"] = 1
        assert second["spec"]["ports"][0]["port"] == 8080
        assert target == statefulset(replicas=2)


# --- the page's commands and paths --------------------------------------------------------------


def commands_on_the_page() -> list[list[str]]:
    """Every command in the page's sh and console blocks (console: the `$ ` lines), as argv."""
    found = []
    for language, text in re.findall(r"^\s*```(sh|console)\n(.*?)^\s*```$", DOC, re.S | re.M):
        for line in text.splitlines():
            line = line.strip()
            if language == "console":
                if not line.startswith("$ "):
                    continue
                line = line[2:]
            if argv := shlex.split(line, comments=True):
                found.append(argv)
    return found


def test_every_path_the_page_names_exists() -> None:
    named = {arg for argv in commands_on_the_page() for arg in argv
             if "/" in arg and "=" not in arg and "://" not in arg}
    named |= set(re.findall(r"\b((?:testdata|deploy|decorators|docs|tests)/[\w./-]*\w/?)", DOC))
    assert {"testdata/decorators/service-per-pod/", "testdata/decorators/crd-roles/hook.py", "deploy/"} <= named
    missing = sorted(path for path in named if not (ROOT / path).exists())
    missing += sorted(link for link in re.findall(r"\]\(([^)#:]+)\)", DOC) if not (DOC_PATH.parent / link).exists())
    assert missing == [], f"docs/decorators.md names paths that do not exist: {missing}"


def test_every_reconcile_command_on_the_page_is_one_these_tests_run() -> None:
    run_here = {tuple(console(name)[0]) for name in ("service-per-pod", "namespace-isolation", "crd-roles")}
    reconcile = ["porchkit", "decorators", "reconcile"]
    on_the_page = {tuple(argv) for argv in commands_on_the_page() if argv[:3] == reconcile}
    assert on_the_page == run_here


def test_every_example_python_hook_the_page_names_imports() -> None:
    references = set(re.findall(r"\b(decorators\.examples\.\w+):(\w+)", DOC))
    assert ("decorators.examples.service_per_pod", "sync_services") in references
    for module, function in references:
        assert callable(getattr(importlib.import_module(module), function))
