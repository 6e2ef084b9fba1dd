"""injection.inject: Porch's config injection (spec b.10 (3)), namespace isolation, text preservation."""

from __future__ import annotations

import pytest

from porchvariant.errors import MutationError
from porchvariant.injection import inject

NS = "team-a"
PRR = "team-a/app-draft"

KPTFILE = """\
apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: app # the package
info:
  description: sample app
"""

SETTINGS = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  annotations:
    kpt.dev/config-injection: required # filled from the cluster
data:
  # defaults, overwritten on injection
  color: blue
"""

TEAM = """\
apiVersion: example.com/v1
kind: Team
metadata:
  name: team
  annotations:
    kpt.dev/config-injection: optional
spec:
  size: 1
status:
  ready: false
"""

DEPLOYMENT = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app\n"


def configmap(name: str, data: dict | None = None, *, namespace: str = NS, api_version: str = "v1") -> dict:
    obj = {"apiVersion": api_version, "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}}
    if data is not None:
        obj["data"] = data
    return obj


def team(name: str, spec: dict | None = None, *, namespace: str = NS) -> dict:
    obj = {"apiVersion": "example.com/v1", "kind": "Team", "metadata": {"name": name, "namespace": namespace}}
    if spec is not None:
        obj["spec"] = spec
    return obj


def package(**files: str) -> dict[str, str]:
    return {"Kptfile": KPTFILE, **files}


def run(resources: dict[str, str], injectors: list[dict], cluster: list[dict], namespace: str = NS):
    return inject(namespace, injectors, resources, cluster, prr=PRR)


# --- injecting ---------------------------------------------------------------------------------------------


def test_a_configmap_gets_the_data_of_the_chosen_in_cluster_configmap_and_keeps_its_comments() -> None:
    out, conditions, gates = run(package(**{"settings.yaml": SETTINGS}), [{"name": "prod"}],
                                 [configmap("prod", {"color": "red", "size": "10"})])
    assert out["settings.yaml"] == """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  annotations:
    kpt.dev/config-injection: required # filled from the cluster
    kpt.dev/injected-resource: prod
data:
  # defaults, overwritten on injection
  color: red
  size: "10"
"""
    assert conditions == [{"type": "config.injection.ConfigMap.settings", "status": "True",
                           "message": 'injected resource "prod" from cluster', "reason": "ConfigInjected"}]
    assert gates == [{"conditionType": "config.injection.ConfigMap.settings"}]


def test_the_kptfile_records_gates_of_required_points_and_conditions_of_all_points() -> None:
    out, _, _ = run(package(**{"settings.yaml": SETTINGS, "team.yaml": TEAM}), [{"name": "prod"}],
                    [configmap("prod", {"color": "red"})])
    assert out["Kptfile"] == KPTFILE.replace("info:\n", "info:\n  readinessGates:\n"
                                             "    - conditionType: config.injection.ConfigMap.settings\n") + """\
status:
  conditions:
    - type: config.injection.ConfigMap.settings
      status: "True"
      message: injected resource "prod" from cluster
      reason: ConfigInjected
    - type: config.injection.Team.team
      status: "False"
      message: no in-cluster resources of type example.com/v1.Team
      reason: NoResourceSelected
"""


def test_a_custom_resource_gets_the_spec_which_stays_before_its_status() -> None:
    out, conditions, gates = run(package(**{"team.yaml": TEAM}), [{"kind": "Team", "name": "blue"}],
                                 [team("blue", {"size": 3, "leads": ["ann", "bo"]})])
    assert out["team.yaml"] == """\
apiVersion: example.com/v1
kind: Team
metadata:
  name: team
  annotations:
    kpt.dev/config-injection: optional
    kpt.dev/injected-resource: blue
spec:
  size: 3
  leads:
    - ann
    - bo
status:
  ready: false
"""
    assert conditions[0]["status"] == "True"
    assert gates == []  # optional


def test_a_missing_spec_is_added_before_status() -> None:
    text = TEAM.replace("spec:\n  size: 1\n", "")
    out, _, _ = run(package(**{"team.yaml": text}), [{"name": "blue"}], [team("blue", {"size": 3})])
    assert out["team.yaml"].endswith("    kpt.dev/injected-resource: blue\nspec:\n  size: 3\nstatus:\n  ready: false\n")


def test_injectors_are_tried_in_order_and_the_first_that_finds_an_object_wins() -> None:
    injectors = [{"name": "absent"}, {"kind": "Secret", "name": "prod"}, {"name": "prod"}, {"name": "dev"}]
    out, conditions, _ = run(package(**{"settings.yaml": SETTINGS}), injectors,
                             [configmap("dev", {"color": "green"}), configmap("prod", {"color": "red"})])
    assert "kpt.dev/injected-resource: prod" in out["settings.yaml"]
    assert conditions[0]["message"] == 'injected resource "prod" from cluster'


@pytest.mark.parametrize(("selector", "matches"), [
    ({"group": "", "version": "v1", "kind": "ConfigMap"}, True),  # apiVersion "v1" is group "", version "v1"
    ({"group": "core"}, False),
    ({"version": "v2"}, False),
    ({"kind": "configmap"}, False),
    ({"group": None, "version": None, "kind": None}, True),  # unset means any
])
def test_an_injector_applies_only_if_its_set_group_version_kind_equal_the_points(selector: dict, matches: bool) -> None:
    _, conditions, _ = run(package(**{"settings.yaml": SETTINGS}), [{**selector, "name": "prod"}],
                           [configmap("prod", {"color": "red"})])
    assert (conditions[0]["status"] == "True") is matches


def test_only_objects_of_the_points_group_version_and_kind_are_candidates() -> None:
    cluster = [configmap("prod", {"color": "red"}, api_version="example.com/v1"), team("prod", {"x": 1})]
    _, conditions, _ = run(package(**{"settings.yaml": SETTINGS}), [{"name": "prod"}], cluster)
    assert conditions[0]["message"] == "no in-cluster resources of type v1.ConfigMap"


def test_a_configmap_outside_the_core_group_gives_its_spec() -> None:
    text = SETTINGS.replace("apiVersion: v1", "apiVersion: example.com/v1")
    source = configmap("prod", {"color": "red"}, api_version="example.com/v1") | {"spec": {"color": "teal"}}
    out, _, _ = run(package(**{"settings.yaml": text}), [{"name": "prod"}], [source])
    assert out["settings.yaml"].endswith("  color: blue\nspec:\n  color: teal\n")


# --- namespace isolation ------------------------------------------------------------------------------------


def test_objects_of_other_namespaces_are_never_injected() -> None:
    cluster = [configmap("prod", {"color": "stolen"}, namespace="team-b"), configmap("prod", {"x": "y"}, namespace="")]
    resources = package(**{"settings.yaml": SETTINGS})
    out, conditions, _ = run(resources, [{"name": "prod"}], cluster)
    assert out["settings.yaml"] is resources["settings.yaml"]
    assert conditions[0] == {"type": "config.injection.ConfigMap.settings", "status": "False",
                             "message": "no in-cluster resources of type v1.ConfigMap", "reason": "NoResourceSelected"}


def test_a_same_named_object_in_another_namespace_loses_to_nothing_and_to_ours() -> None:
    cluster = [configmap("prod", {"color": "stolen"}, namespace="team-b"), configmap("prod", {"color": "ours"})]
    out, _, _ = run(package(**{"settings.yaml": SETTINGS}), [{"name": "prod"}], cluster)
    assert "color: ours" in out["settings.yaml"] and "stolen" not in out["settings.yaml"]


def test_with_an_empty_namespace_nothing_is_injected() -> None:
    cluster = [configmap("prod", {"color": "red"}, namespace="")]
    _, conditions, _ = run(package(**{"settings.yaml": SETTINGS}), [{"name": "prod"}], cluster, namespace="")
    assert conditions[0]["status"] == "False"


def test_objects_without_metadata_are_ignored() -> None:
    _, conditions, _ = run(package(**{"settings.yaml": SETTINGS}), [{"name": "prod"}],
                           [{"apiVersion": "v1", "kind": "ConfigMap"}, "not an object"])  # type: ignore[list-item]
    assert conditions[0]["status"] == "False"


# --- points that are not injected -----------------------------------------------------------------------------


def test_without_injectors_every_point_says_so() -> None:
    _, conditions, gates = run(package(**{"settings.yaml": SETTINGS}), [], [configmap("prod", {"a": "b"})])
    assert conditions[0]["message"] == "no injectors defined"
    assert gates == [{"conditionType": "config.injection.ConfigMap.settings"}]


def test_a_point_no_injector_matches_gets_the_default_message() -> None:
    _, conditions, _ = run(package(**{"settings.yaml": SETTINGS}), [{"name": "dev"}], [configmap("prod", {"a": "b"})])
    assert conditions[0]["message"] == "no resource matched any injection selector for this injection point"


def test_a_source_without_the_field_is_not_injected() -> None:
    resources = package(**{"settings.yaml": SETTINGS})
    out, conditions, _ = run(resources, [{"name": "prod"}], [configmap("prod")])
    assert out["settings.yaml"] is resources["settings.yaml"]
    assert conditions[0]["message"] == 'field "data" not found in resource "prod"'
    _, conditions, _ = run(package(**{"team.yaml": TEAM}), [{"name": "blue"}], [team("blue")])
    assert conditions[0]["message"] == 'field "spec" not found in resource "blue"'


# --- errors ------------------------------------------------------------------------------------------------------


def test_an_invalid_annotation_value_aborts_with_porchs_text() -> None:
    text = SETTINGS.replace("required # filled from the cluster", "maybe")
    with pytest.raises(MutationError) as err:
        run(package(**{"settings.yaml": text}), [{"name": "prod"}], [])
    assert str(err.value) == ('errors in injection points: settings.yaml: ConfigMap/settings has invalid '
                              '"kpt.dev/config-injection" annotation value of "maybe"')


def test_a_duplicate_condition_type_aborts_naming_both_files() -> None:
    with pytest.raises(MutationError) as err:
        run(package(**{"a.yaml": SETTINGS, "b/settings.yml": SETTINGS}), [{"name": "prod"}], [])
    assert str(err.value) == ('errors in injection points: duplicate injection conditionType '
                              '"config.injection.ConfigMap.settings" (a.yaml and b/settings.yml)')


def test_all_point_errors_are_reported_together_in_file_order() -> None:
    bad = SETTINGS.replace("required # filled from the cluster", "true")
    with pytest.raises(MutationError) as err:
        run(package(**{"a.yaml": SETTINGS, "b.yaml": bad}), [{"name": "prod"}], [])
    assert str(err.value) == (
        'errors in injection points: b.yaml: ConfigMap/settings has invalid "kpt.dev/config-injection" '
        'annotation value of "true", duplicate injection conditionType "config.injection.ConfigMap.settings" '
        "(a.yaml and b.yaml)"
    )


def test_a_file_with_a_point_that_is_not_yaml_aborts_naming_the_file() -> None:
    text = SETTINGS + "  size: [\n"
    with pytest.raises(MutationError) as err:
        run(package(**{"settings.yaml": text}), [{"name": "prod"}], [])
    assert str(err.value) == ("settings.yaml: failed to parse input bytes: yaml: line 11: "
                              "did not find expected node content")


def test_files_that_cannot_hold_a_point_are_not_read() -> None:
    resources = package(**{"broken.yaml": "a: [\n", "README.md": "use kpt.dev/config-injection: [\n"})
    out, conditions, _ = run(resources, [], [])
    assert out == resources and conditions == []


def test_points_without_a_kptfile_are_an_error_and_no_points_without_one_are_fine() -> None:
    with pytest.raises(MutationError) as err:
        run({"settings.yaml": SETTINGS}, [{"name": "prod"}], [])
    assert str(err.value) == "\"Kptfile\" not found in PackageRevisionResources 'team-a/app-draft'"
    assert run({"deployment.yaml": DEPLOYMENT}, [], [])[0] == {"deployment.yaml": DEPLOYMENT}


def test_a_kptfile_of_another_kind_is_an_error() -> None:
    with pytest.raises(MutationError) as err:
        run({"Kptfile": KPTFILE.replace("kind: Kptfile", "kind: ConfigMap")}, [], [])
    assert str(err.value) == (
        "\"Kptfile\" does not contain kind \"Kptfile\" in PackageRevisionResources 'team-a/app-draft'"
    )


# --- the Kptfile ----------------------------------------------------------------------------------------------------


def test_existing_gates_and_conditions_are_merged_deduplicated_and_sorted() -> None:
    kptfile = KPTFILE + """\
  readinessGates:
    - conditionType: zeta
    # a gate of the team's own
    - conditionType: alpha
    - conditionType: zeta
status:
  conditions:
    - type: zeta
      status: "True"
    - type: config.injection.ConfigMap.settings
      status: "True"
      reason: ConfigInjected
      message: injected resource "old" from cluster # stale
    - type: alpha
      status: "False"
"""
    resources = {"Kptfile": kptfile, "settings.yaml": SETTINGS}
    out, _, _ = run(resources, [{"name": "dev"}], [])
    assert out["Kptfile"] == KPTFILE + """\
  readinessGates:
    # a gate of the team's own
    - conditionType: alpha
    - conditionType: config.injection.ConfigMap.settings
    - conditionType: zeta
status:
  conditions:
    - type: alpha
      status: "False"
    - type: config.injection.ConfigMap.settings
      status: "False"
      reason: NoResourceSelected
      message: no in-cluster resources of type v1.ConfigMap # stale
    - type: zeta
      status: "True"
"""


def test_without_points_the_kptfile_is_left_alone() -> None:
    resources = package(**{"deployment.yaml": DEPLOYMENT})
    out, conditions, gates = run(resources, [{"name": "prod"}], [configmap("prod", {"a": "b"})])
    assert out["Kptfile"] is KPTFILE
    assert conditions == [] and gates == []


def test_without_points_existing_gates_and_conditions_are_still_sorted_as_porch_does() -> None:
    kptfile = KPTFILE + "  readinessGates:\n    - conditionType: b\n    - conditionType: a\n    - conditionType: b\n" \
                        "status:\n  conditions:\n    - type: b\n      status: \"True\"\n" \
                        "    - type: a\n      status: \"True\"\n"
    out, _, _ = run({"Kptfile": kptfile}, [], [])
    assert out["Kptfile"] == KPTFILE + "  readinessGates:\n    - conditionType: a\n    - conditionType: b\n" \
                                       "status:\n  conditions:\n    - type: a\n      status: \"True\"\n" \
                                       "    - type: b\n      status: \"True\"\n"


def test_compact_sequences_in_the_kptfile_stay_compact() -> None:
    kptfile = KPTFILE.replace("info:\n", "info:\n  keywords:\n  - demo\n")
    out, _, _ = run({"Kptfile": kptfile, "settings.yaml": SETTINGS}, [], [])
    assert "  readinessGates:\n  - conditionType: config.injection.ConfigMap.settings\n" in out["Kptfile"]
    assert "status:\n  conditions:\n  - type: config.injection.ConfigMap.settings\n" in out["Kptfile"]


# --- text preservation --------------------------------------------------------------------------------------------


def test_injecting_twice_gives_the_same_texts_as_once() -> None:
    cluster = [configmap("prod", {"color": "red"}), team("blue", {"size": 3})]
    injectors = [{"name": "prod"}, {"name": "blue"}]
    once, _, _ = run(package(**{"settings.yaml": SETTINGS, "team.yaml": TEAM}), injectors, cluster)
    twice, _, _ = run(once, injectors, cluster)
    assert all(twice[path] is once[path] for path in once)


def test_other_documents_of_a_file_keep_their_exact_text() -> None:
    odd = "--- # first\napiVersion:   v1\nkind: Service   # odd spacing\nmetadata: {name: svc}\n"
    text = odd + "---\n" + SETTINGS + "...\n"
    out, _, _ = run(package(**{"all.yaml": text}), [{"name": "prod"}], [configmap("prod", {"color": "red"})])
    assert out["all.yaml"].startswith(odd + "---\napiVersion: v1\n")
    assert out["all.yaml"].endswith("  color: red\n...\n")


def test_unchanged_files_are_the_same_objects_and_the_input_is_untouched() -> None:
    resources = package(**{"settings.yaml": SETTINGS, "deployment.yaml": DEPLOYMENT})
    before = dict(resources)
    out, _, _ = run(resources, [{"name": "prod"}], [configmap("prod", {"color": "red"})])
    assert resources == before
    assert out is not resources
    assert out["deployment.yaml"] is DEPLOYMENT


def test_a_new_source_object_moves_the_annotation_to_it() -> None:
    once, _, _ = run(package(**{"settings.yaml": SETTINGS}), [{"name": "prod"}], [configmap("prod", {"color": "red"})])
    again, conditions, _ = run(once, [{"name": "dev"}], [configmap("dev", {"color": "green"})])
    assert "kpt.dev/injected-resource: dev\n" in again["settings.yaml"]
    assert "  color: green\n" in again["settings.yaml"] and "color: red" not in again["settings.yaml"]
    assert conditions[0]["message"] == 'injected resource "dev" from cluster'


def test_crlf_files_stay_crlf() -> None:
    resources = {"Kptfile": KPTFILE.replace("\n", "\r\n"), "settings.yaml": SETTINGS.replace("\n", "\r\n")}
    out, _, _ = run(resources, [{"name": "prod"}], [configmap("prod", {"color": "red"})])
    for path in resources:
        assert "\n" not in out[path].replace("\r\n", ""), path
    assert out["settings.yaml"].endswith("  color: red\r\n")


def test_injected_words_that_yaml_1_1_reads_as_booleans_or_numbers_are_quoted() -> None:
    out, _, _ = run(package(**{"settings.yaml": SETTINGS}), [{"name": "prod"}],
                    [configmap("prod", {"enabled": "yes", "on": "off", "window": "12:30"})])
    assert out["settings.yaml"].endswith('data:\n  enabled: "yes"\n  "on": "off"\n  window: "12:30"\n')


def test_injecting_empty_data_into_a_commented_data_field_gives_valid_yaml() -> None:
    text = SETTINGS.replace("data:\n", "data: # from the cluster\n")
    out, _, _ = run(package(**{"settings.yaml": text}), [{"name": "prod"}], [configmap("prod", {})])
    assert out["settings.yaml"].endswith("data: {} # from the cluster\n")


def test_a_point_written_with_tabs_after_colons_can_be_injected() -> None:
    text = SETTINGS.replace("kind: ConfigMap", "kind:\tConfigMap")
    out, _, _ = run(package(**{"settings.yaml": text}), [{"name": "prod"}], [configmap("prod", {"color": "red"})])
    assert out["settings.yaml"].startswith("apiVersion: v1\nkind:\tConfigMap\n")
    assert out["settings.yaml"].endswith("  color: red\n")


def test_the_other_documents_of_a_file_keep_their_spacing_even_in_the_injected_document() -> None:
    text = SETTINGS.replace("  name: settings", "  name:    settings") + "---\nkind:   Other\n"
    out, _, _ = run(package(**{"all.yaml": text}), [{"name": "prod"}], [configmap("prod", {"color": "red"})])
    assert "  name:    settings\n" in out["all.yaml"]
    assert out["all.yaml"].endswith("  color: red\n---\nkind:   Other\n")
