"""First tasks: the package context of a deployment clone, and the Kptfile a clone gets."""

from __future__ import annotations

from typing import Any

import pytest

from krmyaml import textedit
from porchvariant.embedded import _porch_tasks as tasks
from porchvariant.embedded.git.repository import GitPackageRepository
from porchvariant.porch_client import clone_task
from tests.porchvariant.embedded.porch_env import KPTFILE, NS, Env, kptfile_of, repository

CONTEXT = "package-context.yaml"
ABSTRACT_CONTEXT = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: kptfile.kpt.dev
  annotations:
    config.kubernetes.io/local-config: "true"
data:
  name: example
"""
SUB_KPTFILE = "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: sub-pkg\n"
OTHER = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other\ndata:\n  a: b\n"
UPSTREAM = tasks.Upstream("/repos/catalog.git", "web", "web/v1", "0" * 40)


def context_data(text: str) -> dict[str, Any]:
    [(_, obj)] = textedit.load_objects(text)
    assert (obj["kind"], obj["metadata"]["name"]) == ("ConfigMap", "kptfile.kpt.dev")
    assert obj["metadata"]["annotations"] == {"config.kubernetes.io/local-config": "true"}
    return dict(obj["data"])


def test_package_context_is_written_beside_every_kptfile_and_old_ones_dropped() -> None:
    files = {"Kptfile": KPTFILE, CONTEXT: ABSTRACT_CONTEXT, "cm.yaml": OTHER,
             "mixed.yaml": OTHER + "---\n" + ABSTRACT_CONTEXT, "old/context.yaml": ABSTRACT_CONTEXT,
             "sub/Kptfile": SUB_KPTFILE, "notes.txt": "kptfile.kpt.dev is mentioned here\n"}
    out = tasks.with_package_context(files, "apps/web")

    assert context_data(out[CONTEXT]) == {"name": "web", "package-path": "apps/web"}
    assert context_data(out["sub/package-context.yaml"]) == {"name": "sub-pkg", "package-path": "apps/web"}
    assert out["mixed.yaml"] == OTHER  # the context document went, the other kept its text
    assert "old/context.yaml" not in out  # nothing else was in it
    for path in ("Kptfile", "cm.yaml", "sub/Kptfile", "notes.txt"):
        assert out[path] is files[path]
    assert set(out) == {"Kptfile", CONTEXT, "cm.yaml", "mixed.yaml", "sub/Kptfile", "sub/package-context.yaml",
                        "notes.txt"}


@pytest.mark.parametrize("deployment", [True, False])
def test_a_clone_into_a_deployment_repository_regenerates_the_package_context(env: Env, deployment: bool) -> None:
    with GitPackageRepository(env.catalog) as repo:
        repo.approve(repo.create_draft("blueprint", "v1", {"Kptfile": KPTFILE, CONTEXT: ABSTRACT_CONTEXT}))
    env.cluster.create(repository("edge", str(env.deploy), deployment=deployment, branch="main"))
    draft = env.client.create_revision(NS, repository="edge", package="apps/web", workspace="prod",
                                       task=clone_task("catalog.blueprint.v1"))
    files = env.files(draft)
    assert kptfile_of(files)["metadata"]["name"] == "web"
    if deployment:
        assert context_data(files[CONTEXT]) == {"name": "web", "package-path": "apps/web"}
    else:
        assert files[CONTEXT] == ABSTRACT_CONTEXT


@pytest.mark.parametrize("kptfile", [
    KPTFILE,
    "# a comment first\napiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata: {name: web, labels: {a: b}}\n",
    "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: 'wéb'   # quoted\n  namespace: x\n",
    "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: >-\n    folded\n    name\ninfo: {}\n",
    "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  namespace: none-yet\n",
])
@pytest.mark.parametrize("name", ["prod", "123", "web", "yes"])
def test_clones_share_the_upstream_edit_and_get_the_same_data_as_one_edit(kptfile: str, name: str) -> None:
    files = {"Kptfile": kptfile, "cm.yaml": OTHER}
    clones = tasks.Clones()
    for _ in range(2):  # the second one from what the first remembered
        got = clones.cloned(files, UPSTREAM, name=name)
        assert kptfile_of(got) == kptfile_of(tasks.cloned(files, UPSTREAM, name=name))
        assert kptfile_of(got)["metadata"]["name"] == name
        assert got["cm.yaml"] is files["cm.yaml"]
    for comment in ("# a comment first", "# quoted"):
        assert (comment in got["Kptfile"]) == (comment in kptfile)
