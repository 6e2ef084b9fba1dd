"""porchvariant.render: PackageVariantSet targets, templates, names and the PackageVariants they make."""

from __future__ import annotations

import copy
import hashlib
from datetime import date
from typing import Any

import pytest

from porchvariant import cel, render
from porchvariant.errors import TemplateError
from porchvariant.render import (
    expand_targets,
    find_set_upstream,
    package_variant_identifier,
    package_variant_name,
    render_package_variants,
    upstream_not_found_message,
)

UPSTREAM = {"repo": "blueprints", "package": "base", "workspaceName": "v1"}
UPSTREAM_PR = {
    "apiVersion": "porch.kpt.dev/v1alpha1", "kind": "PackageRevision",
    "metadata": {"name": "blueprints.base.v1", "namespace": "ns",
                 "labels": {"vendor": "acme"}, "annotations": {"acme.com/team": "platform"}},
    "spec": {"repository": "blueprints", "packageName": "base", "workspaceName": "v1", "revision": 1,
             "lifecycle": "Published"},
}


@pytest.fixture(params=cel.ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    if request.param not in cel.available_engines():
        pytest.skip(f"{request.param} is not installed")
    return str(request.param)


def repository(name: str, namespace: str = "ns", labels: dict[str, str] | None = None,
               annotations: dict[str, str] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels is not None:
        metadata["labels"] = labels
    if annotations is not None:
        metadata["annotations"] = annotations
    return {"apiVersion": "config.porch.kpt.dev/v1alpha1", "kind": "Repository", "metadata": metadata,
            "spec": {"type": "git", "git": {"repo": f"https://example.com/{name}.git"}}}


def team(name: str, namespace: str = "ns", labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Team",
            "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
            "spec": {"owner": f"{name}@example.com"}, "status": {"ready": True}}


def package_variant_set(*targets: dict[str, Any], upstream: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"apiVersion": "config.porch.kpt.dev/v1alpha2", "kind": "PackageVariantSet",
            "metadata": {"name": "set", "namespace": "ns", "uid": "uid-1"},
            "spec": {"upstream": dict(upstream or UPSTREAM), "targets": list(targets)}}


REPOSITORIES = [
    repository("prod", labels={"env": "prod", "region": "eu"}, annotations={"owner": "ops"}),
    repository("dev", labels={"env": "dev", "region": "us"}),
    repository("bare"),
    repository("prod", namespace="other", labels={"env": "prod", "region": "ap"}),
]


def specs(pvs: dict[str, Any], engine: str, repositories: list[dict[str, Any]] | None = None,
          target_objects: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    out = render_package_variants(pvs, UPSTREAM_PR, REPOSITORIES if repositories is None else repositories,
                                  target_objects or [], engine=engine)
    return [pv["spec"] for pv in out]


def only_spec(template: dict[str, Any] | None, engine: str, repo: str = "prod") -> dict[str, Any]:
    target: dict[str, Any] = {"repositories": [{"name": repo}]}
    if template is not None:
        target["template"] = template
    [spec] = specs(package_variant_set(target), engine)
    return spec


def template_error(pvs: dict[str, Any], engine: str, target_objects: list[dict[str, Any]] | None = None) -> str:
    with pytest.raises(TemplateError) as caught:
        render_package_variants(pvs, UPSTREAM_PR, REPOSITORIES, target_objects or [], engine=engine)
    return str(caught.value)


# --- target expansion (c.4) ------------------------------------------------------------------


def test_repositories_without_package_names_take_the_upstream_package() -> None:
    pvs = package_variant_set({"repositories": [{"name": "prod"}, {"name": "dev"}]})
    targets = expand_targets(pvs, REPOSITORIES, [])
    assert [(t.repo_default, t.package_default, t.obj, t.description) for t in targets] == [
        ("prod", "base", None, "repository prod"),
        ("dev", "base", None, "repository dev"),
    ]


def test_repositories_with_package_names_make_one_target_per_name() -> None:
    pvs = package_variant_set({"repositories": [{"name": "prod", "packageNames": ["a", "b"]}, {"name": "dev"}]})
    targets = expand_targets(pvs, REPOSITORIES, [])
    assert [(t.index, t.repo_default, t.package_default, t.description) for t in targets] == [
        (0, "prod", "a", "repository prod (package a)"),
        (0, "prod", "b", "repository prod (package b)"),
        (0, "dev", "base", "repository dev"),
    ]


def test_repository_selector_match_labels_selects_repositories_of_the_set_namespace_in_name_order() -> None:
    repositories = [repository("zeta", labels={"env": "prod"}), *REPOSITORIES]
    pvs = package_variant_set({"repositorySelector": {"matchLabels": {"env": "prod"}}})
    targets = expand_targets(pvs, repositories, [])
    assert [(t.repo_default, t.package_default, t.description) for t in targets] == [
        ("prod", "base", "Repository/prod"),
        ("zeta", "base", "Repository/zeta"),
    ]
    assert targets[0].obj is REPOSITORIES[0]


def test_repository_selector_match_expressions() -> None:
    pvs = package_variant_set({"repositorySelector": {"matchExpressions": [
        {"key": "env", "operator": "In", "values": ["prod", "dev"]},
        {"key": "region", "operator": "NotIn", "values": ["us"]},
    ]}})
    assert [t.repo_default for t in expand_targets(pvs, REPOSITORIES, [])] == ["prod"]


def test_empty_repository_selector_selects_every_repository_of_the_namespace() -> None:
    pvs = package_variant_set({"repositorySelector": {}})
    assert [t.repo_default for t in expand_targets(pvs, REPOSITORIES, [])] == ["bare", "dev", "prod"]


def test_object_selector_selects_its_kind_in_the_set_namespace_and_ignores_its_name() -> None:
    objects = [team("beta", labels={"tier": "gold"}), team("alpha", labels={"tier": "gold"}),
               team("gamma", labels={"tier": "silver"}), team("delta", namespace="other", labels={"tier": "gold"}),
               {**team("epsilon", labels={"tier": "gold"}), "kind": "Squad"},
               {**team("zeta", labels={"tier": "gold"}), "apiVersion": "example.com/v2"}]
    pvs = package_variant_set({"objectSelector": {"apiVersion": "example.com/v1", "kind": "Team", "name": "beta",
                                                  "matchLabels": {"tier": "gold"}}})
    targets = expand_targets(pvs, REPOSITORIES, objects)
    assert [(t.repo_default, t.package_default, t.description) for t in targets] == [
        ("alpha", "base", "Team/alpha"),
        ("beta", "base", "Team/beta"),
    ]


def test_object_selector_for_repositories_searches_the_repositories() -> None:
    pvs = package_variant_set({"objectSelector": {"apiVersion": "config.porch.kpt.dev/v1alpha1",
                                                  "kind": "Repository", "matchLabels": {"region": "us"}}})
    assert [t.description for t in expand_targets(pvs, REPOSITORIES, [])] == ["Repository/dev"]


def test_targets_expand_in_order_and_a_target_with_no_kind_is_skipped() -> None:
    pvs = package_variant_set({"repositorySelector": {"matchLabels": {"env": "dev"}}}, {"template": {}},
                              {"repositories": [{"name": "bare"}]})
    assert [(t.index, t.description) for t in expand_targets(pvs, REPOSITORIES, [])] == [
        (0, "Repository/dev"), (2, "repository bare")]


def test_label_selector_that_does_not_parse_names_the_target_field() -> None:
    pvs = package_variant_set({"repositorySelector": {"matchExpressions": [{"key": "env", "operator": "Near"}]}})
    with pytest.raises(TemplateError) as caught:
        expand_targets(pvs, REPOSITORIES, [])
    assert caught.value.field == "spec.targets[0].repositorySelector"
    assert str(caught.value).startswith("PackageVariantSet set: spec.targets[0].repositorySelector: invalid label "
                                        "selector")
    assert "'Near' is not a valid label selector operator" in str(caught.value)


# --- rendering one target (c.5) --------------------------------------------------------------


def test_no_template_gives_upstream_and_downstream_only_without_a_repository_lookup(engine: str) -> None:
    assert only_spec(None, engine, repo="not-registered") == {
        "upstream": UPSTREAM, "downstream": {"repo": "not-registered", "package": "base"}}


def test_an_empty_template_still_needs_the_repository(engine: str) -> None:
    pvs = package_variant_set({"repositories": [{"name": "not-registered"}], "template": {}})
    assert template_error(pvs, engine) == \
        'PackageVariantSet set, target repository not-registered: repository "not-registered" could not be loaded'


def test_plain_template_fields(engine: str) -> None:
    template = {
        "downstream": {"repo": "dev", "package": "edge"},
        "adoptionPolicy": "adoptExisting", "deletionPolicy": "orphan",
        "labels": {"b": "2", "a": "1"}, "annotations": {"note": "x"},
        "packageContext": {"data": {"k": "v"}, "removeKeys": ["z", "y", "z"]},
        "injectors": [{"group": "", "version": "v1", "kind": "ConfigMap", "name": "cfg"}, {"name": "any"}],
        "pipeline": {"validators": [{"image": "kubeval:v1", "name": "check"}],
                     "mutators": [{"image": "set-labels:v1", "configMap": {"k": "v"}, "configPath": ""}]},
    }
    assert only_spec(template, engine) == {
        "upstream": UPSTREAM,
        "downstream": {"repo": "dev", "package": "edge"},
        "adoptionPolicy": "adoptExisting", "deletionPolicy": "orphan",
        "labels": {"a": "1", "b": "2"}, "annotations": {"note": "x"},
        "packageContext": {"data": {"k": "v"}, "removeKeys": ["y", "z"]},
        "pipeline": {"validators": [{"image": "kubeval:v1", "name": "check"}],
                     "mutators": [{"image": "set-labels:v1", "configMap": {"k": "v"}}]},
        "injectors": [{"group": "", "version": "v1", "kind": "ConfigMap", "name": "cfg"}, {"name": "any"}],
    }


def test_empty_plain_strings_count_as_unset(engine: str) -> None:
    template = {"downstream": {"repo": "", "package": "", "repoExpr": "", "packageExpr": ""},
                "adoptionPolicy": "", "injectors": [{"name": "", "nameExpr": ""}]}
    assert only_spec(template, engine) == {
        "upstream": UPSTREAM, "downstream": {"repo": "prod", "package": "base"}, "injectors": [{"name": ""}]}


def test_expression_fields(engine: str) -> None:
    template = {
        "downstream": {"repoExpr": "'dev'", "packageExpr": "repoDefault + '-' + packageDefault"},
        "labels": {"foo": "bar", "hello": "there"},
        "labelExprs": [{"key": "foo", "valueExpr": "repoDefault"},
                       {"keyExpr": "repository.labels['region']",
                        "valueExpr": "packageDefault + '-' + repository.name"},
                       {"key": "hello", "value": "goodbye"}],
        "annotations": {"acme.com/id": "123"},
        "annotationExprs": [{"key": "acme.com/id", "value": "456"},
                            {"key": "acme.com/team", "valueExpr": "upstream.annotations['acme.com/team']"}],
        "packageContext": {"data": {"foo": "bar"},
                           "dataExprs": [{"key": "foo", "valueExpr": "upstream.name"},
                                         {"keyExpr": "upstream.namespace", "value": "here"}],
                           "removeKeys": ["old"], "removeKeyExprs": ["repository.labels['env']"]},
        "injectors": [{"kind": "ConfigMap", "nameExpr": "repository.name + '-config'"}],
        "pipeline": {"mutators": [{"image": "set-labels:v1", "configMap": {"k1": "v1", "k2": "v2"},
                                   "configMapExprs": [{"key": "k1", "valueExpr": "repository.name"},
                                                      {"keyExpr": "'k3'", "value": "bar"}]}]},
    }
    assert only_spec(template, engine) == {
        "upstream": UPSTREAM,
        "downstream": {"repo": "dev", "package": "prod-base"},
        "labels": {"foo": "prod", "hello": "goodbye", "us": "base-dev"},
        "annotations": {"acme.com/id": "456", "acme.com/team": "platform"},
        "packageContext": {"data": {"foo": "blueprints.base.v1", "ns": "here"}, "removeKeys": ["dev", "old"]},
        "pipeline": {"mutators": [{"image": "set-labels:v1", "configMap": {"k1": "dev", "k2": "v2", "k3": "bar"}}]},
        "injectors": [{"kind": "ConfigMap", "name": "dev-config"}],
    }


def test_repo_expr_cannot_see_the_repository(engine: str) -> None:
    pvs = package_variant_set({"repositories": [{"name": "prod"}],
                               "template": {"downstream": {"repoExpr": "repository.name"}}})
    assert template_error(pvs, engine) == ("PackageVariantSet set, target repository prod: "
                                           "template.downstream.repoExpr: no such attribute(s): repository")


def test_package_expr_sees_the_repository_chosen_by_repo_expr(engine: str) -> None:
    template = {"downstream": {"repoExpr": "repoDefault == 'prod' ? 'dev' : 'prod'",
                               "packageExpr": "repository.name + '-' + repository.labels['region']"}}
    assert only_spec(template, engine)["downstream"] == {"repo": "dev", "package": "dev-us"}


def test_repository_that_repo_expr_names_must_exist_in_the_set_namespace(engine: str) -> None:
    pvs = package_variant_set({"repositorySelector": {"matchLabels": {"env": "prod"}},
                               "template": {"downstream": {"repoExpr": "target.name + '-mirror'"}}})
    assert template_error(pvs, engine) == \
        'PackageVariantSet set, target Repository/prod: repository "prod-mirror" could not be loaded'


def test_selected_object_is_seen_as_name_namespace_labels_and_annotations_only(engine: str) -> None:
    template = {"labelExprs": [
        {"key": "view", "valueExpr": "string(size(target)) + ':' + target.name + ':' + target.namespace"},
        {"key": "tier", "valueExpr": "target.labels['tier']"},
        {"key": "notes", "valueExpr": "string(size(target.annotations))"},
    ]}
    pvs = package_variant_set({"objectSelector": {"apiVersion": "example.com/v1", "kind": "Team"},
                               "template": {**template, "downstream": {"repo": "prod"}}})
    [spec] = specs(pvs, engine, target_objects=[team("alpha", labels={"tier": "gold"})])
    assert spec["labels"] == {"notes": "0", "tier": "gold", "view": "4:alpha:ns"}
    for hidden in ("spec", "status", "kind", "apiVersion", "metadata"):
        bad = package_variant_set({"objectSelector": {"apiVersion": "example.com/v1", "kind": "Team"},
                                   "template": {"downstream": {"repo": "prod"},
                                                "labelExprs": [{"key": "x", "valueExpr": f"target.{hidden}"}]}})
        assert template_error(bad, engine, [team("alpha")]) == (
            f"PackageVariantSet set, target Team/alpha: template.labelExprs[0].valueExpr: no such key: {hidden}")


def test_a_listed_repository_target_is_seen_as_repo_and_package(engine: str) -> None:
    template = {"labelExprs": [{"key": "t", "valueExpr": "string(size(target)) + ':' + target.repo + '/' + "
                                                         "target.package"}]}
    target = {"repositories": [{"name": "prod", "packageNames": ["edge"]}], "template": template}
    [spec] = specs(package_variant_set(target), engine)
    assert spec["labels"] == {"t": "2:prod/edge"}
    bad = {"repositories": [{"name": "prod"}], "template": {"labelExprs": [{"key": "t", "valueExpr": "target.name"}]}}
    assert template_error(package_variant_set(bad), engine) == \
        "PackageVariantSet set, target repository prod: template.labelExprs[0].valueExpr: no such key: name"


def test_missing_labels_are_an_empty_map(engine: str) -> None:
    template = {"labelExprs": [{"key": "has", "valueExpr": "'env' in repository.labels ? 'yes' : 'no'"},
                               {"key": "count", "valueExpr": "string(size(target.annotations))"}]}
    pvs = package_variant_set({"repositorySelector": {"matchExpressions": [{"key": "env", "operator": "DoesNotExist"}]},
                               "template": template})
    [spec] = specs(pvs, engine)
    assert spec["labels"] == {"count": "0", "has": "no"}
    bad = package_variant_set({"repositories": [{"name": "bare"}],
                               "template": {"labelExprs": [{"key": "e", "valueExpr": "repository.labels['env']"}]}})
    assert template_error(bad, engine) == \
        "PackageVariantSet set, target repository bare: template.labelExprs[0].valueExpr: no such key: env"


def test_upstream_is_the_view_of_the_upstream_package_revision(engine: str) -> None:
    template = {"labelExprs": [{"key": "up", "valueExpr": "upstream.name + ':' + upstream.namespace + ':' + "
                                                          "upstream.labels['vendor'] + ':' + string(size(upstream))"}]}
    assert only_spec(template, engine)["labels"] == {"up": "blueprints.base.v1:ns:acme:4"}
    bad = package_variant_set({"repositories": [{"name": "prod"}],
                               "template": {"labelExprs": [{"key": "x", "valueExpr": "upstream.spec"}]}})
    assert template_error(bad, engine) == \
        "PackageVariantSet set, target repository prod: template.labelExprs[0].valueExpr: no such key: spec"


def test_overlay_applies_entries_in_order_over_the_plain_map(engine: str) -> None:
    template = {"labels": {"a": "plain", "b": "plain"},
                "labelExprs": [{"key": "a", "value": "first"}, {"key": "a", "valueExpr": "'second'"},
                               {"keyExpr": "'b'", "value": "third"}, {"value": "no key"}]}
    assert only_spec(template, engine)["labels"] == {"": "no key", "a": "second", "b": "third"}


def test_empty_maps_and_lists_are_left_out(engine: str) -> None:
    template = {"labels": {}, "labelExprs": [], "annotations": {}, "injectors": [],
                "pipeline": {"validators": [], "mutators": []}}
    assert only_spec(template, engine) == {"upstream": UPSTREAM, "downstream": {"repo": "prod", "package": "base"}}


def test_a_present_but_empty_package_context_stays(engine: str) -> None:
    # Porch keeps the non-nil pointer; the PackageVariant then has nothing to change.
    assert only_spec({"packageContext": {}}, engine)["packageContext"] == {}


def test_remove_keys_are_the_sorted_set_of_plain_and_evaluated_keys(engine: str) -> None:
    template = {"packageContext": {"removeKeys": ["b", "a"],
                                   "removeKeyExprs": ["'c'", "'a'", "repository.labels['region']"]}}
    assert only_spec(template, engine)["packageContext"] == {"removeKeys": ["a", "b", "c", "eu"]}


def test_pipeline_functions_drop_config_map_exprs_and_keep_their_other_fields(engine: str) -> None:
    selectors = [{"kind": "Deployment"}]
    template = {"pipeline": {"validators": [{"image": "check:v1", "name": "v", "selectors": selectors,
                                             "configMapExprs": []}],
                             "mutators": [{"image": "m:v1", "configMapExprs": [{"key": "k1", "value": "yo"}]}]}}
    pipeline = only_spec(template, engine)["pipeline"]
    assert pipeline == {"validators": [{"image": "check:v1", "name": "v", "selectors": [{"kind": "Deployment"}]}],
                        "mutators": [{"image": "m:v1", "configMap": {"k1": "yo"}}]}
    assert pipeline["validators"][0]["selectors"] is not selectors


def test_upstream_is_copied_verbatim_and_not_shared(engine: str) -> None:
    upstream = {"repo": "blueprints", "package": "base", "revision": 3}
    pvs = package_variant_set({"repositories": [{"name": "prod"}]}, upstream=upstream)
    [pv] = render_package_variants(pvs, UPSTREAM_PR, REPOSITORIES, [], engine=engine)
    assert pv["spec"]["upstream"] == {"repo": "blueprints", "package": "base", "revision": 3}
    pv["spec"]["upstream"]["repo"] = "changed"
    assert pvs["spec"]["upstream"]["repo"] == "blueprints"


# --- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("template", "field"), [
    ({"labelExprs": [{"keyExpr": "repository.labels['zone']", "value": "x"}]}, "template.labelExprs[0].keyExpr"),
    ({"annotationExprs": [{"key": "a", "valueExpr": "repository.annotations['zone']"}]},
     "template.annotationExprs[0].valueExpr"),
    ({"injectors": [{"name": "fixed"}, {"nameExpr": "repository.annotations['zone']"}]},
     "template.injectors[1].nameExpr"),
    ({"pipeline": {"validators": [{"image": "v:1"}], "mutators": [{"image": "m:1", "configMapExprs": [
        {"key": "a", "value": "1"}, {"key": "b", "valueExpr": "'2'"},
        {"key": "c", "valueExpr": "upstream.labels['zone']"},
    ]}]}}, "template.pipeline.mutators[0].configMapExprs[2].valueExpr"),
    ({"packageContext": {"removeKeyExprs": ["repository.labels['zone']"]}},
     "template.packageContext.removeKeyExprs[0]"),
    ({"packageContext": {"dataExprs": [{"key": "k", "valueExpr": "repository.labels['zone']"}]}},
     "template.packageContext.dataExprs[0].valueExpr"),
    ({"downstream": {"packageExpr": "repository.labels['zone']"}}, "template.downstream.packageExpr"),
])
def test_evaluation_error_names_the_set_the_target_and_the_field(engine: str, template: dict[str, Any],
                                                                 field: str) -> None:
    pvs = package_variant_set({"repositories": [{"name": "dev"}]}, {"repositories": [{"name": "prod"}],
                                                                    "template": template})
    with pytest.raises(TemplateError) as caught:
        render_package_variants(pvs, UPSTREAM_PR, REPOSITORIES, [], engine=engine)
    assert (caught.value.pvs, caught.value.target, caught.value.field) == ("set", "repository prod", field)
    assert str(caught.value) == f"PackageVariantSet set, target repository prod: {field}: no such key: zone"


def test_result_that_is_not_a_string_names_the_field(engine: str) -> None:
    pvs = package_variant_set({"objectSelector": {"apiVersion": "example.com/v1", "kind": "Team"},
                               "template": {"downstream": {"repo": "prod"},
                                            "labelExprs": [{"key": "n", "valueExpr": "size(target.labels)"}]}})
    assert template_error(pvs, engine, [team("alpha")]) == ("PackageVariantSet set, target Team/alpha: "
                                                            "template.labelExprs[0].valueExpr: expression returned "
                                                            "non-string value: 0 (int)")


def test_compile_error_names_the_field_and_the_first_target(engine: str) -> None:
    pvs = package_variant_set({"repositorySelector": {}, "template": {
        "labelExprs": [{"key": "ok", "value": "1"}, {"key": "bad", "valueExpr": "nope"}]}})
    assert template_error(pvs, engine) == ("PackageVariantSet set, target Repository/bare: "
                                           "template.labelExprs[1].valueExpr: ERROR: <input>:1:1: undeclared "
                                           "reference to 'nope' (in container '')")


def test_first_compile_error_is_in_evaluation_order(engine: str) -> None:
    pvs = package_variant_set({"repositories": [{"name": "prod"}], "template": {
        "pipeline": {"mutators": [{"image": "m", "configMapExprs": [{"key": "a", "valueExpr": "bad1"}]}]},
        "injectors": [{"nameExpr": "bad2"}],
        "downstream": {"packageExpr": "bad3"}}})
    with pytest.raises(TemplateError) as caught:
        render_package_variants(pvs, UPSTREAM_PR, REPOSITORIES, [], engine=engine)
    assert caught.value.field == "template.downstream.packageExpr"


# --- compiled once ------------------------------------------------------------------------------


def test_each_target_template_is_compiled_once_whatever_the_number_of_targets(
        engine: str, monkeypatch: pytest.MonkeyPatch) -> None:
    compiled: list[str] = []
    real = cel.compile_expression

    def counting(text: str, *, engine: str | None = None) -> cel.Expression:
        compiled.append(text)
        return real(text, engine=engine)

    monkeypatch.setattr(render.cel, "compile_expression", counting)
    template = {"downstream": {"packageExpr": "packageDefault + '-' + repoDefault"},
                "labelExprs": [{"keyExpr": "'env'", "valueExpr": "repository.labels['env']"}],
                "injectors": [{"nameExpr": "repository.name"}]}
    pvs = package_variant_set({"repositorySelector": {"matchExpressions": [{"key": "env", "operator": "Exists"}]},
                               "template": template},
                              {"repositories": [{"name": "prod"}, {"name": "dev"},
                                                {"name": "prod", "packageNames": ["x"]}],
                               "template": template})
    out = render_package_variants(pvs, UPSTREAM_PR, REPOSITORIES, [], engine=engine)
    assert [pv["metadata"]["name"] for pv in out] == ["set-dev-base-dev", "set-prod-base-prod", "set-prod-x-prod"]
    assert compiled == ["packageDefault + '-' + repoDefault", "'env'", "repository.labels['env']",
                        "repository.name"] * 2


def test_expression_that_reads_no_target_variable_is_evaluated_once_per_template(
        engine: str, monkeypatch: pytest.MonkeyPatch) -> None:
    evaluated: list[str] = []
    real = cel.compile_expression

    class Counting(cel.Expression):
        def __init__(self, inner: cel.Expression) -> None:
            self.inner, self.engine, self.text = inner, inner.engine, inner.text

        def evaluate(self, variables: Any) -> str:
            evaluated.append(self.text)
            return self.inner.evaluate(variables)

    monkeypatch.setattr(render.cel, "compile_expression",
                        lambda text, *, engine=None: Counting(real(text, engine=engine)))
    template = {"labelExprs": [{"key": "up", "valueExpr": "upstream.name + '/x'"},
                               {"key": "t", "valueExpr": "target.name"},
                               # naming a per-target variable anywhere, even in a string, counts as reading it
                               {"key": "s", "valueExpr": "upstream.name + '/target'"}]}
    out = specs(package_variant_set({"repositorySelector": {}, "template": template}), engine)
    assert [spec["labels"] for spec in out] == [
        {"s": "blueprints.base.v1/target", "t": name, "up": "blueprints.base.v1/x"} for name in ("bare", "dev", "prod")]
    assert sorted(evaluated) == ["target.name"] * 3 + ["upstream.name + '/target'"] * 3 + ["upstream.name + '/x'"]


@pytest.mark.parametrize("text", [
    "'target-' + target.name",
    "r\"it's\" + target.name",       # a quote of the other kind does not end a string
    "'\\'' + target.name",       # an escaped quote does not end a string
    "'''a ' b''' + target.name",
    "upstream.labels.exists(k, k == target.name) ? 'in' : target.name",
])
def test_expression_that_reads_a_target_variable_is_evaluated_for_each_target(engine: str, text: str) -> None:
    template = {"labelExprs": [{"key": "v", "valueExpr": text}]}
    out = specs(package_variant_set({"repositorySelector": {}, "template": template}), engine)
    values = [spec["labels"]["v"] for spec in out]
    assert len(set(values)) == 3 and all(value.endswith(name) for value, name in zip(values, ("bare", "dev", "prod"),
                                                                                     strict=True))


def test_a_target_that_selects_nothing_is_not_compiled(engine: str) -> None:
    # As in Porch, a template is only ever evaluated for a target, so with none it cannot fail.
    pvs = package_variant_set({"repositorySelector": {"matchLabels": {"env": "staging"}},
                               "template": {"labelExprs": [{"key": "x", "valueExpr": "nope("}]}})
    assert render_package_variants(pvs, UPSTREAM_PR, REPOSITORIES, [], engine=engine) == []


# --- PackageVariant objects and names (c.6) ---------------------------------------------------


def test_package_variant_object_is_owned_labelled_and_finalized(engine: str) -> None:
    pvs = package_variant_set({"repositories": [{"name": "prod"}]})
    assert render_package_variants(pvs, UPSTREAM_PR, REPOSITORIES, [], engine=engine) == [{
        "apiVersion": "config.porch.kpt.dev/v1alpha1",
        "kind": "PackageVariant",
        "metadata": {
            "name": "set-prod-base",
            "namespace": "ns",
            "finalizers": ["config.porch.kpt.dev/packagevariants"],
            "labels": {"config.porch.kpt.dev/packagevariantset": "uid-1"},
            "ownerReferences": [{"apiVersion": "config.porch.kpt.dev/v1alpha2", "kind": "PackageVariantSet",
                                 "name": "set", "uid": "uid-1", "controller": True}],
        },
        "spec": {"upstream": UPSTREAM, "downstream": {"repo": "prod", "package": "base"}},
    }]


def test_owner_reference_defaults_the_set_type_when_the_object_lacks_it(engine: str) -> None:
    pvs = package_variant_set({"repositories": [{"name": "prod"}]})
    del pvs["apiVersion"], pvs["kind"]
    [pv] = render_package_variants(pvs, UPSTREAM_PR, REPOSITORIES, [], engine=engine)
    assert pv["metadata"]["ownerReferences"][0]["apiVersion"] == "config.porch.kpt.dev/v1alpha2"
    assert pv["metadata"]["ownerReferences"][0]["kind"] == "PackageVariantSet"


def test_duplicate_identifiers_keep_the_last_rendering_in_the_first_place(engine: str) -> None:
    pvs = package_variant_set(
        {"repositories": [{"name": "prod"}], "template": {"labels": {"from": "first"}}},
        {"repositories": [{"name": "dev"}]},
        {"repositorySelector": {"matchLabels": {"env": "prod"}}, "template": {"labels": {"from": "last"}}})
    out = render_package_variants(pvs, UPSTREAM_PR, REPOSITORIES, [], engine=engine)
    assert [(pv["metadata"]["name"], pv["spec"].get("labels")) for pv in out] == [
        ("set-prod-base", {"from": "last"}), ("set-dev-base", None)]


def test_identifier_is_set_repo_and_package() -> None:
    assert package_variant_identifier("set", {"downstream": {"repo": "prod", "package": "a/b"}}) == "set-prod-a/b"
    assert package_variant_identifier("set", {"downstream": {"repo": "prod"}}) == "set-prod-"


@pytest.mark.parametrize("identifier", ["set-prod-base", "set-prod-my.pkg", "s" * 63])
def test_valid_identifier_of_at_most_63_characters_is_the_name(identifier: str) -> None:
    assert package_variant_name(identifier) == identifier


def test_longer_identifier_is_cut_to_54_characters_and_a_sha1_prefix() -> None:
    identifier = "set-" + "r" * 30 + "-" + "p" * 30
    assert len(identifier) == 65
    assert package_variant_name(identifier) == "set-rrrrrrrrrrrrrrrrrrrrrrrrrrrrrr-ppppppppppppppppppp-8630d22a"
    assert package_variant_name(identifier) == identifier[:54] + "-" + hashlib.sha1(identifier.encode()).hexdigest()[:8]


def test_porch_name_is_kept_when_the_cut_removes_the_invalid_characters() -> None:
    identifier = "set-" + "x" * 50 + "-" + "Y/" * 10
    assert package_variant_name(identifier) == "set-" + "x" * 50 + "-1bef3fdb"


@pytest.mark.parametrize(("identifier", "name"), [
    ("set-prod-a/b", "set-prod-a-b-dd378d83"),
    ("set-Prod-base", "set-prod-base-f9658a3d"),
    ("a" * 53 + "." + "b" * 20, "a" * 53 + "-b245ee49"),  # Porch's cut would end in ".-"
    ("--/--", "f743ec9e"),
])
def test_identifier_that_would_make_an_invalid_name_is_sanitised_and_hashed(identifier: str, name: str) -> None:
    assert package_variant_name(identifier) == name
    assert name.endswith(hashlib.sha1(identifier.encode()).hexdigest()[:8])
    assert len(name) <= 63
    assert name == name.lower() and "/" not in name and not name.startswith("-")


def test_sanitised_names_of_different_identifiers_differ() -> None:
    names = {package_variant_name(i) for i in ("set-prod-a/b", "set-prod-a-b", "set-prod-A/b", "set-prod-a_b")}
    assert len(names) == 4


def test_package_path_in_the_template_gives_a_valid_name(engine: str) -> None:
    pvs = package_variant_set({"repositories": [{"name": "prod"}],
                               "template": {"downstream": {"package": "sites/edge"}}})
    [pv] = render_package_variants(pvs, UPSTREAM_PR, REPOSITORIES, [], engine=engine)
    assert pv["metadata"]["name"] == "set-prod-sites-edge-" + hashlib.sha1(b"set-prod-sites/edge").hexdigest()[:8]
    assert pv["spec"]["downstream"] == {"repo": "prod", "package": "sites/edge"}


# --- the set's upstream (c.3) ---------------------------------------------------------------------


def revision(name: str, *, repo: str = "blueprints", package: str = "base", workspace: str = "v1",
             number: int = 1, namespace: str = "ns") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace},
            "spec": {"repository": repo, "packageName": package, "workspaceName": workspace, "revision": number}}


def test_upstream_matches_by_workspace_name() -> None:
    revisions = [revision("other-repo", repo="catalog"), revision("other-package", package="edge"),
                 revision("other-ns", namespace="elsewhere"), revision("v2", workspace="v2", number=2),
                 revision("v1"), revision("v1-again")]
    found = find_set_upstream(package_variant_set(), revisions)
    assert found is not None and found["metadata"]["name"] == "v1"


def test_upstream_matches_by_revision() -> None:
    pvs = package_variant_set(upstream={"repo": "blueprints", "package": "base", "revision": 2})
    found = find_set_upstream(pvs, [revision("v1"), revision("v2", workspace="second", number=2)])
    assert found is not None and found["metadata"]["name"] == "v2"


def test_unset_revision_matches_any_draft_as_in_porch() -> None:
    revisions = [revision("draft", workspace="wip", number=0), revision("v1")]
    found = find_set_upstream(package_variant_set(), revisions)
    assert found is not None and found["metadata"]["name"] == "draft"


def test_upstream_not_found_returns_none_and_porch_has_a_message_for_it() -> None:
    pvs = package_variant_set(upstream={"repo": "blueprints", "package": "base", "workspaceName": "v9"})
    assert find_set_upstream(pvs, [revision("v1")]) is None
    assert upstream_not_found_message(pvs) == "could not find upstream package revision 'base/0' in repo 'blueprints'"
    pvs["spec"]["upstream"]["revision"] = 4
    assert upstream_not_found_message(pvs) == "could not find upstream package revision 'base/4' in repo 'blueprints'"


def test_rendering_does_not_change_its_inputs(engine: str) -> None:
    pvs = package_variant_set({"repositorySelector": {}, "template": {
        "labels": {"a": "1"}, "labelExprs": [{"key": "b", "valueExpr": "target.name"}],
        "pipeline": {"mutators": [{"image": "m", "configMap": {"k": "v"}, "selectors": [{"kind": "X"}]}]}}})
    before = copy.deepcopy((pvs, REPOSITORIES, UPSTREAM_PR))
    out = render_package_variants(pvs, UPSTREAM_PR, REPOSITORIES, [], engine=engine)
    out[0]["spec"]["labels"]["a"] = "changed"
    out[0]["spec"]["pipeline"]["mutators"][0]["selectors"][0]["kind"] = "Y"
    assert (pvs, REPOSITORIES, UPSTREAM_PR) == before


# --- review fixes -------------------------------------------------------------------------------


@pytest.mark.parametrize(("template", "expected"), [
    # Porch compiles each expression when it first evaluates it, so an earlier failure wins.
    ({"downstream": {"repoExpr": "'missing'"}, "labelExprs": [{"key": "a", "valueExpr": "nope"}]},
     'PackageVariantSet set, target repository prod: repository "missing" could not be loaded'),
    ({"downstream": {"repoExpr": "target.name"}, "labelExprs": [{"key": "a", "valueExpr": "nope"}]},
     "PackageVariantSet set, target repository prod: template.downstream.repoExpr: no such key: name"),
    ({"labelExprs": [{"key": "a", "valueExpr": "repository.labels['zone']"}],
      "annotationExprs": [{"key": "b", "valueExpr": "nope"}]},
     "PackageVariantSet set, target repository prod: template.labelExprs[0].valueExpr: no such key: zone"),
])
def test_a_compile_error_does_not_hide_an_earlier_failure(engine: str, template: dict[str, Any],
                                                          expected: str) -> None:
    pvs = package_variant_set({"repositories": [{"name": "prod"}], "template": template})
    assert template_error(pvs, engine) == expected


@pytest.mark.parametrize("text", [
    # A quote in a comment is no string: these read target.name although no literal names it.
    "upstream.name // '''\n + target.name + '''a''' // '''",
    "upstream.name // it's\n + target.name // isn't it",
])
def test_comments_do_not_hide_a_target_variable(engine: str, text: str) -> None:
    template = {"labelExprs": [{"key": "v", "valueExpr": text}]}
    out = specs(package_variant_set({"repositorySelector": {}, "template": template}), engine)
    assert [spec["labels"]["v"].removesuffix("a") for spec in out] == [
        f"blueprints.base.v1{name}" for name in ("bare", "dev", "prod")]


def test_objects_of_a_cluster_scoped_kind_are_selected_whatever_the_set_namespace(engine: str) -> None:
    # Porch lists a cluster-scoped kind without a namespace: every such object is a target.
    clusters = [{"apiVersion": "example.com/v1", "kind": "Site", "metadata": {"name": name, "labels": {"edge": "y"}}}
                for name in ("west", "east")]
    pvs = package_variant_set({"objectSelector": {"apiVersion": "example.com/v1", "kind": "Site",
                                                  "matchLabels": {"edge": "y"}}})
    assert [t.description for t in expand_targets(pvs, REPOSITORIES, clusters)] == ["Site/east", "Site/west"]


def test_nulls_and_unknown_fields_are_dropped_as_porchs_typed_spec_drops_them(engine: str) -> None:
    upstream = {"repo": "blueprints", "package": "base", "workspaceName": "v1", "revision": 0, "branch": "main"}
    template = {"labels": {"a": "1", "gone": None}, "annotations": {"gone": None},
                "packageContext": {"data": {"k": None}},
                "pipeline": {"mutators": [{"image": "m:v1", "configMap": {"k": None, "j": "v"}, "surprise": 1,
                                           "selectors": [{"kind": "X", "name": None, "extra": "y"}]}]}}
    pvs = package_variant_set({"repositories": [{"name": "prod"}], "template": template}, upstream=upstream)
    [spec] = specs(pvs, engine)
    assert spec == {"upstream": {"repo": "blueprints", "package": "base", "workspaceName": "v1"},
                    "downstream": {"repo": "prod", "package": "base"}, "labels": {"a": "1"}, "packageContext": {},
                    "pipeline": {"mutators": [{"image": "m:v1", "configMap": {"j": "v"},
                                               "selectors": [{"kind": "X"}]}]}}


def test_a_null_workspace_name_reads_as_empty_when_finding_the_upstream() -> None:
    pvs = package_variant_set(upstream={"repo": "blueprints", "package": "base", "revision": 2,
                                        "workspaceName": None})
    found = find_set_upstream(pvs, [revision("v1"), revision("v2", workspace="second", number=2)])
    assert found is not None and found["metadata"]["name"] == "v2"
    assert upstream_not_found_message({"spec": {"upstream": {"repo": None, "package": None}}}) == \
        "could not find upstream package revision '/0' in repo ''"


def test_a_value_cel_cannot_take_is_a_template_error_naming_the_target(engine: str) -> None:
    odd = {**team("alpha"), "metadata": {"name": "alpha", "namespace": "ns", "labels": {"since": date(2026, 1, 1)}}}
    pvs = package_variant_set({"objectSelector": {"apiVersion": "example.com/v1", "kind": "Team"},
                               "template": {"downstream": {"repo": "prod"},
                                            "labelExprs": [{"key": "n", "valueExpr": "target.name"}]}})
    with pytest.raises(TemplateError) as caught:
        render_package_variants(pvs, UPSTREAM_PR, REPOSITORIES, [odd], engine=engine)
    assert (caught.value.pvs, caught.value.target) == ("set", "Team/alpha")
