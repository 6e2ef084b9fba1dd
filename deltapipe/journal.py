"""An undo log, so that a failed `Pipeline.apply` leaves every piece of engine state as it was.

Each state change made through the journal records how to reverse it; `rollback()` replays those
records newest first. The cost is O(1) per change, so an apply stays proportional to its delta
even when it fails.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Any

_MISSING: Any = object()


class Journal:
    __slots__ = ("_undo",)

    def __init__(self) -> None:
        self._undo: list[tuple[Any, Any, Any]] = []

    def set(self, mapping: MutableMapping[Any, Any], key: Any, value: Any) -> Any:
        """mapping[key] = value, reversibly; returns value."""
        self._undo.append((mapping, key, mapping.get(key, _MISSING)))
        mapping[key] = value
        return value

    def pop(self, mapping: MutableMapping[Any, Any], key: Any) -> Any:
        """mapping.pop(key), reversibly; the key must be present."""
        value = mapping.pop(key)
        self._undo.append((mapping, key, value))
        return value

    def on_rollback(self, undo: Callable[..., Any], *args: Any) -> None:
        """Record a custom reversal, for changes the mapping helpers cannot express."""
        self._undo.append((undo, args, _CALL))

    def rollback(self) -> None:
        for target, key, before in reversed(self._undo):
            if before is _CALL:
                target(*key)
            elif before is _MISSING:
                target.pop(key, None)
            else:
                target[key] = before
        self._undo.clear()


_CALL: Any = object()


class Unrecorded(Journal):
    """The same changes with no undo log: for engines that are thrown away when they fail."""

    __slots__ = ()

    def set(self, mapping: MutableMapping[Any, Any], key: Any, value: Any) -> Any:
        mapping[key] = value
        return value

    def pop(self, mapping: MutableMapping[Any, Any], key: Any) -> Any:
        return mapping.pop(key)

    def on_rollback(self, undo: Callable[..., Any], *args: Any) -> None:
        pass
