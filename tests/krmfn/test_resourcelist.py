"""Reading and writing ResourceLists: no YAML corruption, untouched items verbatim, clear errors."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from krmfn import InputError, OutputError, ResourceList, YamlError, annotations, results, yamlio
from krmfn.resourcelist import read, write
from krmyaml import _libyaml
from krmyaml._scalars import same_value


def item_named(rl: ResourceList, name: str, kind: str | None = None) -> dict[str, Any]:
    return next(i for i in rl.items if i["metadata"]["name"] == name and (kind is None or i["kind"] == kind))


def item_texts(text: str) -> list[str]:
    """The text of each item of a compact `items:` list, as written."""
    body = text.split("\nitems:\n", 1)[1].split("\nfunctionConfig:", 1)[0].split("\nresults:", 1)[0]
    return ["- " + part for part in ("\n" + body).split("\n- ")[1:]]


# --- meaning -------------------------------------------------------------------------------


def test_scalars_read_from_kpt_keep_their_go_yaml_meaning(kpt_eval_text: str) -> None:
    rl = read(kpt_eval_text)
    data = item_named(rl, "settings")["data"]
    assert data["flag"] == "yes" and data["switch"] == "on" and data["country"] == "NO"
    assert data["mode"] == 493 and data["hex"] == 31
    assert data["scientific"] == "1e3" and data["octal"] == "0o17" and data["version"] == "1.10"
    assert data["nothing"] is None and data["empty"] == "" and data["date"] == "2024-01-01"
    assert data["quoted-true"] == "true"
    assert data["script"] == '#!/bin/sh\necho "hello" # not a comment: part of the script\n'
    assert data["folded"] == "one long line\n"
    spec = item_named(rl, "gadget")["spec"]
    assert spec == {"size": 1000.0, "enabled": "off", "ratio": 0.5, "big": 12345678901234567890}
    assert item_named(rl, "from-json")["data"] == {"answer": "42", "on": "yes"}


def test_aliases_become_independent_copies(kpt_eval_text: str) -> None:
    deployment = item_named(read(kpt_eval_text), "web", "Deployment")
    labels = deployment["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"] == labels == {"app": "web", "tier": "frontend"}
    labels["extra"] = "x"
    assert "extra" not in deployment["spec"]["selector"]["matchLabels"]


def test_merge_keys_expand_as_go_yaml_does() -> None:
    rl = read(
        "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n"
        "- apiVersion: v1\n  kind: X\n  metadata: {name: a}\n"
        "  base: &base {a: 1, b: 2}\n  other: {b: 0}\n"
        "  merged:\n    <<: [*base, {c: 3, a: 9}]\n    b: 5\n"
    )
    assert rl.items[0]["merged"] == {"b": 5, "a": 1, "c": 3}


# --- text ----------------------------------------------------------------------------------


def test_an_untouched_list_is_written_back_byte_for_byte(kpt_eval_text: str) -> None:
    assert write(read(kpt_eval_text)) == kpt_eval_text


def test_editing_one_item_leaves_every_other_item_byte_identical(kpt_eval_text: str) -> None:
    rl = read(kpt_eval_text)
    item_named(rl, "gadget")["spec"]["size"] = 2
    before, after = item_texts(kpt_eval_text), item_texts(write(rl))
    changed = [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
    assert [rl.items[i]["metadata"]["name"] for i in changed] == ["gadget"]


def test_an_edited_item_keeps_the_text_of_every_field_it_did_not_change(kpt_eval_text: str) -> None:
    rl = read(kpt_eval_text)
    settings_ = item_named(rl, "settings")
    settings_["metadata"]["labels"]["tier"] = "yes"
    text = next(t for t in item_texts(write(rl)) if "name: settings" in t)
    for line in [
        "    flag: yes", "    switch: on", "    country: NO", "    mode: 0755", "    hex: 0x1F",
        '    scientific: "1e3"', '    octal: "0o17"', "    nothing: ~", '    empty: ""',
        "    date: 2024-01-01", "    quoted-true: 'true'", '    version: "1.10"',
        "      config.kubernetes.io/index: '0'", "      internal.config.kubernetes.io/id: '2'",
        "      tier: 'yes'",
    ]:  # fmt: skip
        assert line + "\n" in text + "\n", line
    assert read(write(rl)).items == rl.items


def test_edited_items_lose_their_comments_rather_than_misplace_them(kpt_eval_text: str) -> None:
    rl = read(kpt_eval_text)
    item_named(rl, "settings")["data"]["flag"] = "no"
    written = item_texts(write(rl))
    assert not any("# The settings every replica reads." in t for t in written)
    assert "# kpt-set: ${image}" in next(t for t in written if "kind: Deployment" in t)


def test_flow_collections_stay_flow_when_their_item_changes(kpt_eval_text: str) -> None:
    rl = read(kpt_eval_text)
    service = item_named(rl, "web", "Service")
    service["spec"]["selector"]["tier"] = "on"
    deployment = item_named(rl, "web", "Deployment")
    deployment["spec"]["replicas"] = 5
    texts = item_texts(write(rl))
    assert "    selector: {app: web, tier: 'on'}\n" in next(t for t in texts if "kind: Service" in t)
    assert '          args: [--port, "8080", --verbose]\n' in next(t for t in texts if "kind: Deployment" in t)


def test_new_strings_that_could_be_misread_are_quoted() -> None:
    rl = ResourceList()
    tricky = ["yes", "on", "NO", "y", "0755", "1e3", "0o17", "0x1F", "~", "null", "", "2024-01-01", "1:20",
              "- x", "a: b", "#x", "true", "1_000", ".inf", "<<", "=", "multi\nline\n", " lead", "\t"]  # fmt: skip
    rl.items.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"},
                     "data": {f"k{i}": v for i, v in enumerate(tricky)}})  # fmt: skip
    text = write(rl)
    assert read(text).items == rl.items
    assert yaml.safe_load(text)["items"] == rl.items  # a YAML 1.1 reader agrees


def test_json_input_comes_out_as_block_yaml() -> None:
    document = {
        "apiVersion": "config.kubernetes.io/v1",
        "kind": "ResourceList",
        "items": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"},
                   "data": {"x": "yes", "n": 1e3, "i": 7, "o": "0755"}}],
        "functionConfig": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {}},
    }  # fmt: skip
    rl = read(json.dumps(document, indent=2))
    text = write(rl)
    assert "{" not in text.split("functionConfig")[0]
    assert "    x: 'yes'\n" in text and "    'n': 1000.0\n" in text and "    o: '0755'\n" in text
    assert read(text).items == document["items"]


_JSON_LIST = '{"apiVersion": "config.kubernetes.io/v1", "kind": "ResourceList", "items": [%s]}'


@pytest.mark.parametrize(("item", "words"), [
    ('{"kind": "A", "metadata": {"name": "a", "name": "b"}}', 'invalid YAML: mapping key "name" already defined at '
                                                              "line 1"),
    ('{"kind": "A", "s": "\\udcff"}', "invalid YAML: found invalid Unicode character escape code"),
    ('{"kind": "A", "s": "\x7f"}', "invalid YAML: character U+007F: control characters are not allowed"),
    ('{"kind": "A", "s": "\\ud83d\\ude00"}', "invalid YAML: found invalid Unicode character escape code"),
    ('{"kind": "A", "d": ' + "[" * 5000 + "1" + "]" * 5000 + "}", "invalid YAML: nested too deeply"),
])  # fmt: skip
def test_json_is_refused_where_go_yaml_refuses_it_with_the_yaml_readers_one_line(item: str, words: str) -> None:
    with pytest.raises(YamlError) as refused:
        read(_JSON_LIST % item)
    assert re.fullmatch(r"line 1, column \d+: " + re.escape(words) + ".*", str(refused.value)), str(refused.value)


def test_json_numbers_and_constants_read_as_go_yaml_reads_them_as_yaml_would() -> None:
    item = ('{"kind": "A", "big": 18446744073709551616, "max": 18446744073709551615, "huge": 1e400, '
            f'"long": 1{"0" * 5000}, "nan": NaN, "inf": Infinity, "minf": -Infinity, "f": 1.5, "i": -7}}')
    text = _JSON_LIST % item
    [read_item] = read(text).items
    assert read_item == {"kind": "A", "big": float(2**64), "max": 2**64 - 1, "huge": "1e400", "long": "1" + "0" * 5000,
                         "nan": "NaN", "inf": "Infinity", "minf": "-Infinity", "f": 1.5, "i": -7}
    node = _libyaml.compose(text)
    assert node is not None and same_value([read_item], _libyaml.construct(node, text)["items"])


@pytest.mark.parametrize("version", ["v1", "v1beta1", "v1alpha1"])
def test_every_resource_list_version_is_read_and_v1_is_written(version: str) -> None:
    rl = read(f"apiVersion: config.kubernetes.io/{version}\nkind: ResourceList\nitems:\n- kind: A\n")
    assert rl.items == [{"kind": "A"}]
    assert write(rl).startswith("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\n")


def test_wide_item_indentation_is_kept_for_old_and_new_items() -> None:
    text = "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n  - kind: A\n    x: yes\n  - kind: B\n"
    rl = read(text)
    rl.items[1]["z"] = "on"
    rl.items.append({"kind": "C"})
    out = write(rl)
    assert out == (
        "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n"
        "  - kind: A\n    x: yes\n  - kind: B\n    z: 'on'\n  - kind: C\n"
    )
    assert read(out).items == rl.items


def test_unusual_but_valid_documents_are_read_by_libyaml() -> None:
    text = (
        "%YAML 1.1\n---\napiVersion: config.kubernetes.io/v1\nkind: ResourceList\n"
        "items: [{kind: A, x: yes}, {kind: B, y: !!str 12}]\n"
    )
    rl = read(text)
    assert rl.items == [{"kind": "A", "x": "yes"}, {"kind": "B", "y": "12"}]
    out = write(rl)
    assert read(out).items == rl.items and "items:\n- " in out


def test_a_document_start_marker_and_crlf_line_ends_are_accepted() -> None:
    assert read("---\napiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- kind: A\n").items
    rl = read("apiVersion: config.kubernetes.io/v1\r\nkind: ResourceList\r\nitems:\r\n- kind: A\r\n  x: on\r\n")
    assert rl.items == [{"kind": "A", "x": "on"}]


def test_items_read_by_libyaml_are_written_back_verbatim_with_their_foot_comments() -> None:
    header = "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n"
    items = [
        '- a: >\n    folded\n  b: "q\n    # not a comment"',
        "- &x {k: v}",
        "- c: &y [1]\n  d: *y\n  e: |+\n    kept\n\n",
    ]
    text = header + "\n  # trailing comment\n".join(items) + "\n"
    rl = read(text)
    assert rl.items[0]["b"] == "q # not a comment" and rl.items[2]["e"] == "kept\n\n\n"
    assert write(rl) == text


def test_a_foot_comment_stays_with_its_item_and_a_column_zero_comment_does_not() -> None:
    header = "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n"
    text = header + "- kind: A\n  # foot of A\n\n  # more of it\n# between\n- kind: B\n  # foot of B\n"
    rl = read(text)
    assert write(rl) == header + "- kind: A\n  # foot of A\n\n  # more of it\n- kind: B\n  # foot of B\n"
    rl.items[0]["x"] = 1  # an edited item keeps its foot comment too
    assert "- kind: A\n  x: 1\n  # foot of A\n" in write(rl)


def test_an_items_list_in_flow_style_is_read_and_written_in_block_style() -> None:
    rl = read("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: [{kind: A, x: 'on'}]\n")
    assert rl.items == [{"kind": "A", "x": "on"}]
    assert write(rl).endswith("items:\n- kind: A\n  x: 'on'\n")


def test_anchors_shared_between_items_are_read_from_the_whole_document() -> None:
    rl = read("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- &x {k: v}\n- c: *x\n")
    assert rl.items == [{"k": "v"}, {"c": {"k": "v"}}]
    assert read(write(rl)).items == rl.items


def test_items_keep_the_order_the_function_leaves_them_in(kpt_eval_text: str) -> None:
    rl = read(kpt_eval_text)
    original = item_texts(kpt_eval_text)
    rl.items.reverse()
    del rl.items[0]
    assert item_texts(write(rl)) == list(reversed(original))[1:]


def test_an_empty_list_is_written_with_an_empty_items_list() -> None:
    rl = read("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- kind: A\n")
    rl.items.clear()
    assert write(rl) == "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\n"
    assert read("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\n").items == []


def test_the_function_config_and_input_results_pass_through(kpt_eval_text: str) -> None:
    text = kpt_eval_text + "results:\n- message: from before\n  severity: warning\n"
    rl = read(text)
    assert rl.function_config == {"metadata": {"name": "function-input"}, "data": {}, "kind": "ConfigMap",
                                  "apiVersion": "v1"}  # fmt: skip
    rl.results.append(results.error("new", field="spec"))
    out = write(rl)
    assert out.startswith(kpt_eval_text)
    assert out.endswith(
        "results:\n- message: from before\n  severity: warning\n- message: new\n  severity: error\n  field:\n"
        "    path: spec\n"
    )


def test_a_copied_item_is_matched_to_its_original_by_kpt_id(kpt_eval_text: str) -> None:
    rl = read(kpt_eval_text)
    rl.items = [copy.deepcopy(item) for item in rl.items]
    assert write(rl) == kpt_eval_text


# --- kpt's annotations ------------------------------------------------------------------------


def test_kpt_annotations_dropped_by_accident_are_restored(kpt_eval_text: str) -> None:
    rl = read(kpt_eval_text)
    gadget = item_named(rl, "gadget")
    gadget["metadata"]["annotations"] = {"mine": "x"}
    restored = item_named(read(write(rl)), "gadget")["metadata"]["annotations"]
    assert restored["mine"] == "x"
    assert restored[annotations.ID] == "9" and restored[annotations.LEGACY_ID] == "9"
    assert restored[annotations.PATH] == "widget.yaml" and restored[annotations.LEGACY_INDEX] == "0"
    assert gadget["metadata"]["annotations"] == {"mine": "x"}  # the function's dict is not mutated


def test_a_moved_resource_keeps_its_new_path(kpt_eval_text: str) -> None:
    rl = read(kpt_eval_text)
    annotations.set_path(item_named(rl, "gadget"), "moved/widget.yaml", 0)
    moved = item_named(read(write(rl)), "gadget")
    assert annotations.path(moved) == "moved/widget.yaml"
    assert annotations.annotations_of(moved)[annotations.LEGACY_PATH] == "moved/widget.yaml"


# --- bad input ---------------------------------------------------------------------------------

BAD = {
    "empty": (b"", "empty input"),
    "blank": (b"  \n\n", "empty input"),
    "comment only": (b"# nothing\n", "empty input"),
    "invalid utf-8": (b"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: [\xff]\n", "not valid UTF-8"),
    "a list": (b"- a\n- b\n", "not a ResourceList: the input is a list"),
    "a scalar": (b"hello\n", "not a ResourceList: the input is a string"),
    "wrong kind": (b"apiVersion: v1\nkind: List\nitems: []\n", "kind is 'List'"),
    "wrong group": (b"apiVersion: v1\nkind: ResourceList\nitems: []\n", "apiVersion is 'v1'"),
    "items a mapping": (b"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n  a: 1\n",
                        "items must be a list, not a mapping"),
    "item a scalar": (b"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- kind: A\n- 3\n",
                      "items[1] is a number"),
    "config a list": (b"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nfunctionConfig: [1]\n",
                      "functionConfig must be a mapping"),
    "invalid yaml": (b"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- a: [1\n",
                     "invalid YAML"),
    "two documents": (b"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\n---\na: 1\n", "invalid YAML"),
    "bad json": (b'{"apiVersion": "config.kubernetes.io/v1", "kind": ', "invalid YAML"),
    "control character": (b"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- a: \x01\n",
                          "invalid YAML"),
}  # fmt: skip


@pytest.mark.parametrize(("data", "message"), BAD.values(), ids=BAD.keys())
def test_bad_input_is_one_clear_line(data: bytes, message: str) -> None:
    with pytest.raises(InputError) as caught:
        read(data)
    text = str(caught.value)
    assert message in text and "\n" not in text


def test_invalid_yaml_names_the_line_of_the_whole_input() -> None:
    with pytest.raises(YamlError, match=r"^line 6, column 1: invalid YAML: "):
        read("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- a: 1\n- b: [1\n")


def test_an_unwritable_value_is_an_output_error_naming_the_item() -> None:
    rl = read("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- kind: A\n  metadata:\n    name: a\n")
    rl.items[0]["spec"] = {"tags": {"x"}}
    with pytest.raises(OutputError, match=r"items\[0\] \(A/a\): field 0.spec.tags: cannot write a value of type set"):
        write(rl)


def test_an_integer_go_cannot_hold_is_refused_rather_than_turned_into_a_float() -> None:
    rl = ResourceList(items=[{"kind": "A", "n": 2**64}])
    with pytest.raises(OutputError, match=r"field 0.n: the integer 18446744073709551616 is out of YAML"):
        write(rl)


# --- round trips of new objects -----------------------------------------------------------------

_scalar = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.floats(allow_nan=False), st.text(max_size=8),
    st.sampled_from(["yes", "on", "0755", "1e3", "~", "", "a: b", "x\ny\n", "x\n\n", "- y"]),
)  # fmt: skip
_value = st.recursive(
    _scalar,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.dictionaries(st.text(min_size=1, max_size=6), _value, min_size=1, max_size=4), max_size=4))
def test_new_items_read_back_as_they_were_written(items: list[dict[str, Any]]) -> None:
    rl = ResourceList(items=items)
    assert yamlio.load(write(rl))["items"] == items
    assert read(write(rl)).items == items


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.dictionaries(st.text(min_size=1, max_size=6), _value, max_size=4), max_size=4),
    st.sampled_from(["ours", "pyyaml-block", "pyyaml-wide", "pyyaml-flow", "json"]),
)
def test_any_resource_list_reads_as_libyaml_reads_it_and_round_trips(items: list[dict[str, Any]], style: str) -> None:
    document = {"apiVersion": "config.kubernetes.io/v1", "kind": "ResourceList", "items": items}
    if style == "ours":
        text = yamlio.dump(document)
    elif style == "json":
        # Escaped surrogate pairs are no YAML, nor are raw characters outside YAML's printable set.
        text = re.sub("[\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff]", lambda m: f"\\u{ord(m.group()):04x}",
                      json.dumps(document, indent=1, ensure_ascii=False))
    else:
        text = yaml.safe_dump(
            document,
            default_flow_style=None if style == "pyyaml-flow" else False,
            indent=4 if style == "pyyaml-wide" else 2,
            allow_unicode=True,
            sort_keys=False,
        )
    rl = read(text)
    reference = _libyaml.construct(_libyaml.compose(text), text)  # JSON is YAML, and reads as YAML reads
    whole = reference["items"]
    assert same_value(rl.items, whole), text
    out = write(rl)
    assert same_value(read(out).items, whole), out
    assert write(read(out)) == out  # and then it is stable
