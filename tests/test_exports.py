"""Every package's face is honest: `__all__` lists only names the package has, and every public name
its `__init__.py` defines or imports, whether at once or on first use (through a module
`__getattr__`, as krmyaml and porchvariant load theirs). A face without `__all__` exports nothing.

The packages are those pyproject.toml ships. Not counted as exports: names starting with `_`,
modules (a submodule may be listed, as porchvariant lists `api`), and what the face imports from
`__future__` and `typing` to write its own annotations.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import tomllib
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = sorted(pattern.rstrip("*") for pattern in tomllib.loads((ROOT / "pyproject.toml").read_text())
                  ["tool"]["setuptools"]["packages"]["find"]["include"])
ANNOTATION_ONLY = {"__future__", "typing"}


def bound_in_source(source: str) -> tuple[set[str], set[str]]:
    """The names the module's top level binds, including in `if TYPE_CHECKING:` and other blocks,
    and apart from them, those it imports from __future__ and typing."""
    names: set[str] = set()
    helpers: set[str] = set()

    def visit(statements: list[ast.stmt]) -> None:
        for node in statements:
            if isinstance(node, ast.ImportFrom):
                bound = {alias.asname or alias.name for alias in node.names}
                (helpers if node.module in ANNOTATION_ONLY else names).update(bound)
            elif isinstance(node, ast.Import):
                names.update(alias.asname or alias.name.partition(".")[0] for alias in node.names)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
            elif isinstance(node, ast.If | ast.Try):
                visit(node.body)
                visit(node.orelse)
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)
    visit(ast.parse(source).body)
    return names, helpers


def loaded_on_first_use(face: types.ModuleType) -> set[str]:
    """The names a module `__getattr__` resolves: the keys of the tables of names it reads."""
    loader = vars(face).get("__getattr__")
    if loader is None:
        return set()
    names: set[str] = set()
    for global_name in loader.__code__.co_names:
        table = vars(face).get(global_name)
        if isinstance(table, dict | tuple | list | set | frozenset) and table and all(
                isinstance(key, str) for key in table):
            names.update(table)
    assert names, f"{face.__name__}.__getattr__ reads no table of names this test can see"
    return names


def public_names(face: types.ModuleType) -> set[str]:
    """The names a user can import from the face, modules aside."""
    bound, helpers = bound_in_source(Path(face.__file__ or "").read_text(encoding="utf-8"))
    candidates = (bound | set(vars(face)) | loaded_on_first_use(face)) - helpers
    return {name for name in candidates
            if not name.startswith("_") and not isinstance(getattr(face, name, None), types.ModuleType)}


@pytest.mark.parametrize("package", PACKAGES)
def test_every_name_in_all_is_there_once(package: str) -> None:
    face = importlib.import_module(package)
    listed = list(getattr(face, "__all__", []))
    missing = []
    for name in listed:
        try:
            getattr(face, name)  # loads a lazy name
        except AttributeError:
            missing.append(name)
    assert missing == []
    assert sorted(listed) == sorted(set(listed)), "a name is listed twice"


@pytest.mark.parametrize("package", PACKAGES)
def test_all_lists_every_public_name_of_the_face(package: str) -> None:
    face = importlib.import_module(package)
    unlisted = public_names(face) - set(getattr(face, "__all__", []))
    assert unlisted == set()


def test_a_name_loaded_on_first_use_counts_and_annotation_helpers_and_modules_do_not(tmp_path: Path) -> None:
    (tmp_path / "__init__.py").write_text(
        "from __future__ import annotations\n"
        "import importlib\n"
        "from typing import TYPE_CHECKING, Any\n"
        "from json import dumps as eager\n"
        "if TYPE_CHECKING:\n"
        "    from json import JSONDecoder as Typed\n"
        "_TABLE = {'Lazy': 'JSONDecoder'}\n"
        "__all__ = ['eager']\n"
        "def __getattr__(name: str) -> Any:\n"
        "    if name not in _TABLE:\n"
        "        raise AttributeError(name)\n"
        "    return getattr(importlib.import_module('json'), _TABLE[name])\n")
    spec = importlib.util.spec_from_file_location("face", tmp_path / "__init__.py")
    assert spec is not None and spec.loader is not None
    face = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(face)
    assert public_names(face) == {"eager", "Lazy", "Typed"}
