"""`porchkit pipeline eval`, run as a user runs it: a real process, real files, exit codes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from krmyaml import load_all

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "testdata" / "deltapipe" / "endpoints"


def load_yaml(text: str, source: str) -> list[Any]:
    """Every non-empty document of a YAML stream."""
    return [doc for doc in load_all(text, source) if doc is not None]


def porchkit(*args: str, stdin: str = "", cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "porchkit", *args], input=stdin, capture_output=True,
                          text=True, cwd=cwd, timeout=60)


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_eval_prints_the_outputs_of_the_endpoints_example() -> None:
    result = porchkit("pipeline", "eval", "-p", str(EXAMPLE / "pipeline.yaml"), str(EXAMPLE / "objects.yaml"))
    assert result.returncode == 0, result.stderr
    outputs = load_yaml(result.stdout, "stdout")
    assert [(o["metadata"]["name"], o["spec"]["addresses"]) for o in outputs] == [
        ("db-postgres", ["10.0.3.1"]),
        ("web-http", ["10.0.1.3", "10.0.1.7", "10.0.2.5"]),
        ("web-https", ["10.0.1.3", "10.0.1.7", "10.0.2.5"]),
    ]
    assert {o["apiVersion"] for o in outputs} == {"view.porchkit.dev/v1alpha1"}
    assert result.stderr == ""


def test_eval_reads_directories_and_stdin(tmp_path: Path) -> None:
    objects = (EXAMPLE / "objects.yaml").read_text()
    services, _, rest = objects.partition("---\napiVersion: discovery.k8s.io/v1")
    (tmp_path / "sub").mkdir()
    write(tmp_path / "sub" / "services.yaml", services)
    write(tmp_path / "README.md", "not a manifest")
    result = porchkit("pipeline", "eval", "-p", str(EXAMPLE / "pipeline.yaml"), str(tmp_path), "-",
                      stdin="apiVersion: discovery.k8s.io/v1" + rest)
    assert result.returncode == 0, result.stderr
    assert len(load_yaml(result.stdout, "stdout")) == 3


def test_filename_flags_add_inputs_as_positional_files_do(tmp_path: Path) -> None:
    objects = (EXAMPLE / "objects.yaml").read_text()
    services, _, rest = objects.partition("---\napiVersion: discovery.k8s.io/v1")
    write(tmp_path / "services.yaml", services)
    write(tmp_path / "slices.yaml", "apiVersion: discovery.k8s.io/v1" + rest)
    pipeline = str(EXAMPLE / "pipeline.yaml")
    positional = porchkit("pipeline", "eval", "-p", pipeline, str(EXAMPLE / "objects.yaml"))
    flags = porchkit("pipeline", "eval", "-p", pipeline, "-f", str(tmp_path / "services.yaml"),
                     "--filename", str(tmp_path / "slices.yaml"))
    mixed = porchkit("pipeline", "eval", "-p", pipeline, str(tmp_path / "slices.yaml"), "-f", "-", stdin=services)
    assert positional.returncode == flags.returncode == mixed.returncode == 0, flags.stderr + mixed.stderr
    assert len(load_yaml(positional.stdout, "stdout")) == 3
    assert flags.stdout == mixed.stdout == positional.stdout


def test_no_input_at_all_is_one_line() -> None:
    result = porchkit("pipeline", "eval", "-p", str(EXAMPLE / "pipeline.yaml"))
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == "porchkit: no manifests to read: name files or directories with -f, or as arguments\n"


def test_trace_prints_every_stage_on_stderr_and_only_outputs_on_stdout() -> None:
    plain = porchkit("pipeline", "eval", "-p", str(EXAMPLE / "pipeline.yaml"), str(EXAMPLE / "objects.yaml"))
    traced = porchkit("pipeline", "eval", "--trace", "-p", str(EXAMPLE / "pipeline.yaml"),
                      str(EXAMPLE / "objects.yaml"))
    assert traced.returncode == 0
    assert traced.stdout == plain.stdout
    headers = [line for line in traced.stderr.splitlines() if line.startswith("# ---")]
    assert headers == ["# --- sources: 6 document(s)", "# --- stage 1 (@join): 3 document(s)",
                       "# --- stage 2 (@project): 3 document(s)", "# --- stage 3 (@unwind): 5 document(s)",
                       "# --- stage 4 (@unwind): 7 document(s)", "# --- stage 5 (@gather): 3 document(s)",
                       "# --- stage 6 (@project): 3 document(s)"]


def test_yaml_1_2_scalars_survive_the_round_trip(tmp_path: Path) -> None:
    pipeline = write(tmp_path / "p.yaml", 'pipeline:\n  "@project": {"$.": "$."}\n')
    objects = write(tmp_path / "o.yaml",
                    "kind: X\nmetadata: {name: a}\ndata: {flag: yes, switch: on, country: NO, mode: 0755,"
                    " octal: 0o17, exp: '1e3', when: 2024-01-01, tilde: ~}\n")
    result = porchkit("pipeline", "eval", "-p", str(pipeline), str(objects))
    assert result.returncode == 0, result.stderr
    data = load_yaml(result.stdout, "stdout")[0]["data"]
    assert data == {"flag": "yes", "switch": "on", "country": "NO", "mode": 493, "octal": 15, "exp": "1e3",
                    "when": "2024-01-01", "tilde": None}
    assert "'1e3'" in result.stdout and "'yes'" in result.stdout


@pytest.mark.parametrize(("pipeline_text", "objects_text", "message"), [
    ('pipeline:\n  - "@select": "$.spec.x"\n', "kind: A\nmetadata: {name: a}\n",
     "p.yaml: stage 1 (@select) on A a: the condition must give true or false, got null"),
    ('pipeline:\n  - "@project": {"@nope": 1}\n', "kind: A\nmetadata: {name: a}\n",
     "p.yaml: stage 1 (@project): unknown operator @nope"),
    ('pipeline:\n  - "@project": {"spec": "$.spec"}\n', "kind: A\nmetadata: {name: a}\n",
     "p.yaml: output of A a: the output object has no metadata map"),
    ('pipeline:\n  - "@frobnicate": 1\n', "kind: A\nmetadata: {name: a}\n",
     "p.yaml: stage 1: unknown pipeline operation '@frobnicate'"),
    ('pipeline: [\n', "kind: A\n", "p.yaml: line 2, column 1: invalid YAML"),
    ('pipeline:\n  - "@project": {metadata: "$.metadata"}\n', "kind: A\nmetadata: {name: [\n",
     "o.yaml: line 3, column 1: invalid YAML"),
    ('pipeline:\n  - "@project": {metadata: "$.metadata"}\n', "- 1\n",
     "o.yaml: expected an object (a mapping), got a list"),
    ('sources: [{kind: A}, {kind: B}]\npipeline:\n  - "@select": true\n', "kind: A\nmetadata: {name: a}\n",
     "must start with @join"),
    ('pipeline: {"@select": true}\ntarget: {kind: X, type: Merger}\n', "kind: A\nmetadata: {name: a}\n",
     "p.yaml: target.type: expected Updater or Patcher"),
    ('pipelines: []\n', "", "p.yaml: unknown field 'pipelines'"),
])
def test_bad_input_gives_one_line_and_a_non_zero_exit(tmp_path: Path, pipeline_text: str, objects_text: str,
                                                      message: str) -> None:
    write(tmp_path / "p.yaml", pipeline_text)
    write(tmp_path / "o.yaml", objects_text)
    result = porchkit("pipeline", "eval", "-p", "p.yaml", "o.yaml", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr
    assert lines[0].startswith("porchkit: ") and message in lines[0], lines[0]


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    result = porchkit("pipeline", "eval", "-p", str(EXAMPLE / "pipeline.yaml"), "nope.yaml", cwd=tmp_path)
    assert (result.returncode, result.stderr) == (1, "porchkit: nope.yaml: no such file or directory\n")


def test_invalid_utf8_is_named(tmp_path: Path) -> None:
    (tmp_path / "o.yaml").write_bytes(b"kind: A\nmetadata: {name: \xff}\n")
    result = porchkit("pipeline", "eval", "-p", str(EXAMPLE / "pipeline.yaml"), "o.yaml", cwd=tmp_path)
    assert (result.returncode, result.stderr) == (1, "porchkit: o.yaml: not UTF-8 text\n")
