"""mutations: the three mutations in Porch's order, and Porch's "resources changed" test."""

from __future__ import annotations

import dataclasses

import pytest

from porchvariant.errors import MutationError
from porchvariant.mutations import MutationResult, apply_mutations, resources_changed

KPTFILE = """\
apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: app
# the package's functions
pipeline:
  mutators:
    - image: gcr.io/kpt-fn/set-labels:v0.2 # keep
"""

CONTEXT = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: kptfile.kpt.dev
  annotations:
    config.kubernetes.io/local-config: "true"
data:
  name: app
"""

DEPLOYMENT = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app\nspec:\n  replicas: 1\n"


def variant(**spec: object) -> dict:
    return {"apiVersion": "config.porch.kpt.dev/v1alpha1", "kind": "PackageVariant",
            "metadata": {"name": "app-prod", "namespace": "prod"}, "spec": spec}


def package() -> dict[str, str]:
    return {"Kptfile": KPTFILE, "package-context.yaml": CONTEXT, "deployment.yaml": DEPLOYMENT}


def test_all_three_mutations_are_applied() -> None:
    pv = variant(packageContext={"data": {"env": "prod"}},
                 pipeline={"validators": [{"name": "conform", "image": "kubeconform"}]},
                 injectors=[{"name": "prod-settings"}])
    resources = package() | {"settings.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n"
                                              "  annotations:\n    kpt.dev/config-injection: optional\n"}
    cluster = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "prod-settings", "namespace": "prod"},
                "data": {"replicas": "3"}}]
    result = apply_mutations(pv, resources, cluster, prr="prod/app-1")
    assert result.changed
    assert result.resources["package-context.yaml"].endswith("  name: app\n  env: prod\n")
    assert result.resources["Kptfile"] == KPTFILE + """\
  validators:
    - name: PackageVariant.app-prod.conform.0
      image: kubeconform
status:
  conditions:
    - type: config.injection.ConfigMap.settings
      status: "True"
      message: injected resource "prod-settings" from cluster
      reason: ConfigInjected
"""
    assert result.resources["settings.yaml"].endswith(
        "    kpt.dev/injected-resource: prod-settings\ndata:\n  replicas: \"3\"\n")
    assert result.resources["deployment.yaml"] is DEPLOYMENT
    assert result.conditions == [{"type": "config.injection.ConfigMap.settings", "status": "True",
                                  "message": 'injected resource "prod-settings" from cluster',
                                  "reason": "ConfigInjected"}]
    assert result.readiness_gates == []


def test_injection_comes_after_the_package_context_and_wins_over_it() -> None:
    # package-context.yaml as an injection point: the context edit happens first, then injection replaces data
    context = CONTEXT.replace('    config.kubernetes.io/local-config: "true"\n',
                              '    config.kubernetes.io/local-config: "true"\n    kpt.dev/config-injection: optional\n')
    pv = variant(packageContext={"data": {"env": "prod"}}, injectors=[{"name": "ctx"}])
    cluster = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ctx", "namespace": "prod"},
                "data": {"name": "from-cluster"}}]
    result = apply_mutations(pv, package() | {"package-context.yaml": context}, cluster)
    assert result.resources["package-context.yaml"].endswith("data:\n  name: from-cluster\n")


def test_a_second_pass_over_the_output_changes_nothing() -> None:
    pv = variant(packageContext={"data": {"env": "prod"}, "removeKeys": ["name"]},
                 pipeline={"mutators": [{"name": "ns", "image": "set-namespace", "configMap": {"namespace": "prod"}}]})
    first = apply_mutations(pv, package(), [])
    second = apply_mutations(pv, first.resources, [])
    assert not second.changed
    assert all(second.resources[path] is first.resources[path] for path in first.resources)


def test_a_variant_without_mutations_leaves_the_package_as_it_was() -> None:
    resources = package()
    result = apply_mutations(variant(), resources, [])
    assert result == MutationResult(resources, False, [], [])
    assert result.resources is not resources
    assert all(result.resources[path] is resources[path] for path in resources)


def test_a_package_without_a_kptfile_gets_no_pipeline_and_no_error() -> None:
    resources = {"deployment.yaml": DEPLOYMENT}
    result = apply_mutations(variant(pipeline={"mutators": [{"image": "x"}]}), resources, [])
    assert result.resources == resources and not result.changed


def test_the_input_is_never_modified() -> None:
    resources = package()
    before = dict(resources)
    pv = variant(packageContext={"data": {"env": "prod"}}, pipeline={"mutators": [{"image": "x"}]})
    apply_mutations(pv, resources, [])
    assert resources == before


def test_errors_name_the_package_revision_resources() -> None:
    pv = variant(packageContext={"data": {"env": "prod"}})
    with pytest.raises(MutationError) as err:
        apply_mutations(pv, {"Kptfile": KPTFILE}, [], prr="prod/app-1")
    assert str(err.value) == "\"package-context.yaml\" not found in PackageRevisionResources 'prod/app-1'"


def test_the_result_is_frozen() -> None:
    result = apply_mutations(variant(), package(), [])
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.changed = True  # type: ignore[misc]


# --- resources_changed -----------------------------------------------------------------------------------


def test_the_same_files_have_not_changed() -> None:
    assert not resources_changed(package(), package())


def test_a_file_added_or_gone_is_a_change() -> None:
    assert resources_changed(package(), package() | {"new.yaml": "a: 1\n"})
    smaller = package()
    del smaller["deployment.yaml"]
    assert resources_changed(package(), smaller)


def test_a_renamed_file_is_a_change() -> None:
    renamed = package()
    renamed["deploy.yaml"] = renamed.pop("deployment.yaml")
    assert resources_changed(package(), renamed)


def test_any_text_difference_outside_the_kptfile_is_a_change() -> None:
    respaced = DEPLOYMENT.replace("replicas: 1", "replicas:  1")
    assert resources_changed(package(), package() | {"deployment.yaml": respaced})


def test_a_kptfile_reformatted_but_equal_as_data_is_not_a_change() -> None:
    reformatted = ('{"apiVersion": "kpt.dev/v1", "kind": "Kptfile", "metadata": {"name": "app"}, '
                   '"pipeline": {"mutators": [{"image": "gcr.io/kpt-fn/set-labels:v0.2"}]}}\n')
    assert not resources_changed(package(), package() | {"Kptfile": reformatted})


def test_a_kptfile_with_different_data_is_a_change() -> None:
    assert resources_changed(package(), package() | {"Kptfile": KPTFILE.replace("v0.2", "v0.3")})


def test_an_unparsable_kptfile_that_differs_is_a_change() -> None:
    assert resources_changed(package(), package() | {"Kptfile": KPTFILE + "  - [\n"})


@pytest.mark.parametrize("empty", ["mutators: []", "mutators:", "mutators: ~"])
def test_an_empty_or_null_list_in_the_kptfile_is_no_list_as_porchs_kptfile_struct_reads_it(empty: str) -> None:
    with_empty = KPTFILE.replace("pipeline:\n", f"pipeline:\n  {empty}\n").replace("  mutators:\n    -",
                                                                                   "  validators:\n    -")
    without = with_empty.replace(f"  {empty}\n", "")
    assert not resources_changed(package() | {"Kptfile": with_empty}, package() | {"Kptfile": without})


def test_an_empty_pipeline_list_cleaned_up_is_not_a_change_that_needs_a_draft() -> None:
    resources = package() | {"Kptfile": KPTFILE.replace("pipeline:\n", "pipeline:\n  validators: []\n")}
    result = apply_mutations(variant(), resources, [])
    assert "validators" not in result.resources["Kptfile"]
    assert not result.changed
