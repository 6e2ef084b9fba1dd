"""The crd-roles example's sync hook: a webhook answering two ClusterRoles per CustomResourceDefinition.

    python3 testdata/decorators/crd-roles/hook.py [PORT]    # serves http://127.0.0.1:PORT (8080), until Ctrl-C

For the CRD in the request's `object` it answers `<crd-name>-reader` (get, list, watch) and
`<crd-name>-editor` (those and create, update, patch, delete, deletecollection) on the CRD's
resources, labelled so that Kubernetes aggregates them into the built-in `view`, and `edit` and
`admin`, ClusterRoles: whoever may view or edit a namespace may then do the same with the new
kind, with no RoleBinding to write.

It speaks Metacontroller's webhook protocol (docs/decorators.md, section 3.1) on POST
/sync-crd-role, the path of the DecoratorController's URL; any other path is 404, and a request
without a CRD in `object` is 400 with the reason. Standard library only. Once it listens, it
prints the URL it serves on stdout; each call is one line on stderr.
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PATH = "/sync-crd-role"
DEFAULT_PORT = 8080
READ = ["get", "list", "watch"]
WRITE = ["create", "update", "patch", "delete", "deletecollection"]
AGGREGATE = "rbac.authorization.k8s.io/aggregate-to-"


def sync(request: dict[str, Any]) -> dict[str, Any]:
    """The answer for one target: its two roles. Raises ValueError for a request without a CRD."""
    crd = request.get("object")
    if not isinstance(crd, dict) or crd.get("kind") != "CustomResourceDefinition":
        raise ValueError("object: expected a CustomResourceDefinition")
    name = crd.get("metadata", {}).get("name")
    group = crd.get("spec", {}).get("group")
    plural = crd.get("spec", {}).get("names", {}).get("plural")
    if not (name and group and plural):
        raise ValueError("object: a CRD needs metadata.name, spec.group and spec.names.plural")
    return {"attachments": [role(f"{name}-reader", group, plural, READ, ["view"]),
                            role(f"{name}-editor", group, plural, READ + WRITE, ["edit", "admin"])]}


def role(name: str, group: str, plural: str, verbs: list[str], aggregate_to: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name, "labels": {AGGREGATE + each: "true" for each in aggregate_to}},
        "rules": [{"apiGroups": [group], "resources": [plural], "verbs": verbs}],
    }


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
        if self.path != PATH:
            self.answer(404, {"error": f"no hook at {self.path}; POST {PATH}"})
            return
        try:
            request = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            self.answer(200, sync(request))
        except (ValueError, AttributeError) as err:  # bad JSON, or not a request for a CRD
            self.answer(400, {"error": str(err)})

    def answer(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def main(argv: list[str]) -> int:
    if len(argv) > 2 or (len(argv) == 2 and not argv[1].isdigit()):
        print(f"usage: python3 {argv[0]} [PORT]", file=sys.stderr)
        return 2
    port = int(argv[1]) if len(argv) == 2 else DEFAULT_PORT
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(f"crd-roles hook: serving http://127.0.0.1:{server.server_address[1]}{PATH}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
