"""reconcile.errors.one_line: how every command prints a message."""

from __future__ import annotations

from reconcile.errors import LONGEST_WORD, one_line


def test_a_message_is_one_line_with_single_spaces() -> None:
    assert one_line("a:\n  b\t c  ") == "a: b c"


def test_a_huge_value_is_cut_to_its_start_and_its_length_and_the_rest_is_kept() -> None:
    name = "a" * 200_000
    line = one_line(f'ConfigMap "{name}" is invalid: metadata.name: too long')
    start = "a" * (LONGEST_WORD // 2 - 1)
    assert line == f'ConfigMap "{start}...(200,002 characters) is invalid: metadata.name: too long'


def test_words_up_to_the_limit_are_kept_whole() -> None:
    word = "b" * LONGEST_WORD
    assert one_line(f"x {word} y") == f"x {word} y"
