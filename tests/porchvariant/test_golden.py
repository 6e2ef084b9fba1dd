"""Golden packages: apply_mutations on testdata/porchvariant/golden/<case>/ must give expected/ byte for byte.

Each case has `package/` (the files as Porch hands them over), `variant.yaml` (the
PackageVariant), an optional `cluster.yaml` (objects the injectors may pick from, in any
namespace) and `expected/` (every file of the mutated package). `hand-written` is a package as
people leave it (CRLF, aligned values, mixed sequence styles, tabs, a null `data:`), whose untouched
lines must come back as they were.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from porchvariant.mutations import apply_mutations

GOLDEN = Path(__file__).resolve().parents[2] / "testdata" / "porchvariant" / "golden"
CASES = sorted(path.name for path in GOLDEN.iterdir() if path.is_dir())


def read_tree(root: Path) -> dict[str, str]:
    # bytes decoded as they are (no newline translation): the comparison is exact
    return {path.relative_to(root).as_posix(): path.read_bytes().decode("utf-8")
            for path in sorted(root.rglob("*")) if path.is_file()}


def load_case(name: str) -> tuple[dict, dict[str, str], list[dict], dict[str, str]]:
    case = GOLDEN / name
    pv = yaml.safe_load((case / "variant.yaml").read_text(encoding="utf-8"))
    cluster_file = case / "cluster.yaml"
    cluster = [obj for obj in yaml.safe_load_all(cluster_file.read_text(encoding="utf-8")) if obj] \
        if cluster_file.exists() else []
    return pv, read_tree(case / "package"), cluster, read_tree(case / "expected")


def test_there_are_golden_cases() -> None:
    assert {"kpt-pipeline", "package-context", "injection", "rerun", "dotted-names", "hand-written"} <= set(CASES)


@pytest.mark.parametrize("name", CASES)
def test_the_mutated_package_is_the_expected_one(name: str) -> None:
    pv, package, cluster, expected = load_case(name)
    result = apply_mutations(pv, package, cluster, prr=f"{pv['metadata']['namespace']}/{name}")
    assert sorted(result.resources) == sorted(expected)
    for path, text in expected.items():
        assert result.resources[path] == text, path
    assert result.changed is (package != expected)


@pytest.mark.parametrize("name", CASES)
def test_the_expected_package_is_a_fixpoint(name: str) -> None:
    pv, _, cluster, expected = load_case(name)
    result = apply_mutations(pv, expected, cluster)
    assert not result.changed
    assert all(result.resources[path] is expected[path] for path in expected)
