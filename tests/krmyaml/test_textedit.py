"""krmyaml.textedit: editing YAML as text, so that what was not edited stays as it was written."""

from __future__ import annotations

import time
from typing import Any

import pytest
import yaml

from krmyaml import textedit
from krmyaml.textedit import Style, YamlTextError, edit_document, remove_key, replace_items, set_key


def setting(key: str, value: Any, *path: str) -> Any:
    def edit(doc: Any) -> None:
        node = doc
        for name in path:
            node = node[name]
        set_key(node, key, value)
    return edit


def removing(key: str, *path: str) -> Any:
    def edit(doc: Any) -> None:
        node = doc
        for name in path:
            node = node[name]
        remove_key(node, key)
    return edit


# --- an unchanged document --------------------------------------------------------------------------------


def test_an_edit_that_changes_no_data_gives_back_the_very_same_string() -> None:
    text = "a:   1 # one\nb: [x,  y]\n"
    assert edit_document(text, setting("a", 1)) is text


def test_setting_a_value_that_is_already_there_in_another_spelling_changes_nothing() -> None:
    text = "when: 2001-12-14t21:59:43.10-05:00\nmode: 0o17\n"
    assert edit_document(text, setting("when", "2001-12-14t21:59:43.10-05:00")) is text


# --- formatting outside the edit --------------------------------------------------------------------------


def test_a_crlf_document_keeps_crlf_on_every_line_including_the_new_ones() -> None:
    text = "kind: ConfigMap\r\ndata:\r\n  a: b # note\r\n"
    assert edit_document(text, setting("c", "d", "data")) == (
        "kind: ConfigMap\r\ndata:\r\n  a: b # note\r\n  c: d\r\n"
    )


def test_a_file_mixing_line_ends_keeps_each_lines_own_and_new_lines_take_the_majoritys() -> None:
    assert edit_document("a: 1\r\nb: 2\nc: 3\r\n", setting("d", 4)) == "a: 1\r\nb: 2\nc: 3\r\nd: 4\r\n"


def test_trailing_whitespace_and_tabs_on_untouched_lines_are_kept() -> None:
    text = "kind: ConfigMap\t\nmetadata:   \n  name: x  \ndata:\n  a: b\n"
    assert edit_document(text, setting("a", "z", "data")) == (
        "kind: ConfigMap\t\nmetadata:   \n  name: x  \ndata:\n  a: z\n"
    )


def test_a_tab_after_a_colon_is_read_and_kept() -> None:
    # valid YAML that Go's yaml.v3 reads
    text = "kind:\tConfigMap\ndata:\n  a:\tb\t# note\n"
    assert edit_document(text, setting("c", "d", "data")) == "kind:\tConfigMap\ndata:\n  a:\tb\t# note\n  c: d\n"


def test_a_tab_inside_a_quoted_string_is_content_and_is_kept() -> None:
    text = 'data:\n  a: "x\ty"\n'
    assert edit_document(text, setting("c", "d", "data")) == 'data:\n  a: "x\ty"\n  c: d\n'


def test_untouched_lines_keep_their_alignment_and_their_own_sequence_style() -> None:
    text = """\
kind:       Deployment
spec:
  containers:
  - name: app
    ports:
      - containerPort: 8080
      - containerPort: 9090
  replicas:   2
"""
    assert edit_document(text, setting("replicas", 3, "spec")) == text.replace("replicas:   2", "replicas: 3")


def test_a_multi_line_scalar_next_to_the_edit_is_not_reflowed() -> None:
    text = 'data:\n  a: "this is\n    continued"\n  b: plain\n    too\n'
    assert edit_document(text, setting("c", "d", "data")) == text + "  c: d\n"


def test_a_flow_sequence_of_single_entry_mappings_keeps_its_braces() -> None:
    text = "mutators: [{image: a}]\nother: 1\n"
    def edit(doc: Any) -> None:
        replace_items(doc["mutators"], [(None, {"image": "b"}), (0, None)])
    assert edit_document(text, edit) == "mutators: [{image: b}, {image: a}]\nother: 1\n"


def test_a_block_indented_unlike_the_rest_of_the_file_keeps_its_indentation() -> None:
    text = "metadata:\n  name: x\n  namespace: y\ndata:\n    a: b\n"
    assert edit_document(text, setting("c", "d", "data")) == text + "    c: d\n"


def test_a_block_indented_by_an_odd_amount_keeps_it_and_its_new_entries_join_it() -> None:
    # `data` is indented by 3, unlike the file's 2: the new entry goes at 3, and no other line moves
    text = "metadata:\n  name:   x\n  namespace: y\ndata:\n   a: b\n"
    out = edit_document(text, setting("c", "d", "data"))
    assert out == "metadata:\n  name:   x\n  namespace: y\ndata:\n   a: b\n   c: d\n"


def test_a_document_without_a_final_newline_gets_none() -> None:
    assert edit_document("a: 1", setting("b", 2)) == "a: 1\nb: 2"
    assert edit_document("a: 1\r\nb: 1", setting("c", 2)) == "a: 1\r\nb: 1\r\nc: 2"


def test_a_byte_order_mark_is_kept() -> None:
    assert edit_document("\ufeffa: 1\n", setting("b", 2)) == "\ufeffa: 1\nb: 2\n"


def test_text_that_is_not_yaml_is_an_error_with_its_line() -> None:
    with pytest.raises(YamlTextError, match=r"^yaml: line \d+: "):
        edit_document("a: 1\nb: [\n", setting("c", 1))


# --- what new text looks like ---------------------------------------------------------------------------


@pytest.mark.parametrize("word", ["yes", "no", "on", "off", "On", "NO", "y", "n", "Y", "12:30", "1:20:30.5"])
def test_a_new_string_a_yaml_1_1_reader_takes_for_a_bool_or_number_is_quoted(word: str) -> None:
    # kubectl reads YAML 1.1 (sigs.k8s.io/yaml): unquoted, `on` would be true, `12:30` the number 750
    out = edit_document("data:\n  a: b\n", setting(word, word, "data"))
    assert out == f'data:\n  a: b\n  "{word}": "{word}"\n'
    assert yaml.safe_load(out)["data"][word] == word


def test_a_yaml_1_1_word_already_in_the_file_is_left_as_written() -> None:
    text = "data:\n  on: yes\n"
    assert edit_document(text, setting("a", "b", "data")) == "data:\n  on: yes\n  a: b\n"


def test_a_file_that_prefers_single_quotes_gets_them() -> None:
    text = "data:\n  a: 'x'\n  b: 'y z'\n"
    assert edit_document(text, setting("c", "on", "data")) == text + "  c: 'on'\n"


@pytest.mark.parametrize(("spelling", "text"), [("", "a:\nb: 1\n"), ("null", "a: null\nb: 1\n"), ("~", "a: ~\nb: 1\n")])
def test_new_nulls_are_spelled_as_the_file_spells_them_and_old_ones_stay(spelling: str, text: str) -> None:
    out = edit_document(text, setting("c", None))
    assert out == text + ("c:\n" if spelling == "" else f"c: {spelling}\n")


def test_a_new_multi_line_string_is_a_literal_block() -> None:
    assert edit_document("a: 1\n", setting("b", "x\ny\n")) == "a: 1\nb: |\n  x\n  y\n"


@pytest.mark.parametrize(("text", "style"), [
    ("a:\n  b:\n  - x\n", Style(2, 0, "", '"')),
    ("a:\n    b:\n        - x\n", Style(4, 4, "", '"')),
    ("a: ~\nb: 'x'\n", Style(2, 2, "~", "'")),
    ("a: 1\r\nb:\r\n  - x\r\n", Style(2, 2, "", '"')),
    ("", Style()),
])
def test_the_style_of_a_file_is_detected(text: str, style: Style) -> None:
    assert textedit.detect_style(text) == style


# --- comments -------------------------------------------------------------------------------------------


def test_emptying_a_block_with_a_comment_on_its_key_keeps_the_comment_after_the_brackets() -> None:
    text = "data: # the settings\n  a: b\nnext: 1\n"
    assert edit_document(text, removing("a", "data")) == "data: {} # the settings\nnext: 1\n"


def test_a_key_whose_null_becomes_a_block_keeps_its_comment_on_its_line() -> None:
    assert edit_document("data: ~ # c\nn: 1\n", setting("data", {"a": 1})) == "data: # c\n  a: 1\nn: 1\n"


def test_emptying_a_sequence_with_a_comment_on_its_key_gives_valid_yaml() -> None:
    text = "top:\n  items: # the items\n  - a\n  next: 1\n"
    def edit(doc: Any) -> None:
        replace_items(doc["top"]["items"], [])
    assert edit_document(text, edit) == "top:\n  items: [] # the items\n  next: 1\n"


def test_a_removed_key_takes_the_comment_above_it_and_the_others_stay() -> None:
    text = "# head\ndata:\n  # about a\n  a: 1 # eol a\n  # about b\n  b: 2\n# tail\n"
    assert edit_document(text, removing("a", "data")) == "# head\ndata:\n  # about b\n  b: 2\n# tail\n"


def test_reordered_items_take_their_comments_along_and_a_new_one_has_none() -> None:
    text = "items:\n# first\n- name: a # eol a\n  v: 1\n# second\n- name: b\n  v: 2\n# after\nother: 1\n"
    def edit(doc: Any) -> None:
        replace_items(doc["items"], [(1, None), (None, {"name": "c"}), (0, None)])
    assert edit_document(text, edit) == (
        "items:\n# second\n- name: b\n  v: 2\n- name: c\n# first\n- name: a # eol a\n  v: 1\n# after\nother: 1\n"
    )


def test_a_comment_indented_under_an_entry_goes_with_it() -> None:
    text = "data:\n  a: 1\n    # about a\n  b: 2\n"
    assert edit_document(text, removing("a", "data")) == "data:\n  b: 2\n"


def test_the_comments_closing_a_block_stay_when_its_last_entry_goes() -> None:
    text = "data:\n  a: 1\n  b: 2\n  # end of data\nnext: 1\n"
    assert edit_document(text, removing("b", "data")) == "data:\n  a: 1\n  # end of data\nnext: 1\n"


def test_a_removed_entry_of_a_crlf_file_takes_its_comment_and_the_rest_keeps_crlf() -> None:
    assert edit_document("a: 1\r\n# about b\r\nb: 2\r\nc: 3", removing("b")) == "a: 1\r\nc: 3"


def test_a_changed_string_keeps_its_quotes_and_its_end_of_line_comment() -> None:
    assert edit_document("data:\n  a: 'x' # keep\n", setting("a", "y", "data")) == "data:\n  a: 'y' # keep\n"


def test_a_new_string_in_a_list_whose_strings_are_all_quoted_alike_is_quoted_alike() -> None:
    text = "a: 'x'\nb: 'y'\nverbs:\n- \"get\"\n- \"list\"\n"
    out = edit_document(text, setting("verbs", ["get", "list", "watch"]))
    assert out == text + '- "watch"\n'


def test_an_empty_flow_mapping_that_gains_entries_grows_into_a_block() -> None:
    assert edit_document("data: {}\nnext: 1\n", setting("a", "b", "data")) == "data:\n  a: b\nnext: 1\n"


# --- anchors and merge keys -------------------------------------------------------------------------------


def test_a_key_can_be_removed_from_a_mapping_that_is_merged_elsewhere() -> None:
    text = "base: &b\n  a: 1\n  x: 2\nuse:\n  <<: *b\n  c: 3\n"
    out = edit_document(text, removing("a", "base"))
    assert out == "base: &b\n  x: 2\nuse:\n  <<: *b\n  c: 3\n"


def test_an_edit_that_would_lose_an_anchor_writes_the_document_anew_as_edited() -> None:
    # the flow mapping carrying `&b` is rewritten, so `*b` could not be kept: the aliased data is written out
    text = "base: &b {x: 1}\nuse: *b\n"
    out = edit_document(text, setting("y", 2, "base"))
    assert textedit.load_fast(out) == [{"base": {"x": 1, "y": 2}, "use": {"x": 1, "y": 2}}]


def test_a_merge_key_reads_as_a_key_as_go_and_the_fast_loader_see_it() -> None:
    [data] = textedit.load_fast("b: &b {x: 1}\nuse:\n  <<: *b\n")
    assert data["use"] == {"<<": {"x": 1}}


# --- documents --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    "a: 1\n---\nb: 2\n",
    "# c\n---\na: 1\n--- # two\nb: 2\n...\n# after\n",
    "a: 1\r\n---\r\nb: 2\r\n",
    "---\n",
    "",
    "a: 1",
])
def test_splitting_a_file_into_documents_loses_nothing(text: str) -> None:
    documents = textedit.split_documents(text)
    assert "".join(documents) == text
    assert all(len(textedit.load_fast(document)) <= 1 for document in documents)


def test_objects_are_numbered_by_their_document_and_empty_documents_are_skipped() -> None:
    text = "---\n# nothing\n---\na: 1\n---\nb: 2\n"
    assert textedit.load_objects(text) == [(1, {"a": 1}), (2, {"b": 2})]


def test_an_object_that_is_not_a_mapping_is_an_error_naming_its_line() -> None:
    with pytest.raises(YamlTextError, match="failed to extract objects: document at line 2 is a sequence"):
        textedit.load_objects("a: 1\n---\n- x\n")


def test_one_document_of_a_multi_document_file_is_edited_and_the_others_stay_byte_for_byte() -> None:
    text = "kind:  A   # one\r\n---\r\nkind: B\r\ndata:\r\n  x: 1\r\n...\r\n---\r\nkind:   C\n"
    documents = textedit.split_documents(text)
    documents[1] = edit_document(documents[1], setting("z", 2, "data"))
    assert "".join(documents) == ("kind:  A   # one\r\n---\r\nkind: B\r\ndata:\r\n  x: 1\r\n  z: 2\r\n"
                                  "...\r\n---\r\nkind:   C\n")


def test_a_document_start_line_and_what_follows_the_end_marker_are_kept() -> None:
    text = "# lead\n--- # start\na: 1\n... # end\n"
    assert edit_document(text, setting("b", 2)) == "# lead\n--- # start\na: 1\nb: 2\n... # end\n"


# --- data -------------------------------------------------------------------------------------------------


def test_the_fast_loader_reads_the_yaml_1_2_core_schema() -> None:
    [data] = textedit.load_fast("a: yes\nb: on\nc: 0o17\nd: 0755\ne: 1e3\nf: 2001-01-01\ng: ~\nh: .inf\n")
    # 0755: go-yaml v3 still reads YAML 1.1's octal spelling as octal (strconv.ParseInt base 0)
    assert data == {"a": "yes", "b": "on", "c": 15, "d": 0o755, "e": 1000.0, "f": "2001-01-01", "g": None,
                    "h": float("inf")}


def test_round_trip_data_reads_as_the_fast_loader_reads_it() -> None:
    text = "a: yes\nb: 0o17\nc: 1e3\nd: 2001-12-14t21:59:43.10-05:00\ne:\nf: !!str 5\ng: [1, true, 1.5]\n"
    seen: list[Any] = []
    edit_document(text, lambda doc: seen.append(doc))
    assert textedit.same_data(seen[0], textedit.load_fast(text)[0])


def test_same_data_tells_booleans_and_floats_from_integers() -> None:
    assert textedit.same_data({"a": [1, "x"]}, {"a": [1, "x"]})
    assert not textedit.same_data(True, 1)
    assert not textedit.same_data(1.0, 1)
    assert not textedit.same_data({"a": 1}, [("a", 1)])


# --- layouts that are easy to write wrongly -------------------------------------------------------------------


def test_a_commented_sequence_starting_with_an_empty_mapping_is_written_back_as_yaml() -> None:
    # (ruamel.yaml wrote `- b: 1 -` here: it forgot a line break after an empty `{}`)
    text = "items: # the items\n- {}\n- b: 1\n  c: 2\n- - x\nother: 1\n"
    out = edit_document(text, setting("other", 2))
    assert out == text.replace("other: 1", "other: 2")


def test_comment_lines_after_a_value_that_becomes_a_block_scalar_are_not_read_into_it() -> None:
    for text in ("data:\n  a: 1\n    # about a\n  b: 2\n", "data:\n  a: 1 # about a\n    # more\n  b: 2\n"):
        out = edit_document(text, setting("a", "x\ny\n", "data"))
        assert yaml.safe_load(out) == {"data": {"a": "x\ny\n", "b": 2}}
        assert "  # about a\n" in out


def test_the_comment_above_the_next_item_is_not_read_into_a_new_block_scalar() -> None:
    text = "items:\n  # first\n- a\n  # second\n- b\n"
    out = edit_document(text, setting("items", ["x\ny", "b"]))
    assert yaml.safe_load(out) == {"items": ["x\ny", "b"]}
    assert "# second\n" in out


def test_the_comment_of_an_item_that_becomes_a_mapping_goes_above_it() -> None:
    text = "k: # the list\n  - {} # first\n  - 2\n"
    out = edit_document(text, setting("k", [{"a": [1], "b": 2}, 2]))
    assert yaml.safe_load(out) == {"k": [{"a": [1], "b": 2}, 2]}
    assert "# the list" in out and "  # first\n  - a:\n" in out


def test_a_comment_after_a_flow_collection_is_kept() -> None:
    text = "items:\n- - {b: 1}\n# about c\nc: 1\n"
    def edit(doc: Any) -> None:
        set_key(doc["items"][0][0], "d", 2)
    assert edit_document(text, edit) == "items:\n- - {b: 1, d: 2}\n# about c\nc: 1\n"


@pytest.mark.parametrize("scalar", ["1e3", "1_000", "0b101", ".NaN", "0755", "0x1F", "2001-12-14 21:59:43.10 -5",
                                    "!!str 5"])
def test_a_document_holding_any_spelling_of_a_scalar_keeps_its_other_lines(scalar: str) -> None:
    text = f"kind:   X\nv: {scalar}\n"
    assert edit_document(text, setting("z", 1)) == text + "z: 1\n"


def test_the_edit_path_shares_an_anchor_with_its_aliases_but_still_charges_every_use() -> None:
    from tests.krmyaml.test_schema import billion_laughs

    [doc] = textedit.load_fast(billion_laughs(levels=2))
    assert doc["a2"][0] is doc["a1"] and doc["a1"][0] is doc["a0"]  # one object, as kpt's nodes are
    started = time.perf_counter()
    with pytest.raises(YamlTextError, match="aliases expand to an unreasonably large document"):
        textedit.load_fast(billion_laughs())
    with pytest.raises(YamlTextError, match="aliases expand to an unreasonably large document"):
        edit_document(billion_laughs(), lambda data: data.pop("a0"))
    assert time.perf_counter() - started < 1.0
