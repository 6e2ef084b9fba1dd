"""Manifests on stdin cost what the same bytes in a file cost.

One multi-document stream of MEGABYTES (default 50) MB, mostly ConfigMaps and Deployments, with a
Service and an EndpointSlice every 100 objects so that the output is not empty, goes to
`porchkit pipeline eval -p testdata/deltapipe/endpoints/pipeline.yaml` twice: named as a file
(`-f PATH`), and on stdin from a pipe (`-f -`; a pipe has no size to read ahead of time, unlike a
redirected file). Each is run ROUNDS times, alternately, so that load from elsewhere on a shared
machine falls on both alike; the best wall time of each counts (porchkit's CPU time is printed
beside it, which load elsewhere disturbs less). Both must print the same output.
Target: stdin / file <= 1.1, in wall time.
Run: `python bench/krmyaml_bench.py [MEGABYTES]` (or `make bench`). Exits non-zero on a miss.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PIPELINE = ROOT / "testdata" / "deltapipe" / "endpoints" / "pipeline.yaml"
PORCHKIT = [sys.executable, "-m", "porchkit", "pipeline", "eval", "-p", str(PIPELINE), "-f"]
MEGABYTES = 50
ROUNDS = 3
TARGET = 1.1


def document(i: int) -> str:
    if i % 100 == 98:
        return (f"apiVersion: v1\nkind: Service\nmetadata:\n  name: svc-{i}\n  namespace: ns-{i % 20}\n"
                f"spec:\n  type: ClusterIP\n  ports:\n    - name: http\n      port: 80\n")
    if i % 100 == 99:
        return (f"apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: svc-{i - 1}-a\n"
                f"  namespace: ns-{(i - 1) % 20}\n  labels:\n    kubernetes.io/service-name: svc-{i - 1}\n"
                f"addressType: IPv4\nendpoints:\n  - addresses: [\"10.0.{i // 256 % 256}.{i % 256}\"]\n"
                f"    conditions: {{ready: true}}\n")
    if i % 2 == 0:
        return (f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{i}\n  namespace: ns-{i % 20}\n"
                f"  labels:\n    app: app-{i % 100}\n    tier: backend\ndata:\n  key1: \"value-{i}\"\n"
                f"  key2: \"some longer value for configmap {i} with text\"\n  enabled: \"true\"\n")
    return (f"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: dep-{i}\n  namespace: ns-{i % 20}\n"
            f"  labels:\n    app: app-{i % 100}\nspec:\n  replicas: {i % 5}\n  selector:\n    matchLabels:\n"
            f"      app: app-{i % 100}\n  template:\n    metadata:\n      labels:\n        app: app-{i % 100}\n"
            f"    spec:\n      containers:\n        - name: main\n"
            f"          image: \"registry.example.com/app:{i % 50}\"\n          ports:\n"
            f"            - containerPort: 8080\n              protocol: TCP\n          env:\n"
            f"            - name: INDEX\n              value: \"{i}\"\n")


def write_stream(path: Path, megabytes: int) -> int:
    """A stream of at least `megabytes` MB at `path`; the number of documents."""
    size, count, parts = 0, 0, []
    while size < megabytes * 2**20:
        part = document(count) + "---\n"
        parts.append(part)
        size += len(part)
        count += 1
    path.write_text("".join(parts))
    return count


def run(channel: str, stream: Path, scratch: Path) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds, digest of stdout) of one run reading `stream` as a file or on stdin."""
    argv = [*PORCHKIT, str(stream) if channel == "file" else "-"]
    feed = subprocess.Popen(["cat", str(stream)], stdout=subprocess.PIPE) if channel == "stdin" else None
    with open(scratch / "out", "w+b") as out, open(scratch / "err", "w+b") as err:
        start = time.perf_counter()
        process = subprocess.Popen(argv, cwd=ROOT, stdin=feed.stdout if feed else subprocess.DEVNULL,
                                   stdout=out, stderr=err)
        _, status, usage = os.wait4(process.pid, 0)  # porchkit's own CPU time, not cat's
        took = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        if feed is not None:
            assert feed.stdout is not None
            feed.stdout.close()
            feed.wait()
        if process.returncode != 0:
            err.seek(0)
            raise SystemExit(f"{' '.join(argv)} failed: {err.read().decode(errors='replace').strip()}")
        out.seek(0)
        return took, usage.ru_utime + usage.ru_stime, hashlib.file_digest(out, "sha256").hexdigest()


def main(argv: list[str]) -> int:
    megabytes = int(argv[0]) if argv else MEGABYTES
    times: dict[str, list[tuple[float, float]]] = {"file": [], "stdin": []}
    outputs: set[str] = set()
    with tempfile.TemporaryDirectory() as tmp:
        stream = Path(tmp) / "manifests.yaml"
        count = write_stream(stream, megabytes)
        print(f"{stream.stat().st_size / 2**20:.0f} MB, {count:,} documents: porchkit pipeline eval -f PATH | -f -")
        for _ in range(ROUNDS):
            for channel, samples in times.items():
                wall, cpu, output = run(channel, stream, Path(tmp))
                samples.append((wall, cpu))
                outputs.add(output)
    for channel, samples in times.items():
        print(f"{channel:<6} best {min(w for w, _ in samples):6.2f} s wall, {min(c for _, c in samples):6.2f} s CPU"
              f"   runs {'  '.join(f'{w:.2f}' for w, _ in samples)}")
    ratio = min(w for w, _ in times["stdin"]) / min(w for w, _ in times["file"])
    cpu_ratio = min(c for _, c in times["stdin"]) / min(c for _, c in times["file"])
    print(f"stdin / file = {ratio:.3f} wall (target <= {TARGET}), {cpu_ratio:.3f} CPU")
    failures = []
    if ratio > TARGET:
        failures.append(f"stdin takes {ratio:.2f}x the time of the same bytes in a file")
    if len(outputs) != 1:
        failures.append("stdin and the file gave different output")
    for failure in failures:
        print(f"MISSED: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
