"""A hook server for the hook client's tests, run as its own process: a plain `http.server`.

    python scripted.py [--http11] [--tls CERT KEY] [--client-ca CA] [--token T | --basic USER:PASS]
                       [--drop-reused]

Listens on 127.0.0.1 on a port of the OS's choosing and prints that port on stdout. By default it
answers as Metacontroller's example hooks do: HTTP/1.0, a `Content-type` header, no
Content-Length, and the connection closed after each answer. With --http11 it keeps connections
alive (and sends Content-Length). With --drop-reused, a second request on a kept-alive connection
is read and then the connection is closed without an answer (a server that timed it out).

POST paths:
    /sync     a decorator sync hook: one ConfigMap "<object name>-decorated" and a label
    /echo     {"status": {"headers": {...lower-case names...}, "request": <the request>}}
    /script   the answer the request's `script` describes: {status, headers, body (raw text) or
              json, sleep (seconds before answering), drip (seconds between the body's bytes),
              close (true: close the connection without answering)}
    /etag     304 when If-None-Match equals script.etag, else 200 with script.json and that ETag
GET /stats    {"connections": POST connections so far, "requests": POSTs so far}
"""

from __future__ import annotations

import argparse
import base64
import json
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, options: argparse.Namespace) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.options = options
        self.lock = threading.Lock()
        self.connections = self.requests = 0


class Handler(BaseHTTPRequestHandler):
    server: Server
    disable_nagle_algorithm = True  # else a kept-alive answer's body waits for a delayed ACK (40 ms)

    def setup(self) -> None:
        super().setup()
        self.served = 0
        if self.server.options.http11:
            self.protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        with self.server.lock:
            stats = {"connections": self.server.connections, "requests": self.server.requests}
        self.reply(200, json.dumps(stats).encode())

    def do_POST(self) -> None:
        self.served += 1
        with self.server.lock:
            self.server.requests += 1
            if self.served == 1:
                self.server.connections += 1
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.server.options.drop_reused and self.served > 1:
            self.close_connection = True
            return
        if not self.authorized():
            self.reply(401, b'{"error": "unauthorized"}')
            return
        request = json.loads(body)
        script = request.get("script") or {}
        time.sleep(script.get("sleep", 0))
        if self.path == "/sync":
            self.reply_json(200, sync(request))
        elif self.path == "/echo":
            headers = {name.lower(): value for name, value in self.headers.items()}
            self.reply_json(200, {"status": {"headers": headers, "request": request}})
        elif self.path == "/script":
            if script.get("close"):
                self.close_connection = True
                return
            data = script["body"].encode() if "body" in script else json.dumps(script.get("json", {})).encode()
            self.reply(script.get("status", 200), data, script.get("headers", {}), drip=script.get("drip", 0))
        elif self.path == "/etag":
            if self.headers.get("If-None-Match") == script["etag"]:
                self.reply(304, b"", {"ETag": script["etag"]})
            else:
                self.reply(200, json.dumps(script["json"]).encode(), {"ETag": script["etag"]})
        else:
            self.reply(404, b"no such hook")

    def authorized(self) -> bool:
        options, sent = self.server.options, self.headers.get("Authorization")
        if options.token is not None:
            return sent == f"Bearer {options.token}"
        if options.basic is not None:
            return sent == "Basic " + base64.b64encode(options.basic.encode()).decode()
        return True

    def reply_json(self, status: int, answer: Any) -> None:
        self.reply(status, json.dumps(answer).encode())

    def reply(self, status: int, data: bytes, headers: dict[str, str] | None = None, drip: float = 0) -> None:
        self.send_response(status)
        self.send_header("Content-type", "application/json")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if self.protocol_version == "HTTP/1.1":
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if status == 304:
            return
        if not drip:
            self.wfile.write(data)
        for index in range(len(data) if drip else 0):
            self.wfile.write(data[index:index + 1])
            time.sleep(drip)


def sync(request: dict[str, Any]) -> dict[str, Any]:
    target = request["object"]
    meta = target["metadata"]
    attachment = {"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": f"{meta['name']}-decorated", "namespace": meta.get("namespace", "")},
                  "data": {"source": f"{target['kind']}/{meta['name']}"}}
    return {"attachments": [attachment], "labels": {"decorated": "yes"}}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http11", action="store_true")
    parser.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"))
    parser.add_argument("--client-ca")
    parser.add_argument("--token")
    parser.add_argument("--basic")
    parser.add_argument("--drop-reused", action="store_true")
    options = parser.parse_args()
    server = Server(options)
    if options.tls:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*options.tls)
        if options.client_ca:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(options.client_ca)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
