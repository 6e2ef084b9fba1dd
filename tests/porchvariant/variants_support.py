"""Shared by the controller tests: real git repositories in Porch's layout, manifests over them,
and the controllers running live over them.

`Repos(tmp)` makes a blueprint repository `catalog` with package `web` published as revisions 1
and 2, and empty deployment repositories; `manifests(...)` wraps objects for reconcile_manifests;
`Live(repos)` runs both controllers under a Manager on the embedded cluster and Porch, and
`eventually` waits for what they do.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from porchvariant.embedded.git.repository import GitPackageRepository
from porchvariant.local_run import serve_porch
from porchvariant.manager import package_variant_controllers, package_variant_set_controllers
from porchvariant.manifests import Manifest
from reconcile import EmbeddedCluster
from reconcile.events import EventRecorder
from reconcile.manager import Manager
from tests import waiting
from tests.reconcile import support

NS = "team"
ENV = {**os.environ, "GIT_AUTHOR_NAME": "Someone", "GIT_AUTHOR_EMAIL": "someone@example.com",
       "GIT_COMMITTER_NAME": "Someone", "GIT_COMMITTER_EMAIL": "someone@example.com"}
KPTFILE = "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: web  # the web package\n"
V1 = {"Kptfile": KPTFILE,
      "app.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  color: blue\n  size: small\n",
      "region.yaml": ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: region\n  annotations:\n"
                      "    kpt.dev/config-injection: optional\ndata:\n  name: unset\n")}
V2 = {**V1, "app.yaml": V1["app.yaml"].replace("size: small", "size: large")}


def git(repo: Path, *args: str) -> str:
    run = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=ENV)
    assert run.returncode == 0, run.stderr
    return run.stdout


def bare_repository(tmp: Path, name: str) -> Path:
    work = tmp / f"{name}-work"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    (work / "README.md").write_text(f"{name}\n")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "start")
    bare = tmp / f"{name}.git"
    git(tmp, "clone", "-q", "--bare", str(work), str(bare))
    return bare


def refs(repo: Path) -> str:
    """Every ref and what it points at: equal before and after means nothing was written."""
    return git(repo, "for-each-ref", "--format=%(refname) %(objectname)")


class Repos:
    """A blueprint repository and deployment repositories, all bare, under `tmp`."""

    def __init__(self, tmp: Path, deployments: tuple[str, ...] = ("prod",)) -> None:
        self.tmp = tmp
        self.catalog = bare_repository(tmp, "catalog")
        with GitPackageRepository(self.catalog) as repo:
            for version, files in (("v1", V1), ("v2", V2)):
                repo.approve(repo.create_draft("web", version, files))
        self.deployments = {name: bare_repository(tmp, name) for name in deployments}

    def repository(self, name: str, *, deployment: bool = True, labels: Mapping[str, str] | None = None,
                   ) -> dict[str, Any]:
        path = self.catalog if name == "catalog" else self.deployments[name]
        metadata: dict[str, Any] = {"name": name, "namespace": NS}
        if labels:
            metadata["labels"] = dict(labels)
        return {"apiVersion": "config.porch.kpt.dev/v1alpha1", "kind": "Repository", "metadata": metadata,
                "spec": {"type": "git", "deployment": deployment and name != "catalog",
                         "git": {"repo": str(path), "branch": "main"}}}

    def repositories(self, **labels: Mapping[str, str]) -> list[dict[str, Any]]:
        return [self.repository("catalog"), *(self.repository(name, labels=labels.get(name))
                                             for name in self.deployments)]

    def all_refs(self) -> dict[str, str]:
        return {str(path): refs(path) for path in (self.catalog, *self.deployments.values())}


def package_variant(name: str, *, downstream: str = "prod", package: str = "web", revision: int = 1,
                    **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "config.porch.kpt.dev/v1alpha1", "kind": "PackageVariant",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"upstream": {"repo": "catalog", "package": "web", "revision": revision},
                     "downstream": {"repo": downstream, "package": package}, **spec}}


def configmap(name: str, /, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": NS}, "data": data}


def manifests(*objects: dict[str, Any]) -> list[Manifest]:
    return [Manifest(obj, f"manifest-{i}.yaml") for i, obj in enumerate(objects)]


class Live:
    """The embedded cluster and Porch with namespace NS and the Repositories of `repos`, and both
    controllers running under a Manager (Events on) on a thread, until `stop()`."""

    def __init__(self, repos: Repos) -> None:
        self.repos = repos
        self.cluster = EmbeddedCluster()
        self.porch = serve_porch(self.cluster)
        self.cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        for repository in repos.repositories():
            self.cluster.create(repository)
        self.manager = Manager(self.cluster, events=EventRecorder(self.cluster, "porchkit-test"))
        self.manager.add(package_variant_controllers(self.manager))
        self.manager.add(package_variant_set_controllers(self.manager))
        self.running = support.Running(self.manager)

    def stop(self) -> None:
        self.running.stop()
        self.porch.close()
        self.cluster.close()


def eventually(check: Callable[[], Any], timeout: float = 20.0) -> Any:
    """tests.waiting.eventually, polling every 20 ms (a check may read git)."""
    return waiting.eventually(check, timeout, interval=0.02)
