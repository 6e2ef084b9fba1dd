"""The examples in docs/porchvariant.md run and print what the page says they print."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

DOC = (Path(__file__).resolve().parents[2] / "docs" / "porchvariant.md").read_text(encoding="utf-8")


def block(marker: str) -> str:
    match = re.search(rf"<!-- {marker} -->\n```\w+\n(.*?)```", DOC, re.S)
    assert match, f"no `{marker}` block in docs/porchvariant.md"
    return match.group(1)


@pytest.mark.parametrize("name", ["mutations", "render"])
def test_the_example_prints_what_the_page_shows(name: str) -> None:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(block(f"example: {name}"), f"docs/porchvariant.md ({name})", "exec"), {})
    assert printed.getvalue() == block(f"output: {name}")


def test_the_quoted_validation_messages_are_the_ones_validation_gives() -> None:
    from porchvariant import validate_package_variant, validate_package_variant_set

    pv = {"spec": {"upstream": {"repo": "r"}, "downstream": {"repo": "d", "package": "p"},
                   "adoptionPolicy": "sometimes", "packageContext": {"data": {"name": "x"}},
                   "injectors": [{"name": ""}]}}
    quoted = set(re.findall(r"^\* `+ ?(.*?) ?`+$", DOC, re.M))
    assert len(quoted) == 8
    given = set(validate_package_variant(pv))
    pvs = {"spec": {"upstream": {"repo": "r", "package": "p"},
                    "targets": [{"repositorySelector": {},
                                 "template": {"downstream": {"repo": "a", "repoExpr": "b"},
                                              "pipeline": {"mutators": [{"image": "i"}, {"image": "i"},
                                                                        {"image": "i", "name": "a.b"}]}}},
                                {}]}}
    given |= set(validate_package_variant_set(pvs))
    assert quoted <= given
    assert validate_package_variant_set({"spec": {"upstream": {"repo": "r", "package": "p", "revision": 1},
                                                  "targets": [{"repositories": {}}]}}) == [
        "spec.targets[0].repositories: must be a list, not an object"]
    assert validate_package_variant({"spec": {"labels": {"tier": 3}}}) == [
        "spec.labels[tier]: must be a string, not an integer"]
