"""reconcile.errors.one_line: how every command prints a message."""

from __future__ import annotations

from reconcile.errors import LONGEST_WORD, one_line


def test_a_message_is_one_line_with_single_spaces() -> None:
    assert one_line("a:\n  b\t c  ") == "a: b c"


def test_a_huge_value_is_cut_to_its_start_and_its_length_and_the_rest_is_kept() -> None:
    name = "a" * 200_000
    line = one_line(f'ConfigMap "{name}" is invalid: metadata.name: too long')
    assert line == f'ConfigMap "{"a" * 99}...(200,002 characters)" is invalid: metadata.name: too long'


def test_a_cut_keeps_the_punctuation_that_ends_it() -> None:
    assert one_line(f"PackageVariant default/{'a' * 600}: metadata.name: too long") == (
        f"PackageVariant default/{'a' * 92}...(609 characters): metadata.name: too long")


def test_words_up_to_the_limit_are_kept_whole() -> None:
    word = "b" * LONGEST_WORD
    assert one_line(f"x {word} y") == f"x {word} y"
