"""The face of `reconcile` is honest: every listed name is there, and importing it stays cheap."""

from __future__ import annotations

import subprocess
import sys

import reconcile


def test_every_name_in_all_is_importable_from_the_package() -> None:
    missing = [name for name in reconcile.__all__ if not hasattr(reconcile, name)]
    assert missing == []
    assert sorted(reconcile.__all__, key=str.lower) == sorted(set(reconcile.__all__), key=str.lower)


def test_importing_reconcile_loads_neither_the_kubernetes_client_nor_prometheus() -> None:
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, reconcile; print(' '.join(sorted(sys.modules)))"],
        capture_output=True, text=True, check=True).stdout.split()
    assert "kubernetes" not in loaded and "prometheus_client" not in loaded
