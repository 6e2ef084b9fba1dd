"""kptfile_pipeline: Porch's Kptfile pipeline mutation (spec b.10 (2)) and the dotted-name fix."""

from __future__ import annotations

import pytest

from porchvariant.errors import MutationError
from porchvariant.kptfile_pipeline import edit_kptfile_pipeline, is_variant_function, variant_function_name

HEAD = """\
apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: app # the package
info:
  description: sample app
"""

KPTFILE = HEAD + """\
pipeline:
  mutators:
    # label everything
    - image: gcr.io/kpt-fn/set-labels:v0.2
      configMap:
        app: app
    # left by an earlier pass of this variant
    - name: PackageVariant.pv.old.0
      image: gcr.io/kpt-fn/old:v1
    # another variant's function
    - name: PackageVariant.other.ns.0
      image: gcr.io/kpt-fn/set-namespace:v0.4
  validators:
    - image: gcr.io/kpt-fn/kubeval:v0.3 # strict
status:
  conditions: []
"""

LABELS = {"name": "labels", "image": "gcr.io/kpt-fn/set-labels:v0.3", "configMap": {"tier": "web"}}
KUBECONFORM = {"image": "gcr.io/kpt-fn/kubeconform:v0.1", "name": "conform"}


def test_variant_functions_go_first_renamed_and_other_entries_keep_their_order_and_comments() -> None:
    out = edit_kptfile_pipeline("pv", {"mutators": [LABELS], "validators": [KUBECONFORM]}, KPTFILE)
    assert out == HEAD + """\
pipeline:
  mutators:
    - name: PackageVariant.pv.labels.0
      image: gcr.io/kpt-fn/set-labels:v0.3
      configMap:
        tier: web
    # label everything
    - image: gcr.io/kpt-fn/set-labels:v0.2
      configMap:
        app: app
    # another variant's function
    - name: PackageVariant.other.ns.0
      image: gcr.io/kpt-fn/set-namespace:v0.4
  validators:
    - name: PackageVariant.pv.conform.0
      image: gcr.io/kpt-fn/kubeconform:v0.1
    - image: gcr.io/kpt-fn/kubeval:v0.3 # strict
status:
  conditions: []
"""


def test_the_index_in_the_name_counts_in_each_list_separately() -> None:
    pipeline = {"mutators": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}],
                "validators": [{"name": "c", "image": "z"}]}
    out = edit_kptfile_pipeline("pv", pipeline, HEAD)
    assert out == HEAD + """\
pipeline:
  mutators:
    - name: PackageVariant.pv.a.0
      image: x
    - name: PackageVariant.pv.b.1
      image: "y"
  validators:
    - name: PackageVariant.pv.c.0
      image: z
"""


def test_a_function_without_a_name_gets_an_empty_name_part() -> None:
    out = edit_kptfile_pipeline("pv", {"mutators": [{"image": "x"}]}, HEAD)
    assert "    - name: PackageVariant.pv..0\n      image: x\n" in out


def test_without_variant_functions_our_old_entries_go_and_empty_lists_are_deleted() -> None:
    text = HEAD + "pipeline:\n  mutators:\n    - name: PackageVariant.pv.old.0\n      image: x\n" \
                  "  validators:\n    - image: kubeval\n"
    out = edit_kptfile_pipeline("pv", None, text)
    assert out == HEAD + "pipeline:\n  validators:\n    - image: kubeval\n"


def test_the_pipeline_goes_when_neither_list_is_left_and_comments_below_it_stay() -> None:
    text = HEAD + "pipeline:\n  mutators:\n    - name: PackageVariant.pv.old.3\n      image: x\n# end of the Kptfile\n"
    out = edit_kptfile_pipeline("pv", {"mutators": [], "validators": []}, text)
    assert out == HEAD + "# end of the Kptfile\n"


@pytest.mark.parametrize("pipeline", ["pipeline: {}\n", "pipeline:\n", "pipeline: {mutators: []}\n"])
def test_an_empty_pipeline_is_deleted_even_when_the_variant_has_none(pipeline: str) -> None:
    assert edit_kptfile_pipeline("pv", None, HEAD + pipeline) == HEAD


def test_a_new_pipeline_goes_before_inventory_and_status() -> None:
    text = HEAD + "inventory:\n  name: inv\nstatus:\n  conditions: []\n"
    out = edit_kptfile_pipeline("pv", {"validators": [{"image": "v"}]}, text)
    assert out == HEAD + "pipeline:\n  validators:\n    - name: PackageVariant.pv..0\n      image: v\n" \
                         "inventory:\n  name: inv\nstatus:\n  conditions: []\n"


def test_new_mutators_go_before_existing_validators() -> None:
    text = HEAD + "pipeline:\n  validators:\n    - image: v\n"
    out = edit_kptfile_pipeline("pv", {"mutators": [{"image": "m", "name": "m"}]}, text)
    assert out.endswith("pipeline:\n  mutators:\n    - name: PackageVariant.pv.m.0\n      image: m\n"
                        "  validators:\n    - image: v\n")


def test_a_kptfile_already_holding_the_pipeline_comes_back_as_the_same_object() -> None:
    once = edit_kptfile_pipeline("pv", {"mutators": [LABELS]}, KPTFILE)
    assert edit_kptfile_pipeline("pv", {"mutators": [LABELS]}, once) is once


def test_no_pipeline_anywhere_leaves_the_kptfile_untouched() -> None:
    assert edit_kptfile_pipeline("pv", None, HEAD) is HEAD
    assert edit_kptfile_pipeline("pv", {}, HEAD) is HEAD


def test_changing_a_variant_function_replaces_the_old_entry() -> None:
    once = edit_kptfile_pipeline("pv", {"mutators": [LABELS]}, HEAD)
    changed = {**LABELS, "image": "gcr.io/kpt-fn/set-labels:v0.4"}
    twice = edit_kptfile_pipeline("pv", {"mutators": [changed]}, once)
    assert twice.count("PackageVariant.pv.labels.0") == 1
    assert "set-labels:v0.4" in twice and "set-labels:v0.3" not in twice


def test_compact_sequences_stay_compact() -> None:
    text = HEAD + "pipeline:\n  mutators:\n  # keep me\n  - image: a\n    configMap:\n      k: v\n"
    out = edit_kptfile_pipeline("pv", {"mutators": [{"name": "n", "image": "b"}]}, text)
    assert out == HEAD + "pipeline:\n  mutators:\n  - name: PackageVariant.pv.n.0\n    image: b\n" \
                         "  # keep me\n  - image: a\n    configMap:\n      k: v\n"


def test_wide_sequences_stay_wide() -> None:
    text = HEAD + "pipeline:\n  mutators:\n    - image: a\n"
    out = edit_kptfile_pipeline("pv", {"validators": [{"name": "n", "image": "b"}]}, text)
    assert out.endswith("  mutators:\n    - image: a\n"
                        "  validators:\n    - name: PackageVariant.pv.n.0\n      image: b\n")


def test_other_fields_of_a_function_are_copied_as_given() -> None:
    function = {"image": "i", "configPath": "cfg.yaml", "selectors": [{"kind": "Deployment"}],
                "exclude": [{"name": "x"}], "name": "f"}
    out = edit_kptfile_pipeline("pv", {"mutators": [function]}, HEAD)
    assert out.endswith("""\
pipeline:
  mutators:
    - name: PackageVariant.pv.f.0
      image: i
      configPath: cfg.yaml
      selectors:
        - kind: Deployment
      exclude:
        - name: x
""")


# --- which entries are ours ------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "ours"), [
    ("PackageVariant.pv.fn.0", True),
    ("PackageVariant.pv..12", True),
    ("PackageVariant.pv.fn.+3", True),  # Go's Atoi takes a sign
    ("PackageVariant.pv.fn.-3", True),
    ("PackageVariant.pv.fn.9223372036854775807", True),
    ("PackageVariant.pv.fn.9223372036854775808", False),  # out of int64: Atoi fails
    ("PackageVariant.pv.fn.3a", False),
    ("PackageVariant.pv.fn.", False),
    ("PackageVariant.pv.fn", False),
    ("PackageVariant.pv.a.b.0", False),  # five parts, and not one of this call's names
    ("PackageVariant.other.fn.0", False),
    ("packagevariant.pv.fn.0", False),
    ("set-labels", False),
    (None, False),
])
def test_porchs_rule_for_our_entries_holds_for_a_variant_name_without_dots(name: str | None, ours: bool) -> None:
    assert is_variant_function(name, "pv") is ours


def test_a_name_this_call_generates_is_ours_even_with_dots() -> None:
    name = variant_function_name("pv", "a.b", 0)
    assert name == "PackageVariant.pv.a.b.0"
    assert is_variant_function(name, "pv", frozenset({name}))
    assert not is_variant_function(name, "pv")


def test_a_dotted_variant_name_recognises_its_entries() -> None:
    assert is_variant_function("PackageVariant.team.alpha.fn.0", "team.alpha")
    assert not is_variant_function("PackageVariant.team.alpha.fn.0", "team")  # fn part "alpha.fn" has a dot


@pytest.mark.parametrize(("pv", "function"), [("team.alpha", "labels"), ("pv", "set.labels"), ("a.b", "c.d")])
def test_dotted_names_do_not_make_the_edit_repeat_itself(pv: str, function: str) -> None:
    pipeline = {"mutators": [{"name": function, "image": "img"}]}
    once = edit_kptfile_pipeline(pv, pipeline, KPTFILE)
    twice = edit_kptfile_pipeline(pv, pipeline, once)
    assert twice is once
    assert once.count(variant_function_name(pv, function, 0)) == 1


def test_the_residual_ambiguity_a_dotted_variant_claims_a_dotless_variants_dotted_function() -> None:
    # variant "a" with function "b.c" and variant "a.b" with function "c" both write PackageVariant.a.b.c.0
    name = variant_function_name("a", "b.c", 0)
    assert is_variant_function(name, "a.b")
    assert not is_variant_function(name, "a")


def test_a_dotted_variant_removes_its_entries_when_its_pipeline_goes() -> None:
    once = edit_kptfile_pipeline("team.alpha", {"mutators": [{"name": "labels", "image": "img"}]}, HEAD)
    assert edit_kptfile_pipeline("team.alpha", None, once) == HEAD


# --- errors ----------------------------------------------------------------------------------------------


def test_a_kptfile_that_is_not_yaml_is_an_error() -> None:
    with pytest.raises(MutationError) as err:
        edit_kptfile_pipeline("pv", None, "kind: Kptfile\nmetadata: {name: [\n", prr="ns/p")
    assert str(err.value).startswith(
        'failed to parse "Kptfile" of PackageRevisionResources ns/p: failed to parse input bytes: yaml: line '
    )


def test_a_kptfile_with_two_objects_is_an_error() -> None:
    with pytest.raises(MutationError) as err:
        edit_kptfile_pipeline("pv", None, HEAD + "---\n" + HEAD, prr="ns/p")
    assert str(err.value) == (
        'failed to parse "Kptfile" of PackageRevisionResources ns/p: expected exactly one object, got 2'
    )


@pytest.mark.parametrize(("pipeline", "message"), [
    ("pipeline:\n  mutators: {a: b}\n", "pipeline.mutators in the Kptfile is not a list"),
    ("pipeline:\n  validators:\n    - just-a-string\n",
     "pipeline.validators[0] in the Kptfile is not a function (a mapping)"),
    ("pipeline:\n  mutators:\n    - name: 5\n",
     "could not retrieve field name: pipeline.mutators[0].name is not a string"),
])
def test_a_malformed_pipeline_is_an_error(pipeline: str, message: str) -> None:
    with pytest.raises(MutationError) as err:
        edit_kptfile_pipeline("pv", None, HEAD + pipeline)
    assert str(err.value) == message



# --- the Kptfile's text ------------------------------------------------------------------------------------


def test_a_crlf_kptfile_stays_crlf() -> None:
    text = KPTFILE.replace("\n", "\r\n")
    out = edit_kptfile_pipeline("pv", {"mutators": [LABELS]}, text)
    assert "\n" not in out.replace("\r\n", "")
    assert out.replace("\r\n", "\n") == edit_kptfile_pipeline("pv", {"mutators": [LABELS]}, KPTFILE)


def test_a_flow_style_pipeline_keeps_its_entries_in_braces() -> None:
    text = HEAD + "pipeline:\n  mutators: [{image: gcr.io/kpt-fn/set-labels:v0.2}]\n"
    out = edit_kptfile_pipeline("pv", {"mutators": [{"name": "ns", "image": "set-namespace"}]}, text)
    assert out == HEAD + ("pipeline:\n  mutators: [{name: PackageVariant.pv.ns.0, image: set-namespace}, "
                          "{image: gcr.io/kpt-fn/set-labels:v0.2}]\n")


def test_parts_of_the_kptfile_in_another_style_than_the_pipeline_keep_their_style() -> None:
    # kpt writes compact sequences; a hand-edited pipeline is wide: neither changes the other
    text = """\
apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: app
upstreamLock:
  type:    git
info:
  readinessGates:
  - conditionType: a
  - conditionType: b
pipeline:
  mutators:
    - image: gcr.io/kpt-fn/set-labels:v0.2
    - image: gcr.io/kpt-fn/apply-setters:v0.2
status:
  conditions:
  - type: a
    status: "True"
"""
    out = edit_kptfile_pipeline("pv", {"mutators": [{"name": "ns", "image": "set-namespace"}]}, text)
    assert out == text.replace("  mutators:\n", "  mutators:\n    - name: PackageVariant.pv.ns.0\n"
                                                "      image: set-namespace\n")


def test_a_kptfile_with_tabs_between_key_and_value_can_be_edited() -> None:
    text = HEAD.replace("name: app", "name:\tapp")
    out = edit_kptfile_pipeline("pv", {"mutators": [{"image": "x"}]}, text)
    assert out == text + "pipeline:\n  mutators:\n    - name: PackageVariant.pv..0\n      image: x\n"


def test_fields_of_a_function_that_are_empty_are_left_out_as_porch_leaves_them_out() -> None:
    function = {"name": "ns", "image": "set-namespace", "exec": "", "configPath": None, "configMap": {},
                "selectors": [{"kind": "Deployment", "name": ""}], "exclude": []}
    out = edit_kptfile_pipeline("pv", {"mutators": [function]}, HEAD)
    assert out == HEAD + ("pipeline:\n  mutators:\n    - name: PackageVariant.pv.ns.0\n      image: set-namespace\n"
                          "      selectors:\n        - kind: Deployment\n")
