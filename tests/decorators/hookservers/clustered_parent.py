"""A decorator hook in the style of Metacontroller's clusteredparent example: a binding per ClusterRole.

For the ClusterRole in the request's `object`, answers one RoleBinding of the same name in
namespace `default`, binding the ServiceAccount default/default to that ClusterRole (a
cluster-scoped target with a namespaced attachment, which must name its namespace). The path is
ignored. Standard library only: `python3 clustered_parent.py` serves HTTP/1.0 on 127.0.0.1 (a
free port, printed as the first line of stdout), one thread per request.
"""

import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Hook(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        name = request["object"]["metadata"]["name"]
        binding = {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": "default"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": "default"}],
        }
        self.send_response(200)
        self.send_header("Content-type", "application/json")
        self.end_headers()
        self.wfile.write(json.dumps({"attachments": [binding]}).encode())

    def log_message(self, format: str, *args: Any) -> None:
        pass


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    print(server.server_address[1], flush=True)
    server.serve_forever()
