"""Attacks on the runtime through a real API server: a paused leader, and a second writer.

Managers run as processes of their own (tests/e2e/fencing_manager.py), with a controller whose
reconcile calls a webhook (a side effect outside the cluster, recorded by a hook server in this
test with the caller's identity) and then writes (its ConfigMap's `data.by` names the writer).

* A leader SIGSTOPped past its Lease while a standby takes over, then SIGCONTed, must make no
  hook call and no write on the input it was holding, must step down (exit 1), and must say who
  leads now. (Before fencing it made 5-6 hook calls on 25-second-old input, and its log line
  named itself as the holder.)
* A second writer updating the same targets makes the controller's writes fail with 409
  Conflict: every one shows in `porchkit_write_conflicts_total` on /metrics and in a debug line.
"""

from __future__ import annotations

import contextlib
import json
import re
import secrets
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from reconcile import Cluster, Kind, ObjectKey
from tests.e2e.support import eventually
from tests.reconcile.support import RecordingServer, Request

ROOT = Path(__file__).resolve().parents[2]
CONFIGMAP = Kind("v1", "ConfigMap")
LEASE = Kind("coordination.k8s.io/v1", "Lease")
LEASE_NAME = "fencing-e2e"


# --- the hook server: who called, when ---------------------------------------------------------------


def calls(hook: RecordingServer, caller: str, *, after: float = 0.0) -> list[Request]:
    """The hook calls manager `caller` made after `after` (a time.monotonic())."""
    return [call for call in list(hook.requests) if json.loads(call.body)["caller"] == caller and call.at > after]


@pytest.fixture
def hooks() -> Iterator[Callable[[float], RecordingServer]]:
    """Start RecordingServers: a webhook on loopback recording each call, answering after `delay`
    seconds (a hook that does some work, which leaves other writers time to get in between a
    reconcile's read and write)."""
    started: list[RecordingServer] = []

    def start(delay: float = 0.0) -> RecordingServer:
        started.append(RecordingServer(delay))
        return started[-1]

    yield start
    for server in started:
        server.close()


# --- managers as processes -----------------------------------------------------------------------------


@dataclass
class ManagerProcess:
    identity: str
    process: subprocess.Popen[str]
    stderr: Path
    port: int = 0

    def log(self) -> str:
        return self.stderr.read_text(encoding="utf-8", errors="replace")

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=10) as answer:
            return str(answer.read().decode())


@pytest.fixture
def managers(kubeconfig: str, namespace: str, tmp_path: Path) -> Iterator[Callable[..., ManagerProcess]]:
    """Start tests/e2e/fencing_manager.py processes; each is killed (and continued, if stopped) afterwards."""
    started: list[ManagerProcess] = []

    def start(identity: str, hook_url: str, *options: str) -> ManagerProcess:
        stderr = tmp_path / f"{identity}.stderr"
        with stderr.open("w") as err:
            process = subprocess.Popen(
                [sys.executable, "-m", "tests.e2e.fencing_manager", "--kubeconfig", kubeconfig, "--namespace",
                 namespace, "--identity", identity, "--hook-url", hook_url, *options],
                cwd=ROOT, stdout=subprocess.PIPE, stderr=err, text=True)
        started.append(ManagerProcess(identity, process, stderr))
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        assert line.isdigit(), f"{identity} did not start:\n{started[-1].log()}"
        started[-1].port = int(line)
        return started[-1]

    yield start
    for each in started:
        with contextlib.suppress(ProcessLookupError):
            each.process.send_signal(signal.SIGCONT)
        each.process.kill()
        each.process.wait()
        if each.process.stdout is not None:
            each.process.stdout.close()


def stamped(cluster: Cluster, namespace: str, names: list[str], want: str, by: str | None = None) -> bool:
    """Whether every ConfigMap named has `done == want` (and was written by `by`, when given)."""
    for name in names:
        data = (cluster.get(CONFIGMAP, ObjectKey(namespace, name)) or {}).get("data") or {}
        if data.get("done") != want or (by is not None and data.get("by") != by):
            return False
    return True


def want(cluster: Cluster, namespace: str, names: list[str], value: str) -> None:
    for name in names:
        cluster.patch(CONFIGMAP, ObjectKey(namespace, name), {"data": {"want": value}})


def holder(cluster: Cluster, namespace: str) -> str:
    lease = cluster.get(LEASE, ObjectKey(namespace, LEASE_NAME))
    return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")


# --- the attacks ---------------------------------------------------------------------------------------


def test_a_leader_resumed_after_sigstop_past_its_lease_makes_no_hook_call_or_write_and_names_the_new_leader(
        cluster: Cluster, namespace: str, hooks: Callable[[float], RecordingServer],
        managers: Callable[..., ManagerProcess]) -> None:
    hook = hooks(0.0)
    names = [f"target-{i}" for i in range(4)]
    for name in names:
        cluster.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace},
                        "data": {"want": "1"}})
    suffix = secrets.token_hex(3)
    a = managers(f"a-{suffix}", hook.url("/sync"), "--lease", LEASE_NAME)
    eventually(lambda: holder(cluster, namespace) == a.identity)
    b = managers(f"b-{suffix}", hook.url("/sync"), "--lease", LEASE_NAME)
    eventually(lambda: stamped(cluster, namespace, names, "1", by=a.identity))
    assert calls(hook, b.identity) == []  # the standby calls nothing

    a.process.send_signal(signal.SIGSTOP)  # a is idle: its work is done
    want(cluster, namespace, names, "2")  # new input that a will find queued when it resumes
    eventually(lambda: holder(cluster, namespace) == b.identity)  # a's lease expired: b took over
    eventually(lambda: stamped(cluster, namespace, names, "2", by=b.identity))
    resumed_at = time.monotonic()
    since = cluster.list(CONFIGMAP, namespace=namespace).resource_version
    a.process.send_signal(signal.SIGCONT)

    assert a.process.wait(timeout=30) == 1, a.log()  # it stepped down, and exited
    assert calls(hook, a.identity, after=resumed_at) == [], a.log()
    written = [event.object["metadata"]["name"] for event in cluster.watch(
        CONFIGMAP, namespace=namespace, resource_version=since, timeout=2)
        if event.type != "BOOKMARK" and (event.object.get("data") or {}).get("by") == a.identity]
    assert written == [], a.log()
    assert f"{a.identity} lost leadership to {b.identity}" in a.log()
    assert holder(cluster, namespace) == b.identity


CONFLICTS = re.compile(r'^porchkit_write_conflicts_total\{controller="stamper",group="",kind="ConfigMap"\} (\S+)$',
                       re.M)


def test_a_second_writer_on_the_same_targets_shows_in_the_conflicts_metric_and_the_debug_log(
        cluster: Cluster, connect: Callable[[], Cluster], namespace: str, hooks: Callable[[float], RecordingServer],
        managers: Callable[..., ManagerProcess]) -> None:
    hook = hooks(0.05)  # the reconcile's read and its write are 50 ms apart
    names = [f"target-{i}" for i in range(4)]
    for name in names:
        cluster.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace},
                        "data": {"want": "0"}})
    manager = managers(f"m-{secrets.token_hex(3)}", hook.url("/sync"), "--log-level", "debug")
    other, stop = connect(), threading.Event()

    def second_writer() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            for name in names:
                other.patch(CONFIGMAP, ObjectKey(namespace, name), {"data": {"want": str(n // 10), "noise": str(n)}})

    writer = threading.Thread(target=second_writer, name="second-writer")
    writer.start()
    try:
        found = eventually(lambda: (m := CONFLICTS.search(manager.metrics())) and float(m.group(1)) > 0 and m)
    finally:
        stop.set()
        writer.join(30)
    assert float(found.group(1)) > 0
    lines = re.findall(rf"write conflict: controller stamper, ConfigMap {namespace}/target-\d", manager.log())
    assert lines, manager.log()[-2000:]
    manager.process.send_signal(signal.SIGTERM)
    assert manager.process.wait(timeout=30) == 0
