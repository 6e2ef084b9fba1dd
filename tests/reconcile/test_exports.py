"""Importing the face of `reconcile` stays cheap (tests/test_exports.py checks that it is honest)."""

from __future__ import annotations

import subprocess
import sys


def test_importing_reconcile_loads_neither_the_kubernetes_client_nor_prometheus() -> None:
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, reconcile; print(' '.join(sorted(sys.modules)))"],
        capture_output=True, text=True, check=True).stdout.split()
    assert "kubernetes" not in loaded and "prometheus_client" not in loaded
