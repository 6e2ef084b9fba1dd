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
5. writes `status` (status.py's counts, `observedGeneration`, and the condition
   `<MapController name>.mapctl.porchkit.dev/Mapped`: True when every input's last pass
   succeeded, else False `MapError` with how many failed and the first failure's message),
   through the status subresource when the parent's kind has one. Output counts take every
   output the parent controls that a MapController stamped, and `inputs`/`outputs` are merged
   per resource with what is there, so that MapControllers sharing a parent kind write the same
   numbers instead of overwriting each other's. Other fields of `status` are kept. Nothing is
   written when the status is unchanged, and a pass woken by nothing new (its own status
   write's echo) reads nothing.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from typing import Any

from mapctl.context import InputKey, MapContext
from mapctl.keys import CONTROLLER_LABEL, INPUT_ANNOTATION, key_of, map_key
from mapctl.selection import SelectorError, is_input
from mapctl.status import aggregate
from reconcile import conditions, objects
from reconcile.cluster import Obj, ObjectKey
from reconcile.errors import Conflict, NotFound, Terminal
from reconcile.outcome import Done, Outcome
from reconcile.selectors import LabelSelector

log = logging.getLogger("porchkit.mapctl")

MAPPED_SUFFIX = "mapctl.porchkit.dev/Mapped"


class InvalidParent(Terminal):
    """A parent whose `spec.selector` cannot be used: not retried until it changes."""

    event_reason = "InvalidSelector"


def already_reported(last: tuple[int, str, str] | None, activity: int, fingerprint: str, status: Any) -> bool:
    """Whether the status last written for this parent still stands: written after the same input
    activity, for the same mapping, and not changed since (by anyone)."""
    return last is not None and last[:2] == (activity, fingerprint) and json.dumps(status, sort_keys=True) == last[2]


def failure_message(failures: Mapping[str, str], total: int) -> str:
    """The MapError condition's message for the inputs whose last pass failed; "" when none did."""
    if not failures:
        return ""
    first = next(iter(failures.values()))
    return f"{len(failures)} of {total} input{'s' if total != 1 else ''} failed; first: {first}"


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
            selector = context.memory.selector(parent)
        except SelectorError as err:
            self._write_status(parent, self._condition(parent, "False", "InvalidSelector", str(err)))
            raise InvalidParent(f"cannot map the inputs of {key}: {err}") from None
        fingerprint = context.memory.fingerprint(parent)
        memory = context.memory
        with memory.lock:
            activity = memory.activity.get(key, 0)
            changed = memory.mapped.get(key) != fingerprint
            last = memory.reported.get(key)
        if not changed and already_reported(last, activity, fingerprint, parent.get("status")):
            return Done()  # nothing new since this status was written (its own echo, say)
        started = time.perf_counter()
        counts, live = self._inputs_of(parent, key, selector, keyed=changed)
        owned = context.all_outputs(str(objects.metadata(parent).get("uid") or ""))
        if changed:
            self._map_anew(key, fingerprint, live, owned)
        status = aggregate(counts, {kind.plural: objs for kind, objs in owned.items()},
                           objects.metadata(parent).get("generation"))
        problem = failure_message(memory.failures(key), sum(counts.values()))
        status.update(self._condition(parent, "False", "MapError", problem) if problem
                      else self._condition(parent, "True", "Mapped", ""))
        with memory.lock:
            memory.count_cost[key] = time.perf_counter() - started
        written = self._write_status(parent, status)
        if written is not None:
            with memory.lock:
                memory.reported[key] = (activity, fingerprint, json.dumps(written.get("status"), sort_keys=True))
        return Done()

    def _inputs_of(self, parent: Obj, key: ObjectKey, selector: LabelSelector, *,
                   keyed: bool) -> tuple[dict[str, int], dict[str, InputKey]]:
        """How many inputs of each rule the parent has (by plural) and, if `keyed`, their keys."""
        context = self.context
        counts: dict[str, int] = {}
        live: dict[str, InputKey] = {}
        for (group, kind_name), rule in context.inputs.items():
            candidates = context.cache.list(rule.info.kind, key.namespace)
            found = [obj for obj in candidates if is_input(obj, parent, selector, controller=context.spec.name)]
            counts[rule.plural] = len(found)
            if keyed:  # keys are only needed to queue them all
                for obj in found:
                    name = ObjectKey.of(obj).name
                    mk = map_key(rule.info.kind, key.namespace, name)
                    live[mk] = InputKey(key.namespace, key.name, mk, group, kind_name, name)
        return counts, live

    def _map_anew(self, key: ObjectKey, fingerprint: str, live: Mapping[str, InputKey],
                  owned: Mapping[Any, list[Obj]]) -> None:
        """A parent whose mapping changed: every input is queued, and every output of this
        MapController whose input is gone, so that it is deleted."""
        context = self.context
        with context.memory.lock:
            context.memory.mapped[key] = fingerprint
        for input_key in live.values():
            context.enqueue_input(input_key)
        name = context.spec.name
        mine = {kind: [obj for obj in objs if objects.metadata(obj)["labels"].get(CONTROLLER_LABEL) == name]
                for kind, objs in owned.items()}
        for input_key in self._detached(key, mine, live):
            context.enqueue_input(input_key)

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

    def _condition(self, parent: Obj, status: str, reason: str, message: str) -> dict[str, Any]:
        current = parent.get("status")
        found = current.get("conditions") if isinstance(current, dict) else None
        updated = conditions.set_condition(found if isinstance(found, list) else None,
                                           condition_type(self.context.spec.name), status,  # type: ignore[arg-type]
                                           reason, message, now=self.context.clock.time(),
                                           observed_generation=objects.metadata(parent).get("generation"))
        return {"conditions": updated}

    def _write_status(self, parent: Obj, ours: dict[str, Any]) -> Obj | None:
        """The parent as stored with `ours` in its status (itself when it had it already); None
        when the write lost a race. `inputs` and `outputs` are merged per resource with what is
        there: another MapController of the same parent kind may count other resources."""
        current = parent.get("status")
        current = current if isinstance(current, dict) else {}
        for field in ("inputs", "outputs"):
            there = current.get(field)
            if field in ours and isinstance(there, dict):
                ours = {**ours, field: {**there, **ours[field]}}
        if all(json.dumps(current.get(k), sort_keys=True) == json.dumps(v, sort_keys=True) for k, v in ours.items()):
            return parent
        updated = {**parent, "status": {**current, **ours}}
        context = self.context
        try:
            if "status" in context.parent.subresources:
                return context.cluster.update_status(updated)
            return context.cluster.update(updated)
        except Conflict:
            # Someone else wrote the parent meanwhile, maybe only its status: a change that wakes
            # no pass (see instance._beyond_status), so count again.
            context.refresh_parent(ObjectKey.of(parent))
            return None
        except NotFound:
            return None  # the parent went: nothing to count


def condition_type(controller: str) -> str:
    """The type of MapController `controller`'s condition on its parents: qualified by its name,
    so that several MapControllers of one parent kind each keep their own."""
    return f"{controller}.{MAPPED_SUFFIX}"


__all__ = ["MAPPED_SUFFIX", "InvalidParent", "ParentSync", "condition_type"]
