"""Prometheus metrics of one manager, under controller-runtime's names, in a registry of its own.

`Metrics` is what controllers (controller.py's `Metrics` protocol) and their work queues
(workqueue.py's `QueueMetrics`) report to, and what the manager tells about leadership. Its
series carry controller-runtime's names and labels, so dashboards and alerts written for Go
operators read it unchanged:

    controller_runtime_reconcile_total{controller,result}      result: success, error, requeue, requeue_after
    controller_runtime_reconcile_errors_total{controller}      every error, terminal ones included
    controller_runtime_terminal_reconcile_errors_total{controller}
    controller_runtime_reconcile_time_seconds{controller}      histogram
    controller_runtime_max_concurrent_reconciles{controller}   controller_runtime_active_workers{controller}
    workqueue_depth / adds_total / retries_total / queue_duration_seconds / work_duration_seconds /
      unfinished_work_seconds / longest_running_processor_seconds {name,controller}
    leader_election_master_status{name}                        1 leading, 0 standing by
    porchkit_informer_last_activity_age_seconds{kind}          seconds since the quietest watch of a kind spoke
    porchkit_informer_synced{kind}, porchkit_informer_relists_total{kind}
    porchkit_hook_requests_total{controller,hook,code}         code: HTTP status, timeout, error; ok in-process
    porchkit_hook_request_duration_seconds{controller,hook}    histogram (default buckets)
    porchkit_hook_in_flight_requests{controller,hook}          hook calls under way
    porchkit_write_conflicts_total{controller,group,kind}      409 Conflicts the writes of a controller's reconciles
                                                               got (another writer changed the object first)

Conflicts are counted where every write passes (fencing.write, called by both Cluster backends),
so a Conflict a helper retries or swallows is counted too; AlreadyExists (409 on a create) is not.
A Terminal error counts as result="error" in reconcile_total, in reconcile_errors_total and in
terminal_reconcile_errors_total, as in controller-runtime. The informer series and the two
in-flight queue series are computed when scraped, from what `track_informers` and
`track_queue` were given.

Promises: never touches prometheus_client's global registry (two managers in one process, or
one per test, do not collide); every method is thread-safe and quick (queues call them with
their lock held). Does not: serve HTTP (health.py serves `render()` at /metrics).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from reconcile.clock import SYSTEM_CLOCK, Clock
from reconcile.informer import Informer

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# controller-runtime's buckets (pkg/internal/controller/metrics, pkg/metrics/workqueue.go).
RECONCILE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
                     1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60)
QUEUE_BUCKETS = tuple(1e-8 * 10**i for i in range(12))  # ExponentialBuckets(10e-9, 10, 12): 10 ns to 1000 s

# The results controller.py reports, mapped to controller-runtime's `result` label.
RESULT_LABELS = {"success": "success", "requeue_after": "requeue_after", "requeue": "requeue",
                 "error": "error", "terminal_error": "error"}

INFORMER_AGE = "porchkit_informer_last_activity_age_seconds"
INFORMER_SYNCED = "porchkit_informer_synced"
INFORMER_RELISTS = "porchkit_informer_relists_total"
QUEUE_UNFINISHED = "workqueue_unfinished_work_seconds"
QUEUE_LONGEST = "workqueue_longest_running_processor_seconds"


class InFlight(Protocol):
    """What `track_queue` reads at each scrape (WorkQueue implements it)."""

    name: str

    def in_flight(self) -> list[float]:
        """Seconds each key now being processed has been at it."""
        ...


class Metrics:
    """The metrics of one manager; see the module docstring. `registry` is its own
    `CollectorRegistry` (add process or platform collectors to it if wanted)."""

    def __init__(self) -> None:
        self.registry = registry = CollectorRegistry(auto_describe=False)
        by_controller, by_queue = ["controller"], ["name", "controller"]
        self._reconciles = Counter("controller_runtime_reconcile_total", "Total number of reconciliations per "
                                   "controller", ["controller", "result"], registry=registry)
        self._errors = Counter("controller_runtime_reconcile_errors_total", "Total number of reconciliation errors "
                               "per controller", by_controller, registry=registry)
        self._terminal = Counter("controller_runtime_terminal_reconcile_errors_total", "Total number of terminal "
                                 "reconciliation errors per controller", by_controller, registry=registry)
        self._time = Histogram("controller_runtime_reconcile_time_seconds", "Length of time per reconciliation per "
                               "controller", by_controller, buckets=RECONCILE_BUCKETS, registry=registry)
        self._max_workers = Gauge("controller_runtime_max_concurrent_reconciles", "Maximum number of concurrent "
                                  "reconciles per controller", by_controller, registry=registry)
        self._active = Gauge("controller_runtime_active_workers", "Number of currently used workers per controller",
                             by_controller, registry=registry)
        self._depth = Gauge("workqueue_depth", "Current depth of workqueue", by_queue, registry=registry)
        self._adds = Counter("workqueue_adds_total", "Total number of adds handled by workqueue", by_queue,
                             registry=registry)
        self._retries = Counter("workqueue_retries_total", "Total number of retries handled by workqueue", by_queue,
                                registry=registry)
        self._latency = Histogram("workqueue_queue_duration_seconds", "How long in seconds an item stays in "
                                  "workqueue before being requested", by_queue, buckets=QUEUE_BUCKETS,
                                  registry=registry)
        self._work = Histogram("workqueue_work_duration_seconds", "How long in seconds processing an item from "
                               "workqueue takes.", by_queue, buckets=QUEUE_BUCKETS, registry=registry)
        self._leader = Gauge("leader_election_master_status", "Gauge of if the reporting system is master of the "
                             "relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to "
                             "identify the lease. Please make sure to group by name.", ["name"], registry=registry)
        by_hook = ["controller", "hook"]
        self._hook_requests = Counter("porchkit_hook_requests_total", "Hook calls by controller, hook and result "
                                      "code (HTTP status, timeout, error, or ok for in-process hooks)",
                                      [*by_hook, "code"], registry=registry)
        self._hook_duration = Histogram("porchkit_hook_request_duration_seconds", "How long hook calls take, in "
                                        "seconds", by_hook, registry=registry)
        self._hook_in_flight = Gauge("porchkit_hook_in_flight_requests", "Hook calls under way", by_hook,
                                     registry=registry)
        self._conflicts = Counter("porchkit_write_conflicts_total", "Writes answered 409 Conflict (another writer "
                                  "changed the object first), by the controller whose reconcile wrote, and the "
                                  "object's API group and kind", ["controller", "group", "kind"], registry=registry)
        self._lock = threading.Lock()
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        self._informers: list[tuple[Callable[[], Iterable[Informer]], Clock]] = []
        self._queues: list[InFlight] = []
        registry.register(_ScrapeTime(self))

    def _of(self, metric: Any, *labels: str) -> Any:
        """`metric.labels(*labels)`, remembered: prometheus_client's lookup takes a lock and builds
        a tuple each time, a visible share of a reconcile that does little else."""
        key = (id(metric), labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    # --- controller.py's Metrics ------------------------------------------------------------

    def workers_started(self, controller: str, workers: int) -> None:
        """A controller started `workers` workers: sets max_concurrent_reconciles, and shows every
        series of the controller at zero (as controller-runtime's initMetrics does)."""
        self._max_workers.labels(controller).set(workers)
        self._active.labels(controller)
        for result in ("success", "error", "requeue", "requeue_after"):
            self._reconciles.labels(controller, result)
        self._errors.labels(controller)
        self._terminal.labels(controller)

    def reconcile_started(self, controller: str) -> None:
        """A worker took a key (active_workers + 1 until `reconciled`)."""
        self._of(self._active, controller).inc()

    def reconciled(self, controller: str, result: str, seconds: float) -> None:
        """A reconcile ended with `result` (success, requeue_after, error or terminal_error)."""
        label = RESULT_LABELS.get(result)
        if label is None:
            raise ValueError(f"unknown reconcile result {result!r} (known: {', '.join(RESULT_LABELS)})")
        self._of(self._active, controller).dec()
        self._of(self._reconciles, controller, label).inc()
        if label == "error":
            self._of(self._errors, controller).inc()
        if result == "terminal_error":
            self._of(self._terminal, controller).inc()
        self._of(self._time, controller).observe(seconds)

    def write_conflict(self, controller: str, group: str, kind: str) -> None:
        """A write of `controller`'s reconcile got a 409 Conflict (fencing.write counts it)."""
        self._of(self._conflicts, controller, group, kind).inc()

    # --- workqueue.py's QueueMetrics ------------------------------------------------------

    def added(self, name: str) -> None:
        self._of(self._adds, name, name).inc()

    def depth(self, name: str, n: int) -> None:
        self._of(self._depth, name, name).set(n)

    def retried(self, name: str) -> None:
        self._of(self._retries, name, name).inc()

    def queue_latency(self, name: str, seconds: float) -> None:
        self._of(self._latency, name, name).observe(seconds)

    def work_duration(self, name: str, seconds: float) -> None:
        self._of(self._work, name, name).observe(seconds)

    # --- reconcile.hooks' HookMetrics ---------------------------------------------------------

    def hook_started(self, controller: str, hook: str) -> None:
        """A hook call began (in_flight + 1 until `hook_finished`)."""
        self._of(self._hook_in_flight, controller, hook).inc()

    def hook_finished(self, controller: str, hook: str, code: str, seconds: float) -> None:
        """A hook call ended with `code` after `seconds`."""
        self._of(self._hook_in_flight, controller, hook).dec()
        self._of(self._hook_requests, controller, hook, code).inc()
        self._of(self._hook_duration, controller, hook).observe(seconds)

    # --- the manager's --------------------------------------------------------------------

    def leading(self, lease: str, leading: bool) -> None:
        """leader_election_master_status{name=lease}: 1 while leading, 0 while standing by."""
        self._leader.labels(lease).set(1 if leading else 0)

    def track_informers(self, informers: Callable[[], Iterable[Informer]], clock: Clock = SYSTEM_CLOCK) -> None:
        """Report the porchkit_informer_* series of `informers()` (called at each scrape), with ages
        read from `clock` (the informers' own)."""
        with self._lock:
            self._informers.append((informers, clock))

    def track_queue(self, queue: InFlight) -> None:
        """Report the queue's unfinished_work_seconds and longest_running_processor_seconds."""
        with self._lock:
            self._queues.append(queue)

    def untrack_queue(self, queue: InFlight) -> None:
        """Stop reporting a queue (its controller was removed); unknown ones are ignored."""
        with self._lock:
            self._queues = [q for q in self._queues if q is not queue]

    # --- exposition ------------------------------------------------------------------------

    def render(self) -> str:
        """Every series in Prometheus' text exposition format (CONTENT_TYPE)."""
        return generate_latest(self.registry).decode()

    def _scrape_time_families(self) -> Iterator[Metric]:
        with self._lock:
            informers, queues = list(self._informers), list(self._queues)
        yield from _informer_families(informers)
        unfinished = GaugeMetricFamily(QUEUE_UNFINISHED, "How many seconds of work has been done that is in progress "
                                       "and hasn't been observed by work_duration.", labels=["name", "controller"])
        longest = GaugeMetricFamily(QUEUE_LONGEST, "How many seconds has the longest running processor for workqueue "
                                    "been running.", labels=["name", "controller"])
        for queue in queues:
            running = queue.in_flight()
            unfinished.add_metric([queue.name, queue.name], sum(running))
            longest.add_metric([queue.name, queue.name], max(running, default=0.0))
        yield from (unfinished, longest)


def _informer_families(tracked: list[tuple[Callable[[], Iterable[Informer]], Clock]]) -> Iterator[Metric]:
    age: dict[str, float] = {}
    synced: dict[str, bool] = {}
    relists: dict[str, float] = {}
    for informers, clock in tracked:
        now = clock.monotonic()
        for informer in informers():
            kind = str(informer.kind)
            age[kind] = max(age.get(kind, 0.0), max(0.0, now - informer.last_activity))
            synced[kind] = synced.get(kind, True) and informer.synced.is_set()
            relists[kind] = relists.get(kind, 0) + informer.relists
    age_family = GaugeMetricFamily(INFORMER_AGE, "Seconds since the quietest watch of a kind last received an "
                                   "event, a bookmark or a list (a silent watch keeps growing it)", labels=["kind"])
    synced_family = GaugeMetricFamily(INFORMER_SYNCED, "Whether every informer of a kind finished its first list",
                                      labels=["kind"])
    relists_family = CounterMetricFamily(INFORMER_RELISTS, "Lists made by the informers of a kind (the first, then "
                                         "one per expired watch)", labels=["kind"])
    for kind in sorted(age):
        age_family.add_metric([kind], age[kind])
        synced_family.add_metric([kind], 1 if synced[kind] else 0)
        relists_family.add_metric([kind], relists[kind])
    yield from (age_family, synced_family, relists_family)


class _ScrapeTime:
    """The series computed when scraped, handed to prometheus_client as a custom collector."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        return self._metrics._scrape_time_families()
