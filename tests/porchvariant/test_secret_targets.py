"""No Secret content reaches git through a PackageVariantSet: the whole flow, on real git repositories.

The attack this guards against: a set whose objectSelector picks Secrets (or any object applied
with `kubectl apply`), and a template copying `kubectl.kubernetes.io/last-applied-configuration`,
which holds the object's data, into package-context.yaml of a committed draft. Checked through
`porchkit variants reconcile -f DIR` (in-process `main`, as test_variants_cli.py does) and with the
controllers running live under a Manager, where the refusal is also a Warning Event.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from porchkit.cli import main
from porchvariant.embedded.git.repository import GitPackageRepository
from porchvariant.packagevariant_controller import PACKAGE_VARIANT
from porchvariant.packagevariantset_controller import PACKAGE_VARIANT_SET
from reconcile import Kind, ObjectKey, conditions
from tests.porchvariant.variants_support import NS, V1, Live, Repos, eventually

PASSWORD = "hunter2"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
REFUSED = ("spec.targets[0].objectSelector.kind: Secrets cannot be PackageVariantSet targets: a template could "
           "copy their data into a package in git")
EVENT = Kind("v1", "Event")


def applied(kind: str, name: str, **fields: Any) -> dict[str, Any]:
    """An object as `kubectl apply` leaves it: its own manifest, data and all, in an annotation."""
    manifest = {"apiVersion": "v1", "kind": kind, "metadata": {"name": name, "namespace": NS}, **fields}
    return {**manifest, "metadata": {**manifest["metadata"], "labels": {"team": "edge"},
                                     "annotations": {LAST_APPLIED: json.dumps(manifest), "owner": "ops"}}}


SECRET = applied("Secret", "prod", data={"password": "aHVudGVyMg=="}, stringData={"plain": PASSWORD})
CONFIGMAP = applied("ConfigMap", "prod", data={"password": PASSWORD})


def leaking_set(kind: str, value_expr: str = f"target.annotations['{LAST_APPLIED}']") -> dict[str, Any]:
    """A set giving each selected object of `kind` a variant in the Repository of its name, whose
    package context copies what `value_expr` reads."""
    return {"apiVersion": "config.porch.kpt.dev/v1alpha2", "kind": "PackageVariantSet",
            "metadata": {"name": "leak", "namespace": NS},
            "spec": {"upstream": {"repo": "catalog", "package": "web", "revision": 1},
                     "targets": [{"objectSelector": {"apiVersion": "v1", "kind": kind, "matchLabels": {"team": "edge"}},
                                  "template": {"downstream": {"repoExpr": "target.name"},
                                               "packageContext": {"dataExprs": [
                                                   {"key": "copied", "valueExpr": value_expr}]}}}]}}


def reconcile(tmp_path: Path, repos: Repos, *objects: dict[str, Any]) -> int:
    folder = tmp_path / "manifests"
    folder.mkdir(exist_ok=True)
    (folder / "objects.yaml").write_text(yaml.safe_dump_all([*repos.repositories(), *objects], sort_keys=False))
    return main(["variants", "reconcile", "-f", str(folder), "--state", str(tmp_path / "state")])


def git_text(repos: Repos) -> str:
    """Every file of every revision in the deployment repositories, as one text."""
    out = []
    for path in repos.deployments.values():
        with GitPackageRepository(path) as git:
            out += [text for revision in git.list_revisions() for text in git.read_resources(revision).values()]
    return "\n".join(out)


def test_a_set_selecting_secrets_is_one_clear_line_and_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repos = Repos(tmp_path)
    before = repos.all_refs()
    assert reconcile(tmp_path, repos, SECRET, leaking_set("Secret")) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"porchkit: PackageVariantSet {NS}/leak is Stalled (ValidationError): {REFUSED}"]
    assert repos.all_refs() == before


def test_a_template_copying_last_applied_configuration_is_stalled_and_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repos = Repos(tmp_path)
    before = repos.all_refs()
    assert reconcile(tmp_path, repos, CONFIGMAP, leaking_set("ConfigMap")) == 1
    [line] = capsys.readouterr().err.splitlines()
    assert line == (f"porchkit: PackageVariantSet {NS}/leak is Stalled (UnexpectedError): PackageVariantSet leak, "
                    f"target ConfigMap/prod: template.packageContext.dataExprs[0].valueExpr: no such key: "
                    f"{LAST_APPLIED} (templates never see this annotation: it holds a copy of the object or a "
                    "credential; see docs/variants.md)")
    assert repos.all_refs() == before


def test_the_same_template_reading_a_plain_annotation_drafts_without_the_hidden_ones(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repos = Repos(tmp_path)
    what_is_seen = (f"target.annotations['owner'] + ' ' + ('{LAST_APPLIED}' in target.annotations ? 'leaked' : "
                    "'hidden') + ' ' + (target.annotations.exists(k, k.contains('applied')) ? 'leaked' : 'hidden')")
    assert reconcile(tmp_path, repos, CONFIGMAP, leaking_set("ConfigMap", what_is_seen)) == 0
    capsys.readouterr()
    text = git_text(repos)
    assert "copied: ops hidden hidden" in text
    assert PASSWORD not in text and "last-applied" not in text


# --- live: the refusal is a condition and an Event, and nothing is created ---------------------------


def warnings(live: Live) -> list[dict[str, Any]]:
    """The Warning Events on PackageVariantSets."""
    return [e for e in live.cluster.list(EVENT, namespace=NS).items
            if e["involvedObject"]["kind"] == "PackageVariantSet" and e["type"] == "Warning"]


# A package whose injection point is a Secret.
SECRET_POINT = ("apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n  annotations:\n"
                "    kpt.dev/config-injection: optional\nstringData:\n  password: unset\n")


@pytest.fixture(name="live")
def live_fixture(tmp_path: Path) -> Iterator[Live]:
    repos = Repos(tmp_path)
    with GitPackageRepository(repos.catalog) as git:
        git.approve(git.create_draft("creds", "v1", {**V1, "secret.yaml": SECRET_POINT}))
    running = Live(repos)
    yield running
    running.stop()


def test_a_live_set_selecting_secrets_is_stalled_told_once_as_an_event_and_creates_nothing(live: Live) -> None:
    live.cluster.create(SECRET)
    live.cluster.create(leaking_set("Secret"))

    def stalled() -> dict[str, Any] | None:
        pvs = live.cluster.get(PACKAGE_VARIANT_SET, ObjectKey(NS, "leak"))
        found = conditions.find(conditions.conditions_of(pvs or {}), "Stalled")
        return dict(found) if found is not None and found.get("status") == "True" else None

    condition = eventually(stalled)
    assert (condition["reason"], condition["message"]) == ("ValidationError", REFUSED)
    [event] = eventually(lambda: warnings(live))
    assert (event["involvedObject"]["name"], event["reason"], event["message"]) == ("leak", "ValidationError", REFUSED)

    # Another pass (a label edit), then a second problem: the first is not told again.
    pvs = live.cluster.get(PACKAGE_VARIANT_SET, ObjectKey(NS, "leak"))
    assert pvs is not None
    live.cluster.update({**pvs, "metadata": {**pvs["metadata"], "labels": {"touched": "yes"}}})
    pvs = live.cluster.get(PACKAGE_VARIANT_SET, ObjectKey(NS, "leak"))
    assert pvs is not None
    pvs["spec"]["targets"].append({"objectSelector": {"apiVersion": "v1", "kind": "Secret"}})
    live.cluster.update(pvs)
    first, second = eventually(lambda: len(found := warnings(live)) == 2 and sorted(
        found, key=lambda e: e["firstTimestamp"] + e["metadata"]["name"]))
    assert first["message"] == REFUSED and first.get("count", 1) == 1
    assert second["message"] == f"{REFUSED}; {REFUSED.replace('targets[0]', 'targets[1]')}"
    assert live.cluster.list(PACKAGE_VARIANT, namespace=NS).items == []


def test_an_injection_point_of_kind_secret_never_reads_secrets(live: Live) -> None:
    # the package `creds` has an injection point of kind Secret; the variant's injector names a real one
    live.cluster.create(applied("Secret", "db", stringData={"password": PASSWORD}))
    live.cluster.create({"apiVersion": "config.porch.kpt.dev/v1alpha1", "kind": "PackageVariant",
                         "metadata": {"name": "creds", "namespace": NS},
                         "spec": {"upstream": {"repo": "catalog", "package": "creds", "revision": 1},
                                  "downstream": {"repo": "prod", "package": "creds"},
                                  "injectors": [{"kind": "Secret", "name": "db"}]}})

    def ready() -> bool:
        pv = live.cluster.get(PACKAGE_VARIANT, ObjectKey(NS, "creds"))
        return pv is not None and conditions.is_true(pv, "Ready")

    eventually(ready)
    assert "Secret" not in {informer.kind.kind for informer in live.manager.cache.informers}
    text = git_text(live.repos)
    assert "password: unset" in text and PASSWORD not in text
