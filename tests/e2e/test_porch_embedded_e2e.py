"""`porchkit manager --porch embedded` against a real API server and a real git server (`make e2e`).

No Porch server: the manager, a process of its own, serves Porch's API to its controllers from the
repositories on an https git server on loopback (apache2 + git http-backend, basic auth, a test
CA), with the Repositories, their Secrets, the PackageVariantSet and its PackageVariants in the
real API server. A set fans out to two Repositories: drafts become branches on the server; where
the Repository allows Nephio's `initial` approval policy, the approval controller publishes the
draft and a tag appears; deleting the set deletes its variants (kube-controller-manager's garbage
collector) and they delete their drafts' branches. A Secret that does not name the server is not
sent to it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from porchvariant.approval_controller import APPROVAL_POLICIES_ANNOTATION, POLICY_ANNOTATION
from porchvariant.embedded._secret_scope import SERVERS_ANNOTATION
from porchvariant.packagevariant_controller import PACKAGE_VARIANT
from porchvariant.packagevariantset_controller import PACKAGE_VARIANT_SET
from porchvariant.porch_client import REPOSITORY
from reconcile import Cluster, ObjectKey, conditions
from tests.e2e.support import eventually
from tests.gitservers.https import HttpsGitServer, https_git_server
from tests.porchvariant.embedded.remote_support import Served

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.gitserver


@pytest.fixture(name="server")
def server_fixture() -> Iterator[HttpsGitServer]:
    with https_git_server() as server:
        yield server


class Deployment:
    """The served repositories, their objects in `namespace`, and the manager process over them."""

    def __init__(self, kube: Cluster, namespace: str, served: Served, kubeconfig: str, tmp: Path) -> None:
        self.kube, self.namespace, self.served, self.tmp = kube, namespace, served, tmp
        self.kubeconfig = kubeconfig
        self.log = tmp / "manager.log"
        self.process: subprocess.Popen[bytes] | None = None

    def create(self, obj: dict[str, Any]) -> None:
        self.kube.create({**obj, "metadata": {**obj["metadata"], "namespace": self.namespace}})

    def install(self, *, allow_approval: tuple[str, ...], servers: str) -> None:
        for repository in self.served.repositories():
            name = repository["metadata"]["name"]
            metadata = {**repository["metadata"], "labels": {"tier": "edge"} if name != "catalog" else {}}
            if name in allow_approval:
                metadata["annotations"] = {APPROVAL_POLICIES_ANNOTATION: "initial"}
            self.create({**repository, "metadata": metadata})
        secret = self.served.secret()
        self.create({**secret, "metadata": {**secret["metadata"], "annotations": {SERVERS_ANNOTATION: servers}}})
        bundle = self.served.ca_bundle()  # Porch's name for it: <namespace>-ca-bundle
        self.create({**bundle, "metadata": {**bundle["metadata"], "name": f"{self.namespace}-ca-bundle"}})

    def start(self) -> None:
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "porchkit", "manager", "--kubeconfig", self.kubeconfig, "--porch", "embedded",
                 "--controllers", "packagevariant,packagevariantset,approval", "--git-cache", str(self.tmp / "cache"),
                 "--git-fetch-period", "1s", "--health-addr", "0"],
                cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})

    def stop(self) -> int | None:
        if self.process is None:
            return None
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            return None

    def fan_out(self) -> None:
        self.create({"apiVersion": "config.porch.kpt.dev/v1alpha2", "kind": "PackageVariantSet",
                     "metadata": {"name": "web"},
                     "spec": {"upstream": {"repo": "catalog", "package": "web", "revision": 1},
                              "targets": [{"repositorySelector": {"matchLabels": {"tier": "edge"}},
                                           "template": {"annotations": {POLICY_ANNOTATION: "initial"}}}]}})

    def server_refs(self, repo: str) -> dict[str, str]:
        return self.served.server.refs(f"{repo}.git")

    def get(self, kind: Any, name: str) -> dict[str, Any] | None:
        return self.kube.get(kind, ObjectKey(self.namespace, name))

    def manager_log(self) -> str:
        return self.log.read_text(errors="replace")


@pytest.fixture(name="deployment")
def deployment_fixture(cluster: Cluster, namespace: str, kubeconfig: str, server: HttpsGitServer, tmp_path: Path,
                       variant_crds: None) -> Iterator[Deployment]:
    served = Served(server, tmp_path, deployments=("prod", "dev"))
    running = Deployment(cluster, namespace, served, kubeconfig, tmp_path)
    yield running
    running.stop()


def _branches(refs: dict[str, str], prefix: str) -> list[str]:
    return sorted(ref for ref in refs if ref.startswith(prefix))


def test_a_set_fans_out_to_branches_approval_pushes_a_tag_and_deleting_cleans_up(deployment: Deployment) -> None:
    server = deployment.served.server
    deployment.install(allow_approval=("prod",), servers=server.url(""))
    deployment.start()
    deployment.fan_out()

    def settled() -> tuple[dict[str, str], dict[str, str]] | None:
        prod, dev = deployment.server_refs("prod"), deployment.server_refs("dev")
        return (prod, dev) if "refs/tags/web/v1" in prod and _branches(dev, "refs/heads/drafts/web/") else None

    prod, dev = eventually(settled, timeout=120)
    assert _branches(prod, "refs/heads/drafts/") == []  # approval moved the draft onto main
    assert "refs/tags/web/v1" not in dev  # dev's Repository does not allow the policy: a person approves
    pvs = eventually(lambda: (found := deployment.get(PACKAGE_VARIANT_SET, "web"))
                     and len((found.get("status") or {}).get("packageVariants") or ()) == 2 and found)
    assert {entry["name"] for entry in pvs["status"]["packageVariants"]} == {"web-prod-web", "web-dev-web"}
    prod_ready = deployment.get(REPOSITORY, "prod")
    assert prod_ready is not None and conditions.is_true(prod_ready, "Ready")

    deployment.kube.delete(PACKAGE_VARIANT_SET, ObjectKey(deployment.namespace, "web"))
    eventually(lambda: not _branches(deployment.server_refs("dev"), "refs/heads/drafts/"), timeout=120)
    eventually(lambda: deployment.get(PACKAGE_VARIANT, "web-dev-web") is None)
    assert "refs/tags/web/v1" in deployment.server_refs("prod")  # a published revision is never deleted
    assert deployment.stop() == 0, deployment.manager_log()
    log = deployment.manager_log()
    assert server.password not in log and "Traceback" not in log


def test_a_secret_that_does_not_name_the_server_is_not_sent_to_it(deployment: Deployment) -> None:
    server = deployment.served.server
    deployment.install(allow_approval=(), servers="https://git.example.com/")
    before = {repo: deployment.server_refs(repo) for repo in ("catalog", "prod", "dev")}
    deployment.start()
    deployment.fan_out()

    def refused() -> dict[str, Any] | None:
        repository = deployment.get(REPOSITORY, "prod")
        ready = conditions.find(conditions.conditions_of(repository or {}), "Ready") or {}
        return repository if ready.get("status") == "False" else None

    repository = eventually(refused, timeout=60)
    [ready] = [c for c in repository["status"]["conditions"] if c["type"] == "Ready"]
    assert SERVERS_ANNOTATION in ready["message"] and server.url("prod.git") in ready["message"]
    assert {repo: deployment.server_refs(repo) for repo in before} == before
    # The set cannot list its upstream (catalog's Secret is refused too), and says why.
    pvs = eventually(lambda: (found := deployment.get(PACKAGE_VARIANT_SET, "web"))
                     and conditions.is_true(found, "Stalled") and found)
    stalled = conditions.find(conditions.conditions_of(pvs), "Stalled") or {}
    assert stalled["reason"] == "RepositoryNotReady" and SERVERS_ANNOTATION in stalled["message"]
    assert deployment.get(PACKAGE_VARIANT, "web-prod-web") is None
    assert server.password not in deployment.manager_log()
