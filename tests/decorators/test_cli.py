"""`porchkit decorators reconcile -f DIR`, run as a user runs it: a process, with a real hook server.

The manifests are Metacontroller's crd-roles example (its DecoratorController, unedited: the
webhook URL names an in-cluster Service, sent to the local hook with `--resolve`) and a CRD that
opts in. Also: an invalid DecoratorController, an unreachable hook, and a python hook imported
from PYTHONPATH with no server at all. An error that would only come back (a resource not served,
a hook's answer that cannot be used) is reported after one try, within BUDGET seconds of work;
a hook answering 500 is tried again first.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.commands import BUDGET, ROOT, Command
from tests.decorators.hooks_support import HookServer, closed_port, hook_server

__all__ = ["hook_server"]  # a fixture, imported to be found here

DECORATOR = textwrap.dedent("""\
    apiVersion: metacontroller.k8s.io/v1alpha1
    kind: DecoratorController
    metadata:
      name: crd-role-controller
    spec:
      resources:
        - apiVersion: apiextensions.k8s.io/v1
          resource: customresourcedefinitions
          annotationSelector:
            matchExpressions:
              - {key: enable-default-roles, operator: %(operator)s}
      attachments:
        - apiVersion: rbac.authorization.k8s.io/v1
          resource: clusterroles
      hooks:
        sync:
    %(hook)s
    """)
WEBHOOK = """\
      webhook:
        url: http://crd-role-controller.metacontroller/sync-crd-role
        timeout: 2s"""
CRD = textwrap.dedent("""\
    apiVersion: apiextensions.k8s.io/v1
    kind: CustomResourceDefinition
    metadata:
      name: my-tests.ctl.rlg.io
      annotations:
        enable-default-roles: "yes"
    spec:
      group: ctl.rlg.io
      scope: Cluster
      names: {kind: MyTest, listKind: MyTestList, plural: my-tests, singular: my-test}
      versions:
        - name: v1
          served: true
          storage: true
          schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
    """)
ROLE = "my-tests.ctl.rlg.io-reader"
porchkit = Command("decorators", "reconcile")


def manifests(directory: Path, *, hook: str = WEBHOOK, operator: str = "Exists") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    hook = textwrap.indent(hook, "    ")
    (directory / "controller.yaml").write_text(DECORATOR % {"operator": operator, "hook": hook})
    (directory / "my-crd.yaml").write_text(CRD)
    return directory


def role_hooks(directory: Path) -> None:
    """Write `rolehooks.py` into `directory`: a python sync hook answering a ClusterRole
    `<target>-reader` per target, importable with `directory` on PYTHONPATH."""
    directory.mkdir()
    (directory / "rolehooks.py").write_text(textwrap.dedent("""\
        def sync_roles(request):
            name = request["object"]["metadata"]["name"]
            return {"attachments": [{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                                     "metadata": {"name": name + "-reader"}, "rules": []}]}
        """))


@pytest.fixture
def crd_roles(hook_server: Callable[[str], HookServer]) -> str:
    """`--resolve` sending the example's in-cluster hook host to a local crd_roles.py."""
    return f"crd-role-controller.metacontroller={hook_server('crd_roles').address}"


class TestPreview:
    def test_the_table_lists_the_attachment_created(self, tmp_path: Path, crd_roles: str) -> None:
        result = porchkit("-f", str(manifests(tmp_path / "m")), "--resolve", crd_roles, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        lines = [line.split() for line in result.stdout.splitlines()]
        assert lines == [["DECORATOR", "TARGET", "CHANGE", "ATTACHMENT"],
                         ["crd-role-controller", "CustomResourceDefinition", "my-tests.ctl.rlg.io", "create",
                          "ClusterRole", ROLE]]
        assert result.stderr == ""

    def test_yaml_output_is_the_attachment_owned_by_its_target(self, tmp_path: Path, crd_roles: str) -> None:
        result = porchkit("-f", str(manifests(tmp_path / "m")), "--resolve", crd_roles, "-o", "yaml", cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        [role] = [doc for doc in yaml.safe_load_all(result.stdout) if doc]
        assert (role["kind"], role["metadata"]["name"], role["rules"]) == ("ClusterRole", ROLE, [])
        [owner] = role["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["controller"]) == ("CustomResourceDefinition",
                                                                       "my-tests.ctl.rlg.io", True)
        assert role["metadata"]["annotations"]["metacontroller.k8s.io/decorator-controller"] == "crd-role-controller"

    def test_a_kustomization_beside_the_manifests_is_skipped(self, tmp_path: Path, crd_roles: str) -> None:
        directory = manifests(tmp_path / "m")  # Metacontroller's examples keep one in each folder
        (directory / "kustomization.yaml").write_text("resources: [controller.yaml]\n")  # no kind, as theirs
        result = porchkit("-f", str(directory), "--resolve", crd_roles, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert "create" in result.stdout and result.stderr == ""

    def test_a_python_hook_on_pythonpath_needs_no_server(self, tmp_path: Path) -> None:
        role_hooks(tmp_path / "lib")
        hook = "  python:\n    function: rolehooks:sync_roles"
        result = porchkit("-f", str(manifests(tmp_path / "m", hook=hook)), cwd=tmp_path,
                          env={"PYTHONPATH": str(tmp_path / "lib")})
        assert result.returncode == 0, result.stderr
        assert ["crd-role-controller", "CustomResourceDefinition", "my-tests.ctl.rlg.io", "create", "ClusterRole",
                ROLE] in [line.split() for line in result.stdout.splitlines()]


class TestDeterminism:
    def test_the_same_manifests_in_another_order_print_the_same_table(self, tmp_path: Path) -> None:
        role_hooks(tmp_path / "lib")
        crds = [CRD.replace("my-tests", f"kind{i:02d}s").replace("MyTest", f"Kind{i:02d}")
                .replace("my-test", f"kind{i:02d}") for i in range(10)]
        printed = []
        for name, order in (("forward", crds), ("backward", crds[::-1])):
            directory = manifests(tmp_path / name, hook="  python:\n    function: rolehooks:sync_roles")
            (directory / "my-crd.yaml").write_text("---\n".join(order))
            result = porchkit("-f", str(directory), cwd=tmp_path, env={"PYTHONPATH": str(tmp_path / "lib")})
            assert result.returncode == 0, result.stderr
            printed.append(result.stdout)
        assert printed[0] == printed[1]
        targets = [line.split()[2] for line in printed[0].splitlines()[1:]]
        assert targets == [f"kind{i:02d}s.ctl.rlg.io" for i in range(10)]


class TestFailures:
    def test_one_failing_decorator_is_named_though_another_succeeds_on_the_same_target(self, tmp_path: Path) -> None:
        directory = tmp_path / "m"
        directory.mkdir()
        for name, function in (("a-broken", "fail_finalize"), ("b-fine", "attach_first_slowly")):
            (directory / f"{name}.yaml").write_text(textwrap.dedent(f"""\
                apiVersion: metacontroller.k8s.io/v1alpha1
                kind: DecoratorController
                metadata: {{name: {name}}}
                spec:
                  resources: [{{apiVersion: v1, resource: configmaps, labelSelector: {{matchLabels: {{sel: "yes"}}}}}}]
                  attachments: [{{apiVersion: v1, resource: configmaps}}]
                  hooks: {{sync: {{python: {{function: "tests.decorators.pyhooks:{function}"}}}}}}
                """))
        (directory / "target.yaml").write_text(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: t, labels: {sel: 'yes'}}\n")
        result = porchkit("-f", str(directory), cwd=ROOT)
        assert result.returncode == 1
        [line] = result.stderr.splitlines()
        assert line.startswith(f"porchkit: {directory / 'target.yaml'}: ConfigMap default/t: "
                               "DecoratorController a-broken: Sync error: "), line
        assert "b-fine" in result.stdout  # its attachment is in the table

    def test_an_invalid_decorator_is_one_line_naming_file_object_and_field(self, tmp_path: Path,
                                                                           crd_roles: str) -> None:
        directory = manifests(tmp_path / "m", operator="Gt")
        result = porchkit("-f", str(directory), "--resolve", crd_roles, cwd=tmp_path)
        assert result.returncode == 1
        assert result.stderr.splitlines() == [
            f"porchkit: {directory / 'controller.yaml'}: DecoratorController crd-role-controller: "
            "spec.resources[0].annotationSelector.matchExpressions[0].operator: \"Gt\" is not a selector operator "
            "(In, NotIn, Exists, DoesNotExist)"]
        assert "Traceback" not in result.stdout + result.stderr

    def test_an_object_of_a_kind_not_served_is_one_line_naming_its_file(self, tmp_path: Path) -> None:
        directory = manifests(tmp_path / "m")
        (directory / "widget.yaml").write_text("apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n")
        result = porchkit("-f", str(directory), cwd=tmp_path)
        assert result.returncode == 1
        assert result.stderr.splitlines() == [
            f"porchkit: {directory / 'widget.yaml'}: Widget w: the embedded API server does not serve Widget in "
            "example.com/v1 (add its CustomResourceDefinition)"]

    def test_a_malformed_resolve_is_one_line(self, tmp_path: Path) -> None:
        result = porchkit("-f", str(manifests(tmp_path / "m")), "--resolve", "127.0.0.1:8080", cwd=tmp_path)
        assert result.returncode == 1
        assert result.stderr.splitlines() == [
            "porchkit: --resolve '127.0.0.1:8080': expected HOST=ADDR, e.g. my-hook.default=127.0.0.1:8080"]

    def test_an_unreachable_hook_is_a_sync_error_line(self, tmp_path: Path) -> None:
        address = f"127.0.0.1:{closed_port()}"
        result = porchkit("-f", str(manifests(tmp_path / "m")), "--resolve",
                          f"crd-role-controller.metacontroller={address}", cwd=tmp_path)
        assert result.returncode == 1
        [line] = result.stderr.splitlines()
        assert line.startswith(f"porchkit: {tmp_path / 'm' / 'my-crd.yaml'}: CustomResourceDefinition "
                               f"my-tests.ctl.rlg.io: DecoratorController crd-role-controller: Sync error: POST "
                               f"http://crd-role-controller.metacontroller/sync-crd-role failed: "), line
        assert "Traceback" not in result.stderr

    def test_a_hook_answering_429_for_ever_is_reported_not_waited_for(
            self, tmp_path: Path, hook_server: Callable[[str], HookServer]) -> None:
        directory = tmp_path / "m"
        directory.mkdir()
        (directory / "controller.yaml").write_text(textwrap.dedent("""\
            apiVersion: metacontroller.k8s.io/v1alpha1
            kind: DecoratorController
            metadata: {name: busy}
            spec:
              resources: [{apiVersion: v1, resource: configmaps, labelSelector: {matchLabels: {busy: "yes"}}}]
              attachments: [{apiVersion: v1, resource: configmaps}]
              hooks: {sync: {webhook: {url: "http://busy.hooks/429"}}}
            """))
        (directory / "target.yaml").write_text(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, labels: {busy: 'yes'}}\n")
        result = porchkit("-f", str(directory), "--resolve", f"busy.hooks={hook_server('faulty').address}",
                          "--timeout", "20", cwd=tmp_path)
        assert result.returncode == 1
        [line] = result.stderr.splitlines()
        assert line.startswith(f"porchkit: {directory / 'target.yaml'}: ConfigMap default/a: "
                               "DecoratorController busy: Sync error: "), line
        assert "429" in line  # not "the controllers were still busy after 20s"


def configmap_decorator(directory: Path, hook: str) -> tuple[Path, Path]:
    """A DecoratorController `check` of the ConfigMaps labelled `check: "yes"`, attaching ConfigMaps,
    with the sync hook `hook` (a flow mapping), and one such target `a`: the two files."""
    directory.mkdir(parents=True)
    controller, target = directory / "controller.yaml", directory / "target.yaml"
    controller.write_text(textwrap.dedent(f"""\
        apiVersion: metacontroller.k8s.io/v1alpha1
        kind: DecoratorController
        metadata: {{name: check}}
        spec:
          resources: [{{apiVersion: v1, resource: configmaps, labelSelector: {{matchLabels: {{check: "yes"}}}}}}]
          attachments: [{{apiVersion: v1, resource: configmaps}}]
          hooks: {{sync: {hook}}}
        """))
    target.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, labels: {check: 'yes'}}\n")
    return controller, target


class TestErrorsThatWouldComeBack:
    def test_a_resource_not_served_is_one_line_at_once(self, tmp_path: Path, porchkit_start_up: float) -> None:
        directory = manifests(tmp_path / "m")
        controller = directory / "controller.yaml"
        controller.write_text(controller.read_text().replace("resource: clusterroles", "resource: widgets"))
        result, took = porchkit.timed("-f", str(directory))
        assert result.returncode == 1
        assert result.stderr.splitlines() == [
            f"porchkit: {controller}: DecoratorController crd-role-controller: spec.attachments[0]: can't find "
            "resource 'widgets' in apiVersion 'rbac.authorization.k8s.io/v1'"]
        assert took - porchkit_start_up < BUDGET

    def test_a_webhook_answer_that_is_not_json_is_one_line_after_one_call(
            self, tmp_path: Path, hook_server: Callable[[str], HookServer], porchkit_start_up: float) -> None:
        faulty = hook_server("faulty")
        _, target = configmap_decorator(tmp_path / "m", '{webhook: {url: "http://faulty.hooks/garbage"}}')
        result, took = porchkit.timed("-f", str(tmp_path / "m"), "--resolve", f"faulty.hooks={faulty.address}")
        assert result.returncode == 1
        assert result.stderr.splitlines() == [
            f"porchkit: {target}: ConfigMap default/a: DecoratorController check: Sync error: bad response from "
            "http://faulty.hooks/garbage: invalid JSON: Expecting value: line 1 column 1 (char 0)"]
        assert len(faulty.times("/garbage", "default/a")) == 1
        assert took - porchkit_start_up < BUDGET

    def test_a_python_hook_attaching_a_kind_not_declared_is_one_line_at_once(
            self, tmp_path: Path, porchkit_start_up: float) -> None:
        (tmp_path / "lib").mkdir()
        (tmp_path / "lib" / "secrethooks.py").write_text(textwrap.dedent("""\
            def attach_secret(request):
                name = request["object"]["metadata"]["name"]
                return {"attachments": [{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}}]}
            """))
        _, target = configmap_decorator(tmp_path / "m", "{python: {function: secrethooks:attach_secret}}")
        result, took = porchkit.timed("-f", str(tmp_path / "m"), env={"PYTHONPATH": str(tmp_path / "lib")})
        assert result.returncode == 1
        assert result.stderr.splitlines() == [
            f"porchkit: {target}: ConfigMap default/a: DecoratorController check: Sync error: 1 attachment "
            "operation failed: apply Secret default/a: Secret is not declared in spec.attachments"]
        assert took - porchkit_start_up < BUDGET

    def test_a_hook_answering_500_is_tried_again_before_it_is_reported(
            self, tmp_path: Path, hook_server: Callable[[str], HookServer]) -> None:
        faulty = hook_server("faulty")
        _, target = configmap_decorator(tmp_path / "m", '{webhook: {url: "http://faulty.hooks/500"}}')
        result, _ = porchkit.timed("-f", str(tmp_path / "m"), "--resolve", f"faulty.hooks={faulty.address}")
        assert result.returncode == 1
        [line] = result.stderr.splitlines()
        assert line.startswith(f"porchkit: {target}: ConfigMap default/a: DecoratorController check: Sync error: "
                               "unsupported status code 500"), line
        assert len(faulty.times("/500", "default/a")) > 1
