"""What one running MapController's passes share: its resolved kinds, hooks, cache views and memory.

A running MapController (instance.py) has two kinds of pass: one per parent (parents.py: status,
and re-mapping every input when the parent changed) and one per parent and input (inputs.py: the
map or tombstone hook, then the outputs). `MapContext` is what both read: the spec with its
resources resolved through discovery, the built hooks, the cluster and the shared cache, and
`Memory`, the little they remember between passes:

* each parent's fingerprint (its uid, spec, labels and annotations: what a map request carries
  that can change the answer, and which parent of that name it is) and compiled selector,
  computed once per parent resourceVersion;
* each input's state after its last pass (`Settled`): when a pass finds the parent, the input and
  the outputs exactly as its previous pass left them (its own writes included), the hook is not
  asked again, so the echo of a pass's own writes costs no hook call;
* the inputs whose last pass failed, per parent, for the parent's status;
* per parent, how many input passes did something, and the status its pass last wrote at which
  count: a parent's pass woken by nothing new (the echo of its own status write) reads nothing.

Outputs are found through one informer index per MapController (`output_index`): an output of
this MapController (controller label) under a controller owner reference is indexed by the
owner's uid, and by uid and map key.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from mapctl.keys import CONTROLLER_LABEL, MAP_KEY_LABEL, map_key, parse_reference
from mapctl.protocol import group_key
from mapctl.selection import SelectorError, parent_selector
from mapctl.spec import MapSpec
from reconcile import objects
from reconcile.cache import InformerCache
from reconcile.children import ChildKind, Terms
from reconcile.clock import Clock
from reconcile.cluster import Cluster, Obj, ObjectKey, ResourceInfo
from reconcile.hooks import Hook
from reconcile.selectors import LabelSelector

TERMS = Terms(noun="output", answer="outputs", rules="spec.outputResources", owner="parent",
              belongs="an output of this parent for this input")


class InputKey(NamedTuple):
    """One input of one parent, as the input controller's queue holds it: the parent's namespace
    and name, the input's map key and, when known, its group, kind and name (an input known only
    from outputs whose annotation was tampered with has none: it is gone, or never was)."""

    namespace: str
    parent: str
    map_key: str
    group: str = ""
    kind: str = ""
    name: str = ""

    @property
    def parent_key(self) -> ObjectKey:
        return ObjectKey(self.namespace, self.parent)

    def __str__(self) -> str:
        qualified = f"{self.kind}.{self.group}" if self.group else self.kind
        what = f"{qualified} {self.name}" if self.name else self.map_key
        return f"{ObjectKey(self.namespace, self.parent)} <- {what}"


@dataclass(frozen=True)
class InputKind:
    info: ResourceInfo
    plural: str  # as the spec names it: the status key


@dataclass(frozen=True)
class OutputKind:
    child: ChildKind
    plural: str
    group_key: str  # the request's key for this kind's outputs


@dataclass(frozen=True)
class Settled:
    """An input's state after a pass: what it saw and wrote, and when its hook wants asking again."""

    parent: str  # fingerprint
    input: str  # resourceVersion ("" when gone)
    outputs: frozenset[tuple[str, str, str]]  # (group/kind, name, resourceVersion)
    due: float | None  # clock.monotonic() of the next resync; None: none
    at: float = 0.0  # clock.monotonic() when the pass ended


@dataclass
class Memory:
    """See the module docstring. Thread-safe."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    fingerprints: dict[ObjectKey, tuple[str, str]] = field(default_factory=dict)  # parent -> (uid+rv, fingerprint)
    mapped: dict[ObjectKey, str] = field(default_factory=dict)  # parent -> fingerprint its inputs were mapped at
    settled: dict[InputKey, Settled] = field(default_factory=dict)
    failing: dict[ObjectKey, dict[str, str]] = field(default_factory=dict)  # parent -> map key -> message
    activity: dict[ObjectKey, int] = field(default_factory=dict)  # parent -> input passes that did something
    reported: dict[ObjectKey, tuple[int, str, str]] = field(default_factory=dict)  # parent -> its last status
    selectors: dict[ObjectKey, tuple[str, LabelSelector | SelectorError]] = field(default_factory=dict)
    count_cost: dict[ObjectKey, float] = field(default_factory=dict)  # parent -> seconds its last count took

    def fingerprint(self, parent: Obj) -> str:
        meta = objects.metadata(parent)
        key, version = ObjectKey.of(parent), f"{meta.get('uid')}/{meta.get('resourceVersion')}"
        with self.lock:
            known = self.fingerprints.get(key)
        if known is not None and known[0] == version:
            return known[1]
        value = json.dumps([meta.get("uid"), parent.get("spec"), meta.get("labels"), meta.get("annotations")],
                           sort_keys=True, default=str)
        with self.lock:
            self.fingerprints[key] = (version, value)
        return value

    def failed(self, key: InputKey, message: str | None) -> None:
        """Record the outcome of `key`'s pass: a failure's message, or None for a success."""
        with self.lock:
            found = self.failing.get(key.parent_key)
            if message is not None:
                self.failing.setdefault(key.parent_key, {})[key.map_key] = message
            elif found is not None:
                found.pop(key.map_key, None)
                if not found:
                    del self.failing[key.parent_key]

    def selector(self, parent: Obj) -> LabelSelector:
        """The parent's compiled `spec.selector` (selection.parent_selector), compiled once per
        parent resourceVersion; raises SelectorError as that does."""
        meta = objects.metadata(parent)
        key, version = ObjectKey.of(parent), f"{meta.get('uid')}/{meta.get('resourceVersion')}"
        known = self.selectors.get(key)
        if known is None or known[0] != version:
            try:
                compiled: LabelSelector | SelectorError = parent_selector(parent)
            except SelectorError as err:
                compiled = err
            known = self.selectors[key] = (version, compiled)
        if isinstance(known[1], SelectorError):
            raise known[1]
        return known[1]

    def touch(self, parent: ObjectKey) -> None:
        """An input pass of `parent` did something (or failed): its status needs a look."""
        with self.lock:
            self.activity[parent] = self.activity.get(parent, 0) + 1

    def failures(self, parent: ObjectKey) -> dict[str, str]:
        with self.lock:
            return dict(self.failing.get(parent, {}))

    def forget_parent(self, parent: ObjectKey) -> None:
        with self.lock:
            self.mapped.pop(parent, None)
            self.failing.pop(parent, None)
            self.fingerprints.pop(parent, None)
            self.activity.pop(parent, None)
            self.reported.pop(parent, None)
            self.selectors.pop(parent, None)
            self.count_cost.pop(parent, None)
            for key in [k for k in self.settled if k.parent_key == parent]:
                del self.settled[key]


def output_index(controller: str) -> tuple[str, Callable[[Obj], list[str]]]:
    """The name and function of the informer index that finds this MapController's outputs of one
    map key: `<owner uid>/<map key>`."""
    def index(obj: Obj) -> list[str]:
        labels = objects.metadata(obj).get("labels")
        if not isinstance(labels, Mapping) or labels.get(CONTROLLER_LABEL) != controller:
            return []
        ref = objects.controller_of(obj)
        uid = str(ref.get("uid") or "") if ref is not None else ""
        key = labels.get(MAP_KEY_LABEL)
        return [f"{uid}/{key}"] if uid and isinstance(key, str) and key else []
    return f"mapctl/{controller}", index


@dataclass
class MapContext:
    """See the module docstring."""

    spec: MapSpec
    controller: Obj  # the MapController as hooks receive it
    parent: ResourceInfo
    inputs: Mapping[tuple[str, str], InputKind]  # (group, kind) -> its rule
    outputs: Sequence[OutputKind]
    map_hook: Hook
    tombstone_hook: Hook | None
    cluster: Cluster
    cache: InformerCache
    clock: Clock
    mode: str = "3way"
    follow_resync: bool = True
    memory: Memory = field(default_factory=Memory)
    closed: list[bool] = field(default_factory=list)  # set once the instance stops
    # set by the instance once its controllers exist
    enqueue_input: Callable[[InputKey], None] = lambda key: None
    refresh_parent: Callable[[ObjectKey], None] = lambda key: None
    report: Callable[[str, InputKey, Any], None] | None = None

    @property
    def index(self) -> str:
        return f"mapctl/{self.spec.name}"

    def outputs_of(self, parent_uid: str, key: str) -> dict[OutputKind, list[Obj]]:
        """The parent's outputs of one map key, of every output kind (cached)."""
        value = f"{parent_uid}/{key}"
        return {kind: self.cache.by_index(kind.child.kind, self.index, value) for kind in self.outputs}

    def all_outputs(self, parent_uid: str) -> dict[OutputKind, list[Obj]]:
        """Every object of the output kinds the parent controls that some MapController stamped
        (cached): this one's, and those of any other MapController of the same parent kind."""
        found: dict[OutputKind, list[Obj]] = {}
        for kind in self.outputs:
            found[kind] = [obj for obj in self.cache.by_index(kind.child.kind, "owner", parent_uid)
                           if CONTROLLER_LABEL in (objects.metadata(obj).get("labels") or {})
                           and (objects.controller_of(obj) or {}).get("uid") == parent_uid]
        return found

    def input_kind(self, group: str, kind: str) -> InputKind | None:
        return self.inputs.get((group, kind))

    def input_key(self, parent: ObjectKey, key: str, reference: str) -> InputKey:
        """The key of the input an output of `parent` with map key `key` and input annotation
        `reference` came from: named by the annotation when it reads back as that map key (an
        input of one of our kinds, in the parent's namespace), else by the bare map key."""
        parsed = parse_reference(reference)
        if parsed is not None:
            group, kind, namespace, name = parsed
            rule = self.input_kind(group, kind)
            if rule is not None and namespace == parent.namespace and map_key(rule.info.kind, namespace, name) == key:
                return InputKey(parent.namespace, parent.name, key, group, kind, name)
        return InputKey(parent.namespace, parent.name, key)


def output_kind(child: ChildKind, plural: str) -> OutputKind:
    return OutputKind(child, plural, group_key(child.kind))


def identities(outputs: Mapping[OutputKind, Sequence[Obj]]) -> frozenset[tuple[str, str, str]]:
    """The outputs as (group/kind, name, resourceVersion), to compare states across passes."""
    return frozenset((f"{kind.child.kind.group}/{kind.child.kind.kind}", ObjectKey.of(obj).name,
                      str(objects.metadata(obj).get("resourceVersion") or ""))
                     for kind, objs in outputs.items() for obj in objs)


__all__ = ["TERMS", "InputKey", "InputKind", "MapContext", "Memory", "OutputKind", "Settled",
           "identities", "output_index", "output_kind"]
