"""porchkit's own KRM functions as in-process callables, for a renderer that runs them without kpt.

`in_process_functions()` gives `{"porchkit fn NAME": callable}` for every function registered in
`krmfn.registry.FUNCTIONS`, keyed by the `exec:` string a Kptfile pipeline names it by. The embedded
Porch's renderer (porchvariant.embedded.render.renderer.PipelineRenderer) runs a pipeline with them when
kpt is not installed; porchkit's face hands the mapping over, because porchvariant may not
import krmfn.

A callable takes a ResourceList as a plain dict (`items`, optionally `functionConfig`) and
returns one with `items` and `results` (kpt's result dicts), as the function's process would
write it, but without YAML in between: the function gets copies of the items and the
functionConfig, and the caller's dict is never changed. The outcomes follow
`krmfn.runner.process`, minus the I/O: a function that reports an error result, raises
KrmfnError (a bad functionConfig, say), exits non-zero or raises anything else gives the input
items back unchanged, with its results and one error result saying why. Each function's module
is imported the first time it is called, as `porchkit fn NAME` imports it only when run.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from deltapipe.values import copy_tree
from krmfn import results
from krmfn.errors import KrmfnError
from krmfn.registry import FUNCTIONS
from krmfn.resourcelist import ResourceList
from krmfn.runner import Function

__all__ = ["EXEC_PREFIX", "in_process_functions"]

EXEC_PREFIX = "porchkit fn "

Obj = dict[str, Any]


def in_process_functions() -> dict[str, Callable[[Obj], Obj]]:
    """`{"porchkit fn NAME": callable}` for every function in krmfn.registry.FUNCTIONS (a new dict)."""
    return {EXEC_PREFIX + name: _InProcess(name, target) for name, (target, _) in FUNCTIONS.items()}


class _InProcess:
    """One registered function, called with a ResourceList dict."""

    __slots__ = ("name", "target", "_function")

    def __init__(self, name: str, target: str) -> None:
        self.name, self.target = name, target
        self._function: Function | None = None

    def __repr__(self) -> str:
        return f"<in-process KRM function {EXEC_PREFIX}{self.name} ({self.target})>"

    def __call__(self, resource_list: Obj) -> Obj:
        items = resource_list.get("items") or []
        config = resource_list.get("functionConfig")
        rl = ResourceList(copy_tree(items), copy_tree(config) if config is not None else None)
        try:
            returned = self._load()(rl)
            if returned is not None and returned is not rl:
                raise TypeError(f"the function returned {type(returned).__name__}: "
                                "it must edit the ResourceList in place and return None")
        except KrmfnError as err:
            return _failed(items, rl, results.error(str(err)))
        except SystemExit as exit_:
            if exit_.code not in (None, 0):
                return _failed(items, rl, results.error(f"the function exited with {exit_.code!r}"))
        except Exception as err:  # a bug in the function: reported as process() reports it, exit 3
            message = f"internal error: {type(err).__name__}: {' '.join(str(err).split())}".rstrip(": ")
            return _failed(items, rl, results.error(message))
        if results.exit_code(_reported(rl)):
            return _failed(items, rl, None)
        return _output(rl.items, _reported(rl))

    def _load(self) -> Function:
        if self._function is None:
            module_name, _, attribute = self.target.partition(":")
            self._function = getattr(importlib.import_module(module_name), attribute)
        return self._function


def _reported(rl: ResourceList) -> list[results.Result]:
    return [r for r in rl.results if isinstance(r, results.Result)] if isinstance(rl.results, list) else []


def _failed(items: list[Obj], rl: ResourceList, extra: results.Result | None) -> Obj:
    """The input items as they came (the function worked on copies), its results, and `extra`."""
    return _output(copy_tree(items), _reported(rl) + ([extra] if extra is not None else []))


def _output(items: list[Obj], reported: list[results.Result]) -> Obj:
    return {"apiVersion": "config.kubernetes.io/v1", "kind": "ResourceList", "items": items,
            "results": [r.to_dict() for r in reported]}
