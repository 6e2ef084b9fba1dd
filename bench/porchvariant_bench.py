"""PackageVariant and PackageVariantSet: the pure parts at scale.

  * rendering a PackageVariantSet whose template has CEL expressions (packageExpr, labelExprs,
    an injector nameExpr, a function configMapExprs) over 10,000 Repositories picked by a label
    selector (target: 10,000 PackageVariants in under 1 s, on the default CEL engine);
    cel-python, the pure-Python fallback, is timed on 1,000 for comparison;
  * applying all three mutations (package context, Kptfile pipeline, config injection) to a
    200-file package: first on the pristine package, then again on its result, the steady state
    of every later reconcile (target: under 100 ms each).
Run: `python bench/porchvariant_bench.py` (or `make bench`). Exits non-zero if a target is missed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Any

from porchvariant import apply_mutations, cel, render_package_variants

NAMESPACE = "fleet"


def repositories(count: int) -> list[dict[str, Any]]:
    return [{"apiVersion": "config.porch.kpt.dev/v1alpha1", "kind": "Repository",
             "metadata": {"name": f"edge-{i:05d}", "namespace": NAMESPACE,
                          "labels": {"role": "edge", "region": f"region-{i % 7}"},
                          "annotations": {"example.com/site": f"site-{i}"}},
             "spec": {"type": "git", "git": {"repo": f"https://git.example.com/edge-{i}.git"}}}
            for i in range(count)]


PACKAGE_VARIANT_SET: dict[str, Any] = {
    "apiVersion": "config.porch.kpt.dev/v1alpha2", "kind": "PackageVariantSet",
    "metadata": {"name": "edge-network", "namespace": NAMESPACE, "uid": "7d3c1f0e-0000-4000-8000-000000000001"},
    "spec": {
        "upstream": {"repo": "catalog", "package": "network", "workspaceName": "v3"},
        "targets": [{
            "repositorySelector": {"matchLabels": {"role": "edge"}},
            "template": {
                "downstream": {"packageExpr": "'network-' + repository.labels['region']"},
                "labels": {"team": "net"},
                "labelExprs": [{"key": "site", "valueExpr": "target.annotations['example.com/site']"}],
                "annotationExprs": [{"keyExpr": "'example.com/upstream'", "valueExpr": "upstream.name"}],
                "injectors": [{"kind": "ConfigMap", "nameExpr": "target.name + '-settings'"}],
                "pipeline": {"mutators": [{
                    "image": "gcr.io/kpt-fn/set-labels:v0.2.0", "name": "set-region",
                    "configMapExprs": [{"key": "region", "valueExpr": "target.labels['region']"}]}]},
            },
        }],
    },
}

UPSTREAM = {"apiVersion": "porch.kpt.dev/v1alpha1", "kind": "PackageRevision",
            "metadata": {"name": "catalog.network.v3", "namespace": NAMESPACE},
            "spec": {"repository": "catalog", "packageName": "network", "workspaceName": "v3",
                     "revision": 3, "lifecycle": "Published"}}


def render_seconds(count: int) -> float:
    repos = repositories(count)
    start = time.perf_counter()
    variants = render_package_variants(PACKAGE_VARIANT_SET, UPSTREAM, repos, [])
    elapsed = time.perf_counter() - start
    assert len(variants) == count, len(variants)
    return elapsed


KPTFILE = """\
# The network package: one Deployment per site, and its configuration.
apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: network
  annotations:
    config.kubernetes.io/local-config: "true"
info:
  description: Edge network functions
pipeline:
  mutators:
  # keep labels consistent across the package
  - image: gcr.io/kpt-fn/set-labels:v0.2.0
    configMap:
      app: network
  validators:
  - image: gcr.io/kpt-fn/kubeval:v0.3.0
"""

PACKAGE_CONTEXT = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: kptfile.kpt.dev
  annotations:
    config.kubernetes.io/local-config: "true"
data:
  name: network
"""


def package(files: int = 200) -> dict[str, str]:
    resources = {"Kptfile": KPTFILE, "package-context.yaml": PACKAGE_CONTEXT}
    resources["settings.yaml"] = ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n"
                                  "  annotations:\n    kpt.dev/config-injection: required\ndata:\n  mtu: \"1500\"\n")
    resources["README.md"] = "# network\n\nDeploys the edge network functions.\n"
    for i in range(files - len(resources)):
        resources[f"workloads/deployment-{i:03d}.yaml"] = (
            f"# Deployment {i} of the network package\n"
            f"apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: fn-{i}\n  labels:\n    app: network\n"
            f"spec:\n  replicas: 2\n  selector:\n    matchLabels:\n      app: fn-{i}\n  template:\n"
            f"    metadata:\n      labels:\n        app: fn-{i}\n    spec:\n      containers:\n"
            f"      - name: fn\n        image: registry.example.com/fn:{i}\n"
            f"        ports:\n        - containerPort: 8080\n")
    return resources


VARIANT: dict[str, Any] = {
    "apiVersion": "config.porch.kpt.dev/v1alpha1", "kind": "PackageVariant",
    "metadata": {"name": "edge-network-edge-00001-network", "namespace": NAMESPACE},
    "spec": {
        "upstream": {"repo": "catalog", "package": "network", "workspaceName": "v3"},
        "downstream": {"repo": "edge-00001", "package": "network"},
        "packageContext": {"data": {"region": "region-1", "site": "site-1"}, "removeKeys": ["legacy"]},
        "pipeline": {"mutators": [{"image": "gcr.io/kpt-fn/set-namespace:v0.4.1", "name": "ns",
                                   "configMap": {"namespace": "network"}}]},
        "injectors": [{"kind": "ConfigMap", "name": "edge-00001-settings"}],
    },
}

CLUSTER = [{"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "edge-00001-settings", "namespace": NAMESPACE}, "data": {"mtu": "9000"}}]


def mutation_seconds(resources: dict[str, str], rounds: int = 20) -> tuple[float, dict[str, str]]:
    best, result = float("inf"), None
    for _ in range(rounds):
        start = time.perf_counter()
        result = apply_mutations(VARIANT, resources, CLUSTER)
        best = min(best, time.perf_counter() - start)
    assert result is not None
    return best, result.resources


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--render-only":
        print(f"{render_seconds(int(sys.argv[2])):.3f}")
        return 0
    ok = True
    render_seconds(100)  # warm-up: imports and the compile cache are not what is measured
    seconds = render_seconds(10_000)
    ok &= seconds < 1.0
    print(f"PackageVariantSet render, 10,000 targets ({cel.engine_name()}): {seconds:.3f} s "
          f"({10_000 / seconds:,.0f}/s; target < 1 s)")
    fallback = subprocess.run([sys.executable, __file__, "--render-only", "1000"], capture_output=True, text=True,
                              env={**os.environ, "PORCHKIT_CEL_ENGINE": "cel-python"}, check=True)
    print(f"  for comparison, cel-python: 1,000 targets in {float(fallback.stdout):.3f} s")

    pristine = package()
    first, mutated = mutation_seconds(pristine)
    again, settled = mutation_seconds(mutated)
    changed = sorted(path for path in mutated if mutated[path] != pristine[path])
    ok &= first < 0.1 and again < 0.1 and settled == mutated
    print(f"mutations on a {len(pristine)}-file package: {first * 1000:.1f} ms first pass "
          f"({len(changed)} files changed: {', '.join(changed)}), {again * 1000:.1f} ms on its result "
          f"(no change: {settled == mutated}); target < 100 ms")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
