"""The embedded Porch's fixtures: `env`, a cluster serving a catalog and a deploy repository (porch_env.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.porchvariant.embedded.porch_env import Env


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    made = Env(tmp_path)
    yield made
    made.close()
