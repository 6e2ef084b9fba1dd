"""run_until_idle: a local run whose process cannot start the threads it needs ends in one line."""

from __future__ import annotations

import threading

import pytest

from reconcile import Kind
from reconcile.controller import Controller
from reconcile.embedded import EmbeddedCluster
from reconcile.errors import ReconcileError
from reconcile.idle import run_until_idle
from reconcile.manager import Manager
from reconcile.outcome import Done

CONFIGMAP = Kind("v1", "ConfigMap")


def test_a_manager_that_cannot_start_its_threads_ends_the_run_with_one_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    start = threading.Thread.start

    def start_only_the_runner(thread: threading.Thread) -> None:
        if thread.name != "local-manager":  # as under a tight `ulimit -v`: the first thread it makes fails
            raise RuntimeError("can't start new thread")
        start(thread)

    with EmbeddedCluster() as cluster:
        manager = Manager(cluster)
        manager.add(Controller("noop", CONFIGMAP, lambda key: Done()))
        monkeypatch.setattr(threading.Thread, "start", start_only_the_runner)
        with pytest.raises(ReconcileError, match="^the controllers could not run: can't start new thread$"):
            run_until_idle(manager, timeout=10)


def test_a_process_that_cannot_start_even_the_runner_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(thread: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    with EmbeddedCluster() as cluster:
        manager = Manager(cluster)
        monkeypatch.setattr(threading.Thread, "start", refuse)
        with pytest.raises(ReconcileError, match="^the controllers could not start: can't start new thread$"):
            run_until_idle(manager, timeout=10)
