"""Python hooks for the live MapController tests: `python: {function: tests.mapctl.pyhooks:<name>}`.

Each map hook answers from the request alone (the input, the parent's spec), and records the call
in `CALLS` so that tests can count calls per input. A hook function is called on the hook's own
threads, several at once, so everything shared here is guarded by a lock:

* `CALLS` - every call, as (hook, subject): the input as `Kind/name` for a map hook, the map key
  for a tombstone hook;
* `BROKEN` - inputs (by name) that `map_unless_broken` fails for, until a test heals them;
* `GATE` - holds `map_gated`'s calls until released, counting how many are in flight at once;
* `TOMBSTONE` - whether `tombstone_keep` keeps anything at all.

`reset()` puts all of them back as they start (the stage fixture calls it before each test).
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

Request = dict[str, Any]
Answer = dict[str, Any]

GADGET_API_VERSION = "example.com/v1"
KEEP_SUFFIX, DROP_SUFFIX = "-keep", "-drop"
GATE_TIMEOUT = 5.0  # seconds a gated call waits for its release before it gives up


class Calls:
    """The calls made so far, as (hook, subject) pairs, in order."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._made: list[tuple[str, str]] = []

    def record(self, hook: str, subject: str) -> None:
        with self._lock:
            self._made.append((hook, subject))

    def count(self, hook: str, subject: str | None = None) -> int:
        """How often `hook` was called (about `subject` only, when given)."""
        with self._lock:
            return sum(1 for h, s in self._made if h == hook and (subject is None or s == subject))

    def per_subject(self, hook: str) -> Counter[str]:
        with self._lock:
            return Counter(s for h, s in self._made if h == hook)

    def total(self) -> int:
        with self._lock:
            return len(self._made)

    def reset(self) -> None:
        with self._lock:
            self._made.clear()


class Names:
    """A thread-safe set of input names."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._names: set[str] = set()

    def add(self, name: str) -> None:
        with self._lock:
            self._names.add(name)

    def clear(self) -> None:
        with self._lock:
            self._names.clear()

    def __contains__(self, name: object) -> bool:
        with self._lock:
            return name in self._names


class Gate:
    """Holds calls until `release()`; counts the calls waiting in it now and at most."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open = threading.Event()
        self.in_flight = self.most = 0

    def wait(self) -> None:
        with self._lock:
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
        try:
            self._open.wait(GATE_TIMEOUT)
        finally:
            with self._lock:
                self.in_flight -= 1

    def release(self) -> None:
        self._open.set()

    def close(self) -> None:
        """Hold the calls that come from now on."""
        self._open.clear()

    def reset(self) -> None:
        with self._lock:
            self._open.clear()
            self.in_flight = self.most = 0


class Switch:
    """A thread-safe boolean."""

    def __init__(self, on: bool) -> None:
        self._lock = threading.Lock()
        self._initial = self._on = on

    def set(self, on: bool) -> None:
        with self._lock:
            self._on = on

    def __bool__(self) -> bool:
        with self._lock:
            return self._on

    def reset(self) -> None:
        self.set(self._initial)


CALLS = Calls()
BROKEN = Names()
GATE = Gate()
TOMBSTONE = Switch(on=True)  # off: tombstone_keep keeps nothing


def reset() -> None:
    CALLS.reset()
    BROKEN.clear()
    GATE.reset()
    TOMBSTONE.reset()


# --- map hooks -----------------------------------------------------------------------------------


def map_copy(request: Request) -> Answer:
    """One ConfigMap `<input>-<kind>` recording the input, its annotation `value` and the parent's
    `spec.flavour`."""
    _record("map_copy", request)
    return {"outputs": [_copy(request)]}


def map_pair(request: Request) -> Answer:
    """Two ConfigMaps, `<input>-keep` and `<input>-drop` (tombstone_keep keeps the first)."""
    _record("map_pair", request)
    name = request["input"]["metadata"]["name"]
    return {"outputs": [_configmap(name + KEEP_SUFFIX, {"input": name}),
                        _configmap(name + DROP_SUFFIX, {"input": name})]}


def map_gadget(request: Request) -> Answer:
    """One Gadget `<input>-gadget` (a kind with a status, for condition counts)."""
    _record("map_gadget", request)
    name = request["input"]["metadata"]["name"]
    return {"outputs": [{"apiVersion": GADGET_API_VERSION, "kind": "Gadget", "metadata": {"name": f"{name}-gadget"},
                         "spec": {"input": name}}]}


def map_unless_broken(request: Request) -> Answer:
    """map_copy's answer, or RuntimeError for an input named in BROKEN."""
    _record("map_unless_broken", request)
    name = request["input"]["metadata"]["name"]
    if name in BROKEN:
        raise RuntimeError(f"cannot map {name} today")
    return {"outputs": [_copy(request)]}


def map_gated(request: Request) -> Answer:
    """map_copy's answer once GATE is released."""
    _record("map_gated", request)
    GATE.wait()
    return {"outputs": [_copy(request)]}


def map_by_annotation(request: Request) -> Answer:
    """What the input's annotation `answer` asks for: `undeclared` a Secret (a kind no output rule
    names), `elsewhere` a ConfigMap in the namespace `elsewhere`; else map_copy's answer."""
    _record("map_by_annotation", request)
    source = request["input"]
    name = source["metadata"]["name"]
    wanted = (source["metadata"].get("annotations") or {}).get("answer", "")
    if wanted == "undeclared":
        return {"outputs": [{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"{name}-secret"}}]}
    if wanted == "elsewhere":
        output = _configmap(f"{name}-elsewhere", {"input": name})
        output["metadata"]["namespace"] = "elsewhere"
        return {"outputs": [output]}
    return {"outputs": [_copy(request)]}


def map_fail(request: Request) -> Answer:
    """Always fails."""
    _record("map_fail", request)
    raise RuntimeError("this hook fails on purpose")


# --- tombstone hooks -----------------------------------------------------------------------------


def tombstone_keep(request: Request) -> Answer:
    """Keeps the detached outputs named `*-keep` (each sent back edited, which must not be
    applied); keeps nothing while TOMBSTONE is off."""
    CALLS.record("tombstone_keep", request["mapKey"])
    if not TOMBSTONE:
        return {"outputs": []}
    kept = []
    for group in request["outputs"].values():
        for name, output in group.items():
            if name.endswith(KEEP_SUFFIX):
                kept.append({**output, "data": {"edited": "by the tombstone hook"}})
    return {"outputs": kept}


# --- helpers -------------------------------------------------------------------------------------


def subject(request: Request) -> str:
    """The input of a map request as `Kind/name`."""
    source = request["input"]
    return f"{source['kind']}/{source['metadata']['name']}"


def _record(hook: str, request: Request) -> None:
    CALLS.record(hook, subject(request))


def _copy(request: Request) -> dict[str, Any]:
    source = request["input"]
    name, kind = source["metadata"]["name"], source["kind"]
    annotations = source["metadata"].get("annotations") or {}
    flavour = (request["parent"].get("spec") or {}).get("flavour", "")
    return _configmap(f"{name}-{kind.lower()}", {"input": f"{kind}/{name}", "value": annotations.get("value", ""),
                                                  "flavour": flavour})


def _configmap(name: str, data: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}
