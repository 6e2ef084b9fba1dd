"""krmyaml.schema: go-yaml's scalars, its refusal of duplicate keys, and bounded aliases and depth."""

from __future__ import annotations

import time
import tracemalloc

import pytest

from krmyaml import YamlError, load_all, roundtrip, schema


def test_scalars_resolve_as_go_yaml_resolves_them() -> None:
    [doc] = load_all("a: yes\nb: 0755\nc: 1_000\nd: 0x1F\ne: 0b101\nf: 0o17\ng: 2026-11-27\nh: ~\ni: .inf\n"
                     "j: !custom text\nk: True\n")
    assert doc == {"a": "yes", "b": 493, "c": 1000, "d": 31, "e": 5, "f": 15, "g": "2026-11-27", "h": None,
                   "i": float("inf"), "j": "text", "k": True}


def test_a_key_given_twice_is_refused_naming_both_lines() -> None:
    with pytest.raises(YamlError) as refused:
        load_all("metadata:\n  name: a\n  labels: {}\n  name: b\n", "cm.yaml")
    assert str(refused.value) == ('cm.yaml: line 4, column 3: invalid YAML: mapping key "name" already defined '
                                  "at line 2")


def test_keys_with_different_text_are_different_keys_as_in_go_yaml() -> None:
    assert load_all('{1: a, "01": b}') == [{1: "a", "01": "b"}]


def test_a_merged_key_may_be_overridden() -> None:
    assert load_all("base: &b {x: 1, y: 2}\nm:\n  <<: *b\n  x: 3\n") == [
        {"base": {"x": 1, "y": 2}, "m": {"x": 3, "y": 2}}]


def billion_laughs(levels: int = 9) -> str:
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


def test_aliases_that_expand_out_of_all_proportion_are_refused_at_once_and_in_little_memory() -> None:
    tracemalloc.start()
    started = time.perf_counter()
    with pytest.raises(YamlError, match="aliases expand to an unreasonably large document"):
        load_all(billion_laughs(), "bomb.yaml")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert time.perf_counter() - started < 1.0 and peak < 50 * 2**20


def test_a_few_aliases_are_fine_and_each_use_is_a_copy_of_its_own() -> None:
    [doc] = load_all(billion_laughs(levels=2))
    assert len(doc["a2"]) == 9 and doc["a2"][0] == doc["a1"]
    doc["a2"][0].append("edited")
    assert doc["a1"] == [["lol"] * 9] * 9 and doc["a2"][1] == doc["a1"]


def test_an_alias_inside_its_own_anchor_is_refused() -> None:
    with pytest.raises(YamlError, match="an alias refers to a value that contains it"):
        load_all("a: &x [1, *x]\n")


@pytest.mark.parametrize("text", ["[" * 10_000, "a:\n" + "".join(f"{'  ' * i}b{i}:\n" for i in range(1, 1200))])
def test_deep_nesting_is_one_line(text: str) -> None:
    with pytest.raises(YamlError) as refused:
        load_all(text, "deep.yaml")
    assert "nested too deeply" in str(refused.value) and str(refused.value).startswith("deep.yaml")


def test_a_syntax_error_names_the_line_and_column() -> None:
    with pytest.raises(YamlError) as refused:
        load_all("a: [1, 2\n", "s.yaml")
    assert str(refused.value).startswith("s.yaml: line 2, column 1: invalid YAML: ")


def test_numbers_beyond_64_bits_read_as_go_yaml_reads_them_a_float_if_one_holds_them_else_text() -> None:
    digits = "1" + "0" * 5000
    [doc] = load_all(f"a: {2**64 - 1}\nb: {2**64}\nc: -{digits}\nd: 0x{'f' * 5000}\ne: 1e400\n")
    assert doc == {"a": 2**64 - 1, "b": float(2**64), "c": f"-{digits}", "d": f"0x{'f' * 5000}", "e": "1e400"}


def test_an_explicit_tag_the_text_does_not_fit_is_refused_naming_where_it_is() -> None:
    with pytest.raises(YamlError) as refused:
        load_all(f"spec:\n  revision: !!int -1{'0' * 5000}\n", "big.yaml")
    assert str(refused.value).startswith("big.yaml: line 2, column 13: invalid YAML: cannot decode '-1000")
    assert str(refused.value).endswith("' as a !!int")


def test_more_documents_than_the_limit_are_refused_before_the_next_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(schema, "MAX_DOCUMENTS", 3)
    assert load_all("a: 1\n---\nb: 2\n---\nc: 3\n") == [{"a": 1}, {"b": 2}, {"c": 3}]
    with pytest.raises(YamlError, match=r"^many.yaml: more than 3 documents$"):
        load_all("a: 1\n---\nb: 2\n---\nc: 3\n---\nd: 4\n", "many.yaml")
    with pytest.raises(YamlError, match="more than 3 documents"):
        load_all("---\n" * 4)  # empty documents count too


def test_a_text_longer_than_the_limit_is_refused_before_it_is_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(schema, "MAX_TEXT_CHARS", 2**20)
    load_all("a: " + "x" * (2**20 - 4))
    with pytest.raises(YamlError, match=r"^big.yaml: 1 Mi characters of YAML is more than the 1 Mi porchkit reads"):
        load_all("a: [" + "x" * 2**20, "big.yaml")  # invalid too: the size is what is said


def test_a_lone_surrogate_is_refused_naming_where_it_is() -> None:
    # what a byte that is not UTF-8 becomes when decoded with "surrogateescape"
    with pytest.raises(YamlError) as refused:
        load_all("a: 1\nb: x\udcff\n", "s.yaml")
    assert str(refused.value) == "s.yaml: line 2, column 5: invalid YAML: a lone surrogate (U+DCFF) is not a character"


@pytest.mark.parametrize(("text", "value"), [
    ("a: !!map 0\n", {"a": "0"}),
    ("!!map [1]\n", [1]),
    ("!!set {a, b}\n", {"a": None, "b": None}),
    ("!!omap [a: 1, b: 2]\n", [{"a": 1}, {"b": 2}]),
    ("!!pairs\n- a: 1\n- a: 2\n", [{"a": 1}, {"a": 2}]),
])
def test_a_collection_tag_is_ignored_as_go_yaml_v3_ignores_it(text: str, value: object) -> None:
    # yaml.v3 decodes a node by its kind; it has no !!omap, !!pairs or !!set (decode.go, resolve.go)
    assert load_all(text) == [value] == [roundtrip.load(text)]


def test_an_error_without_a_source_starts_with_its_line() -> None:
    with pytest.raises(YamlError, match=r"^line 2, column 1: invalid YAML: "):
        load_all("a: [1\n")


def test_a_leading_zero_number_that_is_no_octal_reads_as_go_yaml_and_the_round_trip_reader_read_it() -> None:
    [doc] = load_all("a: 08\nb: -09\nc: 0755\n")
    assert doc == {"a": 8.0, "b": -9.0, "c": 493} and type(doc["a"]) is float
    assert doc == roundtrip.load("a: 08\nb: -09\nc: 0755\n")


def test_a_character_yaml_does_not_allow_is_one_line_naming_its_line_and_column() -> None:
    # libyaml's reader reports a byte offset: the line and column count characters
    with pytest.raises(YamlError) as refused:
        load_all("a: éé\nb: x\x7f\n", "c.yaml")
    assert str(refused.value) == ("c.yaml: line 2, column 5: invalid YAML: character U+007F: control characters are "
                                  "not allowed")
