"""Helpers shared by the runtime's tests: objects, managers on threads, and a webhook on loopback that
records what it is sent."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from reconcile import Kind, ListResult, ObjectKey
from reconcile.embedded import EmbeddedCluster
from reconcile.errors import ServerError
from reconcile.leaderelection import LEASE
from reconcile.manager import Manager

ROOT = Path(__file__).resolve().parents[2]


def configmap(name: str, namespace: str = "default", **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace},
            "data": data}


class Running:
    """`manager.run()` on a thread of its own."""

    def __init__(self, manager: Manager) -> None:
        self.manager, self.code = manager, None
        self.thread = threading.Thread(target=self._run, name="manager-run")
        self.thread.start()

    def _run(self) -> None:
        self.code = self.manager.run()

    def wait(self, timeout: float = 10) -> int | None:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the manager did not stop"
        return self.code

    def stop(self, timeout: float = 10) -> int | None:
        self.manager.stop()
        return self.wait(timeout)


class GatedLists:
    """The embedded cluster, except that `list` waits until `release()` (a slow first list), then
    answers, or fails if released with `fail=True`."""

    def __init__(self, cluster: EmbeddedCluster) -> None:
        self.cluster, self.gate, self.fail = cluster, threading.Event(), False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cluster, name)

    def list(self, kind: Kind, **options: Any) -> ListResult:
        self.gate.wait(10)
        if self.fail:
            raise ServerError("the API server is unreachable")
        return self.cluster.list(kind, **options)

    def release(self, *, fail: bool = False) -> None:
        self.fail = fail
        self.gate.set()


class Partitioned:
    """The embedded cluster as one manager sees it; `cut()` makes its Lease requests fail."""

    def __init__(self, cluster: EmbeddedCluster) -> None:
        self.cluster, self.is_cut = cluster, False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cluster, name)

    def cut(self) -> None:
        self.is_cut = True

    def _lease(self, kind: Kind) -> None:
        if self.is_cut and kind == LEASE:
            raise ServerError("connection refused")

    def get(self, kind: Kind, key: ObjectKey) -> Any:
        self._lease(kind)
        return self.cluster.get(kind, key)

    def update(self, obj: dict[str, Any]) -> Any:
        self._lease(Kind.of(obj))
        return self.cluster.update(obj)


@dataclass(frozen=True)
class Request:
    """One POST a RecordingServer got."""

    headers: dict[str, str]
    body: bytes
    at: float  # time.monotonic() when it arrived


class RecordingServer:
    """A webhook on 127.0.0.1 answering every POST with `{}` after `delay` seconds (a hook that does
    some work); `requests` holds each request it got. Serves on a thread until `close()`."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.requests: list[Request] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                owner.requests.append(Request(dict(self.headers.items()), body, time.monotonic()))
                time.sleep(owner.delay)
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


class ScriptProcesses:
    """Scripts (hook servers) run as `python3` processes of their own, each printing the port it
    listens on as its first line; stderr goes to `<stderr_dir>/<script>.stderr`. `stop()` kills
    every one started."""

    def __init__(self, stderr_dir: Path) -> None:
        self.stderr_dir = stderr_dir
        self.started: list[subprocess.Popen[str]] = []

    def start(self, script: Path) -> tuple[int, subprocess.Popen[str]]:
        """The port the script listens on, once it does, and its process."""
        with open(self.stderr_dir / f"{script.stem}.stderr", "a") as stderr:
            process = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=stderr, text=True)
        self.started.append(process)
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        assert line.isdigit(), f"{script.name} did not print its port (got {line!r})"
        return int(line), process

    def stop(self) -> None:
        for process in self.started:
            process.kill()
            process.wait(timeout=5)
            if process.stdout is not None:
                process.stdout.close()


def manager_process(*args: str, state: Path) -> subprocess.Popen[str]:
    """`porchkit manager --embedded --state STATE --controllers slow` as a process of its own
    (tests/reconcile/manager_script.py), with stdout and stderr piped."""
    return subprocess.Popen([sys.executable, "-m", "tests.reconcile.manager_script", "--embedded", "--state",
                             str(state), "--controllers", "slow", "--health-addr", "127.0.0.1:0", *args],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "SLOW_SECONDS": "1"})
