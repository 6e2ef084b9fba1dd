"""`porchkit fn NAME`: registered functions are mounted and run with the runner's contract."""

from __future__ import annotations

import argparse
import io
import sys

import pytest

from krmfn import cli


def test_the_fn_group_gets_one_command_per_registered_function(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(cli.FUNCTIONS, "set-annotation", ("tests.krmfn.fns.set_annotation:set_annotation", "demo"))
    parser = argparse.ArgumentParser(prog="porchkit fn")
    cli.add_commands(parser)
    args = parser.parse_args(["set-annotation"])
    assert args.fn == "set-annotation"
    stdin = io.TextIOWrapper(
        io.BytesIO(
            b"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\n"
            b"functionConfig: {kind: ConfigMap, metadata: {name: x}, data: {key: k}}\n"
        )
    )
    stdout = io.TextIOWrapper(io.BytesIO())
    monkeypatch.setattr(sys, "stdin", stdin)
    monkeypatch.setattr(sys, "stdout", stdout)
    assert args.run(args) == 0
    stdout.flush()
    assert stdout.buffer.getvalue().startswith(b"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\n")


def test_a_function_name_is_required() -> None:
    parser = argparse.ArgumentParser(prog="porchkit fn")
    cli.add_commands(parser)
    with pytest.raises(SystemExit):
        parser.parse_args([])


def test_user_errors_are_krmfn_errors() -> None:
    from krmfn import KrmfnError

    assert (KrmfnError,) == cli.USER_ERRORS


def test_help_prints_the_function_modules_docstring(capsys: pytest.CaptureFixture[str]) -> None:
    import krmfn.deltapipe_fn

    assert cli.run_without_parser(["deltapipe", "--help"]) == 0
    shown = capsys.readouterr().out
    assert shown.startswith("usage: porchkit fn deltapipe < resource-list.yaml > resource-list.yaml\n\n")
    assert krmfn.deltapipe_fn.__doc__ is not None
    assert shown.rstrip("\n").endswith(krmfn.deltapipe_fn.__doc__.strip().splitlines()[-1])
    assert cli.run_without_parser(["deltapipe", "--help", "extra"]) is None  # left to argparse
