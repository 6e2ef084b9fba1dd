"""Shared test configuration: a leak check on every test, paths to the repository's fixtures, and
porchkit's start-up time."""

import logging
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.waiting import eventually

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(name="no_leaked_threads", autouse=True)
def no_leaked_threads_fixture() -> Iterator[None]:
    """Fails a test that leaves a thread running (after giving stopping threads 5 s to end)."""
    before = set(threading.enumerate())
    yield

    def left() -> list[str]:
        return [t.name for t in threading.enumerate() if t not in before and t.is_alive()]
    eventually(lambda: not left(), 5.0, interval=0.01, what="the threads the test started to end", show=left)


@pytest.fixture(name="logging_as_it_was", autouse=True)
def logging_as_it_was_fixture() -> Iterator[None]:
    """Puts the root and urllib3 loggers back as they were: a command run in-process configures
    logging for the process (`porchkit ... -f` without -v raises the root level to CRITICAL), and a
    later test's caplog would then see nothing."""
    root, urllib3 = logging.getLogger(), logging.getLogger("urllib3")
    before = (root.level, list(root.handlers), urllib3.level)
    yield
    root.setLevel(before[0])
    root.handlers[:] = before[1]
    urllib3.setLevel(before[2])


@pytest.fixture
def testdata() -> Path:
    return ROOT / "testdata"


@pytest.fixture(scope="session")
def porchkit_start_up() -> float:
    """Seconds `python -m porchkit --version` takes (the best of two): the interpreter's start and
    porchkit's own, to subtract from a command's time when bounding the command's work."""
    def once() -> float:
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "porchkit", "--version"], cwd=ROOT, capture_output=True, check=True,
                       timeout=60)
        return time.perf_counter() - started
    return min(once() for _ in range(2))
