"""A decorator hook with a customize hook: copies a ConfigMap the target names into an attachment.

    POST /customize  for the target (`parent`) annotated `copy-from: <name>`, one related
                     resource rule: the ConfigMap of that name in the target's namespace
    POST /sync       one ConfigMap `<target>-copy` holding the data of that related ConfigMap
                     (no attachment while it does not exist)

Standard library only: `python3 customize.py` serves HTTP/1.0 on 127.0.0.1 (a free port,
printed as the first line of stdout), one thread per request.
"""

import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def customize(request: dict[str, Any]) -> dict[str, Any]:
    meta = request["parent"]["metadata"]
    source = (meta.get("annotations") or {}).get("copy-from")
    if not source:
        return {"relatedResources": []}
    return {"relatedResources": [{"apiVersion": "v1", "resource": "configmaps", "namespace": meta["namespace"],
                                  "names": [source]}]}


def sync(request: dict[str, Any]) -> dict[str, Any]:
    meta = request["object"]["metadata"]
    source = (meta.get("annotations") or {}).get("copy-from")
    related = request["related"].get("ConfigMap.v1", {}).get(source)  # v1 keys: the name, same namespace
    if related is None:
        return {"attachments": []}
    copy = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{meta['name']}-copy"},
            "data": related.get("data") or {}}
    return {"attachments": [copy]}


class Hook(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path == "/customize":
            answer = customize(request)
        elif self.path == "/sync":
            answer = sync(request)
        else:
            self.send_error(404, f"no hook at {self.path}")
            return
        self.send_response(200)
        self.send_header("Content-type", "application/json")
        self.end_headers()
        self.wfile.write(json.dumps(answer).encode())

    def log_message(self, format: str, *args: Any) -> None:
        pass


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    print(server.server_address[1], flush=True)
    server.serve_forever()
