"""The runner: exit codes, what is written on every path, and one clean line on stderr."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

import krmfn
from krmfn import ResourceList, process, read_resource_list, resourcelist, runner, testing
from krmfn.runner import EXIT_BAD_INPUT, EXIT_BUG, EXIT_FAILED, EXIT_OK
from tests.krmfn.conftest import FNS
from tests.krmfn.fns.misbehave import misbehave
from tests.krmfn.fns.require_label import require_label
from tests.krmfn.fns.set_annotation import set_annotation


def with_config(text: str, **data: str) -> str:
    """`text` (a ResourceList) with a ConfigMap functionConfig holding `data`."""
    lines = ["functionConfig:", "  apiVersion: v1", "  kind: ConfigMap", "  metadata:", "    name: function-input"]
    lines += ["  data:", *(f"    {key}: {value}" for key, value in data.items())] if data else ["  data: {}"]
    return text.split("functionConfig:")[0] + "\n".join(lines) + "\n"


def test_a_successful_run_writes_the_edited_items_and_exits_0(kpt_eval_text: str) -> None:
    outcome = process(set_annotation, with_config(kpt_eval_text, key="team", value="blue"))
    assert outcome.exit_code == EXIT_OK and outcome.messages == []
    rl = read_resource_list(outcome.output)
    edited = [i for i in rl.items if i["metadata"].get("annotations", {}).get("team") == "blue"]
    assert {i["metadata"]["name"] for i in edited} == {"settings", "from-json", "web", "runner", "gadget"}
    assert len(rl.results) == len(edited) and all(r.severity == "info" for r in rl.results)


def test_an_error_result_fails_the_run_and_writes_the_input_unchanged(kpt_eval_text: str) -> None:
    outcome = process(require_label, with_config(kpt_eval_text, label="app"))
    assert outcome.exit_code == EXIT_FAILED
    assert outcome.messages == ["require-label: failed with 4 error result(s)"]
    output = outcome.output.decode()
    assert output.startswith(with_config(kpt_eval_text, label="app"))
    assert [r.severity for r in read_resource_list(output).results] == ["error"] * 4


@pytest.mark.parametrize(
    ("how", "code", "message"),
    [
        ("crash", EXIT_BUG, "misbehave: internal error: ZeroDivisionError: division by zero"),
        ("exit", EXIT_FAILED, "misbehave: the function exited with 4"),
        ("unwritable", EXIT_FAILED, "misbehave: cannot write the output: items[0] (Kptfile/edited): "),
        ("refuse", EXIT_FAILED, "misbehave: field spec.replicas: refusing on purpose"),
    ],
)
def test_a_failing_function_writes_the_input_items_unchanged_plus_an_error(
    kpt_eval_text: str, how: str, code: int, message: str
) -> None:
    text = with_config(kpt_eval_text, how=how)
    outcome = process(misbehave, text)
    assert outcome.exit_code == code
    assert outcome.messages[0].startswith(message)
    output = outcome.output.decode()
    assert output.startswith(text)  # every item as it came, although the function renamed them all
    results = read_resource_list(output).results
    assert results[-1].severity == "error" and results[-1].message in outcome.messages[0]


def test_a_failure_whose_input_cannot_be_written_back_writes_nothing_and_says_why_in_one_line() -> None:
    # JSON items have no text to copy back, and this one is deeper than the writer goes
    deep = "[" * 600 + "1" + "]" * 600
    text = ('{"apiVersion": "config.kubernetes.io/v1", "kind": "ResourceList", "items": '
            f'[{{"kind": "A", "metadata": {{"name": "a"}}, "d": {deep}}}]}}')
    outcome = process(misbehave, text.replace('"items"', '"functionConfig": {"apiVersion": "v1", "kind": "ConfigMap", '
                                                       '"metadata": {"name": "c"}, "data": {"how": "exit"}}, "items"'))
    assert (outcome.exit_code, outcome.output) == (EXIT_FAILED, b"")
    assert outcome.messages == ["misbehave: the function exited with 4 (and the input cannot be written back: an item "
                                "is nested too deeply to write)"]


def test_a_bug_adds_its_traceback_after_the_one_line_message(kpt_eval_text: str) -> None:
    outcome = process(misbehave, with_config(kpt_eval_text, how="crash"))
    assert outcome.messages[1] == "Traceback (most recent call last):"
    assert outcome.messages[-1] == "ZeroDivisionError: division by zero"


def test_a_config_error_is_an_error_result_with_the_input_unchanged(kpt_eval_text: str) -> None:
    outcome = process(set_annotation, kpt_eval_text)  # no `key`
    assert outcome.exit_code == EXIT_FAILED
    assert outcome.messages == ["set-annotation: functionConfig (none given): key: Field required"]
    assert outcome.output.decode().startswith(kpt_eval_text)


def test_returning_something_is_a_bug_not_a_silent_success(kpt_eval_text: str) -> None:
    outcome = process(lambda rl: [], kpt_eval_text, name="fn")
    assert outcome.exit_code == EXIT_BUG
    assert "must edit the ResourceList in place" in outcome.messages[0]


def test_unreadable_input_writes_nothing() -> None:
    outcome = process(set_annotation, b"kind: Nope\n")
    assert (outcome.exit_code, outcome.output) == (EXIT_BAD_INPUT, b"")
    assert outcome.messages == ["set-annotation: not a ResourceList: kind is 'Nope', expected 'ResourceList'"]


def test_main_uses_the_given_streams(kpt_eval_text: str) -> None:
    import io

    out, err = io.BytesIO(), io.StringIO()

    def identity(rl: ResourceList) -> None:
        """Change nothing."""

    code = krmfn.runner.main(identity, stdin=io.BytesIO(kpt_eval_text.encode()), stdout=out, stderr=err)
    assert (code, out.getvalue().decode(), err.getvalue()) == (0, kpt_eval_text, "")
    help_out = io.BytesIO()
    assert krmfn.runner.main(identity, argv=["--help"], stdout=help_out) == 0
    assert b"kpt fn eval DIR --exec 'identity'" in help_out.getvalue() and b"Change nothing." in help_out.getvalue()


# --- as a process: what kpt sees ---------------------------------------------------------------

BAD_STDIN = {
    "empty stdin": b"",
    "not a ResourceList": b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
    "items not a list": b"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: {a: 1}\n",
    "invalid UTF-8": b"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- a: \xc3\x28\n",
    "invalid YAML": b"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- a: 'unterminated\n",
    "garbage bytes": bytes(range(256)),
}


def run_script(name: str, stdin: bytes, *args: str) -> subprocess.CompletedProcess[bytes]:
    env = testing.kpt_environment()
    return subprocess.run(
        [sys.executable, str(FNS / f"{name}.py"), *args], input=stdin, capture_output=True, env=env, timeout=60
    )


@pytest.mark.parametrize("stdin", BAD_STDIN.values(), ids=BAD_STDIN.keys())
def test_bad_input_is_one_stderr_line_a_non_zero_exit_and_no_traceback(stdin: bytes) -> None:
    done = run_script("set_annotation", stdin)
    stderr = done.stderr.decode()
    assert done.returncode == EXIT_BAD_INPUT and done.stdout == b""
    assert "\n" not in stderr and stderr.startswith("set-annotation: ")
    assert "Traceback" not in stderr


def test_a_config_that_fails_validation_is_one_stderr_line_and_exit_1(kpt_eval_text: str) -> None:
    done = run_script("set_annotation", kpt_eval_text.encode())
    assert done.returncode == EXIT_FAILED
    assert done.stderr.decode() == "set-annotation: functionConfig (none given): key: Field required"
    assert done.stdout.decode().startswith(kpt_eval_text)


def test_unexpected_arguments_and_help(tmp_path: Path) -> None:
    done = run_script("set_annotation", b"", "--frobnicate")
    assert done.returncode == EXIT_BAD_INPUT and "\n" not in done.stderr.decode()
    done = run_script("set_annotation", b"", "--help")
    assert done.returncode == 0 and b"Example function: set one annotation" in done.stdout


def test_importing_krmfn_does_not_import_yaml_or_pydantic() -> None:
    code = "import sys, krmfn; print(sorted(m for m in ('yaml', 'pydantic') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=testing.kpt_environment())
    assert done.stdout.strip() == "[]"


def test_stdin_is_read_only_to_one_byte_past_the_limit_and_then_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(resourcelist, "MAX_INPUT", 64)
    monkeypatch.setattr(runner, "MAX_INPUT", 64)
    asked: list[int | None] = []

    class Endless(io.BytesIO):
        def read(self, size: int | None = -1) -> bytes:
            asked.append(size)
            return b"#" * size if size is not None and size >= 0 else b""  # unbounded would never end

    err = io.StringIO()
    assert runner.main(lambda rl: None, stdin=Endless(), stdout=io.BytesIO(), stderr=err) == EXIT_BAD_INPUT
    assert asked == [65]
    assert err.getvalue().strip().endswith("the input is larger than 0 MiB, more than a package can hold")
