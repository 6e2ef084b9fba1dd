"""`porchkit manager`'s hook flags: --python-hooks and --secret-namespaces become the HookPolicy
its hook controllers get (reconcile.cli); a bad value is one line and exit status 1."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from reconcile import Kind
from reconcile.cli import build_controllers, hook_policy, own_namespace
from reconcile.controller import Controller
from reconcile.embedded import EmbeddedCluster
from reconcile.errors import ReconcileError
from reconcile.hooks import HookPolicy
from reconcile.manager import Manager

CONFIGMAP = Kind("v1", "ConfigMap")
GIVEN: list[HookPolicy] = []  # what `runs_hooks` was given, per call


def runs_hooks(manager: Manager, *, hook_policy: HookPolicy) -> Controller:
    GIVEN.append(hook_policy)
    return Controller("runs-hooks", CONFIGMAP, lambda key: None)


def runs_none(manager: Manager) -> Controller:
    return Controller("runs-none", CONFIGMAP, lambda key: None)


def porchkit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "porchkit", *args], capture_output=True, text=True, timeout=60)


def test_each_flag_may_be_repeated_and_comma_separated() -> None:
    policy = hook_policy(["mycompany.hooks, decorators.examples", "mapctl.examples"], ["team-a,team-b", " team-c "])
    assert policy.python_prefixes == ("mycompany.hooks", "decorators.examples", "mapctl.examples")
    assert policy.secret_namespaces == {"team-a", "team-b", "team-c"}
    assert policy.loopback_plain_http is False


def test_by_default_no_python_hook_runs_and_credentials_come_from_the_managers_namespace() -> None:
    policy = hook_policy([], None)
    assert policy.python_prefixes == ()
    assert policy.secret_namespaces == ({own_namespace()} if own_namespace() else frozenset())


def test_an_empty_secret_namespaces_reads_from_none() -> None:
    assert hook_policy([], [""]).secret_namespaces == frozenset()


def test_the_managers_namespace_is_its_service_accounts_then_pod_namespace(tmp_path: Path) -> None:
    account = tmp_path / "namespace"
    account.write_text("porchkit-system\n")
    assert own_namespace(account, {"POD_NAMESPACE": "elsewhere"}) == "porchkit-system"
    assert own_namespace(tmp_path / "missing", {"POD_NAMESPACE": "from-env"}) == "from-env"
    assert own_namespace(tmp_path / "missing", {}) == ""


@pytest.mark.parametrize("prefix", [".hooks", "mycompany..hooks", "my-company.hooks", "mycompany.hooks:f"])
def test_a_prefix_that_is_not_a_module_name_is_a_user_error(prefix: str) -> None:
    with pytest.raises(ReconcileError) as raised:
        hook_policy([prefix], [])
    assert str(raised.value) == (f"--python-hooks: {prefix!r} is not a module name (dotted identifiers, like "
                                 "mycompany.hooks)")


def test_only_a_factory_that_runs_hooks_gets_the_policy() -> None:
    policy = hook_policy(["mycompany.hooks"], ["team-a"])
    manager = Manager(EmbeddedCluster())
    built = build_controllers(f"{__name__}:runs_hooks", manager, hook_policy=policy)
    built += build_controllers(f"{__name__}:runs_none", manager, hook_policy=policy)
    assert [c.name for c in built] == ["runs-hooks", "runs-none"]
    assert GIVEN[-1] is policy


def test_the_help_explains_both_flags() -> None:
    result = porchkit("manager", "--help")
    text = " ".join(result.stdout.split())
    assert "--python-hooks PREFIX run python hooks only if they are functions of modules under PREFIX" in text
    assert "--secret-namespaces NS read the Secrets and ConfigMaps a webhook names for TLS and credentials only in NS" \
        in text


def test_a_bad_prefix_is_one_line_and_exit_status_1() -> None:
    result = porchkit("manager", "--embedded", "--health-addr", "0", "--python-hooks", "mycompany.hooks,.relative")
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == ("porchkit: --python-hooks: '.relative' is not a module name (dotted identifiers, like "
                             "mycompany.hooks)\n")


@pytest.mark.parametrize("group", ["decorators", "map"])
def test_the_local_commands_help_says_their_hooks_run_with_the_users_rights(group: str) -> None:
    text = " ".join(porchkit(group, "reconcile", "--help").stdout.split())
    assert "Hooks run here with your rights, for your own manifests: a python hook may name a plain function" in text
    assert "Run this only on manifests you trust." in text
