"""`porchkit fn deltapipe` under kpt: its own cost, and what it adds to a `kpt fn eval` run.

For packages of 1, 100 and 5,000 Deployments (one file each, 10 namespaces), with the
per-namespace summary pipeline of testdata/krmfn/deltapipe/summary (reads everything, writes one
ConfigMap per namespace, leaves every Deployment byte for byte as it was):
  * the function's own time, as a process reading the ResourceList kpt would send on stdin;
  * `kpt fn eval --exec "porchkit fn deltapipe"` next to `kpt fn eval --exec cat` (an identity
    function that costs nothing), measured alternately on fresh copies of the package.
Targets: at 5,000 resources porchkit's function adds at most 20% to kpt's own time,
and its start-up (process start to first byte of output) is under 150 ms.
Run: `python bench/krmfn_bench.py` (or `make bench`); needs kpt on PATH. Exits non-zero on a miss.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "testdata" / "krmfn" / "deltapipe" / "summary" / "summary-pipeline.yaml"
PORCHKIT = [str(Path(sys.executable).parent / "porchkit"), "fn", "deltapipe"]  # the script kpt runs
SIZES = {"1": 1, "100": 100, "5k": 5_000}
ROUNDS = {"1": 15, "100": 7, "5k": 3}


def make_package(root: Path, size: int) -> Path:
    package = root / f"pkg-{size}"
    package.mkdir()
    (package / "Kptfile").write_text("apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: bench\n")
    for i in range(size):
        (package / f"deploy-{i}.yaml").write_text(
            f"# deployment {i}\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app-{i}\n"
            f"  namespace: ns-{i % 10}\n  labels:\n    app: app-{i}\n    tier: \"on\"\nspec:\n"
            f"  replicas: {i % 5}\n  selector:\n    matchLabels:\n      app: app-{i}\n  template:\n"
            f"    metadata:\n      labels:\n        app: app-{i}\n    spec:\n      containers:\n"
            f"        - name: main\n          image: registry.example.com/app:{i}\n"
            f"          ports:\n            - containerPort: 8080\n")
    return package


def resource_list(package: Path) -> bytes:
    """What kpt sends: `kpt fn source` with the function config."""
    return subprocess.run(["kpt", "fn", "source", str(package), "--fn-config", str(CONFIG)],
                          capture_output=True, check=True).stdout


def time_process(command: list[str], stdin: bytes) -> tuple[float, float]:
    """(seconds to the first byte of output, seconds to exit)."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(stdin)
    process.stdin.close()
    process.stdout.read(1)
    first = time.perf_counter() - start
    process.stdout.read()
    if process.wait() != 0:
        raise SystemExit(f"{' '.join(command)} failed: {process.stderr.read().decode() if process.stderr else ''}")
    return first, time.perf_counter() - start


def time_kpt(package: Path, scratch: Path, exec_: str, with_config: bool) -> float:
    copy = scratch / "run"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(package, copy)
    command = ["kpt", "fn", "eval", str(copy), "--exec", exec_]
    if with_config:
        command += ["--fn-config", str(CONFIG)]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    start = time.perf_counter()
    subprocess.run(command, capture_output=True, check=True, env=env)
    return time.perf_counter() - start


def main() -> int:
    if shutil.which("kpt") is None:
        print("kpt is not on PATH: nothing to measure")
        return 1
    failures = []
    print(f"{'N':>4} {'fn first byte ms':>17} {'fn total ms':>12} {'kpt+cat s':>10} {'kpt+porchkit s':>15} "
          f"{'added':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        for label, size in SIZES.items():
            package = make_package(scratch, size)
            stdin = resource_list(package)
            own = [time_process(PORCHKIT, stdin) for _ in range(ROUNDS[label])]
            identity, ours = [], []
            for _ in range(ROUNDS[label]):  # alternate, so machine load falls on both alike
                identity.append(time_kpt(package, scratch, "cat", with_config=False))
                ours.append(time_kpt(package, scratch, "porchkit fn deltapipe", with_config=True))
            first = statistics.median(f for f, _ in own)
            total = statistics.median(t for _, t in own)
            kpt_cat, kpt_ours = statistics.median(identity), statistics.median(ours)
            added = kpt_ours / kpt_cat - 1
            print(f"{label:>4} {first * 1e3:>17.0f} {total * 1e3:>12.0f} {kpt_cat:>10.2f} {kpt_ours:>15.2f} "
                  f"{added:>6.0%}")
            if size == 1 and first > 0.150:
                failures.append(f"start-up to first byte is {first * 1e3:.0f} ms (target < 150 ms)")
            if label == "5k" and added > 0.20:
                failures.append(f"porchkit adds {added:.0%} to kpt at 5,000 resources (target <= 20%)")
    for failure in failures:
        print(f"MISSED: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
