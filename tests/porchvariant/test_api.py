"""porchvariant.api: the models against the CRDs, manifests through the models, the CRDs on an API server."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel, ValidationError

from porchvariant.api import (
    Condition,
    Downstream,
    InjectionSelector,
    PackageVariant,
    PackageVariantSet,
    PackageVariantSpec,
    Upstream,
    effective_adoption_policy,
    effective_deletion_policy,
    structural_schema,
)
from reconcile import EmbeddedCluster, Kind, NotFound, ObjectKey

ROOT = Path(__file__).resolve().parents[2]
CRDS = ROOT / "deploy" / "crds"
MANIFESTS = ROOT / "testdata" / "porchvariant" / "manifests"
PV_CRD = CRDS / "config.porch.kpt.dev_packagevariants.yaml"
PVS_CRD = CRDS / "config.porch.kpt.dev_packagevariantsets.yaml"


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def served_schema(crd: dict[str, Any], version: str) -> dict[str, Any]:
    (found,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
    schema: dict[str, Any] = found["schema"]["openAPIV3Schema"]
    return schema


def differences(crd: dict[str, Any], model: dict[str, Any], path: str = "") -> list[str]:
    """Where a CRD schema and a model's schema disagree, one line each; descriptions are ignored.
    Every other key is compared at every level: type, required, enum, format, constraints, markers."""
    out = []
    nested = {"description", "properties", "items", "additionalProperties"}
    for key in sorted((set(crd) | set(model)) - nested):
        if crd.get(key) != model.get(key):
            out.append(f"{path or '<root>'}: {key} is {crd.get(key)!r} in the CRD, {model.get(key)!r} in the model")
    crd_fields, model_fields = crd.get("properties", {}), model.get("properties", {})
    for name in sorted(set(crd_fields) | set(model_fields)):
        where = f"{path}.{name}"
        if name not in model_fields:
            out.append(f"{where}: only in the CRD")
        elif name not in crd_fields:
            out.append(f"{where}: only in the model")
        else:
            out += differences(crd_fields[name], model_fields[name], where)
    for key, suffix in (("items", "[]"), ("additionalProperties", "{}")):
        if key in crd and key in model:
            out += differences(crd[key], model[key], path + suffix)
        elif key in crd or key in model:
            out.append(f"{path}{suffix}: {key} only in the {'CRD' if key in crd else 'model'}")
    return out


# the CRDs against the models


@pytest.mark.parametrize(("crd_file", "version", "model"), [
    (PV_CRD, "v1alpha1", PackageVariant),
    (PVS_CRD, "v1alpha2", PackageVariantSet),
], ids=["PackageVariant", "PackageVariantSet"])
def test_each_served_crd_version_has_exactly_the_models_schema(crd_file: Path, version: str,
                                                               model: type[BaseModel]) -> None:
    assert differences(served_schema(load(crd_file), version), structural_schema(model)) == []


def test_the_schema_comparison_reports_a_field_on_one_side_only_and_any_other_disagreement() -> None:
    crd = copy.deepcopy(served_schema(load(PV_CRD), "v1alpha1"))
    spec = crd["properties"]["spec"]
    spec["properties"]["upstream"]["properties"]["branch"] = {"type": "string"}
    del spec["properties"]["injectors"]["items"]["required"]
    spec["properties"]["upstream"]["properties"]["revision"]["type"] = "string"
    del spec["properties"]["labels"]["additionalProperties"]
    del spec["properties"]["downstream"]["properties"]["repo"]

    assert differences(crd, structural_schema(PackageVariant)) == [
        ".spec.downstream.repo: only in the model",
        ".spec.injectors[]: required is None in the CRD, ['name'] in the model",
        ".spec.labels{}: additionalProperties only in the model",
        ".spec.upstream.branch: only in the CRD",
        ".spec.upstream.revision: type is 'string' in the CRD, 'integer' in the model",
    ]


@pytest.mark.parametrize(("crd_file", "plural", "kind", "versions"), [
    (PV_CRD, "packagevariants", "PackageVariant", [("v1alpha1", True, True)]),
    (PVS_CRD, "packagevariantsets", "PackageVariantSet", [("v1alpha1", False, False), ("v1alpha2", True, True)]),
], ids=["PackageVariant", "PackageVariantSet"])
def test_the_crds_have_porchs_group_names_scope_versions_and_status_subresource(
        crd_file: Path, plural: str, kind: str, versions: list[tuple[str, bool, bool]]) -> None:
    crd = load(crd_file)
    assert (crd["apiVersion"], crd["kind"], crd["metadata"]["name"]) == \
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition", f"{plural}.config.porch.kpt.dev")
    assert crd["spec"]["group"] == "config.porch.kpt.dev"
    assert crd["spec"]["names"] == {"kind": kind, "listKind": f"{kind}List", "plural": plural,
                                    "singular": kind.lower()}
    assert crd["spec"]["scope"] == "Namespaced"
    assert [(v["name"], v["served"], v["storage"]) for v in crd["spec"]["versions"]] == versions
    assert all(v["subresources"] == {"status": {}} for v in crd["spec"]["versions"])


def test_the_unserved_v1alpha1_set_version_keeps_porchs_old_schema() -> None:
    crd = load(PVS_CRD)
    old = served_schema(crd, "v1alpha1")
    spec = old["properties"]["spec"]["properties"]
    assert sorted(spec) == ["adoptionPolicy", "annotations", "deletionPolicy", "labels", "targets", "upstream"]
    assert spec["upstream"]["properties"] == {
        "package": {"type": "object", "description": "The upstream repository and package.",
                    "properties": {"name": {"type": "string", "description": "Name of the package."},
                                   "repo": {"type": "string", "description": "Name of the Repository."}}},
        "ref": {"type": "string", "description": "A git ref (tag) of the upstream package."},
        "revision": {"type": "integer", "description": "Revision number of the upstream package."},
    }
    target = spec["targets"]["items"]["properties"]
    assert sorted(target) == ["objects", "package", "packageName", "repositories"]
    assert sorted(target["objects"]["properties"]) == ["repoName", "selectors"]
    assert sorted(target["objects"]["properties"]["selectors"]["items"]["properties"]) == \
        ["annotations", "apiVersion", "kind", "labelSelector", "name", "namespace"]
    assert sorted(target["packageName"]["properties"]) == ["baseName", "namePrefix", "nameSuffix"]
    assert target["repositories"]["x-kubernetes-map-type"] == "atomic"
    # status did not change between the versions, except for porchkit's per-target status in v1alpha2
    assert differences(old["properties"]["status"], served_schema(crd, "v1alpha2")["properties"]["status"]) == [
        ".packageVariants: only in the model"]


@pytest.mark.parametrize("crd_file", [PV_CRD, PVS_CRD], ids=["PackageVariant", "PackageVariantSet"])
def test_every_field_of_every_crd_version_is_described(crd_file: Path) -> None:
    undescribed = []

    def walk(node: dict[str, Any], path: str) -> None:
        for name, field in (node.get("properties") or {}).items():
            if "description" not in field and name != "metadata":
                undescribed.append(f"{path}.{name}")
            walk(field, f"{path}.{name}")
        if isinstance(node.get("items"), dict):
            walk(node["items"], f"{path}[]")

    for version in load(crd_file)["spec"]["versions"]:
        walk(version["schema"]["openAPIV3Schema"], version["name"])
    assert undescribed == []


# manifests through the models


@pytest.mark.parametrize(("manifest", "model"), [
    ("packagevariant.yaml", PackageVariant),
    ("packagevariantset.yaml", PackageVariantSet),
    ("packagevariantset-invalid.yaml", PackageVariantSet),
])
def test_a_manifest_read_into_the_model_dumps_back_unchanged(manifest: str, model: type[BaseModel]) -> None:
    document = load(MANIFESTS / manifest)
    assert model.model_validate(document).model_dump(by_alias=True, exclude_none=True) == document


def test_json_names_are_read_into_snake_case_attributes() -> None:
    pv = PackageVariant.model_validate(load(MANIFESTS / "packagevariant.yaml"))
    pvs = PackageVariantSet.model_validate(load(MANIFESTS / "packagevariantset.yaml"))

    assert pv.spec is not None and pv.spec.upstream is not None and pv.spec.package_context is not None
    assert pv.spec.upstream.workspace_name == "v3"
    assert pv.spec.package_context.remove_keys == ["legacy-zone"]
    assert pv.status is not None and pv.status.downstream_targets is not None
    render = pv.status.downstream_targets[0].render_status
    assert render is not None and render.result is not None and render.result.items is not None
    assert render.result.items[1].results is not None
    assert render.result.items[1].results[0].resource_ref is not None
    assert render.result.items[1].results[0].resource_ref.api_version == "apps/v1"
    assert pvs.spec is not None and pvs.spec.targets is not None
    selector = pvs.spec.targets[2].object_selector
    assert selector is not None and selector.match_labels == {"nephio.org/site-type": "edge"}
    template = pvs.spec.targets[2].template
    assert template is not None and template.pipeline is not None and template.pipeline.mutators is not None
    assert template.pipeline.mutators[0].config_map_exprs is not None
    assert template.pipeline.mutators[0].config_map_exprs[0].value_expr == "target.name"


def test_a_model_built_from_python_names_dumps_the_kubernetes_shape() -> None:
    pv = PackageVariant(metadata={"name": "edge", "namespace": "demo"},
                        spec=PackageVariantSpec(upstream=Upstream(repo="catalog", package="nf", workspace_name="v1"),
                                                downstream=Downstream(repo="edge", package="nf"),
                                                injectors=[InjectionSelector(kind="ConfigMap", name="settings")]))
    assert pv.model_dump(by_alias=True, exclude_none=True) == {
        "apiVersion": "config.porch.kpt.dev/v1alpha1", "kind": "PackageVariant",
        "metadata": {"name": "edge", "namespace": "demo"},
        "spec": {"upstream": {"repo": "catalog", "package": "nf", "workspaceName": "v1"},
                 "downstream": {"repo": "edge", "package": "nf"},
                 "injectors": [{"kind": "ConfigMap", "name": "settings"}]},
    }
    assert PackageVariantSet().model_dump(by_alias=True, exclude_none=True) == \
        {"apiVersion": "config.porch.kpt.dev/v1alpha2", "kind": "PackageVariantSet"}


def test_unknown_fields_are_dropped_and_nulls_count_as_absent_as_the_api_server_prunes_them() -> None:
    pv = PackageVariant.model_validate({
        "apiVersion": "config.porch.kpt.dev/v1alpha1", "kind": "PackageVariant", "surprise": True,
        "spec": {"upstream": {"repo": "catalog", "branch": "main", "package": None},
                 "labels": {"a": "1", "b": None}, "downstream": None, "injectors": [{"name": "x", "extra": 1}]},
    })
    assert pv.model_dump(by_alias=True, exclude_none=True) == {
        "apiVersion": "config.porch.kpt.dev/v1alpha1", "kind": "PackageVariant",
        "spec": {"upstream": {"repo": "catalog"}, "labels": {"a": "1"}, "injectors": [{"name": "x"}]},
    }


@pytest.mark.parametrize(("model", "document", "location"), [
    (PackageVariantSpec, {"upstream": {"revision": "3"}}, ("upstream", "revision")),
    (PackageVariantSpec, {"upstream": {"revision": True}}, ("upstream", "revision")),
    (PackageVariantSpec, {"upstream": {"workspaceName": 3}}, ("upstream", "workspaceName")),
    (PackageVariantSpec, {"labels": {"site": 42}}, ("labels", "site")),
    (PackageVariantSpec, {"upstream": "catalog/nf"}, ("upstream",)),
    (PackageVariantSpec, {"injectors": [{"kind": "ConfigMap"}]}, ("injectors", 0, "name")),
    (PackageVariantSpec, {"injectors": [{"name": None}]}, ("injectors", 0, "name")),
    (PackageVariantSet, {"spec": {"targets": [{"repositories": [{"packageNames": ["a"]}]}]}},
     ("spec", "targets", 0, "repositories", 0, "name")),
    (PackageVariantSet, {"spec": {"targets": {"repositories": []}}}, ("spec", "targets")),
    (Condition, {"type": "Ready", "status": "Maybe", "reason": "R", "message": "", "lastTransitionTime": "t"},
     ("status",)),
    (Condition, {"type": "Ready", "status": "True", "reason": "", "message": "", "lastTransitionTime": "t"},
     ("reason",)),
    (Condition, {"type": "not ok", "status": "True", "reason": "R", "message": "", "lastTransitionTime": "t"},
     ("type",)),
], ids=["revision-as-string", "revision-as-bool", "workspace-as-number", "label-value-as-number",
        "upstream-as-string", "injector-without-name", "injector-with-null-name", "repository-without-name",
        "targets-as-object", "condition-status-outside-enum", "empty-condition-reason", "condition-type-pattern"])
def test_the_models_refuse_what_the_crd_schema_refuses(model: type[BaseModel], document: dict[str, Any],
                                                      location: tuple[Any, ...]) -> None:
    with pytest.raises(ValidationError) as caught:
        model.model_validate(document)
    assert [error["loc"] for error in caught.value.errors()] == [location]


@pytest.mark.parametrize(("moment", "text"), [
    (datetime(2026, 4, 30, 9, 12, 44, tzinfo=UTC), "2026-04-30T09:12:44Z"),
    (datetime(2026, 4, 30, 11, 12, 44, 500, tzinfo=timezone(timedelta(hours=2))), "2026-04-30T09:12:44Z"),
    (datetime(2026, 4, 30, 9, 12, 44), "2026-04-30T09:12:44Z"),
], ids=["utc", "offset", "naive"])
def test_a_condition_time_that_yaml_read_as_a_datetime_becomes_the_apis_utc_string(moment: datetime,
                                                                                   text: str) -> None:
    condition = Condition.model_validate({"type": "Ready", "status": "True", "reason": "NoErrors", "message": "",
                                          "lastTransitionTime": moment})
    assert condition.last_transition_time == text


# Porch's in-memory defaults


@pytest.mark.parametrize(("spec", "adoption", "deletion"), [
    ({}, "adoptNone", "delete"),
    (None, "adoptNone", "delete"),
    ({"adoptionPolicy": "", "deletionPolicy": ""}, "adoptNone", "delete"),
    ({"adoptionPolicy": None, "deletionPolicy": None}, "adoptNone", "delete"),
    ({"adoptionPolicy": "adoptExisting", "deletionPolicy": "orphan"}, "adoptExisting", "orphan"),
    ({"adoptionPolicy": "adoptNone", "deletionPolicy": "delete"}, "adoptNone", "delete"),
    ({"adoptionPolicy": "AdoptExisting", "deletionPolicy": "keep"}, "AdoptExisting", "keep"),
    (PackageVariantSpec(), "adoptNone", "delete"),
    (PackageVariantSpec(adoption_policy="adoptExisting", deletion_policy="orphan"), "adoptExisting", "orphan"),
], ids=["unset", "no-spec", "empty", "null", "given", "given-defaults", "invalid-kept", "model-unset",
        "model-given"])
def test_the_effective_policies_are_porchs_in_memory_defaults(spec: Any, adoption: str, deletion: str) -> None:
    before = copy.deepcopy(spec)
    assert (effective_adoption_policy(spec), effective_deletion_policy(spec)) == (adoption, deletion)
    assert spec == before


def test_the_models_themselves_never_default_the_policies() -> None:
    spec = PackageVariantSpec.model_validate({})
    assert (spec.adoption_policy, spec.deletion_policy) == (None, None)
    assert spec.model_dump(by_alias=True, exclude_none=True) == {}


def test_structural_schema_returns_a_fresh_copy_each_call() -> None:
    first = structural_schema(PackageVariantSpec)
    first["properties"].clear()
    assert "upstream" in structural_schema(PackageVariantSpec)["properties"]


# the CRDs on porchkit's embedded API server


def test_the_crds_install_on_the_embedded_api_server_and_serve_the_sample_manifests() -> None:
    pv_kind = Kind("config.porch.kpt.dev/v1alpha1", "PackageVariant")
    pvs_kind = Kind("config.porch.kpt.dev/v1alpha2", "PackageVariantSet")
    crd_kind = Kind("apiextensions.k8s.io/v1", "CustomResourceDefinition")
    pv = load(MANIFESTS / "packagevariant.yaml")
    pvs = load(MANIFESTS / "packagevariantset.yaml")
    with EmbeddedCluster() as cluster:
        cluster.create(load(PV_CRD))
        cluster.create(load(PVS_CRD))
        cluster.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "porch-demo"}})

        created = cluster.create(pv)
        assert "status" not in created  # status is only written through the status subresource
        cluster.update_status({**created, "status": pv["status"]})
        stored = cluster.get(pv_kind, ObjectKey("porch-demo", "edge-east-network"))
        assert stored is not None
        assert (stored["spec"], stored["status"]) == (pv["spec"], pv["status"])

        cluster.create(pvs)
        stored_set = cluster.get(pvs_kind, ObjectKey("porch-demo", "network-fanout"))
        assert stored_set is not None and stored_set["spec"] == pvs["spec"]

        with pytest.raises(NotFound):
            cluster.create({**pvs, "apiVersion": "config.porch.kpt.dev/v1alpha1",
                            "metadata": {"name": "old", "namespace": "porch-demo"}})
        definition = cluster.get(crd_kind, ObjectKey("", "packagevariantsets.config.porch.kpt.dev"))
        assert definition is not None and definition["status"]["storedVersions"] == ["v1alpha2"]
