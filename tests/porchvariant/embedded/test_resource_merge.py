"""resource_merge: the upgrade 3-way merge over {path: text}, its edge cases, exact outputs.

The cases in testdata/porchvariant/upgrade/ are golden: `expected/` is what merge_packages gives,
text for text (test_resource_merge_kpt.py compares the same cases with the real kpt).
"""

from __future__ import annotations

import copy
from pathlib import Path
from textwrap import dedent, indent
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from krmyaml.textedit import load_fast, same_data
from porchvariant.embedded.merge.resources import merge_packages
from porchvariant.errors import MutationError

CASES_ROOT = Path(__file__).resolve().parents[3] / "testdata" / "porchvariant" / "upgrade"
CASES = sorted(path.name for path in CASES_ROOT.iterdir() if (path / "expected").is_dir())

KPTFILE = """\
apiVersion: kpt.dev/v1
kind: Kptfile
metadata:
  name: pkg
"""


def read_tree(directory: Path) -> dict[str, str]:
    return {path.relative_to(directory).as_posix(): path.read_text(encoding="utf-8")
            for path in sorted(directory.rglob("*")) if path.is_file()}


def cm(name: str, data: str, *, head: str = "") -> str:
    """A ConfigMap document; `data` is its indented data block."""
    return f"{head}apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n{data}"


def merged_file(original: str | None, upstream: str | None, local: str | None, name: str = "cm.yaml") -> str | None:
    sides = [{name: text} if text is not None else {} for text in (original, upstream, local)]
    return merge_packages(*sides).get(name)


# --- golden cases ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES)
def test_golden_case(case: str) -> None:
    directory = CASES_ROOT / case
    result = merge_packages(*(read_tree(directory / side) for side in ("original", "upstream", "local")))
    assert result == read_tree(directory / "expected")


def test_local_files_the_merge_leaves_alone_are_returned_unchanged() -> None:
    directory = CASES_ROOT / "readme-changed-upstream"
    local = read_tree(directory / "local")
    result = merge_packages(read_tree(directory / "original"), read_tree(directory / "upstream"), local)
    assert {path for path in local if result.get(path) == local[path]} == {
        ".gitignore", "Kptfile", "NOTES.md", "OWNERS", "site.txt"}


# --- text: what is not changed stays as it was -------------------------------------------------------------


def test_files_the_merge_does_not_change_come_back_byte_for_byte() -> None:
    odd = "apiVersion:   v1\r\nkind: ConfigMap   # odd spacing\r\nmetadata: {name: odd}\r\ndata:\r\n    k:  'v'\r\n"
    original = {"Kptfile": KPTFILE, "odd.yaml": odd, "cm.yaml": cm("a", "  x: '1'\n"), "README.md": "hi\n"}
    upstream = {**original, "cm.yaml": cm("a", "  x: '2'\n")}
    local = {**original, "Kptfile": KPTFILE + "# mine\n", "odd.yaml": odd + "# local comment\n", "README.md": "mine\n"}
    result = merge_packages(original, upstream, local)
    assert result == {**local, "cm.yaml": cm("a", "  x: '2'\n")}


def test_an_edited_document_keeps_its_comments_quoting_and_indentation() -> None:
    original = cm("app", "    mode: 'fast'\n    level: \"1\"\n", head="# header\n")
    upstream = original.replace("'fast'", "'safe'")
    local = original.replace('"1"', '"3" # ours')
    assert merged_file(original, upstream, local) == cm("app", "    mode: 'safe'\n    level: \"3\" # ours\n",
                                                        head="# header\n")


def test_only_the_changed_document_of_a_multi_document_file_is_rewritten() -> None:
    first, second, changed = cm("a", "  x: '1'\n"), cm("b", "  x: '1'\n"), cm("b", "  x: '2'\n")
    spaced = first.replace("data:", "data:   # spaced")
    assert merged_file(first + "---\n" + second, first + "---\n" + changed, spaced + "---\n" + second) == (
        spaced + "---\n" + changed)


def test_crlf_line_ends_are_kept_in_an_edited_document() -> None:
    original = cm("a", "  x: '1'\n  y: '2'\n").replace("\n", "\r\n")
    upstream = original.replace("'1'", "'9'")
    local = original.replace("'2'", "'3'")
    assert merged_file(original, upstream, local) == original.replace("'1'", "'9'").replace("'2'", "'3'")


def test_a_key_upstream_added_goes_before_the_key_that_follows_it_upstream() -> None:
    original = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  labels:\n    app: a\n"
    upstream = original.replace("  name: a\n", "  name: a\n  annotations:\n    team: t\n")
    local = original.replace("    app: a\n", "    app: a\n    env: prod\n")
    assert merged_file(original, upstream, local) == (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  annotations:\n    team: t\n  labels:\n    app: a\n"
        "    env: prod\n")


def test_a_new_string_in_a_quoted_flow_list_is_quoted_like_the_others() -> None:
    original = cm("a", '  hosts: ["a", "b"]\n')
    upstream = cm("a", '  hosts: ["a", "b", "c"]\n')
    local = cm("a", '  hosts: ["a", "b"] # ours\n')
    assert merged_file(original, upstream, local) == cm("a", '  hosts: ["a", "b", "c"] # ours\n')


def test_a_document_upstream_added_goes_after_locals_with_a_separator() -> None:
    original = cm("a", "  x: '1'\n")
    upstream = original + "---\n" + cm("b", "  x: '1'\n", head="# new upstream\n")
    local = original.rstrip("\n") + " # no final newline"
    assert merged_file(original, upstream, local) == (
        original.rstrip("\n") + " # no final newline\n---\n# new upstream\n" + cm("b", "  x: '1'\n"))


def test_a_file_upstream_added_is_upstreams_text_less_documents_local_deleted() -> None:
    a, b, c = cm("a", "  x: '1'\n"), cm("b", "  x: '1'\n", head="# b\n"), cm("c", "  x: '1'\n")
    original = {"Kptfile": KPTFILE, "x.yaml": f"{a}---\n{b}"}
    upstream = {"Kptfile": KPTFILE, "x.yaml": f"{a}---\n{b}---\n{c}", "new.yaml": f"{c}...\n"}
    local = {"Kptfile": KPTFILE}  # local deleted x.yaml: a and b stay deleted, c is new
    assert merge_packages(original, upstream, local) == {"Kptfile": KPTFILE, "x.yaml": c, "new.yaml": f"{c}...\n"}


def test_a_file_whose_documents_are_all_deleted_is_deleted() -> None:
    text = "# only this\n" + cm("a", "  x: '1'\n")
    assert merged_file(text, None, text) is None
    assert merged_file(text, "# nothing here any more\n", text) is None


# --- resources -------------------------------------------------------------------------------------------------


def test_a_resource_upstream_deleted_stays_if_local_changed_its_data() -> None:
    original = cm("a", "  x: '1'\n")
    assert merged_file(original, None, cm("a", "  x: '2'\n")) == cm("a", "  x: '2'\n")
    # kpt's own marks (added on `kpt pkg get`) and comments do not count as local changes
    marked = original.replace("metadata:\n", "metadata: # kpt-merge: /a\n").replace(
        "  name: a\n", "  name: a\n  annotations:\n    internal.kpt.dev/upstream-identifier: '|ConfigMap|default|a'\n")
    assert merged_file(original, None, marked + "# just a comment\n") is None


def test_a_resource_local_deleted_is_not_brought_back_even_if_upstream_changed_it() -> None:
    both = f"{cm('a', '  x: 1')}\n---\n{cm('b', '  x: 1')}\n"
    upstream = both.replace("x: 1", "x: 2")
    assert merged_file(both, upstream, cm("a", "  x: 1\n")) == cm("a", "  x: 2\n")


def test_resources_are_matched_by_the_kpt_merge_comment_after_a_local_rename() -> None:
    original = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: ns\ndata:\n  x: '1'\n"
    upstream = original.replace("'1'", "'2'")
    local = original.replace("metadata:", "metadata: # kpt-merge: ns/a").replace("name: a", "name: prefix-a")
    assert merged_file(original, upstream, local) == local.replace("'1'", "'2'")


def test_without_the_comment_the_upstream_identifier_annotation_matches() -> None:
    original = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  x: '1'\n"
    upstream = original.replace("'1'", "'2'")
    local = original.replace("  name: a\n", "  name: prefix-a\n  annotations:\n"
                                             "    internal.kpt.dev/upstream-identifier: '|ConfigMap|default|a'\n")
    assert merged_file(original, upstream, local) == local.replace("'1'", "'2'")


def test_identity_includes_the_file_so_a_moved_resource_is_a_different_one() -> None:
    original = {"a.yaml": cm("a", "  x: '1'\n")}
    upstream = {"a.yaml": cm("a", "  x: '2'\n")}
    local = {"b.yaml": cm("a", "  x: '1'\n")}
    assert merge_packages(original, upstream, local) == local  # as kpt: upstream's change is lost


def test_documents_with_the_same_identity_in_one_file_are_matched_in_order() -> None:
    original = "a: 1\nb: 1\n---\na: 2\nb: 2\n"
    upstream = "a: 1\nb: 10\n---\na: 2\nb: 20\n"
    local = "a: 1\nb: 1\nc: 1\n---\na: 2\nb: 2\nc: 2\n"
    assert merged_file(original, upstream, local, "values.yaml") == "a: 1\nb: 10\nc: 1\n---\na: 2\nb: 20\nc: 2\n"


# --- fields ----------------------------------------------------------------------------------------------------


def deployment(containers: str) -> str:
    """A Deployment whose containers are `containers` (dedented)."""
    containers = indent(dedent(containers), " " * 6)
    return ("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\nspec:\n  template:\n    spec:\n"
            "      containers:\n" + containers)


def test_when_both_sides_changed_a_scalar_upstream_wins() -> None:
    original = cm("a", "  x: '1'\n  y: '1'\n")
    upstream = cm("a", "  x: '2'\n  y: '1'\n")
    local = cm("a", "  x: '3'\n  y: '3'\n")
    assert merged_file(original, upstream, local) == cm("a", "  x: '2'\n  y: '3'\n")


def test_upstream_deleting_a_key_wins_over_a_local_change_but_keeps_local_additions() -> None:
    original = cm("a", "  x: '1'\n").replace("  name: a\n", "  name: a\n  labels:\n    a: '1'\n")
    upstream = cm("a", "  x: '1'\n")
    local = original.replace("    a: '1'\n", "    a: '2'\n    mine: '1'\n")
    assert merged_file(original, upstream, local) == original.replace("    a: '1'\n", "    mine: '1'\n")
    assert merged_file(original, upstream, original.replace("a: '1'", "a: '2'")) == upstream


def test_a_map_deleted_on_one_side_and_unchanged_on_the_other_stays_deleted() -> None:
    original = cm("a", "  x: '1'\n").replace("  name: a\n", "  name: a\n  labels:\n    a: '1'\n")
    local = cm("a", "  x: '1'\n")
    assert merged_file(original, original.replace("x: '1'", "x: '2'"), local) == cm("a", "  x: '2'\n")


def test_containers_ports_and_env_merge_by_their_keys() -> None:
    original = deployment("""\
              - name: app
                image: app:1
                env:
                - {name: A, value: a}
                - {name: B, value: b}
                ports:
                - {containerPort: 53, protocol: UDP}
        """)
    upstream = deployment("""\
              - name: side
                image: side:1
              - name: app
                image: app:2
                env:
                - {name: A, value: a}
                ports:
                - {containerPort: 53, protocol: UDP, name: dns}
                - {containerPort: 53}
        """)
    local = deployment("""\
              - name: app # the app
                image: app:1
                env:
                - {name: A, value: a-local}
                - {name: B, value: b, extra: kept}
                ports:
                - {containerPort: 53, protocol: UDP}
        """)
    # B: upstream deleted it and local added `extra`, so B keeps just that and its key (as kpt);
    # a port without a protocol is TCP, so not the one on 53/UDP
    assert merged_file(original, upstream, local, "d.yaml") == deployment("""\
              - name: app # the app
                image: app:2
                env:
                - {name: A, value: a-local}
                - {name: B, extra: kept}
                ports:
                - {containerPort: 53, protocol: UDP, name: dns}
                - containerPort: 53
              - name: side
                image: side:1
        """)


def test_finalizers_of_a_built_in_kind_merge_as_a_set_those_of_a_custom_resource_do_not() -> None:
    def doc(api_version: str, finalizers: str) -> str:
        return f"apiVersion: {api_version}\nkind: ConfigMap\nmetadata:\n  name: a\n  finalizers: [{finalizers}]\n"
    for api_version, merged in (("v1", "x, mine, z"), ("example.com/v1", "x, z")):
        result = merged_file(doc(api_version, "x, y"), doc(api_version, "x, z"), doc(api_version, "x, y, mine"))
        assert result == doc(api_version, merged)


def test_a_list_without_merge_keys_is_replaced_when_upstream_changed_it() -> None:
    original = cm("a", "  l:\n  - 1\n  - 2\n")
    upstream = cm("a", "  l:\n  - 1\n  - 3\n")
    assert merged_file(original, upstream, cm("a", "  l:\n  - 1\n  - 2\n  - mine\n")) == upstream
    assert merged_file(original, original, cm("a", "  l:\n  - mine\n")) == cm("a", "  l:\n  - mine\n")


@pytest.mark.parametrize(("before", "after"), [("'1'", '"1"'), ("1", '"1"'), ('"1"', "1"), ("true", "'true'")])
def test_a_scalar_upstream_only_quoted_or_unquoted_did_not_change(before: str, after: str) -> None:
    local = cm("a", "  x: '2'\n")
    assert merged_file(cm("a", f"  x: {before}\n"), cm("a", f"  x: {after}\n"), local) == local


def test_a_scalar_whose_text_changed_with_its_type_did_change() -> None:
    assert merged_file(cm("a", "  x: 1\n"), cm("a", '  x: "1.0"\n'), cm("a", "  x: 2\n")) == cm("a", '  x: "1.0"\n')


def test_a_field_whose_type_changed_upstream_takes_upstreams_value() -> None:
    original = cm("a", "  x: '1'\n  y: '1'\n")
    upstream = cm("a", "  x:\n    nested: '1'\n  y: '1'\n")
    local = cm("a", "  x: '1'\n  y: '2'\n")
    assert merged_file(original, upstream, local) == cm("a", "  x:\n    nested: '1'\n  y: '2'\n")


def test_nulls_are_values() -> None:
    original = cm("a", "  x: '1'\n  n: null\n")
    upstream = cm("a", "  x: '2'\n  n: null\n")
    local = cm("a", "  x: '1'\n  n: null\n  m: ~\n")
    assert merged_file(original, upstream, local) == cm("a", "  x: '2'\n  n: null\n  m: ~\n")


def test_both_sides_adding_the_same_resource_merge_with_upstream_winning() -> None:
    upstream = cm("a", "  x: up\n  w: up\n")
    local = cm("a", "  x: local\n  z: local\n")
    assert merged_file(None, upstream, local) == cm("a", "  x: up\n  z: local\n  w: up\n")


def test_a_top_level_list_is_merged_like_any_other_list() -> None:
    assert merged_file("- a\n- b\n", "- a\n- c\n", "- a\n- b\n# mine\n", "hosts.yaml") == "- a\n- c\n# mine\n"


# --- the Kptfile ------------------------------------------------------------------------------------------------


UPSTREAM_LOCK = """\
upstream:
  type: git
  git: {repo: https://example.com/repo, directory: /pkg, ref: v1}
upstreamLock:
  type: git
  git: {repo: https://example.com/repo, directory: /pkg, ref: v1, commit: abc}
"""


def test_the_kptfile_upstream_and_upstream_lock_are_left_to_the_caller() -> None:
    original = KPTFILE + UPSTREAM_LOCK + "info:\n  description: v1\n"
    moved = UPSTREAM_LOCK.replace("v1", "v2").replace("abc", "def")
    upstream = KPTFILE.replace("name: pkg", "name: renamed") + moved + "info:\n  description: v2\n"
    local = KPTFILE.replace("name: pkg", "name: mine") + UPSTREAM_LOCK + "info:\n  description: v1 # doc\n"
    assert merged_file(original, upstream, local, "Kptfile") == local.replace("v1 # doc", "v2 # doc")


def test_a_kptfile_section_upstream_added_goes_where_kpt_writes_it() -> None:
    local = KPTFILE + UPSTREAM_LOCK + "inventory:\n  name: inv\n"
    upstream = KPTFILE + "pipeline:\n  mutators:\n  - image: gcr.io/kpt-fn/set-labels:v0.2\n"
    # with no block list in local's Kptfile to follow, a new one is indented as kpt writes Kptfiles
    assert merged_file(KPTFILE, upstream, local, "Kptfile") == KPTFILE + UPSTREAM_LOCK + (
        "pipeline:\n  mutators:\n    - image: gcr.io/kpt-fn/set-labels:v0.2\ninventory:\n  name: inv\n")


def test_kptfile_functions_without_names_are_matched_by_image_unless_an_image_repeats() -> None:
    def kptfile(*functions: str) -> str:
        return KPTFILE + "pipeline:\n  mutators:\n" + "".join(f"  - image: {f}\n" for f in functions)
    original = kptfile("a:v1", "b:v1")
    upstream = kptfile("a:v2", "b:v1", "c:v1")
    assert merged_file(original, upstream, kptfile("mine:v1", "a:v1", "b:v1"), "Kptfile") == kptfile(
        "mine:v1", "a:v2", "b:v1", "c:v1")
    # with a repeated image the list has no keys, and upstream's list replaces local's
    assert merged_file(original, upstream, kptfile("b:v9", "a:v1", "b:v1"), "Kptfile") == upstream


def test_a_kptfile_upstream_deleted_is_kept_as_local_has_it() -> None:
    kptfile = KPTFILE + "info:\n  description: a subpackage\n"
    assert merged_file(kptfile, None, kptfile, "sub/Kptfile") == kptfile
    assert merged_file(None, kptfile, None, "sub/Kptfile") == kptfile  # a subpackage upstream added


def test_only_five_parts_of_the_kptfile_are_merged() -> None:
    original = KPTFILE + "status:\n  conditions: []\n"
    upstream = KPTFILE + "status:\n  conditions: [{type: Ready}]\nextra: upstream\n"
    assert merged_file(original, upstream, original, "Kptfile") == original


# --- files that are not resources --------------------------------------------------------------------------------


@pytest.mark.parametrize(("original", "upstream", "local", "merged"), [
    ("v1", "v2", "v1", "v2"),        # changed upstream only
    ("v1", "v2", "mine", "mine"),    # changed on both sides: local's stays
    ("v1", None, "v1", None),        # deleted upstream
    ("v1", None, "mine", "mine"),    # deleted upstream, changed locally
    (None, "v1", None, "v1"),        # added upstream
    (None, "up", "mine", "mine"),    # added on both sides
    ("v1", "v1", None, "v1"),        # local deleted it: as kpt, it comes back
    ("v1", "v2", None, "v2"),
])
def test_files_that_are_not_yaml_follow_kpts_rules(original: str | None, upstream: str | None, local: str | None,
                                                   merged: str | None) -> None:
    assert merged_file(original, upstream, local, "docs/README.md") == merged


@pytest.mark.parametrize("path", [".gitignore", ".github/CODEOWNERS", "docs/.gitkeep"])
def test_a_file_with_git_in_its_path_is_left_as_local_has_it(path: str) -> None:
    assert merged_file("v1", "v2", "v1", path) == "v1"
    assert merged_file("v1", None, "v1", path) == "v1"
    assert merged_file(None, "v1", None, path) is None


def test_yaml_in_a_file_that_is_not_yaml_is_not_read() -> None:
    assert merged_file("a: [", "b: [", "c: [", "notes.txt") == "c: ["


# --- errors ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("side", ["original", "upstream", "local"])
@pytest.mark.parametrize(("name", "text", "message"), [
    ("cm.yaml", "a: [", 'file "cm.yaml": yaml: line 2: did not find expected node content'),
    ("sub/x.yml", "a: 1\n---\nb: : c\n", 'file "sub/x.yml": yaml: line 3: mapping values are not allowed in this'),
    ("cm.yaml", "a: !!bool maybe\n", 'file "cm.yaml": yaml: line 1: cannot decode \'maybe\' as a !!bool'),
    ("Kptfile", "a: 1\n---\nb: 2\n", 'file "Kptfile": expected exactly one object (the Kptfile)'),
    ("Kptfile", "- a\n", 'file "Kptfile": expected exactly one object (the Kptfile)'),
])
def test_bad_yaml_raises_a_one_line_mutation_error_naming_the_file(side: str, name: str, text: str,
                                                                   message: str) -> None:
    sides = {s: {name: KPTFILE if name == "Kptfile" else "a: 1\n"} for s in ("original", "upstream", "local")}
    sides[side] = {name: text}
    with pytest.raises(MutationError) as raised:
        merge_packages(sides["original"], sides["upstream"], sides["local"])
    assert str(raised.value).startswith(f"cannot upgrade: {side} package: {message}")
    assert "\n" not in str(raised.value)


def test_a_document_nested_too_deeply_is_a_mutation_error() -> None:
    deep = "a: " + "[" * 5000 + "1" + "]" * 5000 + "\n"
    with pytest.raises(MutationError, match="nested too deeply"):
        merge_packages({"x.yaml": "a: 1\n"}, {"x.yaml": deep}, {"x.yaml": "a: 2\n"})


# --- properties ----------------------------------------------------------------------------------------------------

# No strings that read like numbers or booleans: a value upstream only put in quotes keeps local's spelling.
scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from(["a", "b", "on", "", "x y"]))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3),
    st.dictionaries(st.sampled_from(["a", "b", "c", "name"]), inner, max_size=3),
    st.lists(st.fixed_dictionaries({"name": st.sampled_from(["p", "q", "r"]), "image": scalars}), max_size=3),
), max_leaves=12)
documents = st.builds(lambda name, data: {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
                                          "spec": data},
                      st.sampled_from(["one", "two"]), st.dictionaries(st.sampled_from(["a", "b", "template"]), values))
packages = st.dictionaries(st.sampled_from(["a.yaml", "b.yaml"]), st.lists(documents, min_size=1, max_size=2),
                           max_size=2)


def as_files(package: dict[str, list[Any]]) -> dict[str, str]:
    unique = {name: list({doc["metadata"]["name"]: doc for doc in docs}.values()) for name, docs in package.items()}
    return {name: yaml.safe_dump_all(docs, sort_keys=False) for name, docs in unique.items()}


def as_data(files: dict[str, str]) -> dict[str, list[Any]]:
    return {name: sorted(load_fast(text), key=lambda doc: doc["metadata"]["name"]) for name, text in files.items()}


def edited(package: dict[str, list[Any]], data: st.DataObject) -> dict[str, list[Any]]:
    """Some documents of the package with some fields of `spec` changed, dropped or added."""
    out = {}
    for name, docs in package.items():
        kept = [copy.deepcopy(doc) for doc in docs if data.draw(st.booleans(), label=f"keep {name}")]
        for doc in kept:
            doc["spec"].update(data.draw(st.dictionaries(st.sampled_from(["a", "c"]), values, max_size=1)))
        if kept:
            out[name] = kept
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(packages, st.data())
def test_with_upstream_unchanged_local_comes_back_byte_for_byte(original: dict[str, list[Any]],
                                                                data: st.DataObject) -> None:
    local = as_files(edited(original, data))
    assert merge_packages(as_files(original), as_files(original), local) == local


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(packages, st.data())
def test_with_local_unchanged_the_result_holds_upstreams_data(original: dict[str, list[Any]],
                                                              data: st.DataObject) -> None:
    upstream = as_files(edited(original, data))
    result = merge_packages(as_files(original), upstream, as_files(original))
    assert same_data(as_data(result), as_data(upstream))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(packages, st.data())
def test_merging_never_changes_its_arguments(original: dict[str, list[Any]], data: st.DataObject) -> None:
    sides = [as_files(original), as_files(edited(original, data)), as_files(edited(original, data))]
    before = copy.deepcopy(sides)
    merge_packages(*sides)
    assert sides == before
