"""The attacks on hooks found on a real cluster (docs/security.md), as DecoratorControllers, and
the traps that show whether one got through. Shared by test_hook_policy.py (embedded cluster)
and tests/e2e/test_security_hooks_e2e.py (a real API server).

* `subprocess:Popen` is called with the request, a dict: Popen runs `list(request)[0]`, the
  program named `controller`, from PATH. `PathTrap` puts programs of the request's key names
  first on PATH; each one that runs leaves a file behind.
* `builtins:print` writes the target into the manager's log: the target carries `LEAK_MARK`.
* `builtins:__dict__.update` merges the request into the builtins (`object` becomes the target).
* a webhook whose `authorization.secretRef` names a Secret in kube-system, over plain http to
  a server of the attacker's: `RecordingServer` counts the requests it gets and keeps their
  Authorization headers.
"""

from __future__ import annotations

import builtins
import os
import stat
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from reconcile.cluster import Obj
from tests.decorators.hooks_support import decorator_controller

REQUEST_KEYS = ("controller", "object", "attachments", "related", "finalizing")
LEAK_MARK = "leaked-if-printed-7f3a9c"
SELECTED = {"hostile-demo": "yes"}
FIELD = "spec.hooks.sync.python.function"
SECRET_FIELD = "spec.hooks.sync.webhook.authorization"


class PathTrap:
    """Programs named after the request's keys, first on PATH: each one that runs writes a file
    named after itself in `directory`/ran."""

    def __init__(self, directory: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.bin, self.ran_in = directory / "bin", directory / "ran"
        self.bin.mkdir(parents=True)
        self.ran_in.mkdir()
        for name in REQUEST_KEYS:
            program = self.bin / name
            program.write_text(f"#!/bin/sh\ntouch '{self.ran_in / name}'\n")
            program.chmod(program.stat().st_mode | stat.S_IXUSR)
        monkeypatch.setenv("PATH", f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}")

    def ran(self) -> list[str]:
        return sorted(path.name for path in self.ran_in.iterdir())


class RecordingServer:
    """An http server on 127.0.0.1 answering every POST with `{}`; `requests` holds the headers of
    each request it got. Serves on a thread until `close()`."""

    def __init__(self) -> None:
        self.requests: list[dict[str, str]] = []
        recorded = self.requests

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                recorded.append(dict(self.headers.items()))
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, name="recording-hook-server", daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


def builtins_intact() -> bool:
    """Whether no request was merged into the builtins."""
    return builtins.object is object and not any(hasattr(builtins, key) for key in REQUEST_KEYS if key != "object")


def hostile(name: str, hooks: dict[str, Any]) -> Obj:
    """A DecoratorController `name` over the ConfigMaps labelled SELECTED, with `hooks`."""
    return decorator_controller(name, resources=[{"apiVersion": "v1", "resource": "configmaps",
                                                  "labelSelector": {"matchLabels": SELECTED}}],
                                attachments=[{"apiVersion": "v1", "resource": "configmaps"}], hooks=hooks)


def python_attacks() -> dict[str, tuple[Obj, str]]:
    """name -> (the DecoratorController, the message it gets) for the python hook attacks, under
    a manager whose --python-hooks does not name the module."""
    attacks = {}
    for name, reference in (("popen", "subprocess:Popen"), ("printer", "builtins:print")):
        message = f"{FIELD}: refused {reference!r}: python hooks may come from modules under"
        attacks[name] = (hostile(name, {"sync": {"python": {"function": reference}}}), message)
    reference = "builtins:__dict__.update"
    attacks["builtins-update"] = (hostile("builtins-update", {"sync": {"python": {"function": reference}}}),
                                  f"{FIELD}: expected \"package.module:function\"")
    return attacks


def secret_thief(name: str, url: str, secret: str) -> Obj:
    """A DecoratorController whose webhook would send the token of Secret kube-system/`secret` to `url`."""
    ref = {"name": secret, "namespace": "kube-system", "key": "token"}
    return hostile(name, {"sync": {"webhook": {"url": url, "authorization": {"secretRef": ref}}}})


def target(name: str, namespace: str = "default") -> Obj:
    """A ConfigMap every hostile DecoratorController selects, carrying LEAK_MARK."""
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(SELECTED),
                         "annotations": {"example.com/mark": LEAK_MARK}},
            "data": {"mark": LEAK_MARK}}
