"""Garbage-collector settings for a controller process.

A controller process holds a large, long-lived informer cache (every object it watches, as
dicts) and allocates many short-lived ones per reconcile. With CPython's default thresholds
(a young-generation collection every 700 net allocations) the collector keeps walking the
young objects and, every hundred or so of those, the whole cache: on the DecoratorController
benchmark that is a sixth to a fifth of the process's CPU. Cached objects are plain trees
without reference cycles, freed by reference counting when replaced, so collecting less often
costs little memory. `tune_for_controllers()` is called by the commands that run controllers
(`porchkit manager`, the local `... reconcile` commands) and by the benchmarks; a library user
embedding a Manager decides for their own process.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 20_000  # net allocations between young collections (CPython's default: 700)
OLDER_THRESHOLDS = (20, 20)  # young collections per middle one, middle ones per full one (default 10, 10)

__all__ = ["tune_for_controllers"]


def tune_for_controllers() -> None:
    """Collect less often (see the module docstring); idempotent."""
    gc.set_threshold(YOUNG_THRESHOLD, *OLDER_THRESHOLDS)
