"""The MapController at scale, on the embedded cluster: one parent, INPUTS inputs (default 10,000).

On a fresh `EmbeddedCluster` holding one parent (a `Fanout`, bench.porchkit.dev/v1, whose
`spec.selector` picks the inputs) and INPUTS labelled input ConfigMaps, with the manager running
the MapControllers (mapctl.supervisor, as `porchkit manager --controllers map` does) and its
caches synced, a MapController is created whose in-process python hook (`map_input` below) maps
each input to one output ConfigMap `<input>-out` carrying the input's data. Then:

  * map all: from creating the MapController until every input's output exists, reported as
    inputs/s. Target: >= 1,000 inputs/s. Also shown: when the parent's status counted INPUTS
    inputs and INPUTS outputs (it follows the last output by mapctl.instance.STATUS_SETTLE
    seconds or more: a count of 10,000 inputs and outputs waits 20 times as long as the last
    one took), and the map hook calls (one per input is the least; the echo of a pass's own
    writes costs none);
  * one change, CHANGES times over: one input's data is changed, and the time until its output
    holds the new data is taken (polling the server every POLL_CHANGE seconds); once the
    controller is idle again, the map hook calls the change cost are counted. Targets: exactly
    1 hook call per change, and median and worst latency < 50 ms. Also shown: the CPU time one
    change costs the controller's threads until all is idle again (the parent's status pass
    included; the bench's own polling, on the main thread, is not);
  * idle: IDLE seconds with nothing changing. Target: 0 hook calls.

Afterwards every output is checked against its input (untimed). `cpu %` is this process's CPU
time over the map-all wall time: near 100 means one core's worth of Python (the GIL) is the
limit. The garbage collector is tuned as `porchkit manager` tunes it (reconcile.gctuning).

Run: `python bench/mapctl_bench.py [--inputs N] [--parallelism N] [--changes N] [--repeat N]`
(or `make bench`). The best of --repeat runs (3 by default) counts for map-all (the figures
move a lot on a shared machine), and every run's changes and idleness must meet their targets.
`--profile` runs once with every thread under its own cProfile, timed by that thread's CPU
clock, and prints the porchkit functions with the most cumulative and own time for each phase
(map all, single changes, idle). Exits non-zero if a target is missed or a pass fails.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from mapctl.context import InputKey
from mapctl.crds import map_controller_crd
from mapctl.inputs import MapResult
from mapctl.instance import Options
from mapctl.supervisor import MapControllers
from reconcile.cluster import Kind, Obj, ObjectKey
from reconcile.controller import Controller
from reconcile.embedded import EmbeddedCluster
from reconcile.gctuning import tune_for_controllers
from reconcile.manager import Manager

NAMESPACE = "bench"
PARENT = "all-inputs"
CONTROLLER = "bench"
INPUT_LABEL = "bench.porchkit.dev/input"
CONFIGMAP = Kind("v1", "ConfigMap")
FANOUT = Kind("bench.porchkit.dev/v1", "Fanout")
HOOK = "mapctl_bench:map_input"  # this module, by the name it has when bench/ is on sys.path

INPUTS_PER_SECOND = 1_000.0  # target: map all
CHANGE_CALLS = 1  # target: map hook calls per single change
CHANGE_LATENCY = 0.050  # target: seconds from a change until its output is updated (median and worst)
IDLE_CALLS = 0  # target: map hook calls while nothing changes
CHANGES, IDLE = 20, 2.0  # single changes measured; seconds of idleness watched
POLL, POLL_CHANGE, QUIET = 0.005, 0.0005, 0.3  # seconds: polling, polling an output, quiet before "idle"
ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("mapctl", "reconcile", "deltapipe")  # what --profile reports on


# --- the hook -----------------------------------------------------------------------------------


class Counter:
    """A thread-safe count of calls."""

    def __init__(self) -> None:
        self.value = 0
        self._lock = threading.Lock()

    def add(self) -> None:
        with self._lock:
            self.value += 1


HOOK_CALLS = Counter()  # a python hook is named by module:function, so its count lives in the module


def map_input(request: dict[str, Any]) -> dict[str, Any]:
    """The map hook: one ConfigMap `<input>-out` with the input's data."""
    HOOK_CALLS.add()
    source = request["input"]
    return {"outputs": [output_for(source)]}


def output_for(source: Obj) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{source['metadata']['name']}-out"},
            "data": dict(source.get("data") or {})}


# --- the objects ----------------------------------------------------------------------------------


def input_name(i: int) -> str:
    return f"input-{i:05d}"


def input_configmap(i: int) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": input_name(i), "namespace": NAMESPACE, "labels": {INPUT_LABEL: "true"}},
            "data": {"index": str(i)}}


def fanout_crd() -> Obj:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "fanouts.bench.porchkit.dev"},
            "spec": {"group": "bench.porchkit.dev", "scope": "Namespaced",
                     "names": {"kind": "Fanout", "listKind": "FanoutList", "plural": "fanouts", "singular": "fanout"},
                     "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                                   "schema": {"openAPIV3Schema": {"type": "object",
                                                                  "x-kubernetes-preserve-unknown-fields": True}}}]}}


def parent() -> Obj:
    return {"apiVersion": FANOUT.api_version, "kind": FANOUT.kind, "metadata": {"name": PARENT, "namespace": NAMESPACE},
            "spec": {"selector": {"matchLabels": {INPUT_LABEL: "true"}}}}


def map_controller(parallelism: int) -> Obj:
    return {"apiVersion": "porchkit.dev/v1alpha1", "kind": "MapController", "metadata": {"name": CONTROLLER},
            "spec": {"parentResource": {"apiVersion": FANOUT.api_version, "resource": "fanouts"},
                     "inputResources": [{"apiVersion": "v1", "resource": "configmaps"}],
                     "outputResources": [{"apiVersion": "v1", "resource": "configmaps",
                                          "updateStrategy": {"method": "InPlace"}}],
                     "parallelism": parallelism,
                     "hooks": {"map": {"python": {"function": HOOK}}}}}


# --- one run --------------------------------------------------------------------------------------


class Passes:
    """What the MapController reports (Options.report): passes, outputs created, and failures (the
    first few kept)."""

    def __init__(self) -> None:
        self.done = self.created = self.failed = 0
        self.failures: list[str] = []
        self._lock = threading.Lock()

    def report(self, controller: str, key: InputKey, result: MapResult | Exception) -> None:
        with self._lock:
            self.done += 1
            if isinstance(result, Exception):
                self.failed += 1
                if len(self.failures) < 3:
                    self.failures.append(f"{key}: {result}")
            else:
                self.created += sum(1 for change in result.changes if change.action == "create")


@dataclass
class Figures:
    """What one run measured."""

    inputs: int
    outputs_seconds: float = 0.0  # until every output was created
    map_seconds: float = 0.0  # until the parent's status counted them all
    map_cpu: float = 0.0
    map_calls: int = 0
    change_calls: list[int] = field(default_factory=list)  # hook calls per single change
    change_latency: list[float] = field(default_factory=list)  # seconds per single change
    change_cpu: list[float] = field(default_factory=list)  # the other threads' CPU seconds per change, until idle
    idle_calls: int = -1
    outputs_right: int = 0  # inputs whose output exists with the input's data
    failed_passes: int = 0
    failures: list[str] = field(default_factory=list)

    @property
    def inputs_per_second(self) -> float:
        return self.inputs / self.outputs_seconds if self.outputs_seconds else 0.0


class Bench:
    """The cluster and the running manager of one run, and its phases."""

    def __init__(self, inputs: int, parallelism: int) -> None:
        self.inputs, self.parallelism = inputs, parallelism
        self.cluster = EmbeddedCluster()
        self.cluster.create(map_controller_crd())
        self.cluster.create(fanout_crd())
        self.cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        for i in range(inputs):
            self.cluster.create(input_configmap(i))
        self.cluster.create(parent())
        self.passes = Passes()
        self.manager = Manager(self.cluster, grace_period=10.0)
        self.maps = MapControllers(self.manager, Options(report=self.passes.report))
        self.manager.add(self.maps.controller())
        self.runner = threading.Thread(target=self.manager.run, name="bench-manager", daemon=True)
        self.runner.start()
        wait_for(lambda: self.manager.state == "running", 60, "the manager did not start")

    def close(self) -> None:
        self.manager.stop()
        self.runner.join(30)
        self.maps.stop_all()
        self.cluster.close()

    def map_all(self, figures: Figures) -> None:
        calls, started, cpu = HOOK_CALLS.value, time.perf_counter(), time.process_time()
        self.cluster.create(map_controller(self.parallelism))
        timeout = 60 + self.inputs / 50
        wait_for(lambda: self.passes.created >= self.inputs, timeout, "map all: not every output was created")
        figures.outputs_seconds = time.perf_counter() - started
        wait_for(self.all_counted, timeout, "map all: the status never counted every input")
        figures.map_seconds = time.perf_counter() - started
        figures.map_cpu = time.process_time() - cpu
        self.wait_idle(60, "map all")
        figures.map_calls = HOOK_CALLS.value - calls

    def changes(self, figures: Figures, count: int) -> None:
        step = max(1, self.inputs // count)
        for n in range(count):
            calls, cpu, polling = HOOK_CALLS.value, time.process_time(), time.thread_time()
            figures.change_latency.append(self.change_one(input_name((n * step + step // 2) % self.inputs), f"c{n}"))
            self.wait_idle(10, f"change {n}")
            figures.change_calls.append(HOOK_CALLS.value - calls)
            # this (main) thread's own polling is not the controller's
            figures.change_cpu.append(time.process_time() - cpu - (time.thread_time() - polling))

    def change_one(self, name: str, value: str) -> float:
        """Seconds from updating input `name`'s data to `value` until its output holds it."""
        source = self.cluster.get(CONFIGMAP, ObjectKey(NAMESPACE, name))
        assert source is not None
        source["data"] = {"index": value}
        self.cluster.update(source)
        started = time.perf_counter()
        output = ObjectKey(NAMESPACE, f"{name}-out")
        wait_for(lambda: (self.cluster.get(CONFIGMAP, output) or {}).get("data") == {"index": value}, 10,
                 f"{output} never got the new data", poll=POLL_CHANGE)
        return time.perf_counter() - started

    def idle(self, figures: Figures, seconds: float) -> None:
        calls = HOOK_CALLS.value
        time.sleep(seconds)  # wall time is the point: nothing may happen while it passes
        figures.idle_calls = HOOK_CALLS.value - calls

    def all_counted(self) -> bool:
        obj = self.cluster.get(FANOUT, ObjectKey(NAMESPACE, PARENT))
        status = (obj or {}).get("status") or {}
        want = {"configmaps": {"total": self.inputs}}
        return status.get("inputs") == want and status.get("outputs") == want

    def outputs_right(self) -> int:
        """Inputs whose output exists, is controlled by the parent and holds the input's data."""
        listed = {obj["metadata"]["name"]: obj for obj in self.cluster.list(CONFIGMAP, namespace=NAMESPACE).items}
        owner = self.cluster.get(FANOUT, ObjectKey(NAMESPACE, PARENT))
        assert owner is not None
        right = 0
        for i in range(self.inputs):
            source, out = listed.get(input_name(i)), listed.get(f"{input_name(i)}-out")
            if source is None or out is None:
                continue
            refs = out["metadata"].get("ownerReferences") or []
            if out.get("data") == source.get("data") and any(r.get("uid") == owner["metadata"]["uid"] for r in refs):
                right += 1
        return right

    def wait_idle(self, timeout: float, phase: str) -> None:
        """Until every queue has been empty, with nothing in flight or due, for QUIET seconds."""
        deadline = time.monotonic() + timeout
        idle_since: float | None = None
        while True:
            now = time.monotonic()
            if not any(busy(controller) for controller in list(self.manager.controllers)):
                idle_since = now if idle_since is None else idle_since
                if now - idle_since >= QUIET:
                    return
            else:
                idle_since = None
            if now > deadline:
                raise TimeoutError(f"{phase}: still busy after {timeout:.0f} s")
            time.sleep(POLL)


def measure(inputs: int, parallelism: int, changes: int, idle: float,
            between: Callable[[str], None] = lambda phase: None) -> Figures:
    """One run: map all, single changes, idle; `between(phase)` is called before each phase."""
    figures = Figures(inputs)
    bench = Bench(inputs, parallelism)
    try:
        between("map all")
        bench.map_all(figures)
        between("single changes")
        bench.changes(figures, changes)
        between("idle")
        bench.idle(figures, idle)
        between("")
        figures.outputs_right = bench.outputs_right()
    except TimeoutError as err:
        figures.failures.append(str(err))
    finally:
        bench.close()
    figures.failed_passes = bench.passes.failed
    figures.failures += bench.passes.failures
    return figures


def busy(controller: Controller[Any]) -> bool:
    queue = controller.queue
    return bool(len(queue) or queue.in_flight() or queue.next_due() is not None)


def wait_for(condition: Callable[[], bool], timeout: float, message: str, poll: float = POLL) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(message)
        time.sleep(poll)


# --- profiling, output ------------------------------------------------------------------------------


Raw = dict[tuple[str, int, str], tuple[int, int, float, float]]  # function -> (prim calls, calls, own, cum)


class PhaseProfiles:
    """Every thread started after `install()` under a cProfile of its own, timed by that thread's
    CPU clock (waits would swamp a wall-clock profile of idle workers). `between(phase)` reads
    every profile's totals so far (without stopping it: only its own thread may) and books the
    difference from the last reading to the phase that ends, so that each phase is reported apart."""

    def __init__(self) -> None:
        self.profiles: list[cProfile.Profile] = []
        self.phases: list[tuple[str, Raw]] = []
        self.phase = ""
        self.last: Raw = {}
        self._lock = threading.Lock()

    def install(self) -> None:
        def start(frame: FrameType, event: str, arg: object) -> None:
            sys.setprofile(None)
            profile = cProfile.Profile(time.thread_time)
            with self._lock:
                self.profiles.append(profile)
            profile.enable()
        threading.setprofile(start)

    def between(self, phase: str) -> None:
        now = self.totals()
        if self.phase:
            self.phases.append((self.phase, {where: _minus(row, self.last.get(where)) for where, row in now.items()}))
        self.phase, self.last = phase, now

    def totals(self) -> Raw:
        """Each function's figures summed over every profile (its completed calls only)."""
        with self._lock:
            profiles = list(self.profiles)
        summed: dict[tuple[str, int, str], list[float]] = {}
        for profile in profiles:
            profile.snapshot_stats()
            for where, (cc, nc, tt, ct, _callers) in profile.stats.items():
                row = summed.setdefault(where, [0, 0, 0.0, 0.0])
                row[0] += cc
                row[1] += nc
                row[2] += tt
                row[3] += ct
        return {where: (int(row[0]), int(row[1]), row[2], row[3]) for where, row in summed.items()}

    def print(self, top: int) -> None:
        ours = tuple(str(ROOT / package) + os.sep for package in PACKAGES)
        for phase, rows in self.phases:
            entries = [(where, row) for where, row in rows.items() if where[0].startswith(ours) and row[1] > 0]
            total = sum(row[2] for row in rows.values())
            if not entries or total <= 0:
                print(f"\n== {phase}: no porchkit function ran")
                continue
            print(f"\n== {phase}: CPU seconds in profiled threads: {total:.2f} (cProfile slows the run down)")
            for title, column in (("cumulative", 3), ("own", 2)):
                print(f"top {top} porchkit functions by {title} CPU time:")
                print(f"{'calls':>10} {'own s':>7} {'cum s':>7} {'share':>6}  function")
                for (path, line, name), row in sorted(entries, key=lambda e: e[1][column], reverse=True)[:top]:
                    print(f"{row[1]:>10,} {row[2]:>7.2f} {row[3]:>7.2f} {100 * row[column] / total:>5.1f}%  "
                          f"{Path(path).relative_to(ROOT)}:{line} {name}")


def _minus(row: tuple[int, int, float, float], before: tuple[int, int, float, float] | None,
           ) -> tuple[int, int, float, float]:
    if before is None:
        return row
    return row[0] - before[0], row[1] - before[1], row[2] - before[2], row[3] - before[3]


def profiled(inputs: int, parallelism: int, changes: int, idle: float, top: int = 15) -> Figures:
    """One run under PhaseProfiles (see there); prints each phase's profile."""
    profiles = PhaseProfiles()
    profiles.install()
    try:
        figures = measure(inputs, parallelism, changes, idle, between=profiles.between)
    finally:
        threading.setprofile(None)
    profiles.print(top)
    return figures


def milliseconds(values: Sequence[float], pick: Callable[[Sequence[float]], float]) -> float:
    return 1000 * pick(values) if values else float("nan")


def checks(runs: Sequence[Figures]) -> list[tuple[bool, str]]:
    """(passed, what) for each target: the best run's map-all; every run's changes and idleness."""
    best = max(runs, key=lambda f: f.inputs_per_second)
    latency = [seconds for f in runs for seconds in f.change_latency]
    calls = sorted({c for f in runs for c in f.change_calls})
    idle = sorted({f.idle_calls for f in runs})
    failed = sum(f.failed_passes for f in runs)
    failures = [failure for f in runs for failure in f.failures]
    of_runs = f" (best of {len(runs)} runs)" if len(runs) > 1 else ""
    return [
        (best.inputs_per_second >= INPUTS_PER_SECOND and best.outputs_right == best.inputs,
         f"map all{of_runs}: {best.outputs_right:,} of {best.inputs:,} outputs right, all created after "
         f"{best.outputs_seconds:.2f} s = {best.inputs_per_second:,.0f} inputs/s (target >= {INPUTS_PER_SECOND:,.0f}), "
         f"counted by the status after {best.map_seconds:.2f} s, {best.map_calls:,} hook calls"),
        (bool(calls) and calls == [CHANGE_CALLS],
         f"single change: hook calls per change {calls} over {len(latency)} changes (target exactly {CHANGE_CALLS})"),
        (bool(latency) and max(latency) < CHANGE_LATENCY,
         f"single change: latency median {milliseconds(latency, statistics.median):.1f} ms, worst "
         f"{milliseconds(latency, max):.1f} ms over {len(latency)} changes (target < {1000 * CHANGE_LATENCY:.0f} ms)"),
        (idle == [IDLE_CALLS], f"idle: {'/'.join(map(str, idle))} hook calls in {IDLE:.0f} s (target {IDLE_CALLS})"),
        (not failed and not failures,
         f"{failed} failed passes" + "".join(f"\n      {failure}" for failure in failures)),
    ]


def print_table(runs: Sequence[Figures], parallelism: int) -> None:
    print(f"{'inputs':>7} {'outputs s':>9} {'status s':>8} {'inputs/s':>8} {'target':>6} {'cpu %':>5} {'calls':>7} "
          f"{'changes':>7} {'calls/chg':>9} {'median ms':>9} {'worst ms':>8} {'target':>6} {'cpu ms/chg':>10} "
          f"{'idle calls':>10}  result")
    for f in runs:
        cpu = 100 * f.map_cpu / f.map_seconds if f.map_seconds else 0.0
        median, worst = milliseconds(f.change_latency, statistics.median), milliseconds(f.change_latency, max)
        per_change = "/".join(str(c) for c in sorted(set(f.change_calls))) or "-"
        ok = all(passed for passed, _ in checks([f]))
        print(f"{f.inputs:>7,} {f.outputs_seconds:>9.2f} {f.map_seconds:>8.2f} {f.inputs_per_second:>8,.0f} "
              f"{INPUTS_PER_SECOND:>6,.0f} {cpu:>5.0f} {f.map_calls:>7,} {len(f.change_calls):>7} {per_change:>9} "
              f"{median:>9.1f} {worst:>8.1f} {1000 * CHANGE_LATENCY:>6.0f} "
              f"{milliseconds(f.change_cpu, statistics.median):>10.1f} {f.idle_calls:>10}  {'PASS' if ok else 'FAIL'}")
    print(f"(parallelism={parallelism}; outputs s: until every output was created (inputs/s is over this); "
          f"status s: until the parent's status counted them all; calls: map hook calls while mapping all; "
          f"calls/chg: the distinct counts "
          f"of hook calls one change cost; cpu ms/chg: median CPU time of the controller's threads per change until "
          f"idle again, the parent's status pass included; idle calls: over {IDLE:.0f} s of no change)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="MapController throughput and latency on the embedded cluster.")
    parser.add_argument("--inputs", type=int, default=10_000, help="inputs of the parent (default 10000)")
    parser.add_argument("--parallelism", type=int, default=8, help="the MapController's spec.parallelism (default 8)")
    parser.add_argument("--changes", type=int, default=CHANGES, help=f"single changes timed (default {CHANGES})")
    parser.add_argument("--repeat", type=int, default=3, help="runs; the best map-all counts (default 3)")
    parser.add_argument("--profile", action="store_true", help="profile one run instead of checking targets")
    args = parser.parse_args(argv)
    # The hook is named "mapctl_bench:map_input": run as a script, this module is __main__, and
    # importing it again by name would give a second module with a second HOOK_CALLS.
    sys.modules.setdefault("mapctl_bench", sys.modules[__name__])
    tune_for_controllers()  # as `porchkit manager` and the local reconcile commands run
    print(f"{args.inputs:,} inputs -> 1 output ConfigMap each, python map hook, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f} at the start")
    if args.profile:
        print_table([profiled(args.inputs, args.parallelism, args.changes, IDLE)], args.parallelism)
        return 0  # the profiler's slowdown makes the targets meaningless here
    runs = [measure(args.inputs, args.parallelism, args.changes, IDLE) for _ in range(max(1, args.repeat))]
    print_table(runs, args.parallelism)
    failed = 0
    for passed, what in checks(runs):
        failed += not passed
        print(f"{'PASS' if passed else 'FAIL'}  {what}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
