"""The pass over one input of one parent: ask the map hook (or the tombstone hook), then make the outputs so.

`InputSync(key)` is the reconcile function of a MapController's input controller; `key` is an
`InputKey` (parent namespace and name, the input's map key and identity). One pass:

1. reads the parent from the cache; gone or being deleted: nothing to do (the garbage collector
   removes its outputs);
2. gathers the outputs this parent holds for this map key (context.output_index);
3. when the input exists and is one of the parent's inputs (selection.is_input) — the map hook:
   request `{controller, parent, mapKey, input, outputs}`, answer `{outputs, resyncAfterSeconds}`;
   the answer's outputs get the parent's namespace when they name none, are stamped (map key and
   controller labels, input annotation) and made so by reconcile.children with the output
   rule's update method;
4. otherwise the outputs are detached (a key known only by its map key, from an output whose
   input annotation was edited, first looks for a live input with that map key, and hands over
   to its key if there is one): with a tombstone hook, request `{controller, parent,
   mapKey, outputs}` and every detached output the answer does not list (by kind and name) is
   deleted; the ones it keeps are never changed (the proposal lets the hook keep, not edit).
   Without a tombstone hook they are all deleted;
5. remembers the state it left (context.Settled). A pass that finds the parent, the input and
   the outputs just as the previous pass left them, with no resync due, asks no hook: that is
   the echo of its own writes. A pass that finds the cache behind the previous pass's writes
   (it ran again before their watch events arrived) waits for them, up to CATCH_UP seconds,
   instead of asking the hook about a state that is gone. Then it asks the parent's pass to
   refresh the status.

It returns `RequeueAfter` for the answer's `resyncAfterSeconds` or the MapController's
`resyncPeriodSeconds` (while an input has outputs, or detached outputs are kept). A failure of
the hook, of its answer or of a write raises `MapError` (a Warning Event `MapError` on the
parent naming the input, a retry with back-off, and a count in the parent's status); the other
inputs carry on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

from mapctl.context import TERMS, InputKey, MapContext, OutputKind, Settled, identities
from mapctl.keys import input_reference, map_key, reference, stamp
from mapctl.protocol import ResponseError, map_request, parse_map_response, parse_tombstone_response, tombstone_request
from mapctl.selection import SelectorError, is_input
from reconcile import objects
from reconcile.children import Change, ChildrenError, delete_children, manage_children
from reconcile.cluster import Kind, Obj, ObjectKey
from reconcile.errors import NotLeading, ReconcileError
from reconcile.hooks import Hook, HookError, HookRetryAfter
from reconcile.outcome import Done, Outcome, RequeueAfter
from reconcile.selectors import LabelSelector

log = logging.getLogger("porchkit.mapctl")
T = TypeVar("T")

MIN_RETRY_AFTER = 1.0  # seconds: a 429 without a usable Retry-After must not become a busy loop
CATCH_UP = 2.0  # seconds after a pass during which a cache that lacks its writes is waited for...
CATCH_UP_POLL = 0.02  # ...looking again this often


class MapError(ReconcileError):
    """One input's pass failed: a hook call, its answer, or writing the outputs."""

    event_reason = "MapError"


@dataclass(frozen=True)
class MapResult:
    """What one pass did, for previews and tests."""

    controller: str
    key: InputKey
    hook: str  # "map", "tombstone", or "" when no hook was asked
    changes: tuple[Change, ...]


class InputSync:
    """The reconcile function of a MapController's inputs (see the module docstring)."""

    def __init__(self, context: MapContext) -> None:
        self.context = context

    def __call__(self, key: InputKey) -> Outcome:
        context = self.context
        try:
            outcome, result = self._pass(key)
        except NotLeading:
            raise  # nothing to record or report: this replica no longer leads
        except Exception as err:
            if context.closed:
                return Done()  # this instance is being replaced or removed: the next one maps the input
            context.memory.failed(key, str(err))
            with context.memory.lock:
                context.memory.settled.pop(key, None)
            context.memory.touch(key.parent_key)
            context.refresh_parent(key.parent_key)
            if context.report is not None:
                context.report(context.spec.name, key, err)
            raise
        context.memory.failed(key, None)
        if result is not None:
            context.memory.touch(key.parent_key)
            context.refresh_parent(key.parent_key)
            if context.report is not None:
                context.report(context.spec.name, key, result)
        return outcome

    def _pass(self, key: InputKey) -> tuple[Outcome, MapResult | None]:
        context = self.context
        parent = context.cache.get(context.parent.kind, key.parent_key)
        if parent is None or objects.is_deleting(parent):
            return Done(), None
        try:
            selector = context.memory.selector(parent)
        except SelectorError:
            return Done(), None  # the parent's pass reports it; its outputs stay until it is fixed
        uid = str(objects.metadata(parent).get("uid") or "")
        observed = context.outputs_of(uid, key.map_key)
        source = self._input(key)
        if source is None and not key.name:
            named = self._named(key, parent, selector)
            if named is not None:  # an output's annotation was edited: its input is alive
                context.enqueue_input(named)
                return Done(), None
        live = source is not None and is_input(source, parent, selector, controller=context.spec.name)
        before = Settled(context.memory.fingerprint(parent),
                         str(objects.metadata(source).get("resourceVersion") or "") if live and source else "",
                         identities(observed), None)
        with context.memory.lock:
            last = context.memory.settled.get(key)
        verdict = settled_verdict(last, before, context.clock.monotonic())
        if verdict == "unchanged":
            assert last is not None
            return self._later(last.due), None
        if verdict == "behind":
            return RequeueAfter(CATCH_UP_POLL), None  # the cache has not seen the last pass's writes yet
        if live:
            assert source is not None
            hook, outcome, changes, resync = self._map(key, parent, source, observed)
        else:
            hook, outcome, changes, resync = self._tombstone(key, parent, observed)
        if outcome is not None:
            return outcome, None
        due = context.clock.monotonic() + resync if resync is not None else None
        self._settle(key, before, observed, changes, due)
        now_parent = context.cache.get(context.parent.kind, key.parent_key)
        if now_parent is not None and context.memory.fingerprint(now_parent) != before.parent:
            # The parent changed during the pass (its selector, say), and its own pass may have
            # found this input's outputs not yet cached: look again.
            context.enqueue_input(key)
        return self._later(due), MapResult(context.spec.name, key, hook, tuple(changes))

    # --- the two hooks ------------------------------------------------------------------------

    def _map(self, key: InputKey, parent: Obj, source: Obj,
             observed: dict[OutputKind, list[Obj]]) -> tuple[str, Outcome | None, list[Change], float | None]:
        context = self.context
        namespace = key.namespace
        request = map_request(context.controller, parent, key.map_key, source, _groups(observed))
        answer = self._ask("map", context.map_hook, request, key,
                           lambda raw: parse_map_response(raw, namespace=namespace))
        if isinstance(answer, RequeueAfter):
            return "map", answer, [], None
        desired = [_with_namespace(obj, namespace) for obj in answer.outputs]
        kind = context.input_kind(key.group, key.kind)
        assert kind is not None
        marks = stamp(context.spec.name, key.map_key, input_reference(kind.info.kind, namespace, key.name))
        try:
            changes = manage_children(context.cluster, parent, [k.child for k in context.outputs],
                                      {k.child.kind: objs for k, objs in observed.items()}, desired, stamp=marks,
                                      terms=TERMS, mode=context.mode)  # type: ignore[arg-type]
        except ChildrenError as err:
            raise MapError(f"map {_describe(key)}: {err}") from err
        delays = [d for d in (answer.resync_after, context.spec.resync_period) if d]
        return "map", None, changes, min(delays) if delays else None

    def _tombstone(self, key: InputKey, parent: Obj,
                   observed: dict[OutputKind, list[Obj]]) -> tuple[str, Outcome | None, list[Change], float | None]:
        context = self.context
        detached = [(kind, obj) for kind, objs in observed.items() for obj in objs if not objects.is_deleting(obj)]
        if not detached:
            return "", None, [], None
        keep: set[tuple[str, str, str]] = set()
        hook = context.tombstone_hook
        if hook is not None:
            request = tombstone_request(context.controller, parent, key.map_key, _groups(observed))
            answer = self._ask("tombstone", hook, request, key, lambda raw: {
                _identity(Kind.of(obj), obj) for obj in parse_tombstone_response(raw, namespace=key.namespace)})
            if isinstance(answer, RequeueAfter):
                return "tombstone", answer, [], None
            keep = answer
        doomed = [(kind.child.kind, obj) for kind, obj in detached if _identity(kind.child.kind, obj) not in keep]
        try:
            changes = delete_children(context.cluster, doomed, terms=TERMS)
        except ChildrenError as err:
            raise MapError(f"tombstone {_describe(key)}: {err}") from err
        kept = len(detached) > len(doomed)
        return "tombstone" if hook is not None else "", None, changes, \
            context.spec.resync_period if kept and hook is not None else None

    def _ask(self, name: str, hook: Hook, request: dict[str, object], key: InputKey,
             parse: Callable[[dict[str, object]], T]) -> T | RequeueAfter:
        """The hook `name`'s answer for `key`'s input, parsed; or when the hook asks to be called
        later (429), when: a one-off run, which follows no resync, reports it instead. A hook that
        fails or answers what cannot be used is a MapError naming the hook and the input."""
        try:
            return parse(hook.call(request, cache_key=(self.context.parent.kind, key.namespace, key.parent,
                                                       key.map_key)))
        except HookRetryAfter as busy:
            if not self.context.follow_resync:
                raise MapError(f"{name} {_describe(key)}: {busy}") from None
            return RequeueAfter(max(busy.seconds, MIN_RETRY_AFTER))
        except (HookError, ResponseError) as err:
            raise MapError(f"{name} {_describe(key)}: {err}") from err

    # --- bookkeeping --------------------------------------------------------------------------

    def _input(self, key: InputKey) -> Obj | None:
        """The input named by `key`, if it exists and really has `key`'s map key."""
        kind = self.context.input_kind(key.group, key.kind)
        if kind is None or not key.name:
            return None
        found = self.context.cache.get(kind.info.kind, ObjectKey(key.namespace, key.name))
        if found is None or map_key(kind.info.kind, key.namespace, key.name) != key.map_key:
            return None
        return found

    def _named(self, key: InputKey, parent: Obj, selector: LabelSelector) -> InputKey | None:
        """The live input with `key`'s map key, for a key known only by its map key (an output
        whose input annotation does not read back as that key); one look at every input."""
        context = self.context
        for (group, kind_name), rule in context.inputs.items():
            for obj in context.cache.list(rule.info.kind, key.namespace):
                name = ObjectKey.of(obj).name
                if map_key(rule.info.kind, key.namespace, name) == key.map_key \
                        and is_input(obj, parent, selector, controller=context.spec.name):
                    return InputKey(key.namespace, key.parent, key.map_key, group, kind_name, name)
        return None

    def _settle(self, key: InputKey, before: Settled, observed: dict[OutputKind, list[Obj]],
                changes: Sequence[Change], due: float | None) -> None:
        """Remember the state this pass left, unless it recreated something (the delete's echo must
        bring the pass that creates it again) or nothing is left to remember (an input gone, and its
        outputs with it)."""
        memory = self.context.memory
        after = {(kind, name): version for kind, name, version in before.outputs}
        for change in changes:
            ident = (f"{change.kind.group}/{change.kind.kind}", change.key.name)
            if change.action == "delete":
                after.pop(ident, None)
            else:
                after[ident] = change.resource_version
        recreating = any(change.action == "recreate" for change in changes)
        with memory.lock:
            if recreating or (not before.input and not after):
                memory.settled.pop(key, None)
            else:
                memory.settled[key] = Settled(before.parent, before.input,
                                              frozenset((k, n, v) for (k, n), v in after.items()), due,
                                              self.context.clock.monotonic())

    def _later(self, due: float | None) -> Outcome:
        if due is None or not self.context.follow_resync:
            return Done()
        return RequeueAfter(max(due - self.context.clock.monotonic(), 0.0))


def settled_verdict(last: Settled | None, now: Settled, monotonic: float) -> Literal["unchanged", "behind", "ask"]:
    """Whether a pass may skip the hook: nothing it sees changed since the last pass and no resync
    is due ("unchanged"), or the cache has not caught up with the last pass's own writes, for at
    most CATCH_UP seconds ("behind"); else the hook is asked."""
    if last is None:
        return "ask"
    if _unchanged(last, now, monotonic):
        return "unchanged"
    return "behind" if monotonic - last.at < CATCH_UP and _behind(last, now) else "ask"


def _behind(last: Settled, now: Settled) -> bool:
    """Whether the cache looks older than what the last pass left: an output it wrote or kept is
    missing or at an older resourceVersion, or one it deleted is still there. (Someone else's
    change can look the same: it is waited for at most CATCH_UP seconds.)"""
    seen = {(kind, name): version for kind, name, version in now.outputs}
    for kind, name, version in last.outputs:
        found = seen.pop((kind, name), None)
        if found is None or (found.isdigit() and version.isdigit() and int(found) < int(version)):
            return True
    return bool(seen)


def _unchanged(last: Settled, now: Settled, monotonic: float) -> bool:
    """Whether nothing the hook sees changed since the last pass, and no resync is due."""
    return (last.parent == now.parent and last.input == now.input and last.outputs == now.outputs
            and (last.due is None or monotonic < last.due))


def _groups(observed: dict[OutputKind, list[Obj]]) -> dict[str, list[Obj]]:
    return {kind.group_key: objs for kind, objs in observed.items()}


def _identity(kind: Kind, obj: Obj) -> tuple[str, str, str]:
    return kind.group, kind.kind, ObjectKey.of(obj).name


def _with_namespace(obj: Obj, namespace: str) -> Obj:
    """The output with the parent's namespace when it names none (a shallow copy)."""
    meta = obj.get("metadata")
    if not namespace or not isinstance(meta, dict) or meta.get("namespace"):
        return obj
    return {**obj, "metadata": {**meta, "namespace": namespace}}


def _describe(key: InputKey) -> str:
    if not key.name:
        return f"map key {key.map_key}"
    return reference(key.group, key.kind, key.namespace, key.name)
