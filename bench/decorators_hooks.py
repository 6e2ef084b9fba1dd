"""The hooks of bench/decorators_bench.py, which must all answer alike: two ConfigMaps per target.

* `sync(request)`: the python hook (`python: {function: "decorators_hooks:sync"}`);
* `PIPELINE`: the same answer as a Δ pipeline hook (`@project`, then `@unwind` into two);
* run as a script, this module serves `sync` as a webhook: a stdlib `ThreadingHTTPServer` on
  127.0.0.1 speaking HTTP/1.1 with keep-alive, in a process of its own. It prints its port on
  stdout and answers every POST with `sync` of the decoded body, until it is terminated.

For a target ConfigMap `<name>`, the attachments are ConfigMaps `<name>-0` and `<name>-1` in its
namespace, labelled ATTACHMENT_LABEL, with `data: {target: <name>, part: "0" | "1"}` (the names
`@unwind` gives).
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ATTACHMENT_LABEL = "bench.porchkit.dev/attachment"
PARTS = ("0", "1")

PIPELINE: dict[str, Any] = {
    "name": "two-configmaps",
    "pipeline": [
        {"@project": {"metadata": {"name": "$.metadata.name", "namespace": "$.metadata.namespace",
                                   "labels": {ATTACHMENT_LABEL: "true"}},
                      "data": {"target": "$.metadata.name", "part": list(PARTS)}}},
        {"@unwind": "$.data.part"},
    ],
    "target": {"apiVersion": "v1", "kind": "ConfigMap"},
}


def attachments_for(target: dict[str, Any]) -> list[dict[str, Any]]:
    """The two ConfigMaps every hook attaches to `target`."""
    meta = target["metadata"]
    return [{"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": f"{meta['name']}-{part}", "namespace": meta["namespace"],
                          "labels": {ATTACHMENT_LABEL: "true"}},
             "data": {"target": meta["name"], "part": part}} for part in PARTS]


def sync(request: dict[str, Any]) -> dict[str, Any]:
    """A DecoratorController sync hook: the target's two attachments, nothing else."""
    return {"attachments": attachments_for(request["object"])}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: Content-Length on every answer, connections reused
    disable_nagle_algorithm = True  # else a kept-alive answer waits for a delayed ACK (40 ms)

    def do_POST(self) -> None:  # noqa: N802 - the name http.server dispatches to
        request = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        body = json.dumps(sync(request)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's signature
        pass


def serve() -> None:
    """Serve `sync` on a free loopback port (printed on stdout) until terminated."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    serve()
