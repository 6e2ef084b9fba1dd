"""Scalar meaning (go-yaml v3's resolver) and scalar writing (quote whatever could be misread)."""

from __future__ import annotations

import math

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from krmyaml import roundtrip as yamlio
from krmyaml._scalars import double_quoted, float_text, literal_ok, plain_safe, resolve_plain, same_value, scalar_text

# go-yaml v3 `resolve("", text)` for a plain scalar (spec §2.3): YAML 1.2 core plus Go's ints.
GO_YAML = [
    ("yes", "yes"), ("no", "no"), ("on", "on"), ("off", "off"), ("y", "y"), ("n", "n"),
    ("NO", "NO"), ("Yes", "Yes"), ("true", True), ("True", True), ("TRUE", True),
    ("false", False), ("False", False), ("FALSE", False), ("tRUE", "tRUE"),
    ("~", None), ("null", None), ("Null", None), ("NULL", None), ("", None), ("nULL", "nULL"),
    ("0", 0), ("-0", 0), ("+12", 12), ("1_000", 1000), ("0755", 493), ("-0755", -493),
    ("0x1F", 31), ("0X1f", 31), ("-0x1F", -31), ("0o17", 15), ("0O17", 15), ("0b101", 5),
    ("08", 8.0), ("09.5", 9.5), ("1e3", 1000.0), ("1E3", 1000.0), ("1.5e+3", 1500.0),
    ("1.", 1.0), (".5", 0.5), ("-.5", -0.5), ("+.5", 0.5), ("1e999", "1e999"), (".5e999", ".5e999"),
    (".inf", math.inf), ("-.Inf", -math.inf), ("+.INF", math.inf), ("._5", "._5"),
    ("9223372036854775807", 2**63 - 1), ("9223372036854775808", 2**63),
    ("18446744073709551615", 2**64 - 1), ("18446744073709551616", 1.8446744073709552e19),
    ("-9223372036854775809", -9.223372036854776e18), ("+18446744073709551615", 1.8446744073709552e19),
    ("0x1p3", "0x1p3"), ("0x", "0x"), ("0o", "0o"), ("-", "-"), ("+", "+"), ("1:20", "1:20"),
    ("2024-01-01", "2024-01-01"), ("2001-12-14t21:59:43.10-05:00", "2001-12-14t21:59:43.10-05:00"),
    ("<<", "<<"), ("=", "="), ("1.10", 1.1), ("v1", "v1"), ("nginx:1.25", "nginx:1.25"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "value"), GO_YAML, ids=[t or "<empty>" for t, _ in GO_YAML])
def test_plain_scalars_mean_what_go_yaml_says(text: str, value: object) -> None:
    assert same_value(resolve_plain(text), value)


def test_a_decimal_longer_than_python_converts_stays_text_as_in_go_yaml() -> None:
    # Not an int64 or uint64, and ParseFloat overflows; int() would refuse it (over 4,300 digits).
    assert resolve_plain("1" * 4400) == "1" * 4400
    assert resolve_plain("-" + "9" * 25) == -1e25


def test_nan_spellings_are_floats() -> None:
    for text in (".nan", ".NaN", ".NAN"):
        assert math.isnan(resolve_plain(text))


@pytest.mark.parametrize(
    "text",
    ["yes", "No", "ON", "off", "y", "N", "true", "False", "null", "~", "", "0755", "1e3", "0o17",
     "0x1F", "1_000", "1:20", "2024-01-01", "<<", "=", ".inf", ".5", "-1", "1.10", "+1",
     "a: b", "a #b", "#x", "- x", "-", "x:", " x", "x ", "'x", '"x', "&x", "*x", "!x", "%x", "@x",
     "`x", "{x}", "[x]", "|", ">", "?", "a\nb", "tab\there", "nel\x85", "ls\u2028", "bom\ufeff", "y",
     "Infinity"[0:0]],
)  # fmt: skip
def test_anything_a_yaml_11_or_12_reader_could_misread_is_not_plain(text: str) -> None:
    assert not plain_safe(text)


@pytest.mark.parametrize(
    "text", ["v1", "ConfigMap", "app.kubernetes.io/name", "nginx:1.25", "value-0", "http://x/y", "a b", "nan", "é"]
)
def test_ordinary_strings_stay_plain(text: str) -> None:
    assert plain_safe(text)


def test_flow_context_quotes_flow_indicators() -> None:
    assert plain_safe("a,b")
    assert not plain_safe("a,b", flow=True)
    assert not plain_safe("nginx:1.25", flow=True)


def test_scalars_are_spelled_for_both_yaml_versions() -> None:
    assert [scalar_text(v) for v in (None, True, False, 0, -7, 493)] == ["null", "true", "false", "0", "-7", "493"]
    assert scalar_text("yes") == "'yes'"
    assert scalar_text("it's") == "it's"
    assert scalar_text("'x'") == "\"'x'\"" or scalar_text("'x'") == "'''x'''"
    assert scalar_text("a\tb") == '"a\\tb"'
    assert scalar_text("line\nbreak") == '"line\\nbreak"'


def test_floats_always_carry_a_dot() -> None:
    assert float_text(1e20) == "1.0e+20"
    assert float_text(1000.0) == "1000.0"
    assert float_text(1e-05) == "1.0e-05"
    assert (float_text(math.inf), float_text(-math.inf), float_text(math.nan)) == (".inf", "-.inf", ".nan")
    for value in (1e20, 1e-05, 0.1, -2.5, 1000.0):
        assert yaml.safe_load(float_text(value)) == value  # YAML 1.1 reads a float too
        assert resolve_plain(float_text(value)) == value


def test_double_quoted_escapes_everything_unprintable() -> None:
    assert double_quoted('a"b\\c') == '"a\\"b\\\\c"'
    assert double_quoted("\x00\x07\x1b\x7f\x85\u2028\ufeff") == '"\\0\\a\\e\\x7F\\N\\L\\uFEFF"'
    assert double_quoted("\U0001f600") == '"\U0001f600"'


def test_literal_blocks_only_for_text_they_carry_exactly() -> None:
    assert literal_ok("a\nb\n")
    assert not literal_ok("single line")
    assert not literal_ok(" leading space\n")
    assert not literal_ok("trailing space \nx")
    assert not literal_ok("cr\r\nx")
    assert not literal_ok("\n\n")
    assert not literal_ok("a\n  \nb")


def test_same_value_tells_types_apart() -> None:
    assert not same_value(1, True)
    assert not same_value(1, 1.0)
    assert not same_value(0.0, -0.0)
    assert same_value(math.nan, math.nan)
    assert not same_value({"a": 1, "b": 2}, {"b": 2, "a": 1})
    assert same_value({"a": [1, "x"]}, {"a": [1, "x"]})


# Strings that stress quoting: YAML keywords in every case, numbers in every base, indicators.
_tricky = st.one_of(
    st.sampled_from(["yes", "No", "ON", "~", "null", "0755", "0x1F", "0o17", "1e3", "1_000", "1:20", ".inf",
                     "2024-01-01", "<<", "-", "- x", "a: b", "#", " ", "\t", "'", '"', "&a", "*a", "!t"]),
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12),
    st.from_regex(r"[-+.0-9eExXoObB_:]{1,8}", fullmatch=True),
)  # fmt: skip


_RUAMEL = YAML(typ="safe", pure=True)  # an independent YAML 1.2 reader


@settings(max_examples=400)
@given(_tricky)
def test_any_string_reads_back_as_the_same_string(text: str) -> None:
    written = scalar_text(text)
    assert yamlio.load(f"key: {written}\n") == {"key": text}  # YAML 1.2, go-yaml rules
    assert yaml.safe_load(f"key: {written}\n") == {"key": text}  # YAML 1.1 (PyYAML)
    assert _RUAMEL.load(f"key: {written}\n") == {"key": text}  # YAML 1.2 (ruamel.yaml)
