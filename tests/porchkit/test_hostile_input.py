"""Hostile manifests are one line and a non-zero exit from every command that reads manifests, in
bounded time and memory (each run under a 1 GB address-space cap and a 5 s budget after start-up):
alias bombs, duplicate keys, text that is not UTF-8, on a file, in a directory and on stdin. The
function (`fn deltapipe`) reads ResourceLists with krmfn's reader, held to the same rules.
"""

from __future__ import annotations

import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PIPELINE = ROOT / "testdata/deltapipe/endpoints/pipeline.yaml"
MEMORY_CAP = 2**30
TIME_CAP = 5.0  # seconds of work, beyond the interpreter's own start (measured on `--version`)

BOMB = "\n".join(["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]",
                  *(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10))]) + "\n"
DUPLICATE = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  name: b\n"
HOSTILE = {  # name -> (bytes, what the one line says)
    "bomb": (BOMB.encode(), "aliases expand to an unreasonably large document"),
    "duplicate": (DUPLICATE.encode(), 'mapping key "name" already defined at line 4'),
    "binary": (b"\xff\xfe\x00\x01kind: x\n", "not UTF-8 text"),
}
COMMANDS = {
    "pipeline eval": ["pipeline", "eval", "-p", str(PIPELINE), "-f"],
    "variants render": ["variants", "render", "-f"],
    "variants reconcile": ["variants", "reconcile", "-f"],
    "decorators reconcile": ["decorators", "reconcile", "-f"],
    "map reconcile": ["map", "reconcile", "-f"],
}


def _capped() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def porchkit(*args: str, stdin: bytes = b"") -> tuple[subprocess.CompletedProcess[bytes], float]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "porchkit", *args], input=stdin, capture_output=True,
                          timeout=60, preexec_fn=_capped)
    return done, time.perf_counter() - started


@pytest.fixture(scope="module")
def start_up() -> float:
    return min(porchkit("--version")[1] for _ in range(2))


@pytest.mark.parametrize("channel", ["file", "directory", "stdin"])
@pytest.mark.parametrize("hostile", sorted(HOSTILE))
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_hostile_manifests_are_one_line_in_bounded_time_and_memory(tmp_path: Path, start_up: float, command: str,
                                                                    hostile: str, channel: str) -> None:
    data, words = HOSTILE[hostile]
    (tmp_path / "in").mkdir()
    path = tmp_path / "in" / "hostile.yaml"
    path.write_bytes(data)
    target = {"file": str(path), "directory": str(tmp_path / "in"), "stdin": "-"}[channel]
    done, took = porchkit(*COMMANDS[command], target, stdin=data if channel == "stdin" else b"")
    err = done.stderr.decode(errors="replace")
    lines = err.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1, err
    named = "<stdin>" if channel == "stdin" else str(path)
    assert lines[0].startswith(f"porchkit: {named}") and words in lines[0], lines[0]
    assert "Traceback" not in err and done.stdout == b""
    assert took - start_up < TIME_CAP


@pytest.mark.parametrize("hostile", ["bomb", "duplicate"])
def test_the_function_refuses_the_same_resource_lists_with_exit_2(hostile: str) -> None:
    data, words = HOSTILE[hostile]
    body = "".join(f"  {line}\n" for line in data.decode().splitlines())
    resource_list = f"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- \n{body}"
    done, _ = porchkit("fn", "deltapipe", stdin=resource_list.encode())
    err = done.stderr.decode(errors="replace")
    assert done.returncode == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert words.split(" at line")[0] in err
