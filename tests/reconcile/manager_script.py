"""`porchkit manager` with one slow test controller, for tests that signal a real process.

    python -m tests.reconcile.manager_script --embedded --state DIR --controllers slow ...

The `slow` controller reconciles ConfigMaps: it prints `started <key>`, sleeps $SLOW_SECONDS
(default 1) and prints `finished <key>`, on stdout, flushed at once.
"""

from __future__ import annotations

import os
import sys
import time

from reconcile import Kind, ObjectKey
from reconcile.controller import Controller
from reconcile.manager import Manager
from reconcile.outcome import Done

CONFIGMAP = Kind("v1", "ConfigMap")


def slow_controllers(manager: Manager) -> list[Controller]:
    seconds = float(os.environ.get("SLOW_SECONDS", "1"))

    def reconcile(key: ObjectKey) -> Done:
        print(f"started {key}", flush=True)
        time.sleep(seconds)
        print(f"finished {key}", flush=True)
        return Done()

    return [Controller("slow", CONFIGMAP, reconcile, clock=manager.clock)]


if __name__ == "__main__":
    from porchkit import cli

    cli.CONTROLLERS["slow"] = "tests.reconcile.manager_script:slow_controllers"
    sys.exit(cli.main(["manager", *sys.argv[1:]]))
