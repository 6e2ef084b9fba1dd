"""The fast line parser reads exactly what libyaml reads, or declines (`Unsupported`)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from krmyaml import _libyaml
from krmyaml import roundtrip as yamlio
from krmyaml._blockparse import Unsupported, parse_block
from krmyaml._emit import emit_block
from krmyaml._scalars import same_value


def fast(text: str) -> tuple[Any, int]:
    if not yamlio.line_parser_can_read(text):
        raise Unsupported("libyaml's characters")
    lines, rows = yamlio.split_lines(text)
    return parse_block(lines, rows, 0, len(lines))


def libyaml(text: str) -> Any:
    node = _libyaml.compose(text)
    return None if node is None else _libyaml.construct(node, text)


def assert_agree(text: str) -> Any:
    value, _ = fast(text)
    expected = libyaml(text)
    assert same_value(value, expected) or _nan_equal(value, expected), (value, expected)
    return value


def _nan_equal(a: Any, b: Any) -> bool:
    return repr(a) == repr(b) and "nan" in repr(a)


SUPPORTED = {
    "compact and wide sequences": "a:\n- 1\n- x\nb:\n  - 2\n  - y\nc: 3\n",
    "mapping started on the dash line": "- name: a\n  value: 1\n-   name: b\n    value: 2\n",
    "head comment after the dash": "- # head\n  apiVersion: v1\n  kind: X\n",
    "comments and blank lines": "# top\na: 1 # line\n\n  # indented comment\nb:\n  # inside\n  c: 2\n",
    "empty values": "a:\nb: ~\nc: ''\nd: {}\ne: []\nf:\n-\n- x\n",
    "quoted scalars": "a: 'it''s'\nb: \"tab\\there \\u00e9 \\x41 \\/ \\\\\"\nc: '#not comment'\nd: \"a: b\"\n",
    "quoted keys": "'yes': 1\n\"a: b\": 2\n'': 3\n",
    "plain keys of every type": "1: a\ntrue: b\n~: c\n1.5: d\n0755: e\n",
    "literal clip": "s: |\n  line 1\n\n  line 3\nnext: 1\n",
    "literal strip": "s: |-\n  a\n  b\n\n\nnext: 1\n",
    "literal keep": "s: |+\n  a\n\n\nnext: 1\n",
    "literal keep at the end": "s: |+\n  a\n\n",
    "literal with comment-like lines": "s: |\n  # not a comment\n  x: y\n# a comment\nn: 1\n",
    "literal with deeper lines": "s: |\n  a\n    b\n  c\n",
    "literal in a sequence": "- |\n  a\n- b\n",
    "literal with leading blank lines": "s: |\n\n  a\n",
    "empty literal": "s: |\nn: 1\n",
    "plain with inner colon and hash": "url: http://x/y#frag\nimage: nginx:1.25\nc: a # comment\n",
    "trailing spaces": "a: b   \nc: 'd'   \n",
    "go-yaml numbers": "a: 0755\nb: 0x1F\nc: 1e3\nd: 08\ne: 1_000\nf: .5\ng: -.inf\nh: 12345678901234567890\n",
    "keys with spaces before the colon": "a  : 1\nb\t: 2\n",
    "flow collections": "a: [1, yes, 'x', \"y\", [], {}]\nb: {k: v, 'q': [--port, -1], n: ~} # c\n",
    "a json item": '- {"apiVersion": "v1", "data": {"a": "1", n: 1e3}, "x": [true, null]}\n',
}


@pytest.mark.parametrize("text", SUPPORTED.values(), ids=SUPPORTED.keys())
def test_supported_yaml_reads_as_libyaml_reads_it(text: str) -> None:
    assert_agree(text)


UNSUPPORTED = {
    "multi-line flow": "a: [1,\n  2]\n",
    "colon in a flow scalar": "a: [http://x]\n",
    "adjacent json colon": 'a: {"b":1}\n',
    "trailing comma": "a: [1, 2,]\n",
    "flow key without value": "a: {b}\n",
    "anchor in flow": "a: [&x 1, *x]\n",
    "anchor": "a: &x 1\nb: *x\n",
    "tag": "a: !!str 1\n",
    "folded": "a: >\n  x\n",
    "indentation indicator": "a: |2\n   x\n",
    "merge key": "<<: {a: 1}\n",
    "multi-line plain": "a: one\n  two\n",
    "multi-line quoted": "a: 'one\n  two'\n",
    "explicit key": "? a\n: b\n",
    "nested dash": "- - a\n",
    "tab indentation": "a:\n\tb: 1\n",
    "colon in plain": "a: b: c\n",
    "unknown escape": 'a: "\\q"\n',
    "document marker": "a: 1\n---\nb: 2\n",
    "bad indentation": "a:\n    b: 1\n  c: 2\n",
}


@pytest.mark.parametrize("text", UNSUPPORTED.values(), ids=UNSUPPORTED.keys())
def test_anything_else_is_left_to_libyaml(text: str) -> None:
    with pytest.raises(Unsupported):
        fast(text)


def test_yamlio_load_falls_back_to_libyaml_for_the_rest() -> None:
    assert yamlio.load("a: &x {b: [1, yes]}\nc: *x\nd: >\n  folded\n  text\n") == {
        "a": {"b": [1, "yes"]},
        "c": {"b": [1, "yes"]},
        "d": "folded text\n",
    }


def test_the_last_content_line_skips_trailing_comments_but_keeps_kept_blank_lines() -> None:
    assert fast("- a: 1\n  # trailing\n\n")[1] == 0
    assert fast("- s: |+\n    x\n\n  # trailing\n")[1] == 2
    assert fast("- s: |\n    x\n\n")[1] == 1


# Random documents, written in many styles, read the same by both parsers.
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False),
    st.text(max_size=10),
    st.sampled_from(["yes", "on", "NO", "0755", "1e3", "~", "a: b", "#c", "- x", "x\ny\n", "x\n", "\n", " x", ""]),
)
_keys = st.one_of(st.text(min_size=1, max_size=8), st.sampled_from(["yes", "1", "on", "a b", "x: y", "~"]))
_values = st.recursive(
    _scalars,
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(_keys, children, max_size=4)),
    max_leaves=20,
)
_documents = st.dictionaries(_keys, _values, min_size=1, max_size=5)


@settings(max_examples=300, deadline=None)
@given(_documents, st.sampled_from(["ours", "pyyaml-block", "pyyaml-indented", "pyyaml-default"]))
def test_random_documents_read_the_same_by_both_parsers(document: dict[str, Any], style: str) -> None:
    if style == "ours":
        text = "\n".join(emit_block(document)) + "\n"
    elif style == "pyyaml-block":
        text = yaml.safe_dump(document, default_flow_style=False, allow_unicode=True, sort_keys=False)
    elif style == "pyyaml-indented":
        text = yaml.safe_dump(document, default_flow_style=False, indent=4, width=20, sort_keys=False)
    else:
        text = yaml.safe_dump(document, sort_keys=False)
    try:
        value, _ = fast(text)
    except Unsupported:
        return
    expected = libyaml(text)
    assert same_value(value, expected) or _nan_equal(value, expected), (text, value, expected)
    if style == "ours":
        assert same_value(value, document), (text, value, document)
