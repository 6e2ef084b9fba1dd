"""Shared test configuration: paths to the repository's fixtures."""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def testdata() -> Path:
    return ROOT / "testdata"
