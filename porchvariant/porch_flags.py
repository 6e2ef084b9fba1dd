"""What the command line tells the embedded Porch, shared by `porchkit variants reconcile` and
`porchkit manager --porch embedded`.

`add_git_arguments(group)` adds `--git-cache DIR` and `--git-fetch-period DURATION` to an argparse
group, and `remote_settings(args)` turns them into the embedded Porch's RemoteSettings (argparse
reports a bad duration in one line). `renderer(args)` is the Kptfile pipeline renderer: kpt when it
is on PATH, else porchkit's own functions in-process, which the face hands over as the parser
default `in_process_functions` (a function returning {exec command: function}).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from porchvariant.embedded._porch_remotes import RemoteSettings
    from porchvariant.embedded.render.renderer import PipelineRenderer

DEFAULT_FETCH_PERIOD = 60.0
_UNITS = {"s": 1, "m": 60, "h": 3600}


def add_git_arguments(group: argparse._ArgumentGroup | argparse.ArgumentParser) -> None:
    group.add_argument("--git-cache", type=Path, metavar="DIR",
                       help="keep the mirrors of remote repositories in DIR (default: "
                            "$XDG_CACHE_HOME/porchkit/git, else ~/.cache/porchkit/git)")
    group.add_argument("--git-fetch-period", type=duration, default=DEFAULT_FETCH_PERIOD, metavar="DURATION",
                       help="fetch each remote repository this often, unless its spec.sync.schedule says "
                            "otherwise: 60s, 5m, 1h or plain seconds (default 60s)")


def remote_settings(args: argparse.Namespace) -> RemoteSettings:
    from porchvariant.embedded._porch_remotes import RemoteSettings

    return RemoteSettings(**({"cache": args.git_cache} if args.git_cache else {}), fetch_period=args.git_fetch_period)


def duration(text: str) -> float:
    """A duration flag: 45, 45s, 5m or 1h, in seconds."""
    number, unit = (text[:-1], _UNITS[text[-1]]) if text[-1:] in _UNITS else (text, 1)
    try:
        value = float(number) * unit
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (45, 45s, 5m, 1h)") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be more than 0")
    return value


def renderer(args: argparse.Namespace) -> PipelineRenderer:
    from porchvariant.embedded.render.renderer import PipelineRenderer

    provider = getattr(args, "in_process_functions", None)
    return PipelineRenderer(in_process=dict(provider()) if provider is not None else None)
