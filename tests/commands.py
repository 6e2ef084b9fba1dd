"""Running porchkit as a user runs it, a process of its own, and timing it.

`Command("map", "reconcile")` runs `python -m porchkit map reconcile ARGS...` with the test's
environment (plus `env`); `.timed(...)` also says how many seconds that took, porchkit's start-up
included: subtract the session fixture `porchkit_start_up` (tests/conftest.py) to bound the
command's own work by BUDGET. `deployed_hook_policy(manifest)` is what the manager's command line
in a shipped Deployment (deploy/) lets hooks do.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import yaml

from porchkit import cli
from reconcile.cli import hook_policy
from reconcile.hooks import HookPolicy

ROOT = Path(__file__).resolve().parent.parent  # the repository: where `tests.*` imports from
BUDGET = 2.0  # seconds beyond porchkit's start-up to report an error known after one try (retrying took 3)
TIMEOUT = 60.0  # seconds a command may run before the test fails


class Command:
    """`porchkit WORDS... ARGS...` in a process of its own (see the module docstring)."""

    def __init__(self, *words: str) -> None:
        self.words = words

    def __call__(self, *args: str, cwd: Path = ROOT,
                 env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "porchkit", *self.words, *args], cwd=cwd,
                              env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=TIMEOUT)

    def timed(self, *args: str, cwd: Path = ROOT,
              env: Mapping[str, str] | None = None) -> tuple[subprocess.CompletedProcess[str], float]:
        """The command's result, and the seconds it took."""
        started = time.perf_counter()
        result = self(*args, cwd=cwd, env=env)
        return result, time.perf_counter() - started


def deployed_hook_policy(manifest: str) -> HookPolicy:
    """The HookPolicy of `porchkit manager` run with the arguments of the one Deployment in
    deploy/`manifest`."""
    [deployment] = [doc for doc in yaml.safe_load_all((ROOT / "deploy" / manifest).read_text())
                    if doc and doc.get("kind") == "Deployment"]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    parser, _ = cli.build_parser("manager")
    args = parser.parse_args(container["args"])
    return hook_policy(args.python_hooks, args.secret_namespaces)
