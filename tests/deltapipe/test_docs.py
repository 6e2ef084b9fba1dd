"""Runs every example of docs/deltapipe.md, so that the documentation shows what porchkit does.

An example is a fenced block preceded by a marker line `<!-- example: KIND -->`:

* `expression` (YAML): `expression`, optional `subject` and `now`, and `result` or `error`;
* `pipeline` (YAML): `pipeline` (a pipeline file), `objects`, and `output` or `error`. The objects
  are also fed one at a time through `Pipeline.apply`, which must accumulate the same outputs;
* `apply` (YAML): `pipeline`, and `steps`, each `{apply: [deltas], emitted: [deltas]}` or
  `{apply: [deltas], error: text}`; after every step the accumulated outputs must equal
  `evaluate` of the objects held;
* `python`: executed as it is (it checks itself with asserts);
* `cli` (console): `$ porchkit ...` then the expected standard output (a YAML stream), or the
  expected `porchkit: ...` error line.

`error` is a part of the error's one-line text.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import deltapipe
from deltapipe import operators
from deltapipe.errors import DeltapipeError
from deltapipe.spec import PipelineSpec
from deltapipe.values import strict_equal
from krmyaml import load_all

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "deltapipe.md"

MARKER = re.compile(r"^\s*<!--\s*example:\s*(\S+)\s*-->\s*$")
LOOSE_MARKER = re.compile(r"^\s*<!--\s*example")
FENCE = re.compile(r"^(\s*)(`{3,})\s*(\w*)\s*$")
KINDS = {"expression": "yaml", "pipeline": "yaml", "apply": "yaml", "python": "python", "cli": "console"}
STAGES = ("@join", "@select", "@project", "@unwind", "@demux", "@gather", "@mux")


def load_yaml(text: str, source: str) -> list[Any]:
    """Every non-empty document of a YAML stream."""
    return [doc for doc in load_all(text, source) if doc is not None]


@dataclass(frozen=True)
class Example:
    kind: str
    line: int  # 1-based line of the marker
    lang: str
    text: str

    @property
    def where(self) -> str:
        return f"docs/deltapipe.md:{self.line}"


def collect(text: str) -> list[Example]:
    """Every marked example; raises ValueError for a marker without a well-formed block after it."""
    lines = text.splitlines()
    examples = []
    for index, line in enumerate(lines):
        match = MARKER.match(line)
        if match is None:
            if LOOSE_MARKER.search(line):
                raise ValueError(f"line {index + 1}: malformed example marker {line.strip()!r}")
            continue
        kind = match[1]
        if kind not in KINDS:
            raise ValueError(f"line {index + 1}: unknown example kind {kind!r}")
        opening = FENCE.match(lines[index + 1]) if index + 1 < len(lines) else None
        if opening is None:
            raise ValueError(f"line {index + 1}: the marker must be followed by a fenced block")
        indent, ticks, lang = opening.groups()
        if lang != KINDS[kind]:
            wanted = KINDS[kind]
            raise ValueError(f"line {index + 1}: a {kind} example must be a {wanted} block, got {lang!r}")
        body = []
        for follower in lines[index + 2:]:
            if follower.strip() == ticks:
                break
            if follower.strip() and not follower.startswith(indent):
                raise ValueError(f"line {index + 1}: the block is not indented like its fence")
            body.append(follower[len(indent):])
        else:
            raise ValueError(f"line {index + 1}: unterminated block")
        examples.append(Example(kind, index + 1, lang, "\n".join(body) + "\n"))
    return examples


EXAMPLES = collect(DOC.read_text(encoding="utf-8"))


# ---------------------------------------------------------------------------------------------
# Helpers


def _fields(example: Example, allowed: set[str]) -> dict[str, Any]:
    documents = load_yaml(example.text, example.where)
    assert len(documents) == 1 and type(documents[0]) is dict, f"{example.where}: expected one YAML map"
    fields = documents[0]
    unknown = set(fields) - allowed
    assert not unknown, f"{example.where}: unknown keys {sorted(unknown)}"
    return fields


def _clock(fields: dict[str, Any]) -> Any:
    if "now" in fields:
        now = fields["now"]
        return lambda: now
    return lambda: 0


def _assert_same(got: Any, expected: Any, example: Example) -> None:
    assert strict_equal(got, expected), f"{example.where}:\n  expected {expected!r}\n       got {got!r}"


def _assert_error(error: BaseException, expected: Any, example: Example) -> None:
    assert isinstance(expected, str) and expected, f"{example.where}: `error` must be a non-empty string"
    assert isinstance(error, DeltapipeError), f"{example.where}: not a DeltapipeError: {error!r}"
    text = str(error)
    assert expected in text, f"{example.where}:\n  expected an error with {expected!r}\n  got {text!r}"


def _key(obj: dict[str, Any]) -> tuple[str, str]:
    meta = obj["metadata"]
    return meta.get("namespace", ""), meta["name"]


def _accumulate(held: dict[tuple[str, str], Any], deltas: list[dict[str, Any]]) -> None:
    ops = [d["op"] for d in deltas]
    assert ops == sorted(ops), f"deletes must come before upserts: {ops}"  # "delete" < "upsert"
    for delta in deltas:
        key = _key(delta["object"])
        if delta["op"] == "delete":
            assert key in held, f"delete of {key}, which was never emitted"
            del held[key]
        else:
            held[key] = delta["object"]


def _sorted_outputs(held: dict[tuple[str, str], Any]) -> list[Any]:
    return [held[key] for key in sorted(held)]


# ---------------------------------------------------------------------------------------------
# Runners, one per kind


def run_expression(example: Example) -> None:
    fields = _fields(example, {"expression", "subject", "now", "result", "error"})
    assert "expression" in fields, f"{example.where}: no `expression`"
    assert ("result" in fields) != ("error" in fields), f"{example.where}: give exactly one of result, error"
    subject, clock = fields.get("subject"), _clock(fields)
    if "error" in fields:
        with pytest.raises(DeltapipeError) as info:
            deltapipe.evaluate(fields["expression"], subject, clock=clock)
        _assert_error(info.value, fields["error"], example)
        return
    _assert_same(deltapipe.evaluate(fields["expression"], subject, clock=clock), fields["result"], example)


def run_pipeline(example: Example) -> None:
    fields = _fields(example, {"pipeline", "objects", "now", "output", "error"})
    assert "pipeline" in fields, f"{example.where}: no `pipeline`"
    assert ("output" in fields) != ("error" in fields), f"{example.where}: give exactly one of output, error"
    clock = _clock(fields)
    objects = fields.get("objects") or []
    try:
        spec = PipelineSpec.from_dict(fields["pipeline"])
        routed = spec.route(objects)
        got = spec.build(clock=clock).evaluate(routed)
    except DeltapipeError as err:
        if "error" not in fields:
            raise
        _assert_error(err, fields["error"], example)
        return
    assert "error" not in fields, f"{example.where}: expected an error, got {got!r}"
    _assert_same(got, fields["output"], example)
    # The same world fed as deltas, one object at a time, must end with the same outputs.
    pipeline = spec.build(clock=clock)
    held: dict[tuple[str, str], Any] = {}
    for kind, objs in routed.items():
        for obj in objs:
            _accumulate(held, pipeline.apply([{"op": "upsert", "kind": kind, "object": obj}]))
    _assert_same(_sorted_outputs(held), fields["output"], example)


def run_apply(example: Example) -> None:
    fields = _fields(example, {"pipeline", "now", "steps"})
    spec = PipelineSpec.from_dict(fields["pipeline"])
    clock = _clock(fields)
    pipeline = spec.build(clock=clock)
    world: dict[str, dict[tuple[str, str], Any]] = {}
    held: dict[tuple[str, str], Any] = {}
    steps = fields.get("steps")
    assert type(steps) is list and steps, f"{example.where}: `steps` must be a non-empty list"
    for number, step in enumerate(steps, start=1):
        shape_ok = set(step) in ({"apply", "emitted"}, {"apply", "error"})
        assert shape_ok, f"{example.where}: step {number} needs apply, and emitted or error: {step}"
        if "error" in step:
            with pytest.raises(DeltapipeError) as info:
                pipeline.apply(step["apply"])
            _assert_error(info.value, step["error"], example)
        else:
            emitted = pipeline.apply(step["apply"])
            _assert_same(emitted, step["emitted"], example)
            _accumulate(held, emitted)
            for delta in step["apply"]:
                objects = world.setdefault(delta["kind"], {})
                if delta["op"] == "delete":
                    objects.pop(_key(delta["object"]), None)
                else:
                    objects[_key(delta["object"])] = delta["object"]
        current = {kind: list(objs.values()) for kind, objs in world.items()}
        expected = spec.build(clock=clock).evaluate(current)
        _assert_same(_sorted_outputs(held), expected, example)


def run_python(example: Example) -> None:
    code = compile(example.text, example.where, "exec")
    exec(code, {"__name__": "docs_example"})


def run_cli(example: Example) -> None:
    lines = example.text.splitlines()
    assert lines and lines[0].startswith("$ porchkit "), f"{example.where}: start with `$ porchkit ...`"
    args = shlex.split(lines[0][2:])[1:]
    expected = "\n".join(lines[1:]) + "\n"
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, PYTHONPATH=path)
    done = subprocess.run([sys.executable, "-m", "porchkit", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    if expected.startswith("porchkit: "):
        assert done.returncode == 1, f"{example.where}: exit status {done.returncode}, stderr {done.stderr!r}"
        assert done.stderr == expected, f"{example.where}: stderr {done.stderr!r}"
        return
    assert done.returncode == 0, f"{example.where}: exit status {done.returncode}: {done.stderr}"
    _assert_same(load_yaml(done.stdout, "stdout"), load_yaml(expected, example.where), example)


RUNNERS = {"expression": run_expression, "pipeline": run_pipeline, "apply": run_apply,
           "python": run_python, "cli": run_cli}


# ---------------------------------------------------------------------------------------------
# Tests


@pytest.mark.parametrize("example", EXAMPLES, ids=[f"line-{e.line}" for e in EXAMPLES])
def test_example(example: Example) -> None:
    RUNNERS[example.kind](example)


def test_the_documentation_has_examples() -> None:
    assert len(EXAMPLES) >= 40
    assert {e.kind for e in EXAMPLES} == set(KINDS)


def test_every_operator_and_stage_has_an_example() -> None:
    runnable = "\n".join(e.text for e in EXAMPLES if e.kind != "cli")
    missing = [name for name in [*operators.names(), *STAGES] if f'"{name}"' not in runnable]
    assert not missing, f"no example uses {missing}"


def test_the_cli_fixture_is_the_documented_pipeline() -> None:
    path = ROOT / "testdata/deltapipe/docs/service-per-deployment/pipeline.yaml"
    fixture = load_yaml(path.read_text(encoding="utf-8"), str(path))
    documented = [load_yaml(e.text, e.where)[0]["pipeline"] for e in EXAMPLES if e.kind == "pipeline"]
    assert any(strict_equal(fixture[0], pipeline) for pipeline in documented)


@pytest.mark.parametrize("text, problem", [
    ("<!-- example: expression -->\nno block\n", "must be followed by a fenced block"),
    ("<!-- example: expression -->\n```yaml\nexpression: 1\n", "unterminated block"),
    ("<!-- example: expresion -->\n```yaml\n```\n", "unknown example kind"),
    ("<!-- example: python -->\n```yaml\n```\n", "must be a python block"),
    ("<!-- example expression -->\n", "malformed example marker"),
])
def test_the_example_parser_rejects_malformed_markers(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        collect(text)


def test_the_example_parser_reads_indented_blocks() -> None:
    text = "1. item\n\n   <!-- example: expression -->\n   ```yaml\n   expression: 1\n   result: 1\n   ```\n"
    assert collect(text) == [Example("expression", 3, "yaml", "expression: 1\nresult: 1\n")]


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_internal_links_point_to_headings() -> None:
    text = DOC.read_text(encoding="utf-8")
    anchors = {_slug(m[1]) for m in re.finditer(r"^#{1,6} (.+)$", text, re.MULTILINE)}
    broken = sorted({m[1] for m in re.finditer(r"\]\(#([^)]+)\)", text)} - anchors)
    assert not broken, f"links to missing headings: {broken}"
