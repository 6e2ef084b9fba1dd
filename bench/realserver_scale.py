"""Memory and start-up at scale: does the manager's memory follow what its controllers select, or
the cluster?

Claims (issue 22), each printed with its figures, its ratio and the load average:
* memory: `porchkit manager` (a process of its own, so that its RSS is its own: /proc/PID/status
  VmRSS and VmHWM) running one DecoratorController that selects 10 labelled ConfigMaps, in a
  cluster holding 0 and then 25,000 other ConfigMaps: the others add less than 10 MiB. The same
  for a MapController whose parent selects 10 ConfigMaps, and for a PackageVariantSet whose
  objectSelector selects 10 ConfigMaps (the set's upstream in a local git repository served by
  the embedded Porch, `--porch embedded`);
* start-up: the time to synced caches and to the first reconcile, and the memory peak, with
  100,000 ConfigMaps of the selected kind, all selected, in the embedded cluster (in this
  process; tracemalloc's peak in a second run, as tracing slows the first), and with 25,000 on
  the real server (the manager a process of its own again; pages of 500).

The real-server figures need a loopback kube-apiserver: `bash tests/e2e/cluster.sh run --
python -m bench.realserver_scale` sets PORCHKIT_TEST_KUBECONFIG (see tests/e2e/conftest.py);
without it only the embedded start-up is measured. `bench/realserver_bench.py` runs `measure`
after its own sections; `main()` runs it alone.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reconcile import ApiError, Cluster, Kind, ObjectKey

ROOT = Path(__file__).resolve().parents[1]
KUBECONFIG = "PORCHKIT_TEST_KUBECONFIG"
NAMESPACE_PREFIX = "bench-scale"
SELECTED = "bench.porchkit.dev/selected"  # the 10 objects every controller here selects
OTHER = "bench.porchkit.dev/other"  # the many objects nothing selects (start-up: all selected)
DECORATED = "bench.porchkit.dev/decorated"  # written by the decorator's hook
HOOKS = "bench.realserver_scale"  # the module the manager may run python hooks from
PAGE_SIZE = 500  # KubeOptions.page_size: what the manager's lists ask for
EMBEDDED_PAGE = 500  # EmbeddedCluster.pages' default page
SETTLE = 3.0  # seconds a manager runs on after reaching its goal, before its RSS is read
DEADLINE = 300.0  # seconds any one wait may take
TARGET_MIB = 10.0  # what 25,000 others may add to a manager's RSS

CONFIGMAP = Kind("v1", "ConfigMap")
NAMESPACE = Kind("v1", "Namespace")
CRD = Kind("apiextensions.k8s.io/v1", "CustomResourceDefinition")
DECORATOR_CONTROLLER = Kind("metacontroller.k8s.io/v1alpha1", "DecoratorController")
MAP_CONTROLLER = Kind("porchkit.dev/v1alpha1", "MapController")
SELECTION = Kind("bench.porchkit.dev/v1", "Selection")  # the MapController's parent kind here


# --- hooks (run by the manager under test: --python-hooks bench.realserver_scale) -------------------


def decorate(request: dict[str, Any]) -> dict[str, Any]:
    """The DecoratorController's sync hook: a label on the target, nothing attached."""
    return {"labels": {DECORATED: "yes"}}


def mirror(request: dict[str, Any]) -> dict[str, Any]:
    """The MapController's map hook: one ConfigMap `<input>-mirror` per input."""
    name = request["input"]["metadata"]["name"]
    return {"outputs": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{name}-mirror"},
                         "data": {"from": name}}]}


# --- figures --------------------------------------------------------------------------------------


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f}"


def say(line: str) -> None:
    print(f"{line}  [{load()}]", flush=True)


def memory_mib(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of a process, in MiB."""
    found = dict(re.findall(r"^(VmRSS|VmHWM):\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text(), re.M))
    return int(found["VmRSS"]) / 1024, int(found["VmHWM"]) / 1024


@dataclass
class Run:
    """One manager run: when it reached its goal, and its memory then."""

    what: str
    objects: int
    seconds: float
    rss: float
    hwm: float
    synced: float | None = None
    objects_are: str = "other objects"


@dataclass
class Report:
    runs: list[Run] = field(default_factory=list)

    def add(self, run: Run) -> Run:
        self.runs.append(run)
        synced = f", synced after {run.synced:.2f}s" if run.synced is not None else ""
        say(f"{run.what}: {run.objects:,} {run.objects_are}: goal after {run.seconds:.2f}s{synced}, "
            f"VmRSS {run.rss:.1f} MiB, VmHWM {run.hwm:.1f} MiB")
        return run

    def compare(self, what: str, empty: Run, full: Run) -> float:
        added = full.rss - empty.rss
        verdict = "met" if added < TARGET_MIB else "MISSED"
        claim = "no target: what a rule the server cannot select costs" if "fallback" in what else \
            f"target < {TARGET_MIB:g} MiB {verdict}"
        say(f"{what}: {full.objects:,} others add {added:+.1f} MiB RSS ({full.rss / empty.rss:.2f}x; "
            f"VmHWM {full.hwm - empty.hwm:+.1f} MiB): {claim}")
        return added


# --- the manager under test, a process of its own ---------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ManagerProcess:
    """`porchkit manager` started from this checkout, serving /metrics and /readyz on loopback."""

    def __init__(self, args: Sequence[str], *, workdir: Path) -> None:
        self.port = free_port()
        self.log = (workdir / f"manager-{self.port}.log").open("w")
        command = [sys.executable, "-m", "porchkit", "manager", *args, "--health-addr", f"127.0.0.1:{self.port}",
                   "--python-hooks", HOOKS, "--log-level", "warning", "--grace-period", "2"]
        self.started = time.monotonic()
        self.process = subprocess.Popen(command, cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT,
                                        env={**os.environ, "PYTHONPATH": str(ROOT)})

    def _get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=2) as answer:
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, ""
        except OSError:
            return 0, ""

    def metric(self, series: str, **labels: str) -> float:
        """The sum of the samples of `series` whose labels include `labels`."""
        total = 0.0
        for line in self._get("/metrics")[1].splitlines():
            found = re.fullmatch(rf"{re.escape(series)}\{{(.*)\}} (\S+)", line)
            if found and labels.items() <= dict(re.findall(r'(\w+)="([^"]*)"', found.group(1))).items():
                total += float(found.group(2))
        return total

    def ready(self) -> bool:
        return self._get("/readyz")[0] == 200

    def alive(self) -> None:
        if self.process.poll() is not None:
            self.log.flush()
            raise RuntimeError(f"the manager exited ({self.process.returncode}): see {self.log.name}")

    def memory(self) -> tuple[float, float]:
        return memory_mib(self.process.pid)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()


def wait_for(check: Callable[[], Any], what: str, manager: ManagerProcess | None = None,
             timeout: float = DEADLINE) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if manager is not None:
            manager.alive()
        found = check()
        if found:
            return found
        time.sleep(0.1)
    raise RuntimeError(f"waited {timeout:g}s for {what}")


@contextlib.contextmanager
def manager_running(args: Sequence[str], workdir: Path) -> Iterator[ManagerProcess]:
    manager = ManagerProcess(args, workdir=workdir)
    try:
        yield manager
    finally:
        manager.stop()


# --- the cluster's contents -------------------------------------------------------------------------


def configmap(name: str, namespace: str, labels: dict[str, str], size: int = 256,
              annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "data": {"value": "x" * size},
            "metadata": {"name": name, "namespace": namespace, "labels": labels, "annotations": annotations or {}}}


def create_all(cluster: Cluster, objects: Sequence[dict[str, Any]], writers: int = 8) -> float:
    """Create `objects` with `writers` concurrent writers; seconds taken (existing ones skipped)."""
    def create(obj: dict[str, Any]) -> None:
        with contextlib.suppress(ApiError):
            cluster.create(obj)
    started = time.perf_counter()
    with ThreadPoolExecutor(writers) as pool:
        list(pool.map(create, objects, chunksize=64))
    return time.perf_counter() - started


def install(cluster: Cluster, *crds: dict[str, Any]) -> None:
    for crd in crds:
        with contextlib.suppress(ApiError):
            cluster.create(crd)
    for crd in crds:
        names, group = crd["spec"]["names"], crd["spec"]["group"]
        version = next(v["name"] for v in crd["spec"]["versions"] if v.get("served"))
        kind = Kind(f"{group}/{version}", names["kind"])
        wait_for(functools.partial(_served, cluster, kind), f"{kind} to be served")


def _served(cluster: Cluster, kind: Kind) -> bool:
    try:
        cluster.list(kind)
        return True
    except ApiError:
        return False


def selection_crd() -> dict[str, Any]:
    return {"apiVersion": CRD.api_version, "kind": CRD.kind, "metadata": {"name": "selections.bench.porchkit.dev"},
            "spec": {"group": "bench.porchkit.dev", "scope": "Namespaced",
                     "names": {"kind": "Selection", "listKind": "SelectionList", "plural": "selections",
                               "singular": "selection"},
                     "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                                   "schema": {"openAPIV3Schema": {"type": "object",
                                                                  "x-kubernetes-preserve-unknown-fields": True}}}]}}


def decorator(name: str, label: str, *, by_annotation: bool = False) -> dict[str, Any]:
    """A DecoratorController labelling the ConfigMaps whose label (or annotation) `label` is yes."""
    selector = {"annotationSelector": {"matchAnnotations": {label: "yes"}}} if by_annotation else \
        {"labelSelector": {"matchLabels": {label: "yes"}}}
    return {"apiVersion": DECORATOR_CONTROLLER.api_version, "kind": DECORATOR_CONTROLLER.kind,
            "metadata": {"name": name},
            "spec": {"resources": [{"apiVersion": "v1", "resource": "configmaps", **selector}],
                     "hooks": {"sync": {"python": {"function": f"{HOOKS}:decorate"}}}}}


def map_controller(name: str) -> dict[str, Any]:
    return {"apiVersion": MAP_CONTROLLER.api_version, "kind": MAP_CONTROLLER.kind, "metadata": {"name": name},
            "spec": {"parentResource": {"apiVersion": SELECTION.api_version, "resource": "selections"},
                     "inputResources": [{"apiVersion": "v1", "resource": "configmaps"}],
                     "outputResources": [{"apiVersion": "v1", "resource": "configmaps",
                                          "updateStrategy": {"method": "InPlace"}}],
                     "hooks": {"map": {"python": {"function": f"{HOOKS}:mirror"}}}}}


def decorated(cluster: Cluster, namespace: str, label: str) -> int:
    items = cluster.list(CONFIGMAP, namespace=namespace, labels=f"{label}=yes").items
    return sum(1 for obj in items if (obj["metadata"].get("labels") or {}).get(DECORATED) == "yes")


def undecorate(cluster: Cluster, namespace: str, label: str) -> None:
    for obj in cluster.list(CONFIGMAP, namespace=namespace, labels=f"{label}=yes").items:
        if DECORATED in (obj["metadata"].get("labels") or {}):
            cluster.patch(CONFIGMAP, ObjectKey.of(obj), {"metadata": {"labels": {DECORATED: None}}})


def mirrors(cluster: Cluster, namespace: str) -> list[dict[str, Any]]:
    return [obj for obj in cluster.list(CONFIGMAP, namespace=namespace, labels="mapctl.porchkit.dev/controller").items]


# --- the measurements -------------------------------------------------------------------------------


def decorator_run(cluster: Cluster, kubeconfig: str, namespace: str, others: int, workdir: Path,
                  report: Report, *, by_annotation: bool = False) -> Run:
    """One manager running the decorator controller until the 10 selected ConfigMaps are
    decorated. The DecoratorController exists only during the run (a manager runs them all):
    it selects by label, or `by_annotation` alone (which no server can select: the fallback, a
    whole-kind informer of metadata)."""
    name = f"bench-scale-{os.getpid()}" + ("-annotation" if by_annotation else "")
    undecorate(cluster, namespace, SELECTED)
    cluster.create(decorator(name, SELECTED, by_annotation=by_annotation))
    try:
        with manager_running(["--kubeconfig", kubeconfig, "--controllers", "decorator"], workdir) as manager:
            wait_for(lambda: decorated(cluster, namespace, SELECTED) == 10, "10 decorated ConfigMaps", manager)
            seconds = time.monotonic() - manager.started
            time.sleep(SETTLE)
            rss, hwm = manager.memory()
    finally:
        cluster.delete(DECORATOR_CONTROLLER, ObjectKey("", name))
    what = "DecoratorController (annotation selector only: whole kind, metadata)" if by_annotation else \
        "DecoratorController (label selector, 10 selected)"
    return report.add(Run(what, others, seconds, rss, hwm))


def annotation_decorator_run(cluster: Cluster, kubeconfig: str, namespace: str, others: int, workdir: Path,
                             report: Report) -> Run:
    return decorator_run(cluster, kubeconfig, namespace, others, workdir, report, by_annotation=True)


def map_run(cluster: Cluster, kubeconfig: str, namespace: str, others: int, workdir: Path, report: Report) -> Run:
    """One manager running the map controller until the 10 selected ConfigMaps have their mirror."""
    for obj in mirrors(cluster, namespace):
        with contextlib.suppress(ApiError):
            cluster.delete(CONFIGMAP, ObjectKey.of(obj))
    wait_for(lambda: not mirrors(cluster, namespace), "the mirrors of a previous run to go")
    with manager_running(["--kubeconfig", kubeconfig, "--controllers", "map"], workdir) as manager:
        wait_for(lambda: len(mirrors(cluster, namespace)) == 10, "10 mirrored ConfigMaps", manager)
        seconds = time.monotonic() - manager.started
        time.sleep(SETTLE)
        rss, hwm = manager.memory()
    return report.add(Run("MapController (10 selected)", others, seconds, rss, hwm))


PACKAGE_VARIANT = Kind("config.porch.kpt.dev/v1alpha1", "PackageVariant")
PACKAGE_VARIANT_SET = Kind("config.porch.kpt.dev/v1alpha2", "PackageVariantSet")


def variant_crds() -> list[dict[str, Any]]:
    """deploy/crds' PackageVariant and PackageVariantSet CRDs, and Porch's Repository CRD."""
    import yaml

    from porchvariant.crds import crds

    shipped = [doc for path in sorted((ROOT / "deploy" / "crds").glob("config.porch.kpt.dev_*.yaml"))
               for doc in yaml.safe_load_all(path.read_text()) if doc]
    return shipped + [crd for crd in crds() if crd["spec"]["names"]["kind"] == "Repository"]


def variant_set(namespace: str) -> dict[str, Any]:
    """A set giving each selected ConfigMap a PackageVariant (package named after it, in `prod`)."""
    return {"apiVersion": PACKAGE_VARIANT_SET.api_version, "kind": PACKAGE_VARIANT_SET.kind,
            "metadata": {"name": "ten", "namespace": namespace},
            "spec": {"upstream": {"repo": "catalog", "package": "web", "revision": 1},
                     "targets": [{"objectSelector": {"apiVersion": "v1", "kind": "ConfigMap",
                                                     "matchLabels": {SELECTED: "yes"}},
                                  "template": {"downstream": {"repo": "prod", "packageExpr": "target.name"}}}]}}


def variants(cluster: Cluster, namespace: str) -> list[dict[str, Any]]:
    return list(cluster.list(PACKAGE_VARIANT, namespace=namespace).items)


def variant_set_run(cluster: Cluster, kubeconfig: str, namespace: str, others: int, workdir: Path,
                    report: Report) -> Run:
    """One manager running the PackageVariantSet controller (Porch embedded, over local git)
    until the set's 10 PackageVariants exist."""
    for obj in variants(cluster, namespace):  # with no PackageVariant controller running, drop its finalizer
        with contextlib.suppress(ApiError):
            cluster.patch(PACKAGE_VARIANT, ObjectKey.of(obj), {"metadata": {"finalizers": None}})
            cluster.delete(PACKAGE_VARIANT, ObjectKey.of(obj))
    wait_for(lambda: not variants(cluster, namespace), "the PackageVariants of a previous run to go")
    args = ["--kubeconfig", kubeconfig, "--controllers", "packagevariantset", "--porch", "embedded",
            "--git-cache", str(workdir / "git-cache")]
    with manager_running(args, workdir) as manager:
        wait_for(lambda: len(variants(cluster, namespace)) == 10, "10 PackageVariants", manager)
        seconds = time.monotonic() - manager.started
        time.sleep(SETTLE)
        rss, hwm = manager.memory()
    return report.add(Run("PackageVariantSet (objectSelector, 10 selected)", others, seconds, rss, hwm))


def real_server_memory(kubeconfig: str, *, others: int = 25_000, workdir: Path, report: Report) -> dict[str, float]:
    """The memory claim for the DecoratorController and the MapController: RSS with 0 and with
    `others` unselected ConfigMaps beside the 10 selected. Returns the MiB the others add."""
    from decorators.crds import decorator_controller_crd
    from mapctl.crds import map_controller_crd
    from reconcile.kube import KubeCluster
    from tests.porchvariant.variants_support import Repos

    namespace = f"{NAMESPACE_PREFIX}-{os.getpid()}"
    with KubeCluster.from_kubeconfig(kubeconfig) as cluster:
        install(cluster, decorator_controller_crd(), map_controller_crd(), selection_crd(), *variant_crds())
        cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        for repository in Repos(workdir).repositories():  # bare git repositories: catalog (web v1, v2) and prod
            cluster.create({**repository, "metadata": {**repository["metadata"], "namespace": namespace}})
        name = f"bench-scale-{os.getpid()}"
        try:
            create_all(cluster, [configmap(f"selected-{i}", namespace, {SELECTED: "yes"}, annotations={SELECTED: "yes"})
                                 for i in range(10)])
            cluster.create(map_controller(name))
            cluster.create({"apiVersion": SELECTION.api_version, "kind": SELECTION.kind,
                            "metadata": {"name": "ten", "namespace": namespace},
                            "spec": {"selector": {"matchLabels": {SELECTED: "yes"}}}})
            cluster.create(variant_set(namespace))
            runs: dict[str, Callable[..., Run]] = {
                "decorator": decorator_run, "map": map_run, "variant set": variant_set_run,
                "decorator by annotation (fallback)": annotation_decorator_run}
            empty = {what: run(cluster, kubeconfig, namespace, 0, workdir, report) for what, run in runs.items()}
            seconds = create_all(cluster, [configmap(f"other-{i}", namespace, {OTHER: "yes"}) for i in range(others)])
            say(f"created {others:,} other ConfigMaps with 8 writers in {seconds:.1f}s ({others / seconds:.0f}/s)")
            full = {what: run(cluster, kubeconfig, namespace, others, workdir, report) for what, run in runs.items()}
            return {what: report.compare(f"{what} memory", empty[what], full[what]) for what in empty}
        finally:
            for kind, key in ((MAP_CONTROLLER, ObjectKey("", name)), (NAMESPACE, ObjectKey("", namespace))):
                with contextlib.suppress(ApiError):
                    cluster.delete(kind, key)


def real_server_startup(kubeconfig: str, *, count: int = 25_000, workdir: Path, report: Report) -> Run:
    """Start-up on the real server: a DecoratorController selecting `count` ConfigMaps (created
    here, in pages of PAGE_SIZE for the manager's list): seconds to synced caches (/readyz, with
    the target informer bound) and to the first reconcile, and the manager's memory then."""
    from decorators.crds import decorator_controller_crd
    from reconcile.kube import KubeCluster

    namespace = f"{NAMESPACE_PREFIX}-start-{os.getpid()}"
    name = f"bench-start-{os.getpid()}"
    controller = "decorator/" + name + "/configmaps"
    with KubeCluster.from_kubeconfig(kubeconfig) as cluster:
        install(cluster, decorator_controller_crd())
        cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        try:
            seconds = create_all(cluster, [configmap(f"start-{i}", namespace, {"bench.porchkit.dev/start": "yes"})
                                           for i in range(count)])
            say(f"created {count:,} selected ConfigMaps in {seconds:.1f}s ({count / seconds:.0f}/s)")
            cluster.create(decorator(name, "bench.porchkit.dev/start"))
            with manager_running(["--kubeconfig", kubeconfig, "--controllers", "decorator"], workdir) as manager:
                wait_for(lambda: manager.metric("controller_runtime_max_concurrent_reconciles",
                                                controller=controller) > 0 and manager.ready(),
                         "synced caches", manager)
                synced = time.monotonic() - manager.started
                wait_for(lambda: manager.metric("controller_runtime_reconcile_total", controller=controller) > 0,
                         "a first reconcile", manager)
                first = time.monotonic() - manager.started
                rss, hwm = manager.memory()
            run = report.add(Run("start-up, real server", count, first, rss, hwm, synced, "selected ConfigMaps"))
            say(f"start-up, real server: {math.ceil(count / PAGE_SIZE)} pages of {PAGE_SIZE}; "
                f"{count / synced:,.0f} objects/s to synced; first reconcile {first - synced:.2f}s after sync")
            return run
        finally:
            for kind, key in ((DECORATOR_CONTROLLER, ObjectKey("", name)), (NAMESPACE, ObjectKey("", namespace))):
                with contextlib.suppress(ApiError):
                    cluster.delete(kind, key)


def embedded_startup(count: int = 100_000, *, trace: bool = False) -> dict[str, float]:
    """Start-up on the embedded cluster, in this process: a DecoratorController selecting `count`
    ConfigMaps; seconds to the target informer synced and to the first reconcile, and (with
    `trace`) tracemalloc's peak over the start (tracing slows it: time it without)."""
    from decorators.crds import decorator_controller_crd
    from decorators.instance import Options
    from decorators.manager import Decorators
    from reconcile.embedded import EmbeddedCluster
    from reconcile.hooks import HookPolicy
    from reconcile.manager import Manager

    with EmbeddedCluster() as cluster:
        cluster.create(decorator_controller_crd())
        for i in range(count):
            cluster.create(configmap(f"start-{i}", "default", {"bench.porchkit.dev/start": "yes"}, size=64))
        cluster.create(decorator("start", "bench.porchkit.dev/start"))
        if trace:
            tracemalloc.start()
        started = time.perf_counter()
        manager = Manager(cluster, grace_period=2)
        manager.add(Decorators(manager, Options(hook_policy=HookPolicy.for_manager([HOOKS], []))).controller())
        thread = threading.Thread(target=manager.run, name="bench-manager", daemon=True)
        thread.start()
        try:
            informer = wait_for(lambda: next((i for i in manager.cache.informers
                                              if i.kind == CONFIGMAP and i.synced.is_set()), None),
                                "the ConfigMap informer to sync")
            synced = time.perf_counter() - started
            wait_for(lambda: re.search(r'controller_runtime_reconcile_total\{controller="decorator/start/configmaps"'
                                       r'[^}]*\} [1-9]', manager.metrics.render()), "a first reconcile")
            first = time.perf_counter() - started
            peak = tracemalloc.get_traced_memory()[1] / 2**20 if trace else float("nan")
            cached = len(informer)
        finally:
            if trace:
                tracemalloc.stop()
            manager.stop()
            thread.join(30)
    return {"synced": synced, "first": first, "peak": peak, "cached": cached}


def report_embedded_startup(count: int = 100_000) -> dict[str, float]:
    timed = embedded_startup(count)
    say(f"start-up, embedded, {count:,} selected ConfigMaps: synced after {timed['synced']:.2f}s "
        f"({count / timed['synced']:,.0f} objects/s), first reconcile after {timed['first']:.2f}s; "
        f"{timed['cached']:,.0f} cached; listed in {math.ceil(count / EMBEDDED_PAGE)} pages of {EMBEDDED_PAGE}")
    traced = embedded_startup(count, trace=True)
    say(f"start-up, embedded, {count:,}: tracemalloc peak {traced['peak']:.1f} MiB "
        f"({traced['peak'] * 2**20 / count:,.0f} bytes per object; times under tracing "
        f"{traced['synced']:.2f}s / {traced['first']:.2f}s)")
    return {**timed, "peak": traced["peak"]}


def measure(kubeconfig: str | None, *, others: int = 25_000, startup: int = 25_000,
            embedded: int = 100_000) -> list[tuple[bool, str]]:
    """Every section: the embedded start-up, and with a real server its memory and start-up.
    Prints the figures; returns the memory claims as (met, what) checks."""
    report_embedded_startup(embedded)
    if not kubeconfig:
        say(f"no real API server ({KUBECONFIG} unset): run under `bash tests/e2e/cluster.sh run --`")
        return []
    workdir = Path(tempfile.mkdtemp(prefix="realserver-scale-"))
    report = Report()
    try:
        added = real_server_memory(kubeconfig, others=others, workdir=workdir, report=report)
        real_server_startup(kubeconfig, count=startup, workdir=workdir, report=report)
    except BaseException:
        say(f"manager logs kept in {workdir}")
        raise
    shutil.rmtree(workdir, ignore_errors=True)
    return [(mib < TARGET_MIB, f"{what}: {others:,} unselected ConfigMaps add {mib:+.1f} MiB RSS (< {TARGET_MIB:g})")
            for what, mib in added.items() if "fallback" not in what]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--others", type=int, default=25_000, help="unselected ConfigMaps (real server)")
    parser.add_argument("--startup", type=int, default=25_000, help="selected ConfigMaps at start-up (real server)")
    parser.add_argument("--embedded", type=int, default=100_000, help="selected ConfigMaps at start-up (embedded)")
    args = parser.parse_args(argv)
    say(f"realserver_scale on {os.cpu_count()} CPUs")
    checks = measure(os.environ.get(KUBECONFIG), others=args.others, startup=args.startup, embedded=args.embedded)
    for met, what in checks:
        say(f"{'PASS' if met else 'FAIL'}  {what}")
    return 0 if all(met for met, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
