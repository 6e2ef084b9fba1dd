"""The `porchkit` face: mounting part commands, help, and the one-line error contract."""

from __future__ import annotations

import subprocess
import sys

from porchkit import cli


def test_help_lists_every_command_group(capsys) -> None:  # type: ignore[no-untyped-def]
    try:
        cli.main(["--help"])
    except SystemExit as done:
        assert done.code == 0
    out = capsys.readouterr().out
    assert all(group in out for group in cli.GROUPS)


def test_only_the_named_group_is_imported() -> None:
    code = ("import sys; from porchkit import cli; cli.build_parser('pipeline'); "
            "print(sorted(m for m in ('deltapipe.cli', 'krmfn.cli') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['deltapipe.cli']"


def test_python_dash_m_runs_the_same_command_line() -> None:
    result = subprocess.run([sys.executable, "-m", "porchkit", "pipeline", "--help"], capture_output=True, text=True)
    assert result.returncode == 0 and "eval" in result.stdout


def test_an_unknown_command_exits_with_usage() -> None:
    result = subprocess.run([sys.executable, "-m", "porchkit", "frobnicate"], capture_output=True, text=True)
    assert result.returncode == 2 and "invalid choice" in result.stderr
