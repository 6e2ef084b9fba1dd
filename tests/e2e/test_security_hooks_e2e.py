"""The attacks on hooks found on a real cluster, replayed against a real API server (`make e2e`).

The manager is built as `porchkit manager --controllers decorator --python-hooks
tests.decorators.pyhooks --secret-namespaces <the test's namespace>` builds it (reconcile.cli's
`hook_policy` and `build_controllers`, with the face's factory), on a KubeCluster, and runs in
this process, so that the traps of tests/decorators/attacks.py see what it would do:

* `subprocess:Popen` would run the program `controller` from PATH: a trap program is first there;
* `builtins:print` would write the target (which carries a mark) to the process's output;
* a webhook naming a Secret in kube-system, over http:// to a server this test runs on loopback,
  would send that Secret's token there.

Each must end as `Ready=False` on its DecoratorController and a Warning Event `CreateError`
naming the field, with nothing run, printed or sent, while a good DecoratorController decorates
its targets.
"""

from __future__ import annotations

import base64
import contextlib
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from decorators.spec import DECORATOR_CONTROLLER
from reconcile import Cluster, Kind, ObjectKey
from reconcile.cluster import Obj
from reconcile.errors import ApiError
from tests.decorators.attacks import (
    LEAK_MARK,
    SECRET_FIELD,
    PathTrap,
    attached,
    builtins_intact,
    good,
    manager_under_attack,
    python_attacks,
    ready,
    refusal,
    secret_thief,
    target,
)
from tests.e2e.support import eventually
from tests.reconcile.support import RecordingServer, Running

SECRET = Kind("v1", "Secret")


@pytest.fixture
def made(cluster: Cluster) -> Iterator[list[tuple[Kind, ObjectKey]]]:
    """Objects outside the test's namespace (DecoratorControllers, the Secret in kube-system),
    deleted after the test."""
    objects: list[tuple[Kind, ObjectKey]] = []
    yield objects
    for kind, key in reversed(objects):
        with contextlib.suppress(ApiError):
            cluster.delete(kind, key)


@pytest.fixture
def running(cluster: Cluster, namespace: str, decorator_crd: None) -> Iterator[Running]:
    """The manager under attack (attacks.py), with the test's namespace as --secret-namespaces, on a thread."""
    started = Running(manager_under_attack(cluster, namespace))
    yield started
    started.stop(30)


@pytest.fixture
def server() -> Iterator[RecordingServer]:
    started = RecordingServer()
    yield started
    started.close()


def create(cluster: Cluster, made: list[tuple[Kind, ObjectKey]], obj: Obj, suffix: str) -> str:
    """Create a DecoratorController named `<name>-<suffix>` (they are cluster-scoped); its name."""
    obj = {**obj, "metadata": {**obj["metadata"], "name": f"{obj['metadata']['name']}-{suffix}"}}
    cluster.create(obj)
    made.append((DECORATOR_CONTROLLER, ObjectKey("", obj["metadata"]["name"])))
    return str(obj["metadata"]["name"])


def refused(cluster: Cluster, name: str) -> tuple[dict[str, Any], Obj]:
    """`name`'s Ready=False condition and its CreateError Event, once the server has both."""
    found: tuple[dict[str, Any], Obj] = eventually(lambda: refusal(cluster, name))
    return found


def test_python_hooks_naming_popen_or_print_are_refused_and_run_nothing(
        cluster: Cluster, namespace: str, running: Running, made: list[tuple[Kind, ObjectKey]], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    trap = PathTrap(tmp_path, monkeypatch)
    suffix = secrets.token_hex(3)
    cluster.create(target("t", namespace))
    names = {name: create(cluster, made, obj, suffix) for name, (obj, _) in python_attacks().items()}
    good_one = create(cluster, made, good(), suffix)

    for attack, (_, message) in python_attacks().items():
        condition, event = refused(cluster, names[attack])
        assert event["type"] == "Warning" and event["involvedObject"]["kind"] == "DecoratorController"
        assert event["message"] == condition["message"]
        assert str(event["message"]).startswith(f"Cannot create new controller: {message}"), event["message"]
    eventually(attached(cluster, "t", namespace))
    cluster.create(target("t2", namespace))  # the good one keeps decorating after the refusals
    eventually(attached(cluster, "t2", namespace))
    assert eventually(lambda: ready(cluster, good_one))["status"] == "True"

    assert trap.ran() == []
    assert builtins_intact()
    assert LEAK_MARK not in capfd.readouterr().out


def test_a_webhook_sending_a_kube_system_secret_over_http_gets_nothing(
        cluster: Cluster, namespace: str, running: Running, made: list[tuple[Kind, ObjectKey]],
        server: RecordingServer) -> None:
    suffix = secrets.token_hex(3)
    secret_name = f"e2e-admin-token-{suffix}"
    cluster.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": secret_name, "namespace": "kube-system"},
                    "data": {"token": base64.b64encode(b"cluster-admin-" + suffix.encode()).decode()}})
    made.append((SECRET, ObjectKey("kube-system", secret_name)))
    cluster.create(target("t", namespace))
    thief = create(cluster, made, secret_thief("thief", server.url("/sync"), secret_name), suffix)
    create(cluster, made, good(), suffix)

    condition, event = refused(cluster, thief)
    assert event["message"] == condition["message"] == (
        f"Cannot create new controller: {SECRET_FIELD}: refused: credentials are sent only over https, not to "
        f"{server.url('')}; use an https:// URL")
    eventually(attached(cluster, "t", namespace))  # the good one ran its pass: the thief had its chance
    assert server.requests == []


def test_over_https_a_kube_system_secret_is_refused_by_namespace_and_never_read(
        cluster: Cluster, namespace: str, running: Running, made: list[tuple[Kind, ObjectKey]]) -> None:
    suffix = secrets.token_hex(3)
    thief = create(cluster, made, secret_thief("thief", "https://hooks.example/sync", f"no-such-{suffix}"), suffix)
    condition, _ = refused(cluster, thief)
    assert condition["message"] == (
        f"Cannot create new controller: {SECRET_FIELD}.secretRef.namespace: refused: Secret "
        f"kube-system/no-such-{suffix} is in namespace 'kube-system'; hook TLS material and credentials are read "
        f"from namespace {namespace} (--secret-namespaces)")
