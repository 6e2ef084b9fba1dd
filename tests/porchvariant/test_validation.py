"""porchvariant.validation: Porch's rules with Porch's messages in Porch's order, after a shape check."""

from __future__ import annotations

import copy
import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from porchvariant import api, validation
from porchvariant.api import PackageVariantSetSpec, PackageVariantSpec, structural_schema
from porchvariant.validation import manifest_problems, validate_package_variant, validate_package_variant_set

MANIFESTS = Path(__file__).resolve().parents[2] / "testdata" / "porchvariant" / "manifests"

UPSTREAM = {"repo": "catalog", "package": "network-function", "workspaceName": "v3"}
DOWNSTREAM = {"repo": "edge-east", "package": "network-function"}
ONE_OF = "must specify one of `repositories`, `repositorySelector`, or `objectSelector`"
SUBDOMAIN = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
             "must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
             "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
INT64 = "must be a 64-bit integer, from -9223372036854775808 to 9223372036854775807"
BELOW_MINUS_ONE = "spec.upstream.revision: must be at least -1 (no package revision has a lower number), not {}"


def pv(**spec: Any) -> dict[str, Any]:
    """A valid PackageVariant with `spec` fields replaced (None removes one)."""
    merged = {"upstream": UPSTREAM, "downstream": DOWNSTREAM, **spec}
    return {"apiVersion": "config.porch.kpt.dev/v1alpha1", "kind": "PackageVariant",
            "metadata": {"name": "edge-east-network", "namespace": "porch-demo"},
            "spec": {key: value for key, value in merged.items() if value is not None}}


def pvs(*targets: dict[str, Any], **spec: Any) -> dict[str, Any]:
    """A PackageVariantSet with a valid upstream and these targets, `spec` fields replaced."""
    merged = {"upstream": UPSTREAM, "targets": list(targets), **spec}
    return {"apiVersion": "config.porch.kpt.dev/v1alpha2", "kind": "PackageVariantSet",
            "metadata": {"name": "network-fanout", "namespace": "porch-demo"},
            "spec": {key: value for key, value in merged.items() if value is not None}}


def templated(**template: Any) -> dict[str, Any]:
    """A PackageVariantSet whose one (valid) target carries this template."""
    return pvs({"repositorySelector": {}, "template": template})


def load(name: str) -> Any:
    return yaml.safe_load((MANIFESTS / name).read_text())


def named(obj: dict[str, Any], name: Any) -> dict[str, Any]:
    """`obj` with metadata.name replaced (None removes it)."""
    metadata = {key: value for key, value in obj["metadata"].items() if key != "name"}
    return {**obj, "metadata": metadata if name is None else {**metadata, "name": name}}


# PackageVariant: Porch's rules (spec §b.3)

PV_CASES = [
    ("valid", pv(), []),
    ("no-spec", {"apiVersion": "config.porch.kpt.dev/v1alpha1", "kind": "PackageVariant"},
     ["missing required field spec.upstream", "missing required field spec.downstream"]),
    ("null-spec", {"spec": None}, ["missing required field spec.upstream", "missing required field spec.downstream"]),
    ("no-upstream", pv(upstream=None), ["missing required field spec.upstream"]),
    ("empty-upstream", pv(upstream={}),
     ["missing required field spec.upstream.repo", "missing required field spec.upstream.package"]),
    ("upstream-empty-repo", pv(upstream={**UPSTREAM, "repo": ""}), ["missing required field spec.upstream.repo"]),
    ("upstream-without-package", pv(upstream={"repo": "catalog"}), ["missing required field spec.upstream.package"]),
    ("upstream-by-revision-alone", pv(upstream={"repo": "catalog", "package": "nf", "revision": 2}), []),
    ("upstream-by-nothing-but-name", pv(upstream={"repo": "catalog", "package": "nf"}), []),
    ("upstream-revision-minus-one", pv(upstream={**UPSTREAM, "revision": -1}), []),
    ("upstream-revision-largest", pv(upstream={**UPSTREAM, "revision": 2**63 - 1}), []),
    ("upstream-revision-below-minus-one", pv(upstream={**UPSTREAM, "revision": -2}), [BELOW_MINUS_ONE.format(-2)]),
    ("no-downstream", pv(downstream=None), ["missing required field spec.downstream"]),
    ("empty-downstream", pv(downstream={}),
     ["missing required field spec.downstream.repo", "missing required field spec.downstream.package"]),
    ("downstream-without-package", pv(downstream={"repo": "edge"}), ["missing required field spec.downstream.package"]),
    ("downstream-package-path", pv(downstream={"repo": "edge", "package": "network/upf"}), []),
    ("policies-given", pv(adoptionPolicy="adoptExisting", deletionPolicy="orphan"), []),
    ("policies-empty-mean-defaults", pv(adoptionPolicy="", deletionPolicy=""), []),
    ("adoption-invalid", pv(adoptionPolicy="AdoptExisting"),
     ['spec.adoptionPolicy field can only be "adoptNone" or "adoptExisting"']),
    ("deletion-invalid", pv(deletionPolicy="keep"), ['spec.deletionPolicy can only be "orphan" or "delete"']),
    ("empty-package-context", pv(packageContext={}), []),
    ("package-context-other-keys", pv(packageContext={"data": {"region": "us-east1"}, "removeKeys": ["zone"]}), []),
    ("context-data-name", pv(packageContext={"data": {"name": "test"}}),
     ['spec.packageContext.data: Invalid value: {"name":"test"}: must not contain the key "name"']),
    ("context-data-package-path", pv(packageContext={"data": {"package-path": "test"}}),
     ['spec.packageContext.data: Invalid value: {"package-path":"test"}: must not contain the key "package-path"']),
    ("context-remove-name", pv(packageContext={"removeKeys": ["name"]}),
     ['spec.packageContext.removeKeys: Invalid value: ["name"]: must not contain the key "name"']),
    ("context-remove-package-path", pv(packageContext={"removeKeys": ["zone", "package-path"]}),
     ['spec.packageContext.removeKeys: Invalid value: ["zone","package-path"]: must not contain the key '
      '"package-path"']),
    ("context-value-shown-as-go-json", pv(packageContext={"data": {"z": "<b>&", "name": "ü\u2028", "a": "x\ny"}}),
     ['spec.packageContext.data: Invalid value: {"a":"x\\ny","name":"ü\\u2028","z":"\\u003cb\\u003e\\u0026"}: '
      'must not contain the key "name"']),
    ("context-null-value-is-pruned", pv(packageContext={"data": {"name": None, "region": "r"}}), []),
    ("injectors-valid", pv(injectors=[{"group": "infra.nephio.org", "version": "v1alpha1", "kind": "WorkloadCluster",
                                       "name": "edge"}, {"name": "settings"}]), []),
    ("injector-empty-name", pv(injectors=[{"name": "settings"}, {"kind": "ConfigMap", "name": ""}]),
     ["spec.injectors[1].name must not be empty"]),
    ("package-longer-than-any-name", pv(downstream={"repo": "edge", "package": "p" * 254}),
     ["spec.downstream.package: must be no more than 253 characters (a package revision's name holds it), not 254"]),
    ("package-as-long-as-a-name", pv(upstream={**UPSTREAM, "package": "p" * 253}), []),
    ("thousands-of-wrong-injectors", pv(injectors=["x"] * 5_000),
     [*(f"spec.injectors[{i}]: must be an object, not a string" for i in range(10)), "and 4,990 more like these"]),
]


@pytest.mark.parametrize(("obj", "expected"), [(obj, expected) for _, obj, expected in PV_CASES],
                         ids=[name for name, _, _ in PV_CASES])
def test_package_variant_rules_and_messages(obj: dict[str, Any], expected: list[str]) -> None:
    assert validate_package_variant(obj) == expected


def test_package_variant_problems_are_all_collected_in_porchs_order() -> None:
    obj = pv(upstream={"package": ""}, downstream={}, adoptionPolicy="adopt", deletionPolicy="keep",
             packageContext={"data": {"package-path": "p", "name": "n"},
                             "removeKeys": ["name", "package-path", "name"]},
             injectors=[{"name": ""}, {"name": "ok"}, {"name": ""}])
    removed = 'spec.packageContext.removeKeys: Invalid value: ["name","package-path","name"]'
    assert validate_package_variant(obj) == [
        "missing required field spec.upstream.repo",
        "missing required field spec.upstream.package",
        "missing required field spec.downstream.repo",
        "missing required field spec.downstream.package",
        'spec.adoptionPolicy field can only be "adoptNone" or "adoptExisting"',
        'spec.deletionPolicy can only be "orphan" or "delete"',
        'spec.packageContext.data: Invalid value: {"name":"n","package-path":"p"}: must not contain the key "name"',
        f'{removed}: must not contain the key "name"',
        f'{removed}: must not contain the key "name"',
        'spec.packageContext.data: Invalid value: {"name":"n","package-path":"p"}: must not contain the key '
        '"package-path"',
        f'{removed}: must not contain the key "package-path"',
        "spec.injectors[0].name must not be empty",
        "spec.injectors[2].name must not be empty",
    ]


def test_validating_a_package_variant_writes_no_defaults_into_it() -> None:
    obj = pv(packageContext={"data": {"name": "n"}})
    before = copy.deepcopy(obj)
    validate_package_variant(obj)
    assert obj == before


# PackageVariantSet: Porch's rules (spec §c.3)

PVS_CASES = [
    ("valid", pvs({"repositorySelector": {}}), []),
    ("no-spec", {"apiVersion": "config.porch.kpt.dev/v1alpha2", "kind": "PackageVariantSet"},
     ["spec.upstream is a required field", "must specify at least one item in spec.targets"]),
    ("no-upstream", pvs({"repositorySelector": {}}, upstream=None), ["spec.upstream is a required field"]),
    ("empty-upstream", pvs({"repositorySelector": {}}, upstream={}),
     ["spec.upstream.package is a required field", "spec.upstream.repo is a required field",
      "either spec.upstream.revision or spec.upstream.workspaceName must be specified"]),
    ("upstream-by-revision", pvs({"repositorySelector": {}}, upstream={"repo": "c", "package": "p", "revision": 3}),
     []),
    ("upstream-revision-zero", pvs({"repositorySelector": {}}, upstream={"repo": "c", "package": "p", "revision": 0}),
     ["either spec.upstream.revision or spec.upstream.workspaceName must be specified"]),
    ("upstream-revision-minus-one",
     pvs({"repositorySelector": {}}, upstream={"repo": "c", "package": "p", "revision": -1}), []),
    ("upstream-revision-largest",
     pvs({"repositorySelector": {}}, upstream={"repo": "c", "package": "p", "revision": 2**63 - 1}), []),
    ("upstream-revision-below-minus-one",
     pvs({"repositorySelector": {}}, upstream={"repo": "c", "package": "p", "revision": -3}),
     [BELOW_MINUS_ONE.format(-3)]),
    ("upstream-revision-below-minus-one-beside-a-workspace",
     pvs({"repositorySelector": {}}, upstream={**UPSTREAM, "revision": -9223372036854775808}),
     [BELOW_MINUS_ONE.format(-9223372036854775808)]),
    ("upstream-empty-workspace",
     pvs({"repositorySelector": {}}, upstream={"repo": "c", "package": "p", "workspaceName": ""}),
     ["either spec.upstream.revision or spec.upstream.workspaceName must be specified"]),
    ("no-targets", pvs(), ["must specify at least one item in spec.targets"]),
    ("null-targets", pvs(targets=None), ["must specify at least one item in spec.targets"]),
    ("empty-target", pvs({}), [f"spec.targets[0] {ONE_OF}"]),
    ("template-alone-is-no-target", pvs({"template": {}}), [f"spec.targets[0] {ONE_OF}"]),
    ("repositories", pvs({"repositories": [{"name": "edge", "packageNames": ["a", "b"]}, {"name": "west"}]}), []),
    ("repositories-empty-list", pvs({"repositories": []}),
     ["spec.targets[0].repositories must not be an empty list if specified"]),
    ("repository-empty-name", pvs({"repositories": [{"name": "edge"}, {"name": ""}]}),
     ["spec.targets[0].repositories[1].name cannot be empty"]),
    ("repository-empty-package-names", pvs({"repositories": [{"name": "edge", "packageNames": ["a", "", "b", ""]}]}),
     ["spec.targets[0].repositories[0].packageNames[1] cannot be empty",
      "spec.targets[0].repositories[0].packageNames[3] cannot be empty"]),
    ("repository-selector-empty-counts", pvs({"repositorySelector": {}}), []),
    ("repository-selector-null-is-absent", pvs({"repositorySelector": None}), [f"spec.targets[0] {ONE_OF}"]),
    ("object-selector", pvs({"objectSelector": {"apiVersion": "v1", "kind": "ConfigMap", "name": "ignored"}}), []),
    ("object-selector-empty-counts", pvs({"objectSelector": {}}),
     ["spec.targets[0].objectselector.apiVersion cannot be empty",
      "spec.targets[0].objectselector.kind cannot be empty"]),
    ("object-selector-without-kind", pvs({"objectSelector": {"apiVersion": "v1", "kind": ""}}),
     ["spec.targets[0].objectselector.kind cannot be empty"]),
    ("object-selector-of-secrets-is-refused",
     pvs({"repositorySelector": {}}, {"objectSelector": {"apiVersion": "v1", "kind": "Secret"}}),
     ["spec.targets[1].objectSelector.kind: Secrets cannot be PackageVariantSet targets: a template could "
      "copy their data into a package in git"]),
    ("object-selector-of-secrets-in-any-case", pvs({"objectSelector": {"apiVersion": "v1", "kind": "secret"}}),
     ["spec.targets[0].objectSelector.kind: Secrets cannot be PackageVariantSet targets: a template could "
      "copy their data into a package in git"]),
    ("object-selector-of-another-groups-secret",
     pvs({"objectSelector": {"apiVersion": "example.com/v1", "kind": "Secret"}}), []),
    ("two-kinds", pvs({"repositories": [{"name": "edge"}], "repositorySelector": {}}), [f"spec.targets[0] {ONE_OF}"]),
    ("three-kinds", pvs({"repositories": [], "repositorySelector": {}, "objectSelector": {}}),
     ["spec.targets[0].repositories must not be an empty list if specified",
      "spec.targets[0].objectselector.apiVersion cannot be empty",
      "spec.targets[0].objectselector.kind cannot be empty",
      f"spec.targets[0] {ONE_OF}"]),
    ("second-target-counted-on-its-own", pvs({"repositorySelector": {}}, {}), [f"spec.targets[1] {ONE_OF}"]),
    ("empty-template", templated(), []),
    ("template-policies", templated(adoptionPolicy="adoptExisting", deletionPolicy="orphan"), []),
    ("template-adoption-invalid", templated(adoptionPolicy="adopt"),
     ['spec.targets[0].template.adoptionPolicy can only be "adoptNone" or "adoptExisting"']),
    ("template-adoption-empty-is-invalid", templated(adoptionPolicy=""),
     ['spec.targets[0].template.adoptionPolicy can only be "adoptNone" or "adoptExisting"']),
    ("template-deletion-invalid", templated(deletionPolicy="keep"),
     ['spec.targets[0].template.deletionPolicy can only be "orphan" or "delete"']),
    ("template-repo-and-expr", templated(downstream={"repo": "", "repoExpr": "target.name"}),
     ["spec.targets[0].template may specify only one of `downstream.repo` and `downstream.repoExpr`"]),
    ("template-package-and-expr", templated(downstream={"package": "p", "packageExpr": "'p'"}),
     ["spec.targets[0].template may specify only one of `downstream.package` and `downstream.packageExpr`"]),
    ("template-repo-and-package-exprs", templated(downstream={"repoExpr": "target.name", "package": "p"}), []),
    ("label-key-and-expr", templated(labelExprs=[{"key": "a", "value": "b"}, {"key": "a", "keyExpr": "'a'"}]),
     ["spec.targets[0].template.labelExprs[1] may specify only one of `key` and `keyExpr`"]),
    ("label-value-and-expr", templated(labelExprs=[{"key": "a", "value": "", "valueExpr": "'b'"}]),
     ["spec.targets[0].template.labelExprs[0] may specify only one of `value` and `valueExpr`"]),
    ("annotation-both-pairs", templated(annotationExprs=[{"key": "a", "keyExpr": "'a'", "value": "b",
                                                          "valueExpr": "'b'"}]),
     ["spec.targets[0].template.annotationExprs[0] may specify only one of `key` and `keyExpr`",
      "spec.targets[0].template.annotationExprs[0] may specify only one of `value` and `valueExpr`"]),
    ("context-data-exprs", templated(packageContext={"dataExprs": [{"key": "a", "keyExpr": "'a'"}]}),
     ["spec.targets[0].template.packageContext.dataExprs[0] may specify only one of `key` and `keyExpr`"]),
    ("context-reserved-keys-are-not-checked-here",
     templated(packageContext={"data": {"name": "n"}, "removeKeys": ["package-path"], "removeKeyExprs": [""]}), []),
    ("injector-name-and-expr", templated(injectors=[{"name": "a", "nameExpr": "target.name"}]),
     ["spec.targets[0].template.injectors[0] may specify only one of `name` and `nameExpr`"]),
    ("injector-without-name", templated(injectors=[{"name": "a"}, {"kind": "ConfigMap"}]),
     ["spec.targets[0].template.injectors[1] must specify either `name` or `nameExpr`"]),
    ("injector-empty-name-counts", templated(injectors=[{"name": ""}]), []),
    ("function-without-image", templated(pipeline={"mutators": [{"name": "set-labels"}]}),
     ["spec.targets[0].template.pipeline.mutators[0].image must not be empty"]),
    ("function-dotted-name", templated(pipeline={"validators": [{"image": "i", "name": "kube.conform"}]}),
     ["spec.targets[0].template.pipeline.validators[0].name must not contain '.'"]),
    ("validators-before-mutators", templated(pipeline={"mutators": [{"image": ""}], "validators": [{"image": ""}]}),
     ["spec.targets[0].template.pipeline.validators[0].image must not be empty",
      "spec.targets[0].template.pipeline.mutators[0].image must not be empty"]),
]


@pytest.mark.parametrize(("obj", "expected"), [(obj, expected) for _, obj, expected in PVS_CASES],
                         ids=[name for name, _, _ in PVS_CASES])
def test_package_variant_set_rules_and_messages(obj: dict[str, Any], expected: list[str]) -> None:
    assert validate_package_variant_set(obj) == expected


def test_package_variant_set_problems_are_all_collected_in_porchs_order() -> None:
    assert validate_package_variant_set(load("packagevariantset-invalid.yaml")) == [
        "either spec.upstream.revision or spec.upstream.workspaceName must be specified",
        "spec.targets[0].repositories must not be an empty list if specified",
        f"spec.targets[0] {ONE_OF}",
        "spec.targets[1].objectselector.apiVersion cannot be empty",
        'spec.targets[1].template.adoptionPolicy can only be "adoptNone" or "adoptExisting"',
        "spec.targets[1].template may specify only one of `downstream.repo` and `downstream.repoExpr`",
        "spec.targets[1].template.labelExprs[0] may specify only one of `key` and `keyExpr`",
        "spec.targets[1].template.labelExprs[0] may specify only one of `value` and `valueExpr`",
        "spec.targets[1].template.injectors[0] may specify only one of `name` and `nameExpr`",
        "spec.targets[1].template.injectors[1] must specify either `name` or `nameExpr`",
        "spec.targets[1].template.pipeline.mutators[0].image must not be empty",
        "spec.targets[1].template.pipeline.mutators[0].name must not contain '.'",
    ]


@pytest.mark.parametrize(("name", "check"), [
    ("packagevariant.yaml", validate_package_variant),
    ("packagevariantset.yaml", validate_package_variant_set),
])
def test_the_sample_manifests_are_valid(name: str, check: Any) -> None:
    assert check(load(name)) == []


# the shape, checked first

SHAPE_CASES = [
    ("spec-as-list", validate_package_variant, {"spec": []}, ["spec: must be an object, not a list"]),
    ("upstream-as-string", validate_package_variant, pv(upstream="catalog/network-function"),
     ["spec.upstream: must be an object, not a string"]),
    ("revision-as-string", validate_package_variant, pv(upstream={**UPSTREAM, "revision": "3"}),
     ["spec.upstream.revision: must be an integer, not a string"]),
    ("revision-as-bool", validate_package_variant_set, pvs({"repositorySelector": {}},
                                                           upstream={**UPSTREAM, "revision": True}),
     ["spec.upstream.revision: must be an integer, not a boolean"]),
    ("revision-as-float", validate_package_variant, pv(upstream={**UPSTREAM, "revision": 3.0}),
     ["spec.upstream.revision: must be an integer, not a number"]),
    ("revision-beyond-64-bits", validate_package_variant, pv(upstream={**UPSTREAM, "revision": 2**63}),
     [f"spec.upstream.revision: {INT64}"]),
    ("revision-far-beyond-64-bits", validate_package_variant_set,
     pvs({"repositorySelector": {}}, upstream={**UPSTREAM, "revision": 10**29}), [f"spec.upstream.revision: {INT64}"]),
    ("revision-below-64-bits", validate_package_variant_set,
     pvs({"repositorySelector": {}}, upstream={**UPSTREAM, "revision": -(2**63) - 1}),
     [f"spec.upstream.revision: {INT64}"]),
    ("label-value-as-number", validate_package_variant, pv(labels={"app.kubernetes.io/part-of": 5}),
     ["spec.labels[app.kubernetes.io/part-of]: must be a string, not an integer"]),
    ("labels-as-list", validate_package_variant, pv(labels=["a"]), ["spec.labels: must be an object, not a list"]),
    ("injector-without-name", validate_package_variant, pv(injectors=[{"kind": "ConfigMap"}]),
     ["spec.injectors[0].name: is required"]),
    ("injector-null-name", validate_package_variant, pv(injectors=[{"name": None}]),
     ["spec.injectors[0].name: is required"]),
    ("null-injector", validate_package_variant, pv(injectors=[None]),
     ["spec.injectors[0]: must be an object, not null"]),
    ("remove-key-as-number", validate_package_variant, pv(packageContext={"removeKeys": ["a", 1]}),
     ["spec.packageContext.removeKeys[1]: must be a string, not an integer"]),
    ("function-config-value", validate_package_variant,
     pv(pipeline={"mutators": [{"image": "i", "configMap": {"replicas": 3}}]}),
     ["spec.pipeline.mutators[0].configMap[replicas]: must be a string, not an integer"]),
    ("selector-labels", validate_package_variant,
     pv(pipeline={"validators": [{"image": "i", "selectors": [{"labels": {"on": True}}]}]}),
     ["spec.pipeline.validators[0].selectors[0].labels[on]: must be a string, not a boolean"]),
    ("targets-as-object", validate_package_variant_set, pvs(targets={"repositories": []}),
     ["spec.targets: must be a list, not an object"]),
    ("null-target", validate_package_variant_set, pvs(targets=[None]),
     ["spec.targets[0]: must be an object, not null"]),
    ("repositories-as-string", validate_package_variant_set, pvs({"repositories": "edge-east"}),
     ["spec.targets[0].repositories: must be a list, not a string"]),
    ("repository-without-name", validate_package_variant_set, pvs({"repositories": [{"packageNames": ["a"]}]}),
     ["spec.targets[0].repositories[0].name: is required"]),
    ("package-names-as-string", validate_package_variant_set,
     pvs({"repositories": [{"name": "e", "packageNames": "a"}]}),
     ["spec.targets[0].repositories[0].packageNames: must be a list, not a string"]),
    ("selector-requirement", validate_package_variant_set,
     pvs({"repositorySelector": {"matchExpressions": [{"key": "tier", "values": ["edge"]}]}}),
     ["spec.targets[0].repositorySelector.matchExpressions[0].operator: is required"]),
    ("template-label-value", validate_package_variant_set, templated(labels={"nephio.org/site": 42}),
     ["spec.targets[0].template.labels[nephio.org/site]: must be a string, not an integer"]),
    ("map-expr-as-string", validate_package_variant_set, templated(labelExprs=["key: value"]),
     ["spec.targets[0].template.labelExprs[0]: must be an object, not a string"]),
    ("config-map-exprs", validate_package_variant_set,
     templated(pipeline={"mutators": [{"image": "i", "configMapExprs": [{"valueExpr": 1}]}]}),
     ["spec.targets[0].template.pipeline.mutators[0].configMapExprs[0].valueExpr: must be a string, not an integer"]),
]


@pytest.mark.parametrize(("check", "obj", "expected"), [case[1:] for case in SHAPE_CASES],
                         ids=[case[0] for case in SHAPE_CASES])
def test_a_wrong_shape_is_reported_by_field_path(check: Any, obj: dict[str, Any], expected: list[str]) -> None:
    assert check(obj) == expected


def test_shape_problems_are_all_reported_in_document_order_and_porchs_rules_wait_for_them() -> None:
    obj = pvs({"repositories": "edge", "template": {"labels": {"a": 1}}}, {}, upstream={"revision": "1"})
    # Porch would also report the missing upstream package and repo and the target without a kind,
    # but an API server refuses this object before Porch ever sees it.
    assert validate_package_variant_set(obj) == [
        "spec.upstream.revision: must be an integer, not a string",
        "spec.targets[0].repositories: must be a list, not a string",
        "spec.targets[0].template.labels[a]: must be a string, not an integer",
    ]


def test_unknown_fields_are_ignored_and_null_fields_count_as_absent() -> None:
    obj = pvs({"repositorySelector": {"matchLabels": {"tier": "edge", "gone": None}}, "objectSelector": None,
               "template": {"labels": None, "surprise": 3}, "extra": [1]},
              upstream={**UPSTREAM, "branch": 7, "revision": None}, status={"anything": 1})
    obj["surprise"] = {"x": 1}
    assert validate_package_variant_set(obj) == []


def test_the_shape_check_understands_every_keyword_the_spec_schemas_use() -> None:
    # The checker knows types, fields, required fields, map values and list items; a model that
    # gains an enum or a value constraint in its spec needs the checker to learn it too.
    used: set[str] = set()

    def walk(node: dict[str, Any]) -> None:
        used.update(node)
        for field in (node.get("properties") or {}).values():
            walk(field)
        for key in ("items", "additionalProperties"):
            if isinstance(node.get(key), dict):
                walk(node[key])

    walk(structural_schema(PackageVariantSpec))
    walk(structural_schema(PackageVariantSetSpec))
    assert used == {"type", "properties", "required", "items", "additionalProperties",
                    "x-kubernetes-list-type", "x-kubernetes-map-type"}


def test_the_effective_policy_helpers_are_the_apis() -> None:
    assert validation.effective_adoption_policy is api.effective_adoption_policy
    assert validation.effective_deletion_policy is api.effective_deletion_policy


# the object's name, checked before everything else

NAME_CASES = [
    ("dotted", "edge.east-1", []),
    ("longest", "a" * 253, []),
    ("too-long", "a" * 254, ["metadata.name: must be no more than 253 characters"]),
    ("upper-case-and-punctuation", "Bad_Name!", [f"metadata.name: {SUBDOMAIN}"]),
    ("leading-dash", "-edge", [f"metadata.name: {SUBDOMAIN}"]),
    ("a-number", 7, ["metadata.name: must be a string, not an integer"]),
    ("absent", None, []),
    ("empty", "", []),
]


@pytest.mark.parametrize("check", [validate_package_variant, validate_package_variant_set])
@pytest.mark.parametrize(("name", "expected"), [case[1:] for case in NAME_CASES], ids=[case[0] for case in NAME_CASES])
def test_a_name_that_is_not_an_object_name_is_reported_first(check: Any, name: Any, expected: list[str]) -> None:
    obj = pv() if check is validate_package_variant else pvs({"repositorySelector": {}})
    assert check(named(obj, name)) == expected


def test_a_bad_name_is_reported_with_the_shape_problems_and_with_porchs() -> None:
    assert validate_package_variant_set(named(pvs({"repositories": "edge"}), "Bad_Name!")) == [
        f"metadata.name: {SUBDOMAIN}", "spec.targets[0].repositories: must be a list, not a string"]
    assert validate_package_variant(named(pv(downstream=None, upstream={**UPSTREAM, "revision": -3}), "x_y")) == [
        f"metadata.name: {SUBDOMAIN}", "missing required field spec.downstream", BELOW_MINUS_ONE.format(-3)]


def test_porchkits_revision_rule_comes_after_all_of_porchs() -> None:
    obj = pvs(upstream={"repo": "c", "package": "p", "revision": -2})
    assert validate_package_variant_set(obj) == ["must specify at least one item in spec.targets",
                                                 BELOW_MINUS_ONE.format(-2)]


# what a manifest may not hold at all

MANIFEST_CASES = [
    ("valid-variant", pv(), []),
    ("valid-set", pvs(), []),  # no targets: left to validate_package_variant_set
    ("revision-minus-one", pv(upstream={**UPSTREAM, "revision": -1}), []),
    ("revision-largest", pvs(upstream={**UPSTREAM, "revision": 2**63 - 1}), []),
    ("revision-null", pv(upstream={**UPSTREAM, "revision": None}), []),
    ("bad-name-and-revision", named(pvs(upstream={**UPSTREAM, "revision": -3}), "Bad_Name!"),
     [f"metadata.name: {SUBDOMAIN}", BELOW_MINUS_ONE.format(-3)]),
    ("no-name", named(pv(), None), ["metadata.name: is required"]),
    ("empty-name", named(pvs(), ""), ["metadata.name: is required"]),
    ("no-metadata", {"kind": "PackageVariant", "spec": {"upstream": UPSTREAM}}, ["metadata.name: is required"]),
    ("revision-beyond-64-bits", pvs(upstream={**UPSTREAM, "revision": 10**29}), [f"spec.upstream.revision: {INT64}"]),
    ("revision-as-bool", pv(upstream={**UPSTREAM, "revision": True}),
     ["spec.upstream.revision: must be an integer, not a boolean"]),
    ("revision-as-string", pv(upstream={**UPSTREAM, "revision": "-3"}),
     ["spec.upstream.revision: must be an integer, not a string"]),
    ("other-problems-are-not-its-business", pv(upstream="catalog", downstream=None, adoptionPolicy="x"), []),
    ("not-an-object", ["a"], ["<root>: must be an object, not a list"]),
]


@pytest.mark.parametrize(("obj", "expected"), [case[1:] for case in MANIFEST_CASES],
                         ids=[case[0] for case in MANIFEST_CASES])
def test_a_manifest_is_refused_for_its_name_or_its_upstream_revision_alone(obj: Any, expected: list[str]) -> None:
    assert manifest_problems(obj) == expected


def test_what_a_manifest_is_refused_for_the_validation_says_in_the_same_words() -> None:
    obj = named(pvs({"repositorySelector": {}}, upstream={**UPSTREAM, "revision": -3}), "Bad_Name!")
    assert manifest_problems(obj) == validate_package_variant_set(obj)


# never raising, whatever the dict holds

ODD_VALUES: list[Any] = [None, 0, -1, -2, 2**64, -(2**64), True, 1.5, float("nan"), "", "name", [], {}, [None], [1],
                         {"a": None}, {1: "x"}, {None: "x"}, {True: "x"}, {"name": "x", 1: "y"},
                         {"package-path": "p", (1, 2): "t"}, datetime.date(2026, 1, 1), b"bytes", ("a",),
                         {"image": "i", "name": 3}]


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        found += _paths(item, (*prefix, key))
    return found


def _replaced(document: Any, path: tuple[Any, ...], value: Any) -> Any:
    out = copy.deepcopy(document)
    holder = out
    for key in path[:-1]:
        holder = holder[key]
    holder[path[-1]] = copy.deepcopy(value)
    return out


@pytest.mark.parametrize(("name", "check"), [
    ("packagevariant.yaml", validate_package_variant),
    ("packagevariantset.yaml", validate_package_variant_set),
    ("packagevariantset-invalid.yaml", validate_package_variant_set),
])
def test_validation_returns_messages_and_never_raises_whatever_any_field_holds(name: str, check: Any) -> None:
    document = load(name)
    for path in _paths(document):
        for value in ODD_VALUES:
            changed = _replaced(document, path, value)
            for problems in (check(changed), manifest_problems(changed)):
                assert isinstance(problems, list) and all(isinstance(p, str) for p in problems), (path, value)


def test_a_map_key_that_is_not_a_string_is_a_shape_problem() -> None:
    # JSON has only string keys; a YAML loader gives `1:` or `on:` as a number or a boolean.
    assert validate_package_variant(pv(packageContext={"data": {"name": "x", 1: "y"}})) == [
        "spec.packageContext.data[1]: key must be a string, not an integer"]
    assert validate_package_variant_set(templated(labels={True: "x"})) == [
        "spec.targets[0].template.labels[True]: key must be a string, not a boolean"]


def test_an_object_that_is_not_a_mapping_is_reported_not_raised() -> None:
    assert validate_package_variant([]) == ["<root>: must be an object, not a list"]  # type: ignore[arg-type]
    assert validate_package_variant_set(None) == ["<root>: must be an object, not null"]  # type: ignore[arg-type]
