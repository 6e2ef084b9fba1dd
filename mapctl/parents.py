"""The pass over one parent: find its inputs, re-map them all when it changed, and write its status.

`ParentSync(key)` is the reconcile function of a MapController's parent controller. One pass:

1. reads the parent from the cache; gone: forgets it; being deleted: nothing (the garbage
   collector removes its outputs);
2. compiles its `spec.selector`; a selector that cannot be used is a `SelectorError` (a Warning
   Event, and the status condition `Mapped` False `InvalidSelector`), and nothing is mapped or
   deleted until it is fixed;
3. lists its inputs (selection.is_input) of every input kind, and its outputs of every output kind;
4. when the parent is new to this process or its fingerprint changed (spec, labels, annotations:
   what a map request carries), queues every input, and every map key its outputs carry that no
   input has any more (detached outputs, for the tombstone pass). Otherwise inputs come and go
   through their own watches, and the pass only refreshes the status;
5. writes `status` (status.py's counts, `observedGeneration`, and a `Mapped` condition: True
   when every input's last pass succeeded, else False `MapError` with how many failed and the
   first failure's message), through the status subresource when the parent's kind has one.
   Fields of `status` the MapController does not write are kept. Nothing is written when the
   status is unchanged.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from mapctl.context import InputKey, MapContext
from mapctl.keys import INPUT_ANNOTATION, key_of, map_key
from mapctl.selection import SelectorError, is_input, parent_selector
from mapctl.status import aggregate
from reconcile import conditions, objects
from reconcile.cluster import Kind, Obj, ObjectKey
from reconcile.errors import Conflict, NotFound, ReconcileError
from reconcile.outcome import Done, Outcome

log = logging.getLogger("porchkit.mapctl")

MAPPED = "Mapped"


class InvalidParent(ReconcileError):
    """A parent whose `spec.selector` cannot be used; retried when it changes."""

    event_reason = "InvalidSelector"


class ParentSync:
    """The reconcile function of a MapController's parents (see the module docstring)."""

    def __init__(self, context: MapContext) -> None:
        self.context = context

    def __call__(self, key: ObjectKey) -> Outcome:
        context = self.context
        parent = context.cache.get(context.parent.kind, key)
        if parent is None:
            context.memory.forget_parent(key)
            return Done()
        if objects.is_deleting(parent):
            return Done()
        try:
            selector = parent_selector(parent)
        except SelectorError as err:
            self._write_status(parent, _condition(parent, "False", "InvalidSelector", str(err), context.clock.time()))
            raise InvalidParent(f"cannot map the inputs of {key}: {err}") from None
        live: dict[str, InputKey] = {}
        counts: dict[str, int] = {}
        for (group, kind_name), rule in context.inputs.items():
            counts.setdefault(rule.plural, 0)
            for obj in context.cache.list(rule.info.kind, key.namespace):
                if is_input(obj, parent, selector):
                    name = ObjectKey.of(obj).name
                    mk = map_key(rule.info.kind, key.namespace, name)
                    live[mk] = InputKey(key.namespace, key.name, mk, group, kind_name, name)
                    counts[rule.plural] += 1
        uid = str(objects.metadata(parent).get("uid") or "")
        owned = context.outputs_of(uid)
        fingerprint = context.memory.fingerprint(parent)
        with context.memory.lock:
            changed = context.memory.mapped.get(key) != fingerprint
            context.memory.mapped[key] = fingerprint
        if changed:
            for input_key in live.values():
                context.enqueue_input(input_key)
            for input_key in self._detached(key, owned, live):
                context.enqueue_input(input_key)
        status = aggregate(counts, {kind.plural: objs for kind, objs in owned.items()},
                           objects.metadata(parent).get("generation"))
        failures = context.memory.failures(key)
        if failures:
            first = next(iter(failures.values()))
            total = sum(counts.values())
            message = f"{len(failures)} of {total} input{'s' if total != 1 else ''} failed; first: {first}"
            status.update(_condition(parent, "False", "MapError", message, context.clock.time()))
        else:
            status.update(_condition(parent, "True", "Mapped", "", context.clock.time()))
        self._write_status(parent, status)
        return Done()

    def _detached(self, key: ObjectKey, owned: Mapping[Any, list[Obj]], live: Mapping[str, InputKey]) -> list[InputKey]:
        """The input keys of outputs whose map key no input has: from the input annotation when it
        reads back as that key, else the bare map key."""
        found: dict[str, InputKey] = {}
        for objs in owned.values():
            for obj in objs:
                mk = key_of(obj)
                if mk is None or mk in live or mk in found:
                    continue
                found[mk] = self.context.input_key(key, mk, objects.annotations_of(obj).get(INPUT_ANNOTATION, ""))
        return list(found.values())

    def _write_status(self, parent: Obj, ours: dict[str, Any]) -> None:
        current = parent.get("status")
        current = current if isinstance(current, dict) else {}
        if all(json.dumps(current.get(k), sort_keys=True) == json.dumps(v, sort_keys=True) for k, v in ours.items()):
            return
        updated = {**parent, "status": {**current, **ours}}
        context = self.context
        try:
            if "status" in context.parent.subresources:
                context.cluster.update_status(updated)
            else:
                context.cluster.update(updated)
        except (Conflict, NotFound):
            pass  # the parent changed or went: its watch event brings the next pass


def _condition(parent: Obj, status: str, reason: str, message: str, now: float) -> dict[str, Any]:
    current = parent.get("status")
    found = current.get("conditions") if isinstance(current, dict) else None
    return {"conditions": conditions.set_condition(found if isinstance(found, list) else None, MAPPED,
                                                   status, reason, message, now=now,  # type: ignore[arg-type]
                                                   observed_generation=objects.metadata(parent).get("generation"))}


__all__ = ["MAPPED", "InvalidParent", "ParentSync", "Kind"]
