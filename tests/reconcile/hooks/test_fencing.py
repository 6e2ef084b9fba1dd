"""Hooks honour the lease fence: a reconcile of a replica that cannot prove it still holds its
Lease makes no hook call at all, and the refusal is NotLeading, not a HookError (which the
controllers would report, and reporting is a write)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from reconcile import fencing
from reconcile.errors import NotLeading
from reconcile.fencing import Guard
from reconcile.hooks import Hook
from tests.reconcile.hooks import functions
from tests.reconcile.hooks.conftest import Server, sync_request

MakeHook = Callable[..., Hook]


class Switch:
    """A fence that is open or closed as the test says."""

    def __init__(self) -> None:
        self.leading = True

    def check(self) -> None:
        if not self.leading:
            raise NotLeading("not leading")


class NoMetrics:
    def write_conflict(self, controller: str, group: str, kind: str) -> None:
        raise AssertionError("no write happens here")


@pytest.fixture(name="fence")
def fence_fixture() -> Iterator[Switch]:
    switch = Switch()
    with fencing.guarding(Guard("demo", switch, NoMetrics())):
        yield switch


def test_a_webhook_is_not_called_once_the_lease_is_not_provably_held(
        serve: Callable[..., Server], make_hook: MakeHook, fence: Switch) -> None:
    server = serve()
    hook = make_hook({"webhook": {"url": server.url("/sync")}})
    assert hook.call(sync_request())["labels"] == {"decorated": "yes"}
    fence.leading = False
    with pytest.raises(NotLeading):
        hook.call(sync_request())
    assert server.stats()["requests"] == 1
    fence.leading = True  # the connection it had taken went back: the hook still works
    assert hook.call(sync_request())["labels"] == {"decorated": "yes"}


def test_a_python_hook_is_not_called_once_the_lease_is_not_provably_held(
        make_hook: MakeHook, fence: Switch) -> None:
    hook = make_hook({"python": {"function": "tests.reconcile.hooks.functions:recording"}})
    functions.calls.clear()
    hook.call(sync_request())
    fence.leading = False
    with pytest.raises(NotLeading):
        hook.call(sync_request())
    assert functions.calls == ["web"]
