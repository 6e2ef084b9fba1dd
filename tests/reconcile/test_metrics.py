"""Metrics: controller-runtime's series, from reconcile results, queues, leadership and informers."""

from __future__ import annotations

import urllib.request
from collections.abc import Callable

import prometheus_client
import pytest
from prometheus_client.parser import text_string_to_metric_families

from reconcile import FakeClock, Kind, ObjectKey, Terminal
from reconcile.controller import Controller
from reconcile.embedded import EmbeddedCluster
from reconcile.health import for_manager
from reconcile.manager import LeaderElection, Manager
from reconcile.metrics import Metrics
from reconcile.outcome import Done, Outcome, RequeueAfter
from tests.reconcile.support import Running, configmap
from tests.waiting import step_until

CONFIGMAP = Kind("v1", "ConfigMap")
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples(text: str) -> Samples:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(found: Samples, series: str, **labels: str) -> float:
    return found[(series, tuple(sorted(labels.items())))]


def test_a_terminal_error_counts_as_an_error_and_as_a_terminal_error() -> None:
    metrics = Metrics()
    metrics.reconcile_started("cm")
    metrics.reconciled("cm", "terminal_error", 0.1)
    metrics.reconcile_started("cm")
    metrics.reconciled("cm", "error", 0.1)
    found = samples(metrics.render())
    assert value(found, "controller_runtime_reconcile_total", controller="cm", result="error") == 2
    assert value(found, "controller_runtime_reconcile_errors_total", controller="cm") == 2
    assert value(found, "controller_runtime_terminal_reconcile_errors_total", controller="cm") == 1
    assert ("controller_runtime_reconcile_total", (("controller", "cm"), ("result", "terminal_error"))) not in found


def test_starting_workers_shows_every_result_at_zero_and_the_worker_count() -> None:
    metrics = Metrics()
    metrics.workers_started("cm", 3)
    found = samples(metrics.render())
    for result in ("success", "error", "requeue", "requeue_after"):
        assert value(found, "controller_runtime_reconcile_total", controller="cm", result=result) == 0
    assert value(found, "controller_runtime_max_concurrent_reconciles", controller="cm") == 3
    assert value(found, "controller_runtime_active_workers", controller="cm") == 0


def test_a_reconcile_time_lands_in_the_first_bucket_that_holds_it() -> None:
    metrics = Metrics()
    metrics.reconciled("cm", "success", 0.3)
    found = samples(metrics.render())
    bucket = "controller_runtime_reconcile_time_seconds_bucket"
    assert value(found, bucket, controller="cm", le="0.25") == 0
    assert value(found, bucket, controller="cm", le="0.3") == 1
    assert value(found, bucket, controller="cm", le="+Inf") == 1
    assert value(found, "controller_runtime_reconcile_time_seconds_sum", controller="cm") == pytest.approx(0.3)


def test_an_unknown_result_is_a_bug_and_refused() -> None:
    with pytest.raises(ValueError, match="unknown reconcile result 'maybe'"):
        Metrics().reconciled("cm", "maybe", 0.1)


def test_two_managers_metrics_never_meet_and_never_touch_the_global_registry() -> None:
    first, second = Metrics(), Metrics()
    first.reconciled("cm", "success", 0.1)
    assert "controller=\"cm\"" not in second.render()
    global_names = {family.name for family in prometheus_client.REGISTRY.collect()}
    assert not any(name.startswith(("controller_runtime", "workqueue")) for name in global_names)


def test_informer_age_is_read_from_the_clock_when_scraped(cluster: EmbeddedCluster, clock: FakeClock,
                                                          run: Callable[[Manager], Running]) -> None:
    manager = Manager(cluster, clock=clock)
    manager.add(Controller("cm", CONFIGMAP, lambda key: Done(), clock=clock))
    run(manager)
    step_until(clock, lambda: manager.state == "running", limit=1)
    synced_at = max(i.last_activity for i in manager.cache.informers)
    clock.advance(42)
    found = samples(manager.metrics.render())
    age = value(found, "porchkit_informer_last_activity_age_seconds", kind="ConfigMap")
    assert age == pytest.approx(clock.monotonic() - synced_at)
    assert age >= 42
    assert value(found, "porchkit_informer_synced", kind="ConfigMap") == 1
    assert value(found, "porchkit_informer_relists_total", kind="ConfigMap") == 1


def test_metrics_served_after_a_few_reconciles_have_controller_runtime_names_and_sensible_values(
        cluster: EmbeddedCluster, clock: FakeClock, run: Callable[[Manager], Running]) -> None:
    failed_once: set[str] = set()

    def reconcile(key: ObjectKey) -> Outcome:
        clock.advance(0.2)  # every reconcile takes 0.2 clock-seconds
        if key.name == "later":
            return RequeueAfter(3600)
        if key.name == "bad":
            raise Terminal("the spec is invalid")
        if key.name == "flaky" and key.name not in failed_once:
            failed_once.add(key.name)
            raise RuntimeError("not yet")
        return Done()

    manager = Manager(cluster, clock=clock, leader_election=LeaderElection("default", "metrics-test"))
    manager.add(Controller("cm", CONFIGMAP, reconcile, clock=clock, workers=2))
    for name in ("ok-1", "ok-2", "later", "bad", "flaky"):
        cluster.create(configmap(name))
    run(manager)
    server = for_manager(manager, ("127.0.0.1", 0))
    with server:
        def scrape() -> Samples:
            with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=5) as response:
                assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
                return samples(response.read().decode())

        def settled() -> bool:  # six reconciles done (the flaky one twice), none running
            found = scrape()
            count = ("controller_runtime_reconcile_time_seconds_count", (("controller", "cm"),))
            active = ("controller_runtime_active_workers", (("controller", "cm"),))
            return found.get(count) == 6 and found.get(active) == 0
        step_until(clock, settled, limit=5, step=0.05)
        found = scrape()

    def total(result: str) -> float:
        return value(found, "controller_runtime_reconcile_total", controller="cm", result=result)

    assert (total("success"), total("requeue_after"), total("error"), total("requeue")) == (3, 1, 2, 0)
    assert value(found, "controller_runtime_reconcile_errors_total", controller="cm") == 2
    assert value(found, "controller_runtime_terminal_reconcile_errors_total", controller="cm") == 1
    assert value(found, "controller_runtime_reconcile_time_seconds_sum", controller="cm") >= 1.2  # 6 x 0.2 s
    assert value(found, "controller_runtime_max_concurrent_reconciles", controller="cm") == 2
    queue = {"name": "cm", "controller": "cm"}
    assert value(found, "workqueue_adds_total", **queue) == 6  # five objects, one retry
    assert value(found, "workqueue_retries_total", **queue) == 1
    assert value(found, "workqueue_depth", **queue) == 0
    assert value(found, "workqueue_queue_duration_seconds_count", **queue) == 6
    assert value(found, "workqueue_work_duration_seconds_count", **queue) == 6
    assert value(found, "workqueue_work_duration_seconds_sum", **queue) >= 1.2
    assert value(found, "leader_election_master_status", name="metrics-test") == 1
    assert value(found, "porchkit_informer_synced", kind="ConfigMap") == 1


def test_keys_still_being_processed_show_as_unfinished_work_and_the_longest_runner() -> None:
    from reconcile.workqueue import WorkQueue

    clock = FakeClock()
    queue: WorkQueue[str] = WorkQueue(name="cm", clock=clock)
    metrics = Metrics()
    metrics.track_queue(queue)
    queue.add("a")
    assert queue.get(timeout=0) == "a"
    clock.advance(2)
    queue.add("b")
    assert queue.get(timeout=0) == "b"
    clock.advance(3)
    found = samples(metrics.render())
    assert value(found, "workqueue_longest_running_processor_seconds", name="cm", controller="cm") == 5
    assert value(found, "workqueue_unfinished_work_seconds", name="cm", controller="cm") == 8
    queue.done("a")
    queue.done("b")
    found = samples(metrics.render())
    assert value(found, "workqueue_longest_running_processor_seconds", name="cm", controller="cm") == 0
