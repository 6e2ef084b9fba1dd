"""The controllers' git output read by the real kpt: `kpt pkg get` of a published downstream, and an
upgrade draft against `kpt pkg update` on the same three versions.

The downstream is published from upstream revision 1 with local changes (its package context and
an injected region), then the variant moves to revision 2, which changes another file. kpt gets
revision 1 from the same blueprint repository, takes the published downstream's files as its
local package, and updates to `web/v2`. The two results must agree, compared as data the way
embedded/test_resource_merge_kpt.py compares them (kpt's own annotations and comments aside).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from krmfn.testing import kpt_binary
from porchvariant.embedded.git.repository import GitPackageRepository, Lifecycle
from porchvariant.local_run import reconcile_manifests
from tests.porchvariant.embedded.test_resource_merge_kpt import as_data, checked, read_tree, write_tree
from tests.porchvariant.variants_support import Repos, configmap, manifests, package_variant

pytestmark = pytest.mark.kpt


def test_an_upgrade_draft_matches_kpt_pkg_update(tmp_path: Path) -> None:
    kpt = kpt_binary()
    repos = Repos(tmp_path)
    local = {"packageContext": {"data": {"env": "prod"}}, "injectors": [{"kind": "ConfigMap", "name": "region-eu"}]}
    objects = [*repos.repositories(), configmap("region-eu", name="eu-west")]
    state = tmp_path / "state"
    reconcile_manifests(manifests(*objects, package_variant("web-prod", **local)), state=state, approve=True)
    reconcile_manifests(manifests(*objects, package_variant("web-prod", revision=2, **local)), state=state)

    prod = repos.deployments["prod"]
    with GitPackageRepository(prod) as git:
        published = next(r for r in git.list_revisions("web") if r.lifecycle == Lifecycle.PUBLISHED)
        upgraded = next(r for r in git.list_revisions("web") if r.lifecycle == Lifecycle.DRAFT)
        local_files, ours = git.read_resources(published), git.read_resources(upgraded)
    assert "name: eu-west" in local_files["region.yaml"] and "size: small" in local_files["app.yaml"]

    work = tmp_path / "kpt"
    work.mkdir()
    checked(kpt, "pkg", "get", f"file://{repos.catalog}/web@web/v1", "dst", cwd=work)
    got = yaml.safe_load((work / "dst" / "Kptfile").read_text(encoding="utf-8"))
    shutil.rmtree(work / "dst")
    kptfile = yaml.safe_load(local_files["Kptfile"])
    kptfile.update(upstream=got["upstream"], upstreamLock=got["upstreamLock"])
    write_tree(work / "dst", {**local_files, "Kptfile": yaml.safe_dump(kptfile, sort_keys=False)})
    checked(kpt, "pkg", "update", "dst@web/v2", cwd=work)
    theirs = read_tree(work / "dst")

    assert "size: large" in ours["app.yaml"] and "name: eu-west" in ours["region.yaml"]
    assert as_data(ours) == as_data(theirs)


def test_kpt_pkg_get_reads_a_downstream_the_controllers_published(tmp_path: Path) -> None:
    kpt = kpt_binary()
    repos = Repos(tmp_path)
    pv = package_variant("web-prod", packageContext={"data": {"env": "prod"}})
    reconcile_manifests(manifests(*repos.repositories(), pv), state=tmp_path / "state", approve=True)
    prod = repos.deployments["prod"]
    with GitPackageRepository(prod) as git:
        [published] = [r for r in git.list_revisions("web")
                       if r.lifecycle == Lifecycle.PUBLISHED and not r.is_placeholder]
        ours = git.read_resources(published)
    assert published.revision == 1

    work = tmp_path / "kpt"
    work.mkdir()
    checked(kpt, "pkg", "get", f"file://{prod}/web@web/v1", "web", cwd=work)  # kpt names the Kptfile after it
    theirs = read_tree(work / "web")
    assert sorted(theirs) == sorted(ours)
    assert yaml.safe_load(theirs["package-context.yaml"])["data"]["env"] == "prod"
    assert as_data(theirs) == as_data(ours)
