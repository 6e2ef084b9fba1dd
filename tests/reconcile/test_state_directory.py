"""One owner per embedded state directory, and writes that are on disk once acknowledged.

Two processes sharing a `--state` directory destroyed it (an attack on a real deployment lost
every acknowledged write twice in five trials), so the directory's lock is tested with real
processes, through each entry point, and durability by killing a writer (SIGKILL) right after
writes it was told were done.
"""

from __future__ import annotations

import logging
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from porchkit import cli
from reconcile import Kind
from reconcile.embedded import EmbeddedCluster
from reconcile.errors import ServerError, StateInUse
from tests.reconcile.support import ROOT, configmap, manager_process

CONFIGMAP = Kind("v1", "ConfigMap")
REFUSED = re.compile(r"porchkit: state directory (?P<dir>.+) is in use by pid (?P<pid>\d+) on host (?P<host>\S+) "
                     r"since \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


def names(cluster: EmbeddedCluster) -> set[str]:
    return {obj["metadata"]["name"] for obj in cluster.list(CONFIGMAP, namespace="default").items}


def snapshot_of(directory: Path) -> dict[str, bytes]:
    """The bytes of the state files (the lock file aside)."""
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir()) if path.name != "lock"}


# --- in one process ------------------------------------------------------------------------------


def test_a_second_cluster_on_a_held_directory_is_refused_naming_this_process(tmp_path: Path) -> None:
    with EmbeddedCluster(persist_to=tmp_path) as first:
        first.create(configmap("kept"))
        before = snapshot_of(tmp_path)
        with pytest.raises(StateInUse) as refused:
            EmbeddedCluster(persist_to=tmp_path)
        assert str(refused.value).startswith(
            f"state directory {tmp_path} is in use by pid {os.getpid()} on host {socket.gethostname()} since ")
        assert snapshot_of(tmp_path) == before
        first.create(configmap("after"))  # the holder goes on as if nothing happened

    with EmbeddedCluster(persist_to=tmp_path) as reopened:  # closing let it go
        assert names(reopened) == {"kept", "after"}


def test_a_directory_whose_state_cannot_be_read_is_let_go(tmp_path: Path) -> None:
    (tmp_path / "state.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ServerError, match="not valid JSON"):
        EmbeddedCluster(persist_to=tmp_path)
    (tmp_path / "state.json").unlink()
    with EmbeddedCluster(persist_to=tmp_path) as cluster:  # not held by the cluster that failed to open
        cluster.create(configmap("a"))


# --- between processes ---------------------------------------------------------------------------


def wait_started(process: subprocess.Popen[str]) -> None:
    """Until the manager's slow controller reconciles the seeded ConfigMap (it holds the directory)."""
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line.strip() == "started default/slow-one", process.stderr.read() if process.stderr else ""


def stop(process: subprocess.Popen[str]) -> int:
    process.send_signal(signal.SIGTERM)
    try:
        process.communicate(timeout=20)
    finally:
        process.kill()
        process.wait()
    return process.returncode


def refusal(stderr: str) -> str:
    """The one error line of a refused start (after any start-up log lines, before nothing)."""
    lines = stderr.splitlines()
    errors = [line for line in lines if line.startswith("porchkit: ")]
    assert len(errors) == 1 and lines[-1] == errors[0] and "Traceback" not in stderr, stderr
    return errors[0]


def second_manager(state: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tests.reconcile.manager_script", "--embedded", "--state",
                           str(state), "--controllers", "slow", "--health-addr", "127.0.0.1:0"],
                          cwd=ROOT, capture_output=True, text=True, timeout=30)


@pytest.fixture(name="root_logging_restored")
def root_logging_restored_fixture() -> Iterator[None]:
    """`porchkit` run in this process configures the root logger: put it back afterwards."""
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.mark.usefixtures("root_logging_restored")
def test_a_second_process_on_one_state_directory_is_refused_with_one_line_naming_the_first(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state, manifests = tmp_path / "state", tmp_path / "manifests"
    manifests.mkdir()
    with EmbeddedCluster(persist_to=state) as seed:
        seed.create(configmap("slow-one"))
    first = manager_process(state=state)
    watchdog = threading.Timer(60, first.kill)  # never hang the suite on a stuck child
    watchdog.start()
    try:
        wait_started(first)
        before = snapshot_of(state)

        refused = second_manager(state)  # porchkit manager --embedded --state
        assert refused.returncode == 1
        line = REFUSED.fullmatch(refusal(refused.stderr))
        assert line, refused.stderr
        assert (line["dir"], int(line["pid"]), line["host"]) == (str(state), first.pid, socket.gethostname())

        # porchkit variants reconcile --state, in this process: the same one line
        assert cli.main(["variants", "reconcile", "-f", str(manifests), "--state", str(state)]) == 1
        assert REFUSED.fullmatch(refusal(capsys.readouterr().err))

        assert snapshot_of(state) == before  # the refused ones touched nothing
        assert stop(first) == 0
    finally:
        watchdog.cancel()
        watchdog.join()
        first.kill()
        first.wait()

    with EmbeddedCluster(persist_to=state) as after:  # the first's state is intact
        assert names(after) == {"slow-one"}
    again = manager_process(state=state)  # and the directory is free for the next process
    try:
        wait_started(again)
        assert stop(again) == 0
    finally:
        again.kill()
        again.wait()


# --- durability --------------------------------------------------------------------------------------


ROUNDS = 5


def test_no_acknowledged_write_is_lost_when_the_writer_is_killed_right_after_it(tmp_path: Path) -> None:
    acknowledged: set[str] = set()
    chance = random.Random(7)
    for round_ in range(ROUNDS):
        writer = subprocess.Popen([sys.executable, "-m", "tests.reconcile.state_writer", str(tmp_path), f"r{round_}",
                                   "4"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        watchdog = threading.Timer(60, writer.kill)
        watchdog.start()
        try:
            assert writer.stdout is not None
            for _ in range(chance.randrange(20, 200)):
                name = writer.stdout.readline().strip()
                assert name, writer.stderr.read() if writer.stderr else ""
                acknowledged.add(name)
            writer.send_signal(signal.SIGKILL)  # mid-stream: other writes are under way
            writer.wait()
        finally:
            watchdog.cancel()
            watchdog.join()
            writer.kill()
            writer.wait()
            for stream in (writer.stdout, writer.stderr):
                if stream is not None:
                    stream.close()
        with EmbeddedCluster(persist_to=tmp_path) as reopened:  # the killed writer held no lock any more
            missing = acknowledged - names(reopened)
        assert not missing, f"round {round_}: {len(missing)} acknowledged writes lost, e.g. {sorted(missing)[:3]}"
