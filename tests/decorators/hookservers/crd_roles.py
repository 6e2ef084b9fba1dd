"""A decorator hook in the style of Metacontroller's crd-roles example: a reader role per CRD.

For the CustomResourceDefinition in the request's `object`, answers one ClusterRole named
`<crd-name>-reader` with no rules (a cluster-scoped target with a cluster-scoped attachment).
The path is ignored. Standard library only: `python3 crd_roles.py` serves HTTP/1.0 on
127.0.0.1 (a free port, printed as the first line of stdout), one thread per request.
"""

import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Hook(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        name = request["object"]["metadata"]["name"]
        role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": f"{name}-reader"}, "rules": []}
        self.send_response(200)
        self.send_header("Content-type", "application/json")
        self.end_headers()
        self.wfile.write(json.dumps({"attachments": [role]}).encode())

    def log_message(self, format: str, *args: Any) -> None:
        pass


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    print(server.server_address[1], flush=True)
    server.serve_forever()
