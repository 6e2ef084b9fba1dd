"""Helpers shared by the end-to-end tests: waiting on a real API server, and whether it serves a kind.

A real server's controllers act when they get to it (a CRD is established, kube-controller-manager
collects garbage, a PVC's protection finalizer is lifted), so every wait polls, at a pace a real
server and the controllers running in the test's own process can bear.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from reconcile import Cluster, Kind, NotFound
from tests import waiting

T = TypeVar("T")

TIMEOUT = 60.0  # real seconds: a garbage collection or a PVC's finalizer can take most of a minute


def eventually(check: Callable[[], T], timeout: float = TIMEOUT, *, what: str = "") -> T:
    """tests.waiting.eventually at a real server's pace: a minute by default, polling every 50 ms."""
    return waiting.eventually(check, timeout, interval=0.05, what=what)


def served(cluster: Cluster, kind: Kind) -> bool:
    """Whether the server answers a list of `kind` yet (a new CRD's kind is not served at once)."""
    try:
        cluster.list(kind)
        return True
    except NotFound:
        return False
