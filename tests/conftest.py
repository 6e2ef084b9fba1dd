"""Shared test configuration: paths to the repository's fixtures, and porchkit's start-up time."""

import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


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
