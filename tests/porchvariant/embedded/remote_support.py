"""Shared by the remote-repository tests: Porch's layout on a real git server.

`ServedLayout(server, tmp)` puts the blueprint `catalog` (package `web`, published twice) and empty
deployment repositories onto a test git server (https or ssh), gives the Repository manifests that
point at them, and pushes someone else's commits there. `Served` is that layout on the https
server, with the basic-auth Secret and the CA bundle as Porch takes it (Secret
`<namespace>-ca-bundle`); ssh_support.py has the ssh one.
"""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path
from typing import Any

from porchvariant.embedded.git.mirror import Mirror
from porchvariant.embedded.git.repository import GitPackageRepository
from porchvariant.embedded.git.transport import BasicAuth, Transport
from tests.gitservers.https import HttpsGitServer
from tests.gitservers.served import ServedRepositories
from tests.porchvariant.variants_support import ENV, NS, Repos

SECRET = "git-auth"


class ServedLayout:
    """The blueprint and deployment repositories of `Repos`, served by `server`; the Repositories
    name the Secret `secret_name`."""

    secret_name = ""

    def __init__(self, server: ServedRepositories, tmp: Path, deployments: tuple[str, ...] = ("prod",)) -> None:
        self.server, self.tmp, self.deployments = server, tmp, deployments
        (tmp / "seed").mkdir()
        local = Repos(tmp / "seed", deployments)
        for name, path in (("catalog", local.catalog), *local.deployments.items()):
            target = server.repos / f"{name}.git"
            subprocess.run(["git", "clone", "--quiet", "--bare", str(path), str(target)], check=True, env=ENV)
            server.hand_over(target)

    def repository(self, name: str, **git: Any) -> dict[str, Any]:
        return {"apiVersion": "config.porch.kpt.dev/v1alpha1", "kind": "Repository",
                "metadata": {"name": name, "namespace": NS},
                "spec": {"type": "git", "deployment": name != "catalog",
                         "git": {"repo": self.server.url(f"{name}.git"), "branch": "main",
                                 "secretRef": {"name": self.secret_name}, **git}}}

    def repositories(self) -> list[dict[str, Any]]:
        return [self.repository("catalog"), *(self.repository(name) for name in self.deployments)]

    def push_commit(self, name: str, path: str, text: str, *, branch: str = "main", force_root: bool = False) -> str:
        """Someone else's commit on `branch` of the served repository (straight to its directory);
        with `force_root`, a new root commit that replaces the branch's history. Its id."""
        work = self.tmp / f"work-{name}-{len(list(self.tmp.glob('work-*')))}"
        self.server.work_git(self.tmp, "clone", "--quiet", "--branch", branch, str(self.server.repos / f"{name}.git"),
                             str(work))
        if force_root:
            self.server.work_git(work, "checkout", "--quiet", "--orphan", "rewritten")
            self.server.work_git(work, "rm", "-rfq", ".")
        (work / path).parent.mkdir(parents=True, exist_ok=True)
        (work / path).write_text(text)
        self.server.work_git(work, "add", "-A")
        self.server.work_git(work, "commit", "--quiet", "-m", f"someone else: {path}")
        self.server.work_git(work, "push", "--quiet", "--force", "origin", f"HEAD:refs/heads/{branch}")
        self.server.hand_over(self.server.repos / f"{name}.git")
        return self.server.work_git(work, "rev-parse", "HEAD").strip()


class Served(ServedLayout):
    """The layout on the https server, with basic auth."""

    secret_name = SECRET
    server: HttpsGitServer

    def __init__(self, server: HttpsGitServer, tmp: Path, deployments: tuple[str, ...] = ("prod",)) -> None:
        super().__init__(server, tmp, deployments)

    def secret(self, password: str | None = None) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/basic-auth",
                "metadata": {"name": SECRET, "namespace": NS},
                "stringData": {"username": self.server.username, "password": password or self.server.password}}

    def ca_bundle(self) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"{NS}-ca-bundle", "namespace": NS},
                "data": {"ca.crt": base64.b64encode(self.server.ca_pem).decode()}}

    def objects(self) -> list[dict[str, Any]]:
        return [*self.repositories(), self.secret(), self.ca_bundle()]

    def open(self, name: str, cache: Path) -> GitPackageRepository:
        """A handle on the served repository through porchkit's own mirror in `cache`."""
        transport = Transport(self.server.url(f"{name}.git"), ca_bundle=lambda: self.server.ca_pem,
                              credentials=lambda: BasicAuth(self.server.username, self.server.password))
        return GitPackageRepository("", remote=Mirror(cache, transport, "main"))
