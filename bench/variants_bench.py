"""The PackageVariant controllers at scale, on the embedded Porch over real git repositories.

One PackageVariantSet fans one package out to REPOSITORIES × PACKAGES downstreams (default
10 × 100 = 1,000), each with a package context. Timed, each as a whole local run
(`porchvariant.local.reconcile_manifests`, what `porchkit variants reconcile` runs: start-up,
caches, controllers until idle):

  * the first run, which creates every draft (target: under 60 s for 1,000);
  * a second run with nothing to do (target: under 5 s), which must write nothing to git.

Run: `python bench/variants_bench.py [REPOSITORIES PACKAGES]` (or `make bench`). Exits non-zero if
a target is missed or the idle run writes anything.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from porchvariant.embedded.gitrepo import GitPackageRepository
from porchvariant.local import reconcile_manifests
from porchvariant.manifests import Manifest

NAMESPACE = "fleet"
ENV = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@example.com",
       "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@example.com"}
PACKAGE = {
    "Kptfile": "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: network\n",
    "config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: network\ndata:\n  mtu: \"1500\"\n",
}
DRAFTS_TARGET, IDLE_TARGET = 60.0, 5.0


def git(*args: str) -> None:
    subprocess.run(["git", *args], check=True, capture_output=True, env=ENV)


def bare_repository(root: Path, name: str) -> Path:
    work, bare = root / f"{name}-work", root / f"{name}.git"
    git("init", "-q", "-b", "main", str(work))
    (work / "README.md").write_text(f"{name}\n")
    git("-C", str(work), "add", "-A")
    git("-C", str(work), "commit", "-q", "-m", "start")
    git("clone", "-q", "--bare", str(work), str(bare))
    return bare


def repository(name: str, path: Path, *, deployment: bool) -> dict[str, Any]:
    return {"apiVersion": "config.porch.kpt.dev/v1alpha1", "kind": "Repository",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"type": "git", "deployment": deployment, "git": {"repo": str(path), "branch": "main"}}}


def manifests(root: Path, repositories: int, packages: int) -> list[Manifest]:
    catalog = bare_repository(root, "catalog")
    with GitPackageRepository(catalog) as repo:
        repo.approve(repo.create_draft("network", "v1", PACKAGE))
    objects = [repository("catalog", catalog, deployment=False)]
    names = [f"edge-{i:02d}" for i in range(repositories)]
    objects += [repository(name, bare_repository(root, name), deployment=True) for name in names]
    sites = [f"site-{j:03d}" for j in range(packages)]
    objects.append({
        "apiVersion": "config.porch.kpt.dev/v1alpha2", "kind": "PackageVariantSet",
        "metadata": {"name": "network", "namespace": NAMESPACE},
        "spec": {"upstream": {"repo": "catalog", "package": "network", "revision": 1},
                 "targets": [{"repositories": [{"name": name, "packageNames": sites} for name in names],
                              "template": {"packageContext": {"dataExprs": [
                                  {"key": "site", "valueExpr": "repoDefault + '/' + packageDefault"}]}}}]}})
    return [Manifest(obj, "bench.yaml") for obj in objects]


def all_refs(root: Path) -> str:
    return "".join(subprocess.run(["git", "-C", str(path), "for-each-ref"], capture_output=True, text=True,
                                  check=True).stdout for path in sorted(root.glob("*.git")))


def main(repositories: int, packages: int) -> int:
    count = repositories * packages
    with tempfile.TemporaryDirectory(prefix="variants-bench-") as tmp:
        root = Path(tmp)
        objects = manifests(root, repositories, packages)
        started = time.perf_counter()
        first = reconcile_manifests(objects, state=root / "state", timeout=3600)
        drafts = time.perf_counter() - started
        created = sum(1 for c in first.changes if c.change == "created")
        before = all_refs(root)
        started = time.perf_counter()
        idle = reconcile_manifests(objects, state=root / "state", timeout=3600)
        idle_seconds = time.perf_counter() - started
        wrote = all_refs(root) != before
    print(f"{count} drafts ({repositories} repositories x {packages} packages): {drafts:.1f} s, "
          f"{count / drafts:.0f} drafts/s (target for 1,000: < {DRAFTS_TARGET:.0f} s)")
    print(f"idle run: {idle_seconds:.2f} s, {len(idle.changes)} changes, git {'WRITTEN' if wrote else 'untouched'} "
          f"(target for 1,000: < {IDLE_TARGET:.0f} s, nothing written)")
    problems = first.problems + idle.problems
    for problem in problems[:5]:
        print(f"problem: {problem}")
    ok = (created == count and not problems and not wrote and not idle.changes
          and drafts < DRAFTS_TARGET and idle_seconds < IDLE_TARGET)
    return 0 if ok else 1


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:3]] or [10, 100]
    sys.exit(main(*args))
