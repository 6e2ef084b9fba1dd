"""The example in docs/krmfn.md runs, and writes exactly what the page shows."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from krmfn import process
from tests.krmfn.conftest import ROOT

DOC = (ROOT / "docs" / "krmfn.md").read_text(encoding="utf-8")


def example(name: str) -> str:
    match = re.search(rf"<!-- example: {name} -->\n```\w+\n(.*?)```", DOC, re.S)
    assert match, f"no `{name}` example in docs/krmfn.md"
    return match.group(1)


def test_the_documented_function_writes_the_documented_output(tmp_path: Path) -> None:
    script = tmp_path / "set_team.py"
    script.write_text(example("function"), encoding="utf-8")
    spec = importlib.util.spec_from_file_location("set_team_example", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    outcome = process(module.set_team, example("input"))
    assert (outcome.exit_code, outcome.messages) == (0, [])
    assert outcome.output.decode() == example("output")
