"""Fixtures of the runtime's tests: a fake clock, an embedded cluster on it, and managers run on
threads (stopped after the test)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from reconcile import FakeClock
from reconcile.embedded import EmbeddedCluster
from reconcile.manager import Manager
from tests.reconcile.support import Running


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
