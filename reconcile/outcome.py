"""What a reconcile returns, each outcome with exactly one spelling.

Return `Done()` (nothing to do until something watched changes) or `RequeueAfter(seconds)`
(look again later even if nothing changes). Raise `reconcile.Terminal` for "record it, do not
retry". Any other exception means "retry with per-key back-off". There is no boolean flag beside
these (controller-runtime's `Requeue` overlapped `RequeueAfter` until it was deprecated).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Done:
    """Nothing to do until something watched changes."""


@dataclass(frozen=True, slots=True)
class RequeueAfter:
    """Look again after `seconds` even if nothing changes (waiting on git, a hook, a lease)."""

    seconds: float


Outcome = Done | RequeueAfter
