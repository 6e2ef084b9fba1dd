"""Δ engine scaling: the cost of one single-object update must not grow with the state.

For N = 1k, 10k, 100k objects, three pipelines are loaded with N objects (untimed), then one
object at a time is updated through `Pipeline.apply` (timed, median of many), next to one full
re-evaluation of the same world (`Pipeline.evaluate`). Targets:
  * per-update cost at 100k within 2x of the cost at 1k, for every pipeline;
  * at 10k objects an incremental update at least 100x cheaper than a re-evaluation.
Run: `python bench/deltapipe_bench.py` (or `make bench`). Exits non-zero if a target is missed.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from deltapipe import Pipeline

SIZES = {"1k": 1_000, "10k": 10_000, "100k": 100_000}
UPDATES = 400  # timed single-object updates per size


@dataclass
class Workload:
    name: str
    pipeline: Callable[[], Pipeline]
    world: Callable[[int], dict[str, list[dict[str, Any]]]]
    changed: Callable[[dict[str, Any], int], dict[str, Any]]  # a real change to one object
    kind: str  # the kind whose objects get updated


def pod(i: int, apps: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"pod-{i}", "namespace": f"ns-{i % apps % 10}", "labels": {"app": f"app-{i % apps}"}},
            "spec": {"replicas": i % 7, "ports": [{"port": 80 + i % 3}, {"port": 443}, {"port": 8080}]},
            "status": {"podIP": f"10.{i // 65536 % 256}.{i // 256 % 256}.{i % 256}", "phase": "Running"}}


def service(i: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": f"app-{i}", "namespace": f"ns-{i % 10}"},
            "spec": {"selector": {"app": f"app-{i}"}}}


def with_replicas(obj: dict[str, Any], step: int) -> dict[str, Any]:
    return {**obj, "spec": {**obj["spec"], "replicas": 100 + step}}


def with_ip(obj: dict[str, Any], step: int) -> dict[str, Any]:
    return {**obj, "status": {**obj["status"], "podIP": f"192.168.{step // 256 % 256}.{step % 256}"}}


SELECT_PROJECT = Workload(
    "@select+@project",
    lambda: Pipeline([
        {"@select": {"@gte": ["$.spec.replicas", 1]}},
        {"@project": {"metadata": {"name": "$.metadata.name", "namespace": "$.metadata.namespace"},
                      "spec": {"app": "$.metadata.labels.app", "scaled": {"@mul": ["$.spec.replicas", 2]}}}},
    ], ["Pod"], {"apiVersion": "view.porchkit.dev/v1", "kind": "PodView"}),
    lambda n: {"Pod": [pod(i, n // 10) for i in range(n)]},
    with_replicas, "Pod")

JOIN = Workload(
    "two-source @join",
    lambda: Pipeline([
        {"@join": {"@and": [{"@eq": ["$.Service.metadata.namespace", "$.Pod.metadata.namespace"]},
                            {"@eq": ["$.Service.spec.selector.app", "$.Pod.metadata.labels.app"]}]}},
        {"@project": {"metadata": {"name": "$.Pod.metadata.name", "namespace": "$.Pod.metadata.namespace"},
                      "spec": {"service": "$.Service.metadata.name", "ip": "$.Pod.status.podIP"}}},
    ], ["Service", "Pod"], {"apiVersion": "view.porchkit.dev/v1", "kind": "Backend"}),
    # N objects in all: 10 pods per service
    lambda n: {"Service": [service(i) for i in range(n // 11)],
               "Pod": [pod(i, n // 11) for i in range(n - n // 11)]},
    with_ip, "Pod")

UNWIND_GATHER = Workload(
    "@unwind+@gather",
    lambda: Pipeline([
        {"@unwind": "$.spec.ports"},
        {"@gather": [{"@concat": ["$.metadata.namespace", "/", "$.metadata.labels.app"]}, "$.status.podIP"]},
        {"@project": {"metadata": {"name": "$.metadata.labels.app", "namespace": "$.metadata.namespace"},
                      "spec": {"ips": "$.status.podIP"}}},
    ], ["Pod"], {"apiVersion": "view.porchkit.dev/v1", "kind": "AppIPs"}),
    # 10 pods (30 unwound documents) per group
    lambda n: {"Pod": [pod(i, n // 10) for i in range(n)]},
    with_ip, "Pod")


def loaded(workload: Workload, size: int) -> tuple[Pipeline, dict[str, list[dict[str, Any]]]]:
    world = workload.world(size)
    pipeline = workload.pipeline()
    pipeline.apply([{"op": "upsert", "kind": kind, "object": obj} for kind, objs in world.items() for obj in objs])
    return pipeline, world


def time_updates(workload: Workload, pipeline: Pipeline, world: dict[str, list[dict[str, Any]]],
                 steps: range) -> list[float]:
    """Seconds per single-object update, one sample per step; each update really changes the object."""
    targets = world[workload.kind]
    samples = []
    for step in steps:
        index = (step * 7919) % len(targets)
        updated = workload.changed(targets[index], step)
        delta = [{"op": "upsert", "kind": workload.kind, "object": updated}]
        start = time.perf_counter()
        out = pipeline.apply(delta)
        samples.append(time.perf_counter() - start)
        assert out, "an update that changes nothing measures nothing"
        targets[index] = updated
    return samples


def measure(workload: Workload) -> dict[str, tuple[float, float]]:
    """Per size: (median seconds per update, seconds for one full re-evaluation).

    The sizes are measured round-robin, a few updates at a time, so that load from elsewhere on
    a shared machine lands on every size alike and the ratios stay meaningful.
    """
    states = {label: loaded(workload, size) for label, size in SIZES.items()}
    samples: dict[str, list[float]] = {label: [] for label in SIZES}
    chunk = 20
    for first in range(0, UPDATES, chunk):
        for label, (pipeline, world) in states.items():
            samples[label] += time_updates(workload, pipeline, world, range(first, first + chunk))
    results = {}
    for label, (pipeline, world) in states.items():
        start = time.perf_counter()
        pipeline.evaluate(world)
        results[label] = (statistics.median(samples[label]), time.perf_counter() - start)
    return results


def main() -> int:
    print(f"{'pipeline':<18} {'N':>5} {'update µs':>10} {'re-eval ms':>11} {'re-eval/update':>15}")
    failures = []
    for workload in (SELECT_PROJECT, JOIN, UNWIND_GATHER):
        per_size = measure(workload)
        for label, (update, reevaluate) in per_size.items():
            print(f"{workload.name:<18} {label:>5} {update * 1e6:>10.1f} {reevaluate * 1e3:>11.1f} "
                  f"{reevaluate / update:>14.0f}x")
        flatness = per_size["100k"][0] / per_size["1k"][0]
        speedup = per_size["10k"][1] / per_size["10k"][0]
        print(f"{'':<18} update(100k)/update(1k) = {flatness:.2f} (target <= 2);  "
              f"re-eval/update at 10k = {speedup:.0f}x (target >= 100)")
        if flatness > 2:
            failures.append(f"{workload.name}: update cost grew {flatness:.2f}x from 1k to 100k")
        if speedup < 100:
            failures.append(f"{workload.name}: incremental update only {speedup:.0f}x cheaper at 10k")
    for failure in failures:
        print(f"MISSED: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
