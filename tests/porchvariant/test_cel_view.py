"""porchvariant.cel_view: what a template sees of an object, and that no Secret data gets through."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from porchvariant import cel
from porchvariant.cel_view import HIDDEN_ANNOTATIONS, is_hidden_annotation, is_secret_kind, object_view
from porchvariant.errors import TemplateError
from porchvariant.render import render_package_variants

SECRET_DATA = {"password": "aHVudGVyMg=="}  # what must never reach a PackageVariant
LAST_APPLIED = json.dumps({"apiVersion": "example.com/v1", "kind": "Team", "spec": {"token": SECRET_DATA}})
COPIES = {
    "kubectl.kubernetes.io/last-applied-configuration": LAST_APPLIED,
    "metacontroller.k8s.io/last-applied-configuration": LAST_APPLIED,
    "kapp.k14s.io/original": LAST_APPLIED,
    "kapp.k14s.io/original-diff": LAST_APPLIED,
    "banzaicloud.com/last-applied": "UEsDBBQACAAI",
    "objectset.rio.cattle.io/applied": "H4sIAAAAAAAA",
    "vcluster.loft.sh/token-abcdefgh": "eyJhbGciOi",
    "openshift.io/token-secret.value": "eyJhbGciOi",
    "kubernetes.io/change-cause": "kubectl create secret generic db --from-literal=password=hunter2",
}
VISIBLE = {"acme.com/team": "platform", "deployment.kubernetes.io/revision": "3",
           "meta.helm.sh/release-name": "db"}
UPSTREAM_PR = {"apiVersion": "porch.kpt.dev/v1alpha1", "kind": "PackageRevision",
               "metadata": {"name": "catalog.web.v1", "namespace": "ns", "annotations": dict(COPIES)},
               "spec": {"repository": "catalog", "packageName": "web", "revision": 1, "lifecycle": "Published"}}
REPOSITORY = {"apiVersion": "config.porch.kpt.dev/v1alpha1", "kind": "Repository",
              "metadata": {"name": "prod", "namespace": "ns", "annotations": {**COPIES, **VISIBLE}}}


@pytest.fixture(params=cel.ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    if request.param not in cel.available_engines():
        pytest.skip(f"{request.param} is not installed")
    return str(request.param)


def team(annotations: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Team",
            "metadata": {"name": "alpha", "namespace": "ns", "annotations": annotations,
                         "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]},
            "spec": {"token": SECRET_DATA}}


def team_set(template: dict[str, Any], kind: str = "Team", api_version: str = "example.com/v1") -> dict[str, Any]:
    return {"apiVersion": "config.porch.kpt.dev/v1alpha2", "kind": "PackageVariantSet",
            "metadata": {"name": "set", "namespace": "ns", "uid": "uid-1"},
            "spec": {"upstream": {"repo": "catalog", "package": "web", "revision": 1},
                     "targets": [{"objectSelector": {"apiVersion": api_version, "kind": kind},
                                  "template": {"downstream": {"repo": "prod"}, **template}}]}}


def render(pvs: dict[str, Any], engine: str, *targets: dict[str, Any]) -> list[dict[str, Any]]:
    return render_package_variants(pvs, UPSTREAM_PR, [REPOSITORY], list(targets), engine=engine)


def context_exprs(*exprs: str) -> dict[str, Any]:
    return {"packageContext": {"dataExprs": [{"key": f"k{i}", "valueExpr": e} for i, e in enumerate(exprs)]}}


def test_the_view_has_name_namespace_labels_and_annotations_and_no_copy_of_the_object() -> None:
    obj = team({**COPIES, **VISIBLE})
    before = copy.deepcopy(obj)
    view = object_view(obj)
    assert view == {"name": "alpha", "namespace": "ns", "labels": {}, "annotations": VISIBLE}
    assert obj == before  # the cached object is shared: never changed
    assert "hunter2" not in json.dumps(view) and SECRET_DATA["password"] not in json.dumps(view)


def test_an_object_without_hidden_annotations_is_viewed_with_its_own_map() -> None:
    obj = team(dict(VISIBLE))
    assert object_view(obj)["annotations"] is obj["metadata"]["annotations"]  # no copy per target


@pytest.mark.parametrize("key", sorted(COPIES))
def test_every_annotation_known_to_hold_a_copy_or_a_credential_is_hidden(key: str) -> None:
    assert is_hidden_annotation(key)


@pytest.mark.parametrize("key", [*sorted(VISIBLE), "kubectl.kubernetes.io/restartedAt", "last-applied-configuration"])
def test_ordinary_annotations_stay_visible(key: str) -> None:
    assert not is_hidden_annotation(key)


def test_the_named_list_is_in_the_docs() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "variants.md").read_text(encoding="utf-8")
    missing = [key for key in sorted(HIDDEN_ANNOTATIONS) if f"`{key}`" not in docs]
    assert missing == []


@pytest.mark.parametrize(("api_version", "kind", "secret"), [
    ("v1", "Secret", True), ("v1", "secret", True), ("v2", "SECRET", True), ("/v1", "Secret", True),
    ("example.com/v1", "Secret", False), ("v1", "ConfigMap", False), ("v1", "Secrets", False), (None, "Secret", False),
])
def test_secret_kinds_are_core_secrets_in_any_version_and_letter_case(api_version: Any, kind: str,
                                                                       secret: bool) -> None:
    assert is_secret_kind(api_version, kind) is secret


def test_a_template_reading_last_applied_configuration_fails_naming_the_reason(engine: str) -> None:
    key = "kubectl.kubernetes.io/last-applied-configuration"
    pvs = team_set(context_exprs(f"target.annotations['{key}']"))
    with pytest.raises(TemplateError) as caught:
        render(pvs, engine, team({**COPIES, **VISIBLE}))
    assert str(caught.value) == (
        f"PackageVariantSet set, target Team/alpha: template.packageContext.dataExprs[0].valueExpr: no such key: "
        f"{key} (templates never see this annotation: it holds a copy of the object or a credential; "
        "see docs/variants.md)")


@pytest.mark.parametrize("variable", ["target", "upstream", "repository"])
def test_no_variable_carries_a_hidden_annotation(engine: str, variable: str) -> None:
    # Every way a template could look for them: presence tests, the map's size and its keys joined.
    exprs = [f"string(size({variable}.annotations))", f"{variable}.annotations.exists(k, k.contains('applied') "
             "|| k.contains('original') || k.contains('token') || k.contains('change-cause')) ? 'leak' : 'none'"]
    [pv] = render(team_set(context_exprs(*exprs)), engine, team({**COPIES, **VISIBLE}))
    visible = {"target": VISIBLE, "upstream": {}, "repository": VISIBLE}[variable]
    assert pv["spec"]["packageContext"]["data"] == {"k0": str(len(visible)), "k1": "none"}
    assert "hunter2" not in json.dumps(pv) and SECRET_DATA["password"] not in json.dumps(pv)


def test_a_visible_annotation_is_still_read_as_before(engine: str) -> None:
    [pv] = render(team_set(context_exprs("target.annotations['acme.com/team']")), engine, team({**COPIES, **VISIBLE}))
    assert pv["spec"]["packageContext"]["data"] == {"k0": "platform"}


def test_rendering_refuses_a_set_of_secrets_even_when_validation_was_skipped(engine: str) -> None:
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db", "namespace": "ns"},
              "data": SECRET_DATA}
    with pytest.raises(TemplateError) as caught:
        render(team_set(context_exprs("target.name"), kind="Secret", api_version="v1"), engine, secret)
    assert str(caught.value) == ("PackageVariantSet set: spec.targets[0].objectSelector.kind: Secrets cannot be "
                                 "PackageVariantSet targets: a template could copy their data into a package in git")
