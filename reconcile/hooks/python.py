"""The python hook: a function named "package.module:function", called in-process.

    hooks:
      sync:
        python: {function: "myhooks.decorate:sync", timeout: "5s"}

Which functions may be named is the process's HookPolicy (policy.py): exactly "module:function",
the module under a prefix the operator allowed (checked before the module is imported: importing
runs its code), the function a plain `def` (or lambda) that module itself defines, under a name
that does not begin with `_` (a hook module's helpers stay its own). Builtins, classes, callable
objects, methods, attribute chains, relative and dunder module names, and functions a module
merely imports from another are refused (HookRefused). A local run's policy allows any module,
with the same rules for the rest: a hook that works in a preview works under a manager that
allows its module.

The function is imported once, when the hook is built, and called with the request (a mapping,
the same JSON-shaped request a webhook would receive) from any number of threads at once; it
returns the response as a dict, checked against the response shape like a webhook's body.

Each call runs on a daemon thread of the hook's own small pool, so that the caller can stop
waiting when `timeout` (a Go duration, 10 s by default) passes: the call raises HookError
"timed out". Python cannot kill a thread, so the function itself runs on until it returns; its
late result is dropped. A pool thread that is stuck in a function forever stays stuck (and a
hook whose every thread is stuck times out every call): write functions that return.

The function gets its own deep copy of the request, and its result is copied too, so neither
side can change what the other holds (the request may carry shared cache entries; the result
may be a constant of the module). An exception, or a result that is not a fitting dict, is a
HookError naming the function.
"""

from __future__ import annotations

import importlib
import inspect
import threading
import time
from collections.abc import Callable, Hashable, Mapping
from queue import SimpleQueue
from types import ModuleType
from typing import Any

from reconcile import fencing
from reconcile.hooks.base import (
    HookConfigError,
    HookError,
    HookRefused,
    Instruments,
    ResponseShape,
    check_response,
    format_seconds,
    json_type,
    timeout_of,
)
from reconcile.hooks.policy import HookPolicy, is_module_name, is_plain_name
from reconcile.patching import clone

Function = Callable[[Any], Any]

FIELDS = ("function", "timeout")
MAX_THREADS = 16
_MISSING = object()


def build_python(python: Mapping[str, Any], *, field: str, version: str, strict: bool, shape: ResponseShape,
                 instruments: Instruments, policy: HookPolicy) -> PythonHook:
    """A PythonHook from a `python:` spec at `field`; HookConfigError naming the field at fault
    (an unknown field, a function that cannot be imported), HookRefused when `policy` does not
    allow the function."""
    for key in python:
        if key not in FIELDS:
            raise HookConfigError(f"{field}.{key}", f"unknown field (expected {', '.join(FIELDS)})")
    reference = python.get("function")
    function = load_function(reference, f"{field}.function", policy)
    return PythonHook(function, target=str(reference), timeout=timeout_of(python, field), shape=shape,
                      version=version, strict=strict, instruments=instruments)


def load_function(reference: Any, field: str, policy: HookPolicy) -> Function:
    """The plain function that "package.module:function" names, in a module `policy` allows.

    The module is checked against the policy before it is imported (importing runs its code), and
    the function is taken from the module's own namespace (no module `__getattr__`, no attribute
    chains) and must be a `def` (or lambda) of that very module: not a builtin, a class, a callable
    object, or a function another module defined and this one merely imports."""
    module_name, function_name = parse_reference(reference, field)
    if function_name.startswith("_"):
        raise HookRefused(field, f"refused {reference!r}: a name beginning with _ is private to its module, not a hook")
    if not policy.allows_module(module_name):
        raise HookRefused(field, f"refused {reference!r}: python hooks may come from {policy.describe_modules()}")
    module = _import(module_name, field)
    found = vars(module).get(function_name, _MISSING)
    if found is _MISSING:
        raise HookConfigError(field, f"module {module_name!r} has no attribute {function_name!r}")
    problem = _not_a_plain_function(found, module_name)
    if problem:
        raise HookRefused(field, f"refused {reference!r}: {problem}; a python hook is a function defined in the "
                          "module named")
    function: Function = found
    return function


def parse_reference(reference: Any, field: str) -> tuple[str, str]:
    """("package.module", "function") from "package.module:function"; HookRefused for anything
    else (a relative or dunder module, an attribute chain, a name that is not an identifier)."""
    if isinstance(reference, str):
        module_name, colon, function_name = reference.partition(":")
        if colon and is_module_name(module_name) and is_plain_name(function_name):
            return module_name, function_name
    shown = repr(reference) if isinstance(reference, str) else json_type(reference)
    raise HookRefused(field, f"expected \"package.module:function\" (an absolute module name and the name of a "
                      f"function in it, nothing more), got {shown}")


def _import(module_name: str, field: str) -> ModuleType:
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise HookConfigError(field, f"cannot import {module_name!r}: {err}") from None
    except (Exception, SystemExit) as err:  # the module itself failed while being imported
        raise HookConfigError(field, f"importing {module_name!r} raised {type(err).__name__}: {err}") from None
    name = getattr(module, "__name__", None)
    if not isinstance(module, ModuleType) or name != module_name:
        # Something put another object in sys.modules under this name: the code that would run is
        # not the module the name (and the policy) says.
        got = f"module {name!r}" if isinstance(module, ModuleType) else f"a {type(module).__name__}"
        raise HookRefused(field, f"refused: importing {module_name!r} gave {got}")
    return module


def _not_a_plain_function(found: Any, module_name: str) -> str:
    """Why `found` is not a plain function defined in module `module_name`, or "" when it is one."""
    if not inspect.isfunction(found):
        name = "class" if inspect.isclass(found) else type(found).__name__
        return f"it is {'an' if name[0] in 'aeiou' else 'a'} {name}, not a function"
    if found.__module__ != module_name:
        return f"it is a function of module {found.__module__!r}, which {module_name!r} only imports"
    if inspect.iscoroutinefunction(found) or inspect.isgeneratorfunction(found) or inspect.isasyncgenfunction(found):
        return "it is an async or generator function, which returns no answer when called"
    return ""


class PythonHook:
    """A function as a hook; see the module docstring. Thread-safe."""

    kind = "python"

    def __init__(self, function: Function, *, target: str, timeout: float, shape: ResponseShape,
                 version: str = "v1", strict: bool = False, instruments: Instruments | None = None) -> None:
        self.target, self.version, self.strict = target, version, strict
        self.timeout, self.shape = timeout, shape
        self._function = function
        self._instruments = instruments or Instruments(None, "", "")
        self._workers = _Workers(f"hook {target}")

    def call(self, request: Mapping[str, Any], *, cache_key: Hashable | None = None) -> dict[str, Any]:
        argument = clone(request)
        self._instruments.started()
        started, code = time.perf_counter(), "error"
        try:
            fencing.check()  # here, on the reconcile's thread: the pool's threads carry no guard
            task = self._workers.run(self._function, argument, self.timeout)
            if task is None:
                code = "timeout"
                raise HookError(f"{self.target} timed out after {format_seconds(self.timeout)}")
            if task.cancelled:
                raise HookError(f"{self.target} cancelled: the hook was closed")
            if task.error is not None:
                error = task.error
                raise HookError(f"{self.target} raised {type(error).__name__}: {error}") from error
            answer = check_response(clone(task.result), self.shape, strict=self.strict, source=self.target)
            code = "ok"
            return answer
        finally:
            self._instruments.finished(code, time.perf_counter() - started)

    def close(self) -> None:
        self._workers.close()


class _Task:
    __slots__ = ("function", "argument", "result", "error", "done", "finished", "abandoned", "cancelled")

    def __init__(self, function: Function, argument: Any) -> None:
        self.function, self.argument = function, argument
        self.result: Any = None
        self.error: BaseException | None = None
        self.done = threading.Lock()  # held until the task is finished (a lock is the cheapest wait)
        self.done.acquire()
        self.finished = self.abandoned = self.cancelled = False


class _Workers:
    """Daemon threads that run tasks while their callers wait with a timeout. A thread is started
    when no idle one is left, up to MAX_THREADS; past that, tasks wait for a free thread."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._queue: SimpleQueue[_Task | None] = SimpleQueue()
        self._lock = threading.Lock()
        self._threads = self._idle = 0
        self._waiting: set[_Task] = set()
        self._closed = False

    def run(self, function: Function, argument: Any, timeout: float) -> _Task | None:
        """The finished (or cancelled) task, or None when `timeout` seconds passed first."""
        task = _Task(function, argument)
        with self._lock:
            if self._closed:
                task.cancelled = True
                return task
            self._waiting.add(task)
            start = self._idle == 0 and self._threads < MAX_THREADS
            if start:
                self._threads += 1
            elif self._idle:
                self._idle -= 1
        if start:
            threading.Thread(target=self._work, name=self._name, daemon=True).start()
        self._queue.put(task)
        finished = task.done.acquire(timeout=timeout)
        with self._lock:
            self._waiting.discard(task)
            if not finished and not task.finished:
                task.abandoned = True
                return None
        return task

    def close(self) -> None:
        """Cancel the tasks being waited for and let every thread end (at once if idle, or when
        its function returns)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            waiting, threads = list(self._waiting), self._threads
            for task in waiting:
                self._finish(task, cancelled=True)
        for _ in range(threads):
            self._queue.put(None)

    def _work(self) -> None:
        while (task := self._queue.get()) is not None:
            if task.abandoned or task.finished:
                with self._lock:
                    self._idle += 1
                continue
            try:
                task.result = task.function(task.argument)
            except BaseException as err:  # SystemExit from a hook must not end the thread silently
                task.error = err
            with self._lock:
                self._finish(task)
                self._idle += 1

    @staticmethod
    def _finish(task: _Task, *, cancelled: bool = False) -> None:
        """Wake the task's caller, once (called with the lock held)."""
        if not task.finished:
            task.finished, task.cancelled = True, cancelled
            task.done.release()
