"""deploy/porch-embedded/: the variants' manager with the embedded Porch, and what that adds to its rights.

The Deployment's flags must be ones `porchkit manager` accepts and must put the mirrors on a
volume; the added RBAC must let the embedded Porch write a Repository's Ready condition and read
a Repository's Secret only in a namespace where an administrator bound porchkit-git-credentials,
with `get` alone.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from porchkit import cli
from reconcile.cli import selected_controllers
from tests.deploy.rbac_model import DEPLOY, NAMESPACE, Access, allowed, load, shipped

OVERLAY = "porch-embedded"
_REPOSITORIES = ("config.porch.kpt.dev", "repositories")


def overlay() -> list[dict[str, Any]]:
    """The RBAC objects the overlay adds to what deploy/ ships."""
    return load(f"{OVERLAY}/rbac.yaml")


def built() -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip(f"kubectl is not on PATH, so `kubectl kustomize deploy/{OVERLAY}` cannot be checked")
    out = subprocess.run([kubectl, "kustomize", str(DEPLOY / OVERLAY)], capture_output=True, text=True,
                         check=True).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def test_the_overlay_builds_the_variants_manager_with_the_embedded_porch_and_the_repository_crd() -> None:
    docs = built()
    names = {(d["kind"], d["metadata"]["name"]) for d in docs}
    assert ("CustomResourceDefinition", "repositories.config.porch.kpt.dev") in names
    assert ("ClusterRole", "porchkit-variants-embedded-porch") in names
    assert not any(kind == "Deployment" and name != "porchkit-variants" for kind, name in names)
    [deployment] = [d for d in docs if d["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    args = cli.build_parser("manager")[0].parse_args(container["args"])
    assert args.porch == "embedded" and args.leader_elect
    assert selected_controllers(args.controllers, cli.CONTROLLERS) == ["packagevariant", "packagevariantset",
                                                                        "approval"]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert mounts.get(str(args.git_cache)) in {v["name"] for v in pod["volumes"] if "emptyDir" in v}
    assert container["securityContext"]["readOnlyRootFilesystem"] is True  # the patch keeps the base's hardening


def test_the_repository_crd_serves_the_status_the_embedded_porch_writes() -> None:
    [crd] = load(f"{OVERLAY}/config.porch.kpt.dev_repositories.yaml")
    [version] = crd["spec"]["versions"]
    assert (crd["spec"]["group"], crd["spec"]["names"]["plural"]) == _REPOSITORIES
    assert version["name"] == "v1alpha1" and version["subresources"] == {"status": {}}


def test_the_embedded_porch_may_write_a_repositorys_ready_condition() -> None:
    status = Access("update", _REPOSITORIES[0], "repositories/status", "team-a", "edge")
    assert not allowed(shipped(), "porchkit", status)
    assert allowed(shipped() + overlay(), "porchkit", status)


def test_secrets_are_read_only_where_an_administrator_binds_the_credentials_role_and_only_with_get() -> None:
    docs = shipped() + overlay()
    [role] = [d for d in overlay() if d["metadata"]["name"] == "porchkit-git-credentials"]
    assert role["rules"] == [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]
    assert "aggregate" not in " ".join(role["metadata"].get("labels") or {})
    bindings = [d for d in docs if d["kind"] in ("ClusterRoleBinding", "RoleBinding")]
    assert not any(d["roleRef"]["name"] == role["metadata"]["name"] for d in bindings)
    read = Access("get", "", "secrets", "team-a", "git-edge")
    assert not allowed(docs, "porchkit", read)
    granted = docs + load(f"{OVERLAY}/example-git-credentials.yaml")
    assert allowed(granted, "porchkit", read)
    for refused in (Access("get", "", "secrets", "team-b", "git-edge"), Access("get", "", "secrets", "kube-system"),
                    Access("list", "", "secrets", "team-a"), Access("watch", "", "secrets", "team-a")):
        assert not allowed(granted, "porchkit", refused), refused
    assert not allowed(granted, "porchkit-decorators", read)


def test_every_overlay_file_is_documented_in_the_deploy_readme() -> None:
    readme = (DEPLOY / "README.md").read_text(encoding="utf-8")
    for path in sorted(Path(DEPLOY / OVERLAY).glob("*.yaml")):
        assert f"{OVERLAY}/{path.name}" in readme or path.name == "kustomization.yaml", path.name
    assert f"kubectl apply -k deploy/{OVERLAY}/" in readme
    assert NAMESPACE in readme
