"""The `porchkit` face: mounting part commands, help, --version, and the one-line error contract."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

import yaml

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
            "print(sorted(m for m in ('porchkit.pipeline_cli', 'krmfn.cli') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['porchkit.pipeline_cli']"


def test_python_dash_m_runs_the_same_command_line() -> None:
    result = subprocess.run([sys.executable, "-m", "porchkit", "pipeline", "--help"], capture_output=True, text=True)
    assert result.returncode == 0 and "eval" in result.stdout


def test_an_unknown_command_exits_with_usage() -> None:
    result = subprocess.run([sys.executable, "-m", "porchkit", "frobnicate"], capture_output=True, text=True)
    assert result.returncode == 2 and "invalid choice" in result.stderr


def test_version_prints_the_installed_distributions_version() -> None:
    result = subprocess.run([sys.executable, "-m", "porchkit", "--version"], capture_output=True, text=True)
    assert (result.returncode, result.stdout, result.stderr) == (0, f"porchkit {metadata.version('porchkit')}\n", "")


def test_manager_help_names_every_controller() -> None:
    result = subprocess.run([sys.executable, "-m", "porchkit", "manager", "--help"], capture_output=True, text=True)
    assert result.returncode == 0
    assert "packagevariant, packagevariantset, approval, decorator, map" in " ".join(result.stdout.split())


def test_a_reader_that_goes_away_ends_the_command_quietly(tmp_path: Path) -> None:
    objects = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"c{i:04d}"}, "data": {"k": "v" * 200}}
               for i in range(2000)]  # far more than a pipe holds
    (tmp_path / "objects.yaml").write_text(yaml.safe_dump_all(objects))
    (tmp_path / "pipeline.yaml").write_text('pipeline:\n  "@project": {"$.": "$."}\n')
    process = subprocess.Popen([sys.executable, "-m", "porchkit", "pipeline", "eval", "-p",
                                str(tmp_path / "pipeline.yaml"), str(tmp_path / "objects.yaml")],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stderr is not None
    assert process.stdout.readline() == "apiVersion: v1\n"
    process.stdout.close()  # as `| head -1` does
    assert process.wait(timeout=60) == 1
    assert process.stderr.read() == ""


def test_every_name_the_face_wires_by_string_resolves() -> None:
    import importlib

    for name, spec in cli.CONTROLLERS.items():
        module_name, _, function_name = spec.partition(":")
        assert callable(getattr(importlib.import_module(module_name), function_name)), name
    for group, (module_name, _) in cli.GROUPS.items():
        module = importlib.import_module(module_name)
        assert callable(module.add_commands), group
    assert "porchkit fn deltapipe" in cli.in_process_functions()
