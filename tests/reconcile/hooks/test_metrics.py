"""Hook metrics: every call counted by code, timed, and shown in flight while it runs."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from prometheus_client.parser import text_string_to_metric_families

from reconcile.hooks import Hook, HookError
from reconcile.metrics import Metrics
from tests.reconcile.hooks import functions
from tests.reconcile.hooks.conftest import Server, sync_request
from tests.waiting import eventually

MakeHook = Callable[..., Hook]
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples(metrics: Metrics) -> Samples:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(metrics.render()) for s in family.samples}


def value(found: Samples, series: str, **labels: str) -> float:
    return found[(series, tuple(sorted(labels.items())))]


def test_webhook_calls_are_counted_by_status_code_and_timed(plain: Server, make_hook: MakeHook) -> None:
    metrics = Metrics()
    hook = make_hook({"webhook": {"url": plain.url("/script"), "timeout": "200ms"}}, metrics=metrics)
    hook.call(sync_request())
    hook.call(sync_request())
    for reply in ({"status": 500, "body": "no"}, {"sleep": 1}):
        with pytest.raises(HookError):
            hook.call(sync_request(script=reply))
    found = samples(metrics)
    labels = {"controller": "demo", "hook": "sync"}
    assert value(found, "porchkit_hook_requests_total", code="200", **labels) == 2
    assert value(found, "porchkit_hook_requests_total", code="500", **labels) == 1
    assert value(found, "porchkit_hook_requests_total", code="timeout", **labels) == 1
    assert value(found, "porchkit_hook_request_duration_seconds_count", **labels) == 4
    assert value(found, "porchkit_hook_request_duration_seconds_sum", **labels) >= 0.2
    assert value(found, "porchkit_hook_in_flight_requests", **labels) == 0


def test_in_process_calls_count_as_ok_or_error(make_hook: MakeHook) -> None:
    metrics = Metrics()
    module = "tests.reconcile.hooks.functions"
    good = make_hook({"python": {"function": f"{module}:sync"}}, metrics=metrics, controller="demo", hook="sync")
    bad = make_hook({"python": {"function": f"{module}:explode"}}, metrics=metrics, hook="finalize")
    good.call(sync_request())
    with pytest.raises(HookError):
        bad.call(sync_request())
    found = samples(metrics)
    assert value(found, "porchkit_hook_requests_total", controller="demo", hook="sync", code="ok") == 1
    assert value(found, "porchkit_hook_requests_total", controller="demo", hook="finalize", code="error") == 1


@pytest.mark.usefixtures("blocked")
def test_a_call_under_way_is_in_flight(make_hook: MakeHook) -> None:
    metrics = Metrics()
    hook = make_hook({"python": {"function": "tests.reconcile.hooks.functions:blocked"}}, metrics=metrics)
    caller = threading.Thread(target=hook.call, args=(sync_request(),))
    caller.start()
    eventually(functions.started.is_set)
    assert value(samples(metrics), "porchkit_hook_in_flight_requests", controller="demo", hook="sync") == 1
    functions.release.set()
    caller.join(5)
    assert value(samples(metrics), "porchkit_hook_in_flight_requests", controller="demo", hook="sync") == 0
