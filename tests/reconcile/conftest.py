"""Fixtures of the runtime's tests: a leak check on every test, a fake clock, an embedded cluster
on it, and managers run on threads (stopped after the test)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

from reconcile import FakeClock
from reconcile.embedded import EmbeddedCluster
from reconcile.manager import Manager
from tests.reconcile.support import Running


@pytest.fixture(name="no_leaked_threads", autouse=True)
def no_leaked_threads_fixture() -> Iterator[None]:
    """Fails a test that leaves a thread running (after giving stopping threads 5 s to end)."""
    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + 5
    while left := [t.name for t in threading.enumerate() if t not in before and t.is_alive()]:
        if time.monotonic() > deadline:
            pytest.fail(f"threads left running: {left}")
        time.sleep(0.01)


@pytest.fixture(name="clock")
def clock_fixture() -> FakeClock:
    return FakeClock()


@pytest.fixture(name="cluster")
def cluster_fixture(clock: FakeClock) -> Iterator[EmbeddedCluster]:
    """An embedded cluster on the fake clock, closed (ending every watch) after the test."""
    with EmbeddedCluster(clock=clock) as embedded:
        yield embedded


@pytest.fixture(name="run")
def run_fixture() -> Iterator[Callable[[Manager], Running]]:
    """Start managers on threads; any still running are stopped after the test."""
    started: list[Running] = []

    def start(manager: Manager) -> Running:
        started.append(Running(manager))
        return started[-1]

    yield start
    for running in started:
        running.stop()
