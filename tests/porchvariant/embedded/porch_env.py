"""What the embedded Porch's tests share: bare git repositories, Repository objects, and `Env`.

`Env` has an upstream repository `catalog` (package `web`, published as `web/v1` by
GitPackageRepository) and an empty downstream repository `deploy`, both bare repositories under
tmp_path, registered as Repository objects in namespace `team` of an EmbeddedCluster, plus a
`remote` Repository the embedded Porch does not serve.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from krmyaml import textedit
from porchvariant.embedded.git.repository import GitPackageRepository
from porchvariant.embedded.porch import EmbeddedPorch
from porchvariant.porch_client import PorchClient, clone_task
from reconcile import EmbeddedCluster

ENV = {**os.environ, "GIT_AUTHOR_NAME": "Someone", "GIT_AUTHOR_EMAIL": "someone@example.com",
       "GIT_COMMITTER_NAME": "Someone", "GIT_COMMITTER_EMAIL": "someone@example.com"}
NS = "team"
KPTFILE = "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: web  # the web package\n"
CONFIGMAP = ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\n"
             "data:\n  color: blue\n  size: small\n")


def git(repo: Path, *args: str) -> str:
    run = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=ENV)
    assert run.returncode == 0, run.stderr
    return run.stdout


def seed(tmp: Path, name: str, files: Mapping[str, str]) -> Path:
    work = tmp / f"{name}-work"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    for path, text in files.items():
        (work / path).parent.mkdir(parents=True, exist_ok=True)
        (work / path).write_text(text)
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "seed")
    bare = tmp / f"{name}.git"
    git(tmp, "clone", "-q", "--bare", str(work), str(bare))
    return bare


def crd(kind: str, plural: str, group: str) -> dict[str, Any]:
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{group}"},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
                     "versions": [{"name": "v1alpha1", "served": True, "storage": True, "schema": schema}]}}


def repository(name: str, repo: str, *, deployment: bool = False, annotations: Mapping[str, str] | None = None,
               **git_spec: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": NS}
    if annotations:
        metadata["annotations"] = dict(annotations)
    spec: dict[str, Any] = {"type": "git", "git": {"repo": repo, "branch": "main", **git_spec}}
    if deployment:
        spec["deployment"] = True
    return {"apiVersion": "config.porch.kpt.dev/v1alpha1", "kind": "Repository", "metadata": metadata, "spec": spec}


class Env:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.catalog = seed(tmp, "catalog", {"web/Kptfile": KPTFILE, "web/cm.yaml": CONFIGMAP})
        self.deploy = seed(tmp, "deploy", {"README.md": "deployments\n"})
        with GitPackageRepository(self.catalog) as repo:
            draft = repo.create_draft("web", "v1", {"Kptfile": KPTFILE, "cm.yaml": CONFIGMAP})
            repo.approve(draft)
        self.cluster, self.porch, self.client = self.start()

    def start(self, renderer: Any = None) -> tuple[EmbeddedCluster, EmbeddedPorch, PorchClient]:
        """A new cluster, its Repositories and an EmbeddedPorch over them (the old ones are left open)."""
        cluster = EmbeddedCluster()
        cluster.create(crd("Repository", "repositories", "config.porch.kpt.dev"))
        cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        cluster.create(repository("catalog", str(self.catalog)))
        cluster.create(repository("deploy", f"file://{self.deploy}"))
        cluster.create(repository("remote", "https://example.com/remote.git"))
        return cluster, EmbeddedPorch(cluster, renderer=renderer), PorchClient(cluster)

    def close(self) -> None:
        self.porch.close()
        self.cluster.close()

    def restart(self, renderer: Any = None) -> None:
        """Close the cluster and the Porch, and serve the same repositories again with `renderer`."""
        self.close()
        self.cluster, self.porch, self.client = self.start(renderer)

    def clone(self, workspace: str = "prod", upstream: str = "catalog.web.v1", **kw: Any) -> dict[str, Any]:
        return self.client.create_revision(NS, repository="deploy", package="web", workspace=workspace,
                                           task=clone_task(upstream), **kw)

    def publish(self, revision: dict[str, Any]) -> dict[str, Any]:
        return self.client.approve(self.client.propose(revision))

    def files(self, revision: dict[str, Any]) -> dict[str, str]:
        resources = self.client.resources(revision)
        assert resources is not None
        return dict(resources["spec"]["resources"])

    def write(self, revision: dict[str, Any], change: Callable[[dict[str, str]], None]) -> dict[str, Any]:
        resources = self.client.resources(revision)
        assert resources is not None
        files = dict(resources["spec"]["resources"])
        change(files)
        return self.client.update_resources(resources, files)[1]


def kptfile_of(files: Mapping[str, str]) -> dict[str, Any]:
    return textedit.load_objects(files["Kptfile"])[0][1]


def configmap_data(files: Mapping[str, str]) -> dict[str, Any]:
    return dict(textedit.load_objects(files["cm.yaml"])[0][1]["data"])


