"""Hook scripts run as processes of their own, as a user's hook servers run.

`hook_servers(folder)` makes the `hook_server` fixture of a test package: `start("faulty")` runs
`folder`/faulty.py with `python3`, and returns a `HookServer` once it listens (the script prints
its port on its first line); its stderr goes to `<tmp_path>/<script>.stderr`, and every process
started is killed after the test.
"""

from __future__ import annotations

import json
import subprocess
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.reconcile.support import ScriptProcesses


@dataclass(frozen=True)
class HookServer:
    """A hook script running as a process of its own on 127.0.0.1:`port`."""

    script: str
    port: int
    process: subprocess.Popen[str]

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def calls(self) -> dict[str, dict[str, list[float]]]:
        """faulty.py only: path -> subject -> the time.monotonic() of each call (the subject is
        what that faulty.py names a call by: "ns/name" of a target, the name of an input)."""
        with urllib.request.urlopen(f"http://{self.address}/calls", timeout=5) as answer:
            found: dict[str, dict[str, list[float]]] = json.loads(answer.read())
        return found

    def times(self, path: str, subject: str) -> list[float]:
        """faulty.py only: when `subject` was answered on `path`."""
        return self.calls().get(path, {}).get(subject, [])


def hook_servers(folder: Path) -> Any:
    """The `hook_server` fixture for the scripts in `folder` (see the module docstring)."""
    @pytest.fixture
    def hook_server(tmp_path: Path) -> Iterator[Callable[[str], HookServer]]:
        processes = ScriptProcesses(tmp_path)

        def start(script: str) -> HookServer:
            port, process = processes.start(folder / f"{script}.py")
            return HookServer(script, port, process)

        yield start
        processes.stop()
    return hook_server
