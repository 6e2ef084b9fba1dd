"""DecoratorControllers against a real kube-apiserver: how close convergence comes to what the server allows.

Needs a real API server: PORCHKIT_TEST_KUBECONFIG names its kubeconfig (`make bench-realserver`
runs this under tests/e2e/cluster.sh, which starts etcd and kube-apiserver on loopback). Without
it, one line says so and the bench exits 0 (so `make bench` passes on a machine without one).

In one run, on one server, with N = the decorators' worker count (--workers):

  (a) the limit: TARGETS ConfigMaps created by N concurrent writers through `KubeCluster`, each
      writer creating one after the other; creates/s = TARGETS / seconds. These are the targets.
  (b) convergence: a manager running the DecoratorControllers' controller (caches synced) gets
      a DecoratorController selecting those targets, with an in-process python hook (`sync`
      below) answering one attachment ConfigMap per target; timed from creating the
      DecoratorController to every target's attachment created and every queue idle.
      targets/s = TARGETS / seconds, shown as a share of (a). Target: >= 50% (each target needs
      at least one create, so 100% is the ceiling);
  (c) sync-hook calls per target while converging. Target: <= 1.2;
  (d) write requests per target while converging (creates, updates, patches, deletes the
      manager's KubeCluster sent).

Every figure is printed with the machine's load average (`os.getloadavg`, as `uptime` shows it):
on a shared machine the ratios move with it. Then bench/realserver_scale.py's sections: the
manager's memory against 0 and 25,000 unselected ConfigMaps, and start-up at scale.

Run: `python bench/realserver_bench.py [--targets N] [--workers N]`. Exits non-zero when a
target is missed, a pass fails, or a figure misses its target.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import realserver_scale  # bench/, beside this file

from decorators.crds import decorator_controller_crd
from decorators.instance import Options
from decorators.spec import DECORATOR_CONTROLLER
from decorators.supervisor import Decorators
from decorators.sync import SyncResult
from reconcile.cluster import Kind, Obj, ObjectKey
from reconcile.errors import ApiError, NotFound
from reconcile.gctuning import tune_for_controllers
from reconcile.hooks import HookPolicy
from reconcile.idle import busy
from reconcile.manager import Manager

KUBECONFIG = "PORCHKIT_TEST_KUBECONFIG"
CONFIGMAP = Kind("v1", "ConfigMap")
NAMESPACE = Kind("v1", "Namespace")
TARGET_LABEL = "bench.porchkit.dev/target"
ATTACHMENT_LABEL = "bench.porchkit.dev/attachment"
TARGETS = 2_000
WORKERS = Options().workers  # the decorators' default worker count; the writers of (a) are as many
MIN_SHARE = 0.5  # convergence rate / raw create rate
MAX_CALLS_PER_TARGET = 1.2
POLL, QUIET = 0.01, 0.3  # seconds: how often to look at the queues, and how long they must stay empty


def sync(request: dict[str, Any]) -> dict[str, Any]:
    """The sync hook (`python: {function: "realserver_bench:sync"}`): one ConfigMap `<target>-a`."""
    meta = request["object"]["metadata"]
    return {"attachments": [{"apiVersion": "v1", "kind": "ConfigMap",
                             "metadata": {"name": f"{meta['name']}-a", "labels": {ATTACHMENT_LABEL: "true"}},
                             "data": {"target": meta["name"]}}]}


@dataclass
class Figures:
    """What one run measured."""

    targets: int
    workers: int
    create_seconds: float = 0.0
    converge_seconds: float = 0.0
    calls: int = 0
    writes: int = 0
    attached: int = 0
    failed: int = 0
    load: tuple[float, float, float] = (0.0, 0.0, 0.0)

    @property
    def creates_per_second(self) -> float:
        return self.targets / self.create_seconds if self.create_seconds else 0.0

    @property
    def targets_per_second(self) -> float:
        return self.targets / self.converge_seconds if self.converge_seconds else 0.0

    @property
    def share(self) -> float:
        return self.targets_per_second / self.creates_per_second if self.creates_per_second else 0.0

    @property
    def calls_per_target(self) -> float:
        return self.calls / self.targets if self.targets else 0.0

    @property
    def writes_per_target(self) -> float:
        return self.writes / self.targets if self.targets else 0.0


def counting(cluster: Any) -> Any:
    """`cluster` (a KubeCluster) counting the write requests sent through it, in `cluster.writes`."""
    lock = threading.Lock()
    cluster.writes = 0
    for name in ("create", "update", "update_status", "patch", "apply", "delete"):
        method = getattr(cluster, name)

        def counted(*args: Any, _method: Callable[..., Any] = method, **kwargs: Any) -> Any:
            with lock:
                cluster.writes += 1
            return _method(*args, **kwargs)
        setattr(cluster, name, counted)
    return cluster


class Passes:
    """What the decorator reports: hook calls (every report is one), attachments created, failures."""

    def __init__(self) -> None:
        self.calls = self.created = self.failed = 0
        self.first_failure = ""
        self._lock = threading.Lock()

    def report(self, decorator: str, kind: Kind, key: ObjectKey, result: SyncResult | Exception) -> None:
        with self._lock:
            self.calls += 1
            if isinstance(result, Exception):
                self.failed += 1
                self.first_failure = self.first_failure or f"{key}: {result}"
            else:
                self.created += sum(1 for change in result.changes if change.action == "create")


# --- the sections -------------------------------------------------------------------------------


def create_targets(connect: Callable[[], Any], namespace: str, targets: int, writers: int) -> float:
    """(a): seconds for `writers` concurrent writers to create the targets, one KubeCluster shared
    (as a manager's controllers share one)."""
    cluster = connect()
    try:
        def write(indexes: range) -> None:
            for i in indexes:
                cluster.create({"apiVersion": "v1", "kind": "ConfigMap",
                                "metadata": {"name": f"target-{i:05d}", "namespace": namespace,
                                             "labels": {TARGET_LABEL: "true"}},
                                "data": {"index": str(i)}})
        started = time.perf_counter()
        with ThreadPoolExecutor(writers) as pool:
            list(pool.map(write, [range(w, targets, writers) for w in range(writers)]))
        return time.perf_counter() - started
    finally:
        cluster.close()


def converge(connect: Callable[[], Any], namespace: str, figures: Figures) -> None:
    """(b), (c), (d): a manager with the decorators on a fresh KubeCluster; the DecoratorController
    created, timed until every target is attached and every queue idle."""
    cluster = counting(connect())
    passes = Passes()
    manager = Manager(cluster, grace_period=10.0)
    decorators = Decorators(manager, Options(workers=figures.workers, report=passes.report,
                                             hook_policy=HookPolicy.local()))
    manager.add(decorators.controller())
    runner = threading.Thread(target=manager.run, name="bench-manager", daemon=True)
    runner.start()
    name = f"bench-{secrets.token_hex(3)}"
    try:
        wait_for(lambda: manager.state == "running", 60, "the manager did not start")
        writes = cluster.writes
        started = time.perf_counter()
        cluster.create(decorator_controller(name, namespace))
        timeout = 60 + figures.targets / 20
        figures.converge_seconds = wait_idle(
            manager, lambda: passes.created >= figures.targets, timeout) - started
        figures.writes = cluster.writes - writes - 1  # not the DecoratorController's create
        figures.calls, figures.failed = passes.calls, passes.failed
        if passes.first_failure:
            print(f"first failed pass: {passes.first_failure}")
    finally:
        manager.stop()
        runner.join(30)
        decorators.stop_all()
        with contextlib.suppress(ApiError):
            cluster.delete(DECORATOR_CONTROLLER, ObjectKey("", name))
        cluster.close()
    figures.attached = attached_on_server(connect, namespace)


def decorator_controller(name: str, namespace: str) -> Obj:
    return {"apiVersion": DECORATOR_CONTROLLER.api_version, "kind": DECORATOR_CONTROLLER.kind,
            "metadata": {"name": name},
            "spec": {"resources": [{"apiVersion": "v1", "resource": "configmaps",
                                    "labelSelector": {"matchLabels": {TARGET_LABEL: "true"}}}],
                     "attachments": [{"apiVersion": "v1", "resource": "configmaps"}],
                     "hooks": {"sync": {"python": {"function": f"{Path(__file__).stem}:sync"}}}}}


def attached_on_server(connect: Callable[[], Any], namespace: str) -> int:
    """Targets that own exactly one attachment, read from the server."""
    cluster = connect()
    try:
        listed = cluster.list(CONFIGMAP, namespace=namespace).items
    finally:
        cluster.close()
    targets = {obj["metadata"]["uid"] for obj in listed if TARGET_LABEL in (obj["metadata"].get("labels") or {})}
    owners: dict[str, int] = {}
    for obj in listed:
        for ref in obj["metadata"].get("ownerReferences") or []:
            if ref.get("controller") and ref.get("uid") in targets:
                owners[ref["uid"]] = owners.get(ref["uid"], 0) + 1
    return sum(1 for count in owners.values() if count == 1)


# --- waiting, output -------------------------------------------------------------------------------


def wait_for(condition: Callable[[], bool], timeout: float, message: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(message)
        time.sleep(POLL)


def wait_idle(manager: Manager, done: Callable[[], bool], timeout: float) -> float:
    """The perf_counter time from which `done()` held and every queue was idle, once that has
    lasted QUIET seconds."""
    deadline = time.monotonic() + timeout
    idle_since: float | None = None
    while True:
        now = time.perf_counter()
        if done() and not any(busy(controller.queue, 5.0) for controller in list(manager.controllers)):
            if idle_since is None:
                idle_since = now
            elif now - idle_since >= QUIET:
                return idle_since
        else:
            idle_since = None
        if time.monotonic() > deadline:
            raise TimeoutError(f"converge: not done after {timeout:.0f} s")
        time.sleep(POLL)



def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f}, {five:.2f}, {fifteen:.2f}"


def report(f: Figures) -> list[tuple[bool, str]]:
    """Prints every figure; returns (passed, what) for each target."""
    print(f"(a) raw create rate: {f.targets:,} ConfigMaps by {f.workers} writers in {f.create_seconds:.2f} s = "
          f"{f.creates_per_second:,.0f} creates/s")
    print(f"(b) converge: {f.attached:,} of {f.targets:,} targets attached in {f.converge_seconds:.2f} s = "
          f"{f.targets_per_second:,.0f} targets/s = {100 * f.share:.0f}% of (a)")
    print(f"(c) sync-hook calls: {f.calls:,} = {f.calls_per_target:.2f} per target")
    print(f"(d) write requests: {f.writes:,} = {f.writes_per_target:.2f} per target")
    print(f"    {load()} at the end ({f.load[0]:.2f}, {f.load[1]:.2f}, {f.load[2]:.2f} at the start), "
          f"{os.cpu_count()} CPUs")
    return [
        (f.attached == f.targets and not f.failed,
         f"{f.attached:,} of {f.targets:,} attached, {f.failed} failed passes"),
        (f.share >= MIN_SHARE, f"convergence at {100 * f.share:.0f}% of the raw create rate (target >= "
                               f"{100 * MIN_SHARE:.0f}%)"),
        (f.calls_per_target <= MAX_CALLS_PER_TARGET,
         f"{f.calls_per_target:.2f} sync-hook calls per target (target <= {MAX_CALLS_PER_TARGET})"),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="DecoratorControllers against a real API server.")
    parser.add_argument("--targets", type=int, default=TARGETS, help=f"targets (default {TARGETS})")
    parser.add_argument("--workers", type=int, default=WORKERS,
                        help=f"decorator workers, and writers in (a) (default {WORKERS})")
    args = parser.parse_args(argv)
    kubeconfig = os.environ.get(KUBECONFIG)
    if not kubeconfig:
        print(f"realserver_bench: skipped: {KUBECONFIG} is not set (run `make bench-realserver`)")
        return 0
    from reconcile.kube import KubeCluster

    def connect() -> Any:
        return KubeCluster.from_kubeconfig(kubeconfig)

    tune_for_controllers()  # as `porchkit manager` runs
    figures = Figures(args.targets, args.workers, load=os.getloadavg())
    print(f"{args.targets:,} targets x 1 attachment, {args.workers} workers, {load()} at the start")
    admin = connect()
    namespace = f"bench-{secrets.token_hex(4)}"
    try:
        if admin.get(Kind("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
                     ObjectKey("", decorator_controller_crd()["metadata"]["name"])) is None:
            admin.create(decorator_controller_crd())
        wait_for(lambda: served(admin, DECORATOR_CONTROLLER), 60, "the DecoratorController CRD is not served")
        admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        figures.create_seconds = create_targets(connect, namespace, args.targets, args.workers)
        converge(connect, namespace, figures)
    except TimeoutError as err:
        print(f"FAIL  {err}")
        return 1
    finally:
        with contextlib.suppress(ApiError):
            admin.delete(NAMESPACE, ObjectKey("", namespace))
        admin.close()
    checks = report(figures)
    checks += realserver_scale.measure(kubeconfig)  # memory and start-up at scale
    failed = 0
    for passed, what in checks:
        failed += not passed
        print(f"{'PASS' if passed else 'FAIL'}  {what}")
    return 1 if failed else 0


def served(cluster: Any, kind: Kind) -> bool:
    try:
        cluster.list(kind)
        return True
    except NotFound:
        return False


if __name__ == "__main__":
    sys.exit(main())
