"""The map webhook of tests/e2e/test_mapctl_e2e.py: a real HTTP server on loopback, in a thread.

`MirrorHook()` listens on 127.0.0.1 (a free port; `url` is where a MapController reaches it) and
answers every map request with one ConfigMap per input ConfigMap: `<input>-mirror`, labelled
MIRROR_LABEL, carrying the input's data. An input whose data holds the key FAIL_KEY gets an HTTP
500 instead, with FAIL_KEY's value as the body, so that a test can make one input fail while the
others are mapped. Every request's input name is recorded (`calls`).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MIRROR_LABEL = "e2e.porchkit.dev/mirror"
FAIL_KEY = "fail"


def mirror(request: Mapping[str, Any]) -> dict[str, Any]:
    """The map answer for one input ConfigMap: its `<name>-mirror` copy."""
    source = request["input"]
    name = source["metadata"]["name"]
    return {"outputs": [{"apiVersion": "v1", "kind": "ConfigMap",
                         "metadata": {"name": f"{name}-mirror", "labels": {MIRROR_LABEL: name}},
                         "data": dict(source.get("data") or {})}]}


class MirrorHook:
    """See the module docstring. `close()` stops the server."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, name="mirror-hook", daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/map"

    def calls_for(self, name: str) -> int:
        with self._lock:
            return self.calls.count(name)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)

    def _answer(self, request: Mapping[str, Any]) -> tuple[int, bytes]:
        source = request["input"]
        with self._lock:
            self.calls.append(source["metadata"]["name"])
        failure = (source.get("data") or {}).get(FAIL_KEY)
        if failure is not None:
            return 500, str(failure).encode()
        return 200, json.dumps(mirror(request)).encode()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        hook = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the hook client reuses connections

            def do_POST(self) -> None:  # noqa: N802 - the name http.server dispatches to
                request = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                status, body = hook._answer(request)
                self.send_response(status)
                self.send_header("Content-Type", "application/json" if status == 200 else "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's signature
                pass

        return Handler
