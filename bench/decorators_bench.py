"""The DecoratorController at scale, on the embedded cluster: TARGETS targets, 2 attachments each.

For each kind of hook (python, pipeline, and a webhook on loopback; bench/decorators_hooks.py,
all three answering alike), on a fresh `EmbeddedCluster` holding TARGETS labelled ConfigMaps
(default 5,000), with the manager already running and its caches synced:

  * converge: from creating the DecoratorController to every target holding its two attachment
    ConfigMaps and no queue having work left (the passes that the attachments' own watch events
    cause are part of it). A sync is one sync-hook call and what follows from its answer
    (Metacontroller's "sync"). Converging takes one per target: the echo of a pass's own writes
    asks no hook (decorators/settled.py). syncs/s = syncs / seconds, targets/s = targets /
    seconds, calls/target = syncs / targets, writes/target = write requests / targets, all
    shown. Targets: >= 1,000 syncs/s with the in-process hooks, >= 300 over the webhook, at most
    1.2 calls per target;
  * idle resync: the DecoratorController has resyncPeriodSeconds RESYNC; the manager's clock
    (JumpClock: real time plus the bench's jumps) jumps RESYNC seconds ahead, so every target's
    resync falls due at once, timed until all are synced again. Target: it writes nothing; the
    cluster counts the write requests it is sent, and no object's resourceVersion (nor the
    store's revision) may move.

Attachments use `updateStrategy: InPlace`, so an idle pass really compares each attachment with
the hook's answer (under OnDelete it could not write anything anyway). The webhook server is a
stdlib ThreadingHTTPServer with HTTP/1.1 keep-alive, in a process of its own. `cpu %` is this
process's CPU time over the converge's wall time: near 100 means one core's worth of Python is
the limit (the GIL), not waiting. The garbage collector is tuned as `porchkit manager` tunes it
(reconcile.gctuning).

Run: `python bench/decorators_bench.py [--targets N] [--workers N] [--hooks python,pipeline,webhook]
[--repeat N]` (or `make bench`). With --repeat, each hook's best converge counts (the figures
move a lot on a shared machine), and every run's idle resync must write nothing. `--profile`
instead runs the python hook once with every thread under its own cProfile, timed by that
thread's CPU clock (waits would swamp a wall-clock profile of idle workers), and prints the
porchkit functions with the most cumulative and own time. Exits non-zero if a target is missed,
a pass fails, or an idle resync writes anything.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import decorators_hooks

from decorators.crds import decorator_controller_crd
from decorators.instance import Options
from decorators.supervisor import Decorators
from decorators.sync import SyncResult
from reconcile.clock import SystemClock
from reconcile.cluster import Kind, Obj, ObjectKey
from reconcile.embedded import EmbeddedCluster
from reconcile.gctuning import tune_for_controllers
from reconcile.hooks import HookPolicy
from reconcile.idle import busy
from reconcile.manager import Manager

NAMESPACE = "bench"
DECORATOR = "bench"
TARGET_LABEL = "bench.porchkit.dev/target"
CONFIGMAP = Kind("v1", "ConfigMap")
NAMESPACE_KIND = Kind("v1", "Namespace")
HOOKS = ("python", "pipeline", "webhook")
SYNCS_TARGET = {"python": 1_000.0, "pipeline": 1_000.0, "webhook": 300.0}  # syncs/s to converge
MAX_CALLS_PER_TARGET = 1.2  # sync-hook calls per target while converging
RESYNC = 3_600  # resyncPeriodSeconds: never due while converging; the idle resync jumps the clock to it
WORKERS = 4  # per controller: the hooks are CPU-bound under one GIL, so more only adds switching
POLL, QUIET = 0.005, 0.1  # seconds: how often to look at the queues, and how long they must stay empty
ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("decorators", "reconcile", "deltapipe")  # what --profile reports on


class CountingCluster(EmbeddedCluster):
    """The embedded cluster, counting the write requests it is sent (whether or not they change anything)."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0
        self._count_lock = threading.Lock()

    def _counted(self) -> None:
        with self._count_lock:
            self.writes += 1

    def create(self, obj: Obj) -> Obj:
        self._counted()
        return super().create(obj)

    def update(self, obj: Obj) -> Obj:
        self._counted()
        return super().update(obj)

    def update_status(self, obj: Obj) -> Obj:
        self._counted()
        return super().update_status(obj)

    def patch(self, kind: Kind, key: ObjectKey, patch: Any, **options: Any) -> Obj:
        self._counted()
        return super().patch(kind, key, patch, **options)

    def apply(self, obj: Obj, **options: Any) -> Obj:
        self._counted()
        return super().apply(obj, **options)

    def delete(self, kind: Kind, key: ObjectKey, **options: Any) -> Obj | None:
        self._counted()
        return super().delete(kind, key, **options)

    def revision(self) -> str:
        """The store's revision: it moves with every write that changes anything, of any kind."""
        return self.list(NAMESPACE_KIND).resource_version


class JumpClock(SystemClock):
    """Real time plus the jumps the bench makes (`jump`), waking whatever waits through the clock."""

    def __init__(self) -> None:
        self.offset = 0.0
        self._lock = threading.Lock()
        self._waiting: set[threading.Condition] = set()

    def monotonic(self) -> float:
        return time.monotonic() + self.offset

    def jump(self, seconds: float) -> None:
        with self._lock:
            self.offset += seconds
            waiting = list(self._waiting)
        for condition in waiting:
            with condition:
                condition.notify_all()

    def wait(self, condition: threading.Condition, timeout: float | None) -> None:
        with self._lock:
            self._waiting.add(condition)
        try:
            condition.wait(timeout)
        finally:
            with self._lock:
                self._waiting.discard(condition)


class Passes:
    """What the decorator reports (Options.report): passes, attachments created, failures (the
    first few kept)."""

    def __init__(self) -> None:
        self.done = self.created = self.failed = 0
        self.failures: list[str] = []
        self._lock = threading.Lock()

    def report(self, decorator: str, kind: Kind, key: ObjectKey, result: SyncResult | Exception) -> None:
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
    """What one hook's run measured."""

    hook: str
    targets: int
    converge_seconds: float = 0.0
    converge_cpu: float = 0.0  # CPU seconds this process used meanwhile (all threads)
    converge_passes: int = 0
    converge_writes: int = 0  # write requests the cluster was sent while converging
    attached: int = 0  # targets holding exactly their two attachments, as the hook answers them
    idle_seconds: float = 0.0
    idle_passes: int = 0
    idle_writes: int = 0  # write requests the cluster was sent during the idle resync
    idle_moved: int = 0  # objects whose resourceVersion changed during it
    failed_passes: int = 0
    failures: tuple[str, ...] = ()

    @property
    def syncs_per_second(self) -> float:
        return self.converge_passes / self.converge_seconds if self.converge_seconds else 0.0

    @property
    def targets_per_second(self) -> float:
        return self.targets / self.converge_seconds if self.converge_seconds else 0.0

    @property
    def calls_per_target(self) -> float:
        return self.converge_passes / self.targets if self.targets else 0.0

    @property
    def writes_per_target(self) -> float:
        return self.converge_writes / self.targets if self.targets else 0.0

    @property
    def idle_per_second(self) -> float:
        return self.targets / self.idle_seconds if self.idle_seconds else 0.0


# --- the objects ----------------------------------------------------------------------------


def target_name(i: int) -> str:
    return f"target-{i:05d}"


def target(i: int) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": target_name(i), "namespace": NAMESPACE, "labels": {TARGET_LABEL: "true"}},
            "data": {"index": str(i)}}


def decorator_controller(hook: dict[str, Any]) -> Obj:
    return {"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "DecoratorController",
            "metadata": {"name": DECORATOR},
            "spec": {"resources": [{"apiVersion": "v1", "resource": "configmaps",
                                    "labelSelector": {"matchLabels": {TARGET_LABEL: "true"}}}],
                     "attachments": [{"apiVersion": "v1", "resource": "configmaps",
                                      "updateStrategy": {"method": "InPlace"}}],
                     "hooks": {"sync": hook}, "resyncPeriodSeconds": RESYNC}}


def hook_spec(hook: str, port: int | None) -> dict[str, Any]:
    if hook == "python":
        return {"python": {"function": f"{decorators_hooks.__name__}:sync"}}
    if hook == "pipeline":
        return {"pipeline": decorators_hooks.PIPELINE}
    return {"webhook": {"url": f"http://127.0.0.1:{port}/sync"}}


# --- one run ----------------------------------------------------------------------------------


def measure(hook: str, targets: int, workers: int, port: int | None = None) -> Figures:
    """Converge `targets` targets with `hook`, then time an idle resync; see the module docstring."""
    figures = Figures(hook, targets)
    cluster = CountingCluster()
    cluster.create(decorator_controller_crd())
    cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    for i in range(targets):
        cluster.create(target(i))
    passes = Passes()
    clock = JumpClock()
    manager = Manager(cluster, grace_period=10.0, clock=clock)
    decorators = Decorators(manager, Options(workers=workers, report=passes.report, hook_policy=HookPolicy.local()))
    manager.add(decorators.controller())
    runner = threading.Thread(target=manager.run, name="bench-manager", daemon=True)
    runner.start()
    timeout = 60 + targets / 50
    baseline: tuple[dict[str, str], str, int, int] | None = None
    try:
        wait_for(lambda: manager.state == "running", 60, "the manager did not start")

        started, cpu, writes = time.perf_counter(), time.process_time(), cluster.writes
        cluster.create(decorator_controller(hook_spec(hook, port)))
        converged = wait_idle(manager, lambda: passes.created >= 2 * targets, timeout, "converge")
        figures.converge_seconds = converged - started
        figures.converge_cpu = time.process_time() - cpu
        figures.converge_passes = passes.done
        figures.converge_writes = cluster.writes - writes - 1  # not the DecoratorController's create

        baseline = resource_versions(cluster), cluster.revision(), cluster.writes, passes.done
        started = time.perf_counter()
        clock.jump(RESYNC)
        figures.idle_seconds = wait_idle(manager, lambda: passes.done >= baseline[3] + targets, timeout,
                                         "idle resync") - started
    except TimeoutError as err:
        figures.failures += (str(err),)
    finally:
        manager.stop()
        runner.join(30)
        decorators.stop_all()
    if baseline is not None:
        versions, revision, writes, before = baseline
        figures.idle_passes = passes.done - before
        figures.idle_writes = cluster.writes - writes
        after = resource_versions(cluster)
        figures.idle_moved = sum(1 for name in versions.keys() | after.keys() if versions.get(name) != after.get(name))
        if not figures.idle_moved and cluster.revision() != revision:
            figures.idle_moved = 1  # something outside the namespace changed
    figures.attached = count_attached(cluster, targets)
    cluster.close()
    figures.failed_passes = passes.failed
    figures.failures += tuple(passes.failures)
    return figures


def wait_for(condition: Callable[[], bool], timeout: float, message: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(message)
        time.sleep(POLL)


def wait_idle(manager: Manager, done: Callable[[], bool], timeout: float, phase: str) -> float:
    """The perf_counter time from which `done()` held and every queue was empty, with nothing in
    flight or due, provided it all stayed so for QUIET seconds (a watch event may be on its way)."""
    deadline = time.monotonic() + timeout
    idle_since: float | None = None
    while True:
        now = time.perf_counter()
        if done() and not any(busy(controller.queue, RESYNC / 2) for controller in list(manager.controllers)):
            if idle_since is None:
                idle_since = now
            elif now - idle_since >= QUIET:
                return idle_since
        else:
            idle_since = None
        if time.monotonic() > deadline:
            raise TimeoutError(f"{phase}: still busy after {timeout:.0f} s")
        time.sleep(POLL)



def resource_versions(cluster: EmbeddedCluster) -> dict[str, str]:
    return {obj["metadata"]["name"]: obj["metadata"]["resourceVersion"]
            for obj in cluster.list(CONFIGMAP, namespace=NAMESPACE).items}


def count_attached(cluster: EmbeddedCluster, targets: int) -> int:
    """Targets whose attachments are exactly their two ConfigMaps, controlled by them, with the
    labels and data the hooks answer."""
    listed = cluster.list(CONFIGMAP, namespace=NAMESPACE).items
    owners = {obj["metadata"]["uid"]: obj for obj in listed if TARGET_LABEL in (obj["metadata"].get("labels") or {})}
    found: dict[str, dict[str, Obj]] = {}
    for obj in listed:
        for ref in obj["metadata"].get("ownerReferences") or []:
            if ref.get("controller") and ref.get("uid") in owners:
                found.setdefault(ref["uid"], {})[obj["metadata"]["name"]] = obj
    attached = 0
    for uid, owner in owners.items():
        want = decorators_hooks.attachments_for(owner)
        have = found.get(uid, {})
        if len(have) == len(want) and all(
                (got := have.get(w["metadata"]["name"])) is not None and got.get("data") == w["data"]
                and got["metadata"].get("labels") == w["metadata"]["labels"] for w in want):
            attached += 1
    return attached if len(owners) == targets else 0


# --- the webhook server, profiling, output ------------------------------------------------------


class WebhookServer:
    """bench/decorators_hooks.py run as a webhook server, in a process of its own."""

    def __init__(self) -> None:
        script = Path(decorators_hooks.__file__).resolve()
        self.process = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.strip().isdigit():
            self.stop()
            raise SystemExit(f"the webhook server did not start (it printed {line!r})")
        self.port = int(line)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)
        if self.process.stdout is not None:
            self.process.stdout.close()


def profiled(targets: int, workers: int, top: int = 15) -> Figures:
    """One python-hook run, every thread started meanwhile under its own cProfile timed by that
    thread's CPU clock; prints the porchkit functions with the most cumulative and own CPU time,
    summed over threads."""
    profiles: list[tuple[threading.Thread, cProfile.Profile]] = []

    def start(frame: FrameType, event: str, arg: object) -> None:
        sys.setprofile(None)
        profile = cProfile.Profile(time.thread_time)
        profiles.append((threading.current_thread(), profile))
        profile.enable()

    threading.setprofile(start)
    try:
        figures = measure("python", targets, workers)
    finally:
        threading.setprofile(None)
    # Only a profile whose thread has ended is complete: another thread cannot close the calls
    # still open on its stack (it would time them with its own CPU clock).
    ended = []
    for thread, profile in profiles:
        thread.join(5)
        if not thread.is_alive():
            ended.append(profile)
    stats = pstats.Stats(*ended)
    rows = stats.stats  # type: ignore[attr-defined]  # {(file, line, function): (cc, calls, own, cumulative, callers)}
    ours = tuple(str(ROOT / package) + os.sep for package in PACKAGES)
    entries = [(where, row) for where, row in rows.items() if where[0].startswith(ours)]
    total = sum(row[2] for row in rows.values())
    print(f"\nCPU seconds in profiled threads: {total:.2f} ({len(ended)} of {len(profiles)} threads; "
          f"cProfile slows the run down several times)")
    for title, column in (("cumulative", 3), ("own", 2)):
        print(f"\ntop {top} porchkit functions by {title} CPU time:")
        print(f"{'calls':>10} {'own s':>7} {'cum s':>7} {'share':>6}  function")
        for (path, line, name), row in sorted(entries, key=lambda e: e[1][column], reverse=True)[:top]:
            print(f"{row[1]:>10,} {row[2]:>7.2f} {row[3]:>7.2f} {100 * row[column] / total:>5.1f}%  "
                  f"{Path(path).relative_to(ROOT)}:{line} {name}")
    return figures


def checks(runs: Sequence[Figures]) -> list[tuple[bool, str]]:
    """(passed, what) for each target one hook is held to: its best run's converge, and every
    run's idle resync and passes."""
    best = max(runs, key=lambda f: f.syncs_per_second)
    want = SYNCS_TARGET[best.hook]
    writes, moved = sum(f.idle_writes for f in runs), sum(f.idle_moved for f in runs)
    failed = sum(f.failed_passes for f in runs)
    failures = [failure for f in runs for failure in f.failures]
    of_runs = f" (best of {len(runs)} runs)" if len(runs) > 1 else ""
    calls = max(f.calls_per_target for f in runs)
    return [
        (calls <= MAX_CALLS_PER_TARGET,
         f"sync-hook calls per target while converging: {calls:.2f} at most (target <= {MAX_CALLS_PER_TARGET}); "
         f"writes per target: {max(f.writes_per_target for f in runs):.2f} at most"),
        (best.syncs_per_second >= want and best.attached == best.targets,
         f"converge{of_runs}: {best.attached:,} of {best.targets:,} targets attached in "
         f"{best.converge_seconds:.2f} s ({best.targets_per_second:,.0f} targets/s), {best.converge_passes:,} syncs, "
         f"{best.syncs_per_second:,.0f} syncs/s (target >= {want:,.0f})"),
        (all(f.idle_seconds > 0 for f in runs) and not writes and not moved,
         f"idle resync: {writes} writes sent, {moved} resourceVersions changed (target: none)"),
        (not failed and not failures,
         f"{failed} failed passes" + "".join(f"\n      {failure}" for failure in failures)),
    ]


def print_table(results: Sequence[Figures], workers: int) -> None:
    print(f"{'hook':<9} {'targets':>7} {'converge s':>10} {'targets/s':>9} {'syncs':>7} {'syncs/s':>8} {'target':>7} "
          f"{'calls/t':>7} {'writes/t':>8} {'cpu %':>5} "
          f"{'idle s':>7} {'idle/s':>7} {'writes':>6} {'moved':>5}  result")
    for f in results:
        cpu = 100 * f.converge_cpu / f.converge_seconds if f.converge_seconds else 0.0
        ok = all(passed for passed, _ in checks([f]))
        print(f"{f.hook:<9} {f.targets:>7,} {f.converge_seconds:>10.2f} {f.targets_per_second:>9,.0f} "
              f"{f.converge_passes:>7,} {f.syncs_per_second:>8,.0f} {SYNCS_TARGET[f.hook]:>7,.0f} "
              f"{f.calls_per_target:>7.2f} {f.writes_per_target:>8.2f} {cpu:>5.0f} "
              f"{f.idle_seconds:>7.2f} "
              f"{f.idle_per_second:>7,.0f} {f.idle_writes:>6} {f.idle_moved:>5}  {'PASS' if ok else 'FAIL'}")
    print(f"(workers={workers} per controller; syncs: sync-hook calls while converging, calls/t and writes/t: "
          "per target while converging; writes, moved: write requests sent and resourceVersions changed during "
          "the idle resync)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="DecoratorController throughput on the embedded cluster.")
    parser.add_argument("--targets", type=int, default=5_000, help="targets per run (default 5000)")
    parser.add_argument("--workers", type=int, default=WORKERS, help=f"workers per controller (default {WORKERS})")
    parser.add_argument("--hooks", default=",".join(HOOKS), help="hooks to run, comma-separated (default: all)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per hook; the best converge counts (default 1)")
    parser.add_argument("--profile", action="store_true", help="profile one python-hook run instead")
    args = parser.parse_args(argv)
    hooks = [hook for hook in args.hooks.split(",") if hook]
    if unknown := sorted(set(hooks) - set(HOOKS)):
        parser.error(f"--hooks: unknown {', '.join(unknown)} (expected {', '.join(HOOKS)})")
    tune_for_controllers()  # as `porchkit manager` and the local reconcile commands run
    print(f"{args.targets:,} targets x 2 attachments, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f} at the start")
    if args.profile:
        print_table([profiled(args.targets, args.workers)], args.workers)
        return 0  # the profiler's slowdown makes the targets meaningless here
    runs: dict[str, list[Figures]] = {}
    for hook in hooks:
        server = WebhookServer() if hook == "webhook" else None
        try:
            runs[hook] = [measure(hook, args.targets, args.workers, server.port if server else None)
                          for _ in range(max(1, args.repeat))]
        finally:
            if server is not None:
                server.stop()
    print_table([figures for hook in hooks for figures in runs[hook]], args.workers)
    failed = 0
    for hook in hooks:
        for passed, what in checks(runs[hook]):
            failed += not passed
            print(f"{'PASS' if passed else 'FAIL'}  {hook:<9} {what}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
