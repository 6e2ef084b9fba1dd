"""Fixtures of the hook tests: hook servers run as processes, certificates made with openssl,
hooks that are closed after each test, and tests/reconcile/hooks/functions.py's `blocked` ready
to block; `wrong_answers` calls a hook from several threads at once."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from reconcile.hooks import Hook, HookPolicy, build_hook
from reconcile.patching import clone
from tests.reconcile.hooks import functions

SERVER_SCRIPT = Path(__file__).resolve().parent / "servers" / "scripted.py"

# A DecoratorController's sync/finalize response, as its controller declares it.
DECORATOR_SHAPE = {"labels": (dict, type(None)), "annotations": (dict, type(None)), "status": (dict, type(None)),
                   "attachments": (list, type(None)), "resyncAfterSeconds": (int, float, type(None)),
                   "finalized": (bool, type(None))}

TARGET = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "web", "namespace": "shop"}}


def sync_request(target: Mapping[str, Any] = TARGET, **extra: Any) -> dict[str, Any]:
    """A decorator sync request for `target` (plus any extra top-level fields, e.g. `script`)."""
    controller = {"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "DecoratorController",
                  "metadata": {"name": "demo"}, "spec": {}, "status": {}}
    return {"controller": controller, "object": clone(target), "attachments": {"ConfigMap.v1": {}}, "related": {},
            "finalizing": False, **extra}


@dataclass
class Server:
    process: subprocess.Popen[str]
    port: int
    scheme: str = "http"

    def url(self, path: str) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}{path}"

    def stats(self) -> dict[str, int]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/stats", timeout=5) as answer:
            stats: dict[str, int] = json.load(answer)
        return stats

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(5)
        if self.process.stdout:
            self.process.stdout.close()


def start_server(*args: str) -> Server:
    process = subprocess.Popen([sys.executable, str(SERVER_SCRIPT), *args], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line.strip().isdigit(), f"the hook server did not start (printed {line!r})"
    return Server(process, int(line), "https" if "--tls" in args else "http")


@pytest.fixture(name="serve")
def serve_fixture() -> Iterator[Callable[..., Server]]:
    """Start a hook server process with the given options; stopped after the test."""
    servers: list[Server] = []

    def start(*args: str) -> Server:
        servers.append(start_server(*args))
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


@pytest.fixture(name="plain", scope="module")
def plain_fixture() -> Iterator[Server]:
    """One HTTP/1.0 hook server (no Content-Length, closes after each answer) for a test module."""
    server = start_server()
    yield server
    server.stop()


@pytest.fixture(name="blocked")
def blocked_fixture() -> Iterator[None]:
    """`functions.blocked` ready to block, and released (so its thread ends) after the test."""
    for event in (functions.started, functions.release, functions.finished):
        event.clear()
    yield
    functions.release.set()


def wrong_answers(hook: Hook, calls: int, threads: int = 5) -> list[Any]:
    """The answers to sync requests that were not for their own target, of `calls` requests for
    targets of their own from each of `threads` threads at once (the hook decorates each target
    with an attachment `<name>-decorated`)."""
    wrong: list[Any] = []

    def work(thread: int) -> None:
        for call in range(calls):
            name = f"t{thread}-{call}"
            answer = hook.call(sync_request({**TARGET, "metadata": {"name": name}}))
            if answer["attachments"][0]["metadata"]["name"] != f"{name}-decorated":
                wrong.append(answer)

    running = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
    for thread in running:
        thread.start()
    for thread in running:
        thread.join(10)
    return wrong


@pytest.fixture(name="make_hook")
def make_hook_fixture() -> Iterator[Callable[..., Hook]]:
    """build_hook with the decorator's defaults (field spec.hooks.sync, controller demo, hook sync,
    the decorator's response shape, a local run's policy); every hook built is closed after the test."""
    built: list[Hook] = []

    def make(spec: Mapping[str, Any], **options: Any) -> Hook:
        arguments: dict[str, Any] = {"field": "spec.hooks.sync", "controller": "demo", "hook": "sync",
                                     "shape": DECORATOR_SHAPE, "output_field": "attachments",
                                     "policy": HookPolicy.local(), **options}
        hook = build_hook(spec, **arguments)
        assert hook is not None
        built.append(hook)
        return hook

    yield make
    for hook in built:
        hook.close()


# ---------------------------------------------------------------------------------------------
# Certificates


@dataclass(frozen=True)
class Certificates:
    directory: Path

    def path(self, name: str) -> str:
        return str(self.directory / name)

    def read(self, name: str) -> bytes:
        return (self.directory / name).read_bytes()


def _openssl(directory: Path, *args: str) -> None:
    subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True)


def _signed(directory: Path, name: str, subject: str, extensions: str, ca: str = "ca") -> None:
    _openssl(directory, "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject)
    (directory / f"{name}.ext").write_text(extensions)
    _openssl(directory, "x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key",
             "-CAcreateserial", "-out", f"{name}.crt", "-days", "2", "-extfile", f"{name}.ext")


@pytest.fixture(name="certs", scope="session")
def certs_fixture(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    """A CA, a server certificate (127.0.0.1, localhost, hooks.example, hooks.default) and a client
    certificate signed by it, plus an unrelated CA."""
    directory = tmp_path_factory.mktemp("certs")
    for ca in ("ca", "other-ca"):
        _openssl(directory, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                 "-keyout", f"{ca}.key", "-out", f"{ca}.crt", "-days", "2", "-subj", f"/CN=porchkit test {ca}",
                 "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    _signed(directory, "server", "/CN=hooks", "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:hooks.example,"
            "DNS:hooks.default\nextendedKeyUsage=serverAuth\n")
    _signed(directory, "client", "/CN=porchkit", "extendedKeyUsage=clientAuth\n")
    return Certificates(directory)


def secret(name: str, namespace: str = "default", *, data: Mapping[str, bytes | str]) -> dict[str, Any]:
    """A Secret as the API server stores it (values base64-encoded under `data`)."""
    encoded = {key: base64.b64encode(value if isinstance(value, bytes) else value.encode()).decode()
               for key, value in data.items()}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace},
            "data": encoded}
