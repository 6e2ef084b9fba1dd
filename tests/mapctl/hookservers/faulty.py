"""A MapController map hook that misbehaves on request, and tells how often it was called.

The input's annotation `faulty-path` chooses how each call is answered (`/ok` when absent), so
that one MapController can have inputs that fail in different ways:

    /ok        200: one ConfigMap `<input>-ok` with data `{"data": <input annotation faulty-data>}`
    /slow      /ok's answer after SLOW seconds (longer than any hook timeout a test sets)
    /500       500 with a one-line text body
    /garbage   200 with a body that is not JSON
    /429       429 Too Many Requests with `Retry-After: 1`

`GET /calls` answers `{"<path>": {"<input name>": [<time.monotonic() of each call>]}}`, so tests
can count calls per input and measure the time between them (CLOCK_MONOTONIC is shared by
processes). A request without an input (a tombstone request) is answered `{"outputs": []}`.

Standard library only: `python3 faulty.py` serves HTTP/1.0 on 127.0.0.1 (a free port, printed
as the first line of stdout), one thread per request.
"""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SLOW = 3.0
ERROR_BODY = "internal trouble: this hook fails on purpose"

calls: dict[str, dict[str, list[float]]] = {}
lock = threading.Lock()


def ok(source: dict[str, Any]) -> dict[str, Any]:
    meta = source["metadata"]
    annotations = meta.get("annotations") or {}
    output = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{meta['name']}-ok"},
              "data": {"data": annotations.get("faulty-data", "")}}
    return {"outputs": [output]}


class Hook(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
        if self.path != "/calls":
            self.send_error(404)
            return
        with lock:
            body = json.dumps(calls)
        self.reply(200, "application/json", body)

    def do_POST(self) -> None:  # noqa: N802
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        source = request.get("input")
        if not source:
            self.reply(200, "application/json", json.dumps({"outputs": []}))
            return
        meta = source.get("metadata") or {}
        path = (meta.get("annotations") or {}).get("faulty-path", "/ok")
        with lock:
            calls.setdefault(path, {}).setdefault(str(meta.get("name")), []).append(time.monotonic())
        if path == "/ok":
            self.reply(200, "application/json", json.dumps(ok(source)))
        elif path == "/slow":
            time.sleep(SLOW)
            self.reply(200, "application/json", json.dumps(ok(source)))
        elif path == "/500":
            self.reply(500, "text/plain", ERROR_BODY)
        elif path == "/garbage":
            self.reply(200, "application/json", "<html>this is not JSON</html>")
        elif path == "/429":
            self.reply(429, "text/plain", "too many requests", retry_after="1")
        else:
            self.reply(404, "text/plain", f"no behaviour for {path}")

    def reply(self, status: int, content_type: str, body: str, retry_after: str = "") -> None:
        self.send_response(status)
        self.send_header("Content-type", content_type)
        if retry_after:
            self.send_header("Retry-After", retry_after)
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, format: str, *args: Any) -> None:
        pass


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    print(server.server_address[1], flush=True)
    server.serve_forever()
