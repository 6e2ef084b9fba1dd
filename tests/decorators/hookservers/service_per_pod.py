"""A decorator hook in the style of Metacontroller's service-per-pod examples: a Service per replica.

The target is a StatefulSet annotated `service-per-pod-label` (the pod label a Service selects
on) and `service-per-pod-ports` ("80:8080,443:8443": port:targetPort pairs).

    POST /sync         one Service `<name>-<i>` per replica, selecting `<label>: <name>-<i>`,
                       with ports `port-<port>`
    POST /finalize     no attachments, and `finalized` once no Service is observed any more
    POST /v2/sync      as /sync, and annotation `v2-naming-verified` "true" when the request keys
    POST /v2/finalize  the Service of replica 0 `<namespace>/<name>-0` (hook version v2), else "false"

Standard library only: `python3 service_per_pod.py` serves HTTP/1.0 on 127.0.0.1 (a free port,
printed as the first line of stdout), one thread per request.
"""

import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def ports(spec: str) -> list[dict[str, Any]]:
    pairs = [item.split(":") for item in spec.split(",") if item.strip()]
    return [{"name": f"port-{port}", "port": int(port), "targetPort": int(target)} for port, target in pairs]


def sync(request: dict[str, Any]) -> dict[str, Any]:
    target = request["object"]
    meta = target["metadata"]
    annotations = meta.get("annotations") or {}
    label = annotations["service-per-pod-label"]
    services = []
    for i in range(int(target.get("spec", {}).get("replicas", 1))):
        name = f"{meta['name']}-{i}"
        services.append({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
                         "spec": {"selector": {label: name},
                                  "ports": ports(annotations["service-per-pod-ports"])}})
    return {"attachments": services}


def finalize(request: dict[str, Any]) -> dict[str, Any]:
    return {"attachments": [], "finalized": not request["attachments"]["Service.v1"]}


def v2_naming(request: dict[str, Any]) -> dict[str, str]:
    meta = request["object"]["metadata"]
    found = f"{meta['namespace']}/{meta['name']}-0" in request["attachments"]["Service.v1"]
    return {"v2-naming-verified": "true" if found else "false"}


class Hook(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - the name http.server calls
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        v2 = self.path.startswith("/v2/")
        path = self.path[3:] if v2 else self.path
        if path == "/sync":
            answer = sync(request)
        elif path == "/finalize":
            answer = finalize(request)
        else:
            self.send_error(404, f"no hook at {self.path}")
            return
        if v2:
            answer["annotations"] = v2_naming(request)
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
