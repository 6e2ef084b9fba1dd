"""package_context.apply_package_context: Porch's packageContext mutation (spec b.10 (1))."""

from __future__ import annotations

import pytest

from porchvariant.errors import MutationError
from porchvariant.package_context import apply_package_context

PRR = "ns/pkg-draft"

CONTEXT = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: kptfile.kpt.dev
  annotations:
    config.kubernetes.io/local-config: "true"
data:
  # written by Porch on clone
  name: example
  package-path: deploy/example # where it lives
  team: blue
"""


def context_spec(data: dict[str, str] | None = None, remove: list[str] | None = None) -> dict:
    context: dict = {}
    if data is not None:
        context["data"] = data
    if remove is not None:
        context["removeKeys"] = remove
    return {"packageContext": context}


def apply(spec: dict, text: str = CONTEXT, **files: str) -> dict[str, str]:
    return apply_package_context(spec, {"package-context.yaml": text, **files}, prr=PRR)


@pytest.mark.parametrize("spec", [
    {},
    {"packageContext": None},
    {"packageContext": {}},
    context_spec({}, []),
], ids=["no-packageContext", "null", "empty", "empty-data-and-removeKeys"])
def test_without_anything_to_do_the_files_come_back_as_they_were(spec: dict) -> None:
    resources = {"Kptfile": "kind: Kptfile\n"}  # not even a package-context.yaml: it is not looked at
    out = apply_package_context(spec, resources, prr=PRR)
    assert out == resources
    assert out is not resources


def test_new_keys_are_appended_and_existing_ones_change_in_place_with_their_comments() -> None:
    out = apply(context_spec({"region": "us-east1", "team": "red", "zone": "b"}))
    assert out["package-context.yaml"] == """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: kptfile.kpt.dev
  annotations:
    config.kubernetes.io/local-config: "true"
data:
  # written by Porch on clone
  name: example
  package-path: deploy/example # where it lives
  team: red
  region: us-east1
  zone: b
"""


def test_a_key_both_set_and_removed_ends_up_removed() -> None:
    out = apply(context_spec({"team": "red", "region": "x"}, ["team", "region"]))
    assert "team" not in out["package-context.yaml"]
    assert "region" not in out["package-context.yaml"]


def test_removing_a_key_takes_the_comment_above_it_and_leaves_the_others() -> None:
    out = apply(context_spec(remove=["name"]))
    assert out["package-context.yaml"].endswith("""\
data:
  package-path: deploy/example # where it lives
  team: blue
""")


def test_removing_a_key_that_is_not_there_changes_nothing() -> None:
    resources = {"package-context.yaml": CONTEXT}
    out = apply_package_context(context_spec(remove=["absent"]), resources, prr=PRR)
    assert out["package-context.yaml"] is CONTEXT


def test_setting_the_values_already_there_keeps_the_very_same_text() -> None:
    out = apply(context_spec({"team": "blue", "name": "example"}))
    assert out["package-context.yaml"] is CONTEXT


def test_applying_twice_gives_the_text_of_applying_once() -> None:
    spec = context_spec({"region": "us-east1", "team": "red"}, ["name"])
    once = apply(spec)
    twice = apply_package_context(spec, once, prr=PRR)
    assert twice["package-context.yaml"] is once["package-context.yaml"]


def test_other_files_are_the_same_objects_and_the_input_is_not_modified() -> None:
    deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app\n"
    resources = {"package-context.yaml": CONTEXT, "deployment.yaml": deployment}
    before = dict(resources)
    out = apply_package_context(context_spec({"region": "x"}), resources, prr=PRR)
    assert resources == before
    assert out["deployment.yaml"] is deployment
    assert out is not resources


def test_strings_that_read_as_other_types_are_double_quoted() -> None:
    out = apply(context_spec({"enabled": "true", "port": "8080", "empty": ""}))
    assert out["package-context.yaml"].endswith('  enabled: "true"\n  port: "8080"\n  empty: ""\n')


def test_a_replaced_value_keeps_its_quotes() -> None:
    text = CONTEXT.replace("team: blue", "team: 'blue'")
    out = apply(context_spec({"team": "red"}), text)
    assert "  team: 'red'\n" in out["package-context.yaml"]


def test_a_multi_line_value_is_written_as_a_literal_block() -> None:
    out = apply(context_spec({"motd": "hello\nworld\n"}))
    assert out["package-context.yaml"].endswith("  motd: |\n    hello\n    world\n")


def test_an_empty_flow_data_mapping_grows_into_a_block() -> None:
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kptfile.kpt.dev\ndata: {}\n"
    out = apply(context_spec({"a": "1"}), text)
    assert out["package-context.yaml"] == text.replace("data: {}\n", "data:\n  a: \"1\"\n")


def test_a_document_start_marker_and_a_trailing_comment_are_kept() -> None:
    text = "---\n" + CONTEXT + "# the end\n"
    out = apply(context_spec({"region": "x"}), text)
    assert out["package-context.yaml"].startswith("---\napiVersion: v1\n")
    assert out["package-context.yaml"].endswith("  team: blue\n  region: x\n# the end\n")


def test_values_that_are_not_strings_elsewhere_in_data_are_left_as_written() -> None:
    # Porch rewrites the whole data mapping as strings; only the edited key is touched here.
    text = CONTEXT.replace("team: blue", "replicas: 3")
    out = apply(context_spec({"region": "x"}), text)
    assert "  replicas: 3\n  region: x\n" in out["package-context.yaml"]


# --- errors: Porch's texts --------------------------------------------------------------------------


def test_a_missing_file_is_an_error() -> None:
    with pytest.raises(MutationError) as err:
        apply_package_context(context_spec({"a": "b"}), {"Kptfile": ""}, prr=PRR)
    assert str(err.value) == "\"package-context.yaml\" not found in PackageRevisionResources 'ns/pkg-draft'"


def test_a_file_that_is_not_yaml_is_an_error() -> None:
    with pytest.raises(MutationError) as err:
        apply(context_spec({"a": "b"}), "data:\n  a: [\n")
    assert str(err.value) == (
        'failed to parse "package-context.yaml" of PackageRevisionResources ns/pkg-draft: '
        "failed to parse input bytes: yaml: line 3: did not find expected node content"
    )


def test_a_file_with_two_objects_is_an_error() -> None:
    with pytest.raises(MutationError) as err:
        apply(context_spec({"a": "b"}), CONTEXT + "---\n" + CONTEXT)
    assert str(err.value) == (
        'failed to parse "package-context.yaml" of PackageRevisionResources ns/pkg-draft: '
        "expected exactly one object, got 2"
    )


def test_an_object_that_is_not_a_configmap_is_an_error() -> None:
    with pytest.raises(MutationError) as err:
        apply(context_spec({"a": "b"}), CONTEXT.replace("kind: ConfigMap", "kind: Secret"))
    assert str(err.value) == (
        "\"package-context.yaml\" does not contain kind \"ConfigMap\" in PackageRevisionResources 'ns/pkg-draft'"
    )


def test_a_configmap_with_another_name_is_an_error() -> None:
    with pytest.raises(MutationError) as err:
        apply(context_spec({"a": "b"}), CONTEXT.replace("name: kptfile.kpt.dev", "name: other"))
    assert str(err.value) == (
        '"package-context.yaml" does not contain resource named "kptfile.kpt.dev" '
        "in PackageRevisionResources 'ns/pkg-draft'"
    )


def test_a_configmap_without_data_is_an_error() -> None:
    with pytest.raises(MutationError) as err:
        apply(context_spec(remove=["a"]), CONTEXT.split("\ndata:")[0] + "\n")
    assert str(err.value) == "PackageRevisionResources ns/pkg-draft PackageContext no data field found"


@pytest.mark.parametrize("data", ["data: [a]\n", "data:\n  a:\n    b: c\n", "data: text\n"],
                         ids=["list", "nested", "scalar"])
def test_data_that_is_not_a_mapping_of_strings_is_an_error(data: str) -> None:
    with pytest.raises(MutationError) as err:
        apply(context_spec({"a": "b"}), CONTEXT.split("\ndata:")[0] + "\n" + data)
    assert str(err.value).startswith("PackageRevisionResources ns/pkg-draft PackageContext invalid data field: ")


@pytest.mark.parametrize("data", ["data:\n", "data: ~\n"], ids=["empty", "tilde"])
def test_a_null_data_field_counts_as_empty_as_in_porch(data: str) -> None:
    head = CONTEXT.split("\ndata:")[0] + "\n"
    out = apply(context_spec({"region": "us-east1"}), head + data)
    assert out["package-context.yaml"] == head + "data:\n  region: us-east1\n"
    removing = head + data
    assert apply(context_spec(remove=["region"]), removing)["package-context.yaml"] is removing


def test_a_crlf_file_stays_crlf() -> None:
    text = CONTEXT.replace("\n", "\r\n")
    out = apply(context_spec({"team": "red", "region": "us-east1"}), text)
    assert out["package-context.yaml"] == text.replace("team: blue", "team: red") + "  region: us-east1\r\n"


def test_words_that_yaml_1_1_reads_as_booleans_are_quoted() -> None:
    # kubectl (sigs.k8s.io/yaml, YAML 1.1) would read `on: yes` as true: true, not as ConfigMap data
    out = apply(context_spec({"on": "yes", "team": "no"}))
    assert out["package-context.yaml"].endswith('  team: "no"\n  "on": "yes"\n')


def test_removing_every_key_keeps_the_comment_on_data_and_valid_yaml() -> None:
    text = CONTEXT.split("\ndata:")[0] + "\ndata: # set by the variant\n  team: blue\n"
    out = apply(context_spec(remove=["team"]), text)
    assert out["package-context.yaml"] == CONTEXT.split("\ndata:")[0] + "\ndata: {} # set by the variant\n"


def test_lines_the_edit_does_not_touch_keep_their_spacing_and_tabs() -> None:
    text = CONTEXT.replace("kind: ConfigMap", "kind:\tConfigMap").replace("team: blue", "team:   blue  ")
    out = apply(context_spec({"region": "us-east1"}), text)
    assert out["package-context.yaml"] == text + "  region: us-east1\n"
