"""The public face: `krmfn.__all__` lists exactly what the package exports, and nothing is missing."""

from __future__ import annotations

import types

import krmfn


def test_every_name_in_all_exists() -> None:
    assert all(hasattr(krmfn, name) for name in krmfn.__all__)


def test_all_lists_every_public_name_imported_into_the_face() -> None:
    public = {
        name
        for name, value in vars(krmfn).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert public == set(krmfn.__all__)
