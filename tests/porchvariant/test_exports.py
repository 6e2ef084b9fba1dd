"""The face of `porchvariant` is cheap: the mutations load without pydantic, CEL or the runtime, and
a name it does not have is an AttributeError (tests/test_exports.py checks that `__all__` is honest)."""

from __future__ import annotations

import subprocess
import sys

import pytest

import porchvariant


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
        porchvariant.nonexistent  # noqa: B018


def test_the_mutations_load_without_pydantic_cel_or_the_runtime() -> None:
    code = "import sys; from porchvariant import apply_mutations; print(' '.join(sorted(sys.modules)))"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(run.stdout.split())
    assert loaded.isdisjoint({"pydantic", "celpy", "cel_expr_python", "reconcile"})
    assert "porchvariant.mutations" in loaded
