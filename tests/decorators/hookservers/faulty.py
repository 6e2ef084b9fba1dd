"""A decorator hook that misbehaves on request, and tells how often it was called.

The first segment of the path chooses the behaviour; `/by-annotation` uses the target's
annotation `faulty-path` instead (so one DecoratorController can serve targets that fail in
different ways):

    /ok...     200: one ConfigMap `<target>-<last path segment>` in the target's namespace,
               with data `{"data": <annotation faulty-data>}`, and `resyncAfterSeconds` from the
               annotation `resync-after` when there is one
    /slow      answers /ok's answer after SLOW seconds (longer than any hook timeout a test sets)
    /500       500 with a one-line text body
    /500-page  500 with a multi-line body, as a web framework's error page is
    /garbage   200 with a body that is not JSON
    /429       429 Too Many Requests with `Retry-After: 1`

`GET /calls` answers `{"<path>": {"<namespace>/<name>": [<time.monotonic() of each call>]}}`,
the path being the one that chose the behaviour (the annotation's for /by-annotation), so tests
can count calls and measure the time between them (CLOCK_MONOTONIC is shared by processes).

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
ERROR_PAGE = "<html>\n<head><title>500 Internal Server Error</title></head>\n<body>the hook broke</body>\n</html>\n"

calls: dict[str, dict[str, list[float]]] = {}
lock = threading.Lock()


def ok(path: str, target: dict[str, Any]) -> dict[str, Any]:
    meta = target["metadata"]
    annotations = meta.get("annotations") or {}
    name = f"{meta['name']}-{path.rstrip('/').rsplit('/', 1)[-1]}"
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": meta["namespace"]},
              "data": {"data": annotations.get("faulty-data", "")}}
    answer: dict[str, Any] = {"attachments": [config]}
    if "resync-after" in annotations:
        answer["resyncAfterSeconds"] = float(annotations["resync-after"])
    return answer


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
        target = request.get("object") or request.get("parent") or {}
        meta = target.get("metadata") or {}
        path = self.path.split("?", 1)[0]
        if path == "/by-annotation":
            path = (meta.get("annotations") or {}).get("faulty-path", "/ok")
        with lock:
            calls.setdefault(path, {}).setdefault(f"{meta.get('namespace')}/{meta.get('name')}", []).append(
                time.monotonic())
        behaviour = "/" + path.strip("/").split("/", 1)[0]
        if behaviour == "/ok":
            self.reply(200, "application/json", json.dumps(ok(path, target)))
        elif behaviour == "/slow":
            time.sleep(SLOW)
            self.reply(200, "application/json", json.dumps(ok(path, target)))
        elif behaviour == "/500":
            self.reply(500, "text/plain", ERROR_BODY)
        elif behaviour == "/500-page":
            self.reply(500, "text/html", ERROR_PAGE)
        elif behaviour == "/garbage":
            self.reply(200, "application/json", "<html>this is not JSON</html>")
        elif behaviour == "/429":
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
