"""Too-deep YAML is one line, `nested too deeply`, whichever command reads it and whichever
library layer notices: libyaml's own limit (1,000 levels since PyYAML 6.0.4) or Python's stack.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PIPELINE = ROOT / "testdata/deltapipe/endpoints/pipeline.yaml"


def _config_map(depth: int) -> str:
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: x}}\ndata: {{a: {'[' * depth}1{']' * depth}}}\n"


def _porchkit(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "porchkit", *args], input=stdin, capture_output=True, text=True,
                          timeout=60)


def _assert_one_line_too_deep(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "nested too deeply" in lines[0], result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("command", [
    ["pipeline", "eval", "-p", str(PIPELINE)],
    ["variants", "render", "-f"],
    ["decorators", "reconcile", "-f"],
    ["map", "reconcile", "-f"],
])
def test_a_manifest_past_libyamls_limit(tmp_path: Path, command: list[str]) -> None:
    manifest = tmp_path / "deep.yaml"
    manifest.write_text(_config_map(5000))
    result = _porchkit(*command, str(manifest))
    _assert_one_line_too_deep(result)
    assert str(manifest) in result.stderr


@pytest.mark.parametrize("depth", [990, 5000], ids=["python-stack", "libyaml-limit"])
def test_a_resource_list_item_nested_too_deeply(depth: int) -> None:
    item = _config_map(depth).replace("\n", "\n  ").rstrip()
    resource_list = ("apiVersion: config.kubernetes.io/v1\nkind: ResourceList\n"
                     "functionConfig: {apiVersion: fn.porchkit.dev/v1alpha1, kind: Pipeline, metadata: {name: p},"
                     " pipeline: []}\n"
                     f"items:\n- {item}\n")
    _assert_one_line_too_deep(_porchkit("fn", "deltapipe", stdin=resource_list))
