"""One sync pass of a DecoratorController over one target object (Metacontroller's `syncParentObject`).

`TargetSync(key)` is the reconcile function of one target kind of one DecoratorController:

1. read the target from the cache; gone, or neither selected nor holding our finalizer: done;
2. add or remove the finalizer `metacontroller.io/decoratorcontroller-<name>` as the spec says
   (one to add is shown to the hook as added, and written with step 5's labels and annotations);
3. gather the observed attachments (controller owner reference to the target and the decorator
   annotation naming this DecoratorController; every attachment rule's group present, even
   empty) and, with a customize hook, the related objects;
4. call `finalize` when the target is being deleted or no longer selected (and we hold its
   finalizer), else `sync`;
5. write back labels, annotations and status (status through the status subresource when the
   kind has one), removing our finalizer when the hook says `finalized`;
6. make the cluster hold the desired attachments (decorators.attachments), unless the target is
   being deleted and we may not act (no finalizer of ours, or a garbage collector's finalizer);
7. remember the state it left (decorators.settled). A pass that finds the target, its
   attachments and its related objects just as the previous call saw or wrote them, with no
   resync due, asks no hook: that is the echo of its own writes, so converging costs one call
   per target change. A pass that finds the cache behind the previous pass's writes waits for
   their watch events (up to settled.CATCH_UP seconds) instead of asking the hook again and
   writing what is written already.

A hook failure or a failed attachment write raises `SyncError` (a Warning Event `SyncError` on
the target, and a retry with back-off); a 429 answer requeues after its Retry-After, with no
Event (except in a one-off local run, `follow_resync=False`, where it fails the pass like any
error, so that the run ends and names the target instead of waiting on the hook). The pass
returns `RequeueAfter` for a hook's `resyncAfterSeconds` and for the DecoratorController's
`resyncPeriodSeconds` (a per-object timer, so every selected object is resynced on time, however
many there are).

Differences from Metacontroller (docs/decorators.md lists them all):
- a decorator with only a finalize hook does nothing to live objects (Metacontroller fails every
  sync with "no enabled hooks found", metacontroller #948);
- the finalizer is added only when a finalize hook can be called (`finalize: {}` without a
  webhook added a finalizer that only a sync answering `finalized: true` could remove);
- a target being deleted that we hold no finalizer on is left to the garbage collector at once,
  without calling sync (whose attachments Metacontroller would not manage anyway);
- periodic resync is a per-object timer set after each pass, not a replay of the whole cache;
- the echo of a pass's own writes asks no hook (Metacontroller calls sync again for each of them);
- the finalizer is added in the same request as the labels and annotations the hook answers,
  after the call (so the hook sees the target's resourceVersion from before it) and before any
  attachment is made; Metacontroller writes it on its own before calling.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from decorators.attachments import AttachmentKind, AttachmentsError, Change, manage_attachments
from decorators.protocol import ResponseError, SyncResponse, build_request, group_key, parse_response
from decorators.related import Related
from decorators.selection import TargetSelector
from decorators.settled import (
    CATCH_UP_POLL,
    Memory,
    Seen,
    identity,
    lagging,
    related_versions,
    target_version,
    verdict,
    versions,
)
from decorators.spec import DECORATOR_ANNOTATION, DecoratorSpec
from decorators.writeback import write_back
from reconcile import finalizers, objects
from reconcile.cache import InformerCache
from reconcile.clock import SYSTEM_CLOCK, Clock
from reconcile.cluster import Cluster, Kind, Obj, ObjectKey, ResourceInfo
from reconcile.errors import Conflict, NotFound, NotLeading, ReconcileError
from reconcile.hooks import Hook, HookError, HookRetryAfter
from reconcile.outcome import Done, Outcome, RequeueAfter

log = logging.getLogger("porchkit.decorators")

GC_FINALIZERS = ("foregroundDeletion", "orphan")
MIN_RETRY_AFTER = 1.0  # seconds: a 429 without a usable Retry-After must not become a busy loop


class SyncError(ReconcileError):
    """A pass failed: a hook call, its answer, or writing what it asked for."""

    event_reason = "SyncError"

    def __init__(self, cause: object) -> None:
        super().__init__(f"Sync error: {cause}")


@dataclass(frozen=True)
class Hooks:
    """The built hooks of one DecoratorController; None where a hook is absent or disabled."""

    sync: Hook | None = None
    finalize: Hook | None = None
    customize: Hook | None = None
    _closed: list[bool] = field(default_factory=list, repr=False)

    @property
    def closed(self) -> bool:
        return bool(self._closed)

    def close(self) -> None:
        self._closed.append(True)
        for hook in (self.sync, self.finalize, self.customize):
            if hook is not None:
                hook.close()


@dataclass(frozen=True)
class SyncResult:
    """What one pass did, for previews and tests."""

    decorator: str
    target: Kind
    key: ObjectKey
    hook: str  # "sync" or "finalize"
    target_changed: bool
    changes: tuple[Change, ...]


def first_step(*, selected: bool, held: bool, deleting: bool, release_asked: bool) -> Literal["none", "release", "go"]:
    """What a pass does first with a target: nothing (neither selected nor holding our finalizer;
    or being deleted without it, so the garbage collector removes the attachments), release our
    finalizer without cleanup (`porchkit.dev/release-finalizers` asks it), or go on."""
    if (not selected and not held) or (deleting and not held):
        return "none"
    return "release" if held and release_asked else "go"


def hook_to_call(*, selected: bool, held: bool, deleting: bool) -> Literal["none", "sync", "finalize"]:
    """Which hook a pass calls once our finalizer is as the spec wants it: finalize while we hold
    it on a target being deleted or no longer selected, sync on a selected live one, none when we
    have just let go of a target we would otherwise finalize."""
    if (not selected and not held) or (deleting and not held):
        return "none"
    return "finalize" if deleting or not selected else "sync"


def again(call: str, response: SyncResponse, changes: Sequence[Change]) -> bool:
    """Whether the echo of a pass's writes asks the hook once more, rather than being skipped:
    when a finalize hook is still waiting (it answers `finalized` once it sees its attachments
    gone), when attachments were deleted or recreated (a hook may wait for them to go; Recreate
    creates on the next call), and when the hook reported something on its target (labels,
    annotations or status) while attachments were created or updated: what it reported may be
    about them, and it has not seen them as stored (Metacontroller's service-per-pod v2 example
    reports on its Services this way). A hook that answers with attachments alone is asked once."""
    if call == "finalize" and not response.finalized:
        return True
    if any(change.action in ("delete", "recreate") for change in changes):
        return True
    reports = response.labels is not None or response.annotations is not None or response.status is not None
    return reports and bool(changes)


class TargetSync:
    """The reconcile function of one target kind of one DecoratorController (see the module docstring)."""

    def __init__(self, *, spec: DecoratorSpec, controller: Obj, target: ResourceInfo, selector: TargetSelector,
                 attachments: Sequence[AttachmentKind], hooks: Hooks, cluster: Cluster, cache: InformerCache,
                 related: Related | None = None, mode: str = "3way", follow_resync: bool = True,
                 report: Callable[[str, Kind, ObjectKey, SyncResult | Exception], None] | None = None,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.spec, self.controller, self.target, self.selector = spec, controller, target, selector
        self.attachments, self.hooks, self.cluster, self.cache = tuple(attachments), hooks, cluster, cache
        self.related, self.mode, self.follow_resync, self.report = related, mode, follow_resync, report
        self.clock = clock
        self.memory = Memory()
        self._groups = [(kind, group_key(kind.kind)) for kind in self.attachments]

    @property
    def finalizer_enabled(self) -> bool:
        return self.hooks.finalize is not None

    def __call__(self, key: ObjectKey) -> Outcome:
        try:
            return self._pass(key)
        except NotLeading:
            self.memory.forget(key)
            raise  # nothing to report, and reporting is a write
        except Exception as err:
            self.memory.forget(key)  # the retry asks the hook
            if self.hooks.closed:
                return Done()  # this instance is being replaced or removed: the next one syncs the target
            if self.report is not None:
                self.report(self.spec.name, self.target.kind, key, err)
            raise

    def _pass(self, key: ObjectKey) -> Outcome:
        kind, finalizer = self.target.kind, self.spec.finalizer
        target = self.cache.get(kind, key)
        if target is None:
            self.memory.forget(key)
            return Done()
        selected, deleting = self.selector.matches(target), objects.is_deleting(target)
        held = finalizers.has(target, finalizer)
        step = first_step(selected=selected, held=held, deleting=deleting,
                          release_asked=finalizers.should_release(target, finalizer))
        if step == "release":  # porchkit.dev/release-finalizers: let go without cleanup, and keep away
            with contextlib.suppress(NotFound):
                finalizers.release(self.cluster, kind, target, finalizer)
        if step != "go":
            self.memory.forget(key)
            return Done()
        stored, (target, adding) = target, self._sync_finalizer(target, selected, held)
        if target is None:
            self.memory.forget(key)
            return Done()
        held = finalizers.has(target, finalizer)
        call = hook_to_call(selected=selected, held=held, deleting=deleting)
        if call == "none":
            self.memory.forget(key)
            return Done()  # we just let go of it (the spec dropped its finalize hook)
        hook = self.hooks.finalize if call == "finalize" else self.hooks.sync
        if hook is None:  # a finalize-only decorator and a live object: nothing to ask
            if adding:
                with contextlib.suppress(NotFound):
                    finalizers.ensure(self.cluster, kind, stored, finalizer)
            return self._resync_later(None)
        observed = self._observed(target)
        try:
            related = self.related.objects(target, self.target.namespaced) if self.related is not None else {}
            before = Seen(target_version(target), versions(observed), related_versions(related))
            last = self.memory.get(key)
            found = verdict(last, before, self.clock.monotonic())
            if found == "unchanged":
                assert last is not None
                return self._later(last.due)  # the echo of our own writes: nothing the hook sees changed
            if found == "behind":
                return RequeueAfter(CATCH_UP_POLL)  # the cache has not seen the last pass's writes yet
            stale = last is not None and lagging(last, before)  # it still has not, after settled.CATCH_UP
            response = self._ask(hook, target, observed, related, call == "finalize")
        except HookRetryAfter as busy:  # the hook asked us to come back later: not an error...
            self.memory.forget(key)
            if not self.follow_resync:  # ...except in a one-off run, which reports what it could not finish
                raise SyncError(busy) from None
            return RequeueAfter(max(busy.seconds, MIN_RETRY_AFTER))
        changed = self._write_back(stored, response, finalizer if response.finalized and held else None,
                                   finalizer if adding else None)
        if changed is None:
            self.memory.forget(key)
            return Done()  # the target changed meanwhile: its watch event brings us back
        changes = self._manage(target, observed, response)  # as the hook saw it (a finalizer added counts)
        due = self._due(response)
        if stale:  # what it would remember could miss writes whose echoes the watches dropped: look again
            self.memory.forget(key)
        else:
            self._settle(key, changed, before, changes, due, ask_again=again(call, response, changes))
        if self.report is not None:
            self.report(self.spec.name, kind, key, SyncResult(self.spec.name, kind, key, call, changed is not target,
                                                              tuple(changes)))
        return RequeueAfter(CATCH_UP_POLL) if stale else self._later(due)

    # --- the steps --------------------------------------------------------------------------

    def _manage(self, target: Obj, observed: dict[Kind, list[Obj]], response: SyncResponse) -> list[Change]:
        """Make the cluster hold the answer's attachments, where we may (see `_may_manage`)."""
        if not self._may_manage(target):  # as it was before write-back: a `finalized` answer still cleans up
            return []
        desired = [self._defaulted(obj, target) for obj in response.attachments]
        try:
            return manage_attachments(self.cluster, target, self.attachments, observed, desired,
                                      decorator=self.spec.name, mode=self.mode)  # type: ignore[arg-type]
        except AttachmentsError as err:
            raise SyncError(err) from err

    def _sync_finalizer(self, target: Obj, selected: bool, held: bool) -> tuple[Obj | None, bool]:
        """The target with our finalizer added or removed as the spec says (None when it is gone),
        and whether adding it is still to be written: it goes with the write-back, one request
        with the labels and annotations, before any attachment is made. Removing is written now."""
        finalizer = self.spec.finalizer
        if self.finalizer_enabled and not held and selected and not objects.is_deleting(target):
            meta = objects.metadata(target)
            wanted = {**target, "metadata": {**meta, "finalizers": [*objects.finalizers_of(target), finalizer]}}
            if finalizers.should_release(wanted, finalizer):
                return target, False  # an operator asked us to keep away (finalizers.RELEASE_ANNOTATION)
            return wanted, True
        if not self.finalizer_enabled and held:
            try:
                return finalizers.release(self.cluster, self.target.kind, target, finalizer), False
            except NotFound:
                return None, False
        return target, False

    def _ask(self, hook: Hook, target: Obj, observed: dict[Kind, list[Obj]], related: dict[str, list[Obj]],
             finalizing: bool) -> SyncResponse:
        groups = {group: observed[attachment.kind] for attachment, group in self._groups}
        request = build_request(self.controller, target, self.target.namespaced, groups,
                                related, finalizing=finalizing, version=hook.version)
        meta = objects.metadata(target)
        try:
            raw = hook.call(request, cache_key=(self.target.kind, meta.get("namespace") or "", meta.get("name")))
            return parse_response(raw)
        except (HookError, ResponseError) as err:
            raise SyncError(err) from err

    def _observed(self, target: Obj) -> dict[Kind, list[Obj]]:
        uid = str(objects.metadata(target).get("uid") or "")
        found: dict[Kind, list[Obj]] = {}
        for attachment in self.attachments:
            found[attachment.kind] = [obj for obj in self.cache.by_index(attachment.kind, "owner", uid)
                                      if self._attached(obj, uid)]
        return found

    def _attached(self, obj: Obj, uid: str) -> bool:
        ref = objects.controller_of(obj)
        return (ref is not None and ref.get("uid") == uid
                and objects.annotations_of(obj).get(DECORATOR_ANNOTATION) == self.spec.name)

    def _write_back(self, target: Obj, response: SyncResponse, release: str | None, add: str | None) -> Obj | None:
        """The target as it stands after writing back (itself when nothing changed); None when a
        write lost a race (Conflict) or the target is gone: the pass ends there, successfully."""
        change = write_back(target, response, release, add)
        if change is None:
            return target
        obj = change.object
        try:
            if change.status_changed and "status" in self.target.subresources:
                stored = self.cluster.update_status(obj)
                obj["metadata"]["resourceVersion"] = stored["metadata"]["resourceVersion"]
                if not change.metadata_changed:
                    return stored
            return self.cluster.update(obj)
        except (Conflict, NotFound):
            return None

    def _may_manage(self, target: Obj) -> bool:
        """Attachments are managed for live targets, and for one being deleted while we finalize it
        (our finalizer still on, and no garbage collector's finalizer asking for another order)."""
        if not objects.is_deleting(target):
            return True
        held = objects.finalizers_of(target)
        return (self.finalizer_enabled and self.spec.finalizer in held
                and not any(gc in held for gc in GC_FINALIZERS))

    def _defaulted(self, desired: Obj, target: Obj) -> Obj:
        """The desired attachment with the target's namespace when it names none (a shallow copy)."""
        meta = desired.get("metadata")
        if not isinstance(meta, dict) or meta.get("namespace"):
            return desired
        namespace = objects.metadata(target).get("namespace") or ""
        if not namespace:
            return desired
        return {**desired, "metadata": {**meta, "namespace": namespace}}

    def _resync_later(self, response: SyncResponse | None) -> Outcome:
        return self._later(self._due(response))

    def _due(self, response: SyncResponse | None) -> float | None:
        """clock.monotonic() when the target is to be synced again whatever happens (the answer's
        resyncAfterSeconds, the spec's resyncPeriodSeconds); None: only on a change."""
        if not self.follow_resync:
            return None
        delays = [d for d in (response.resync_after if response else None, self.spec.resync_period) if d]
        return self.clock.monotonic() + min(delays) if delays else None

    def _later(self, due: float | None) -> Outcome:
        if due is None or not self.follow_resync:
            return Done()
        return RequeueAfter(max(due - self.clock.monotonic(), 0.0))

    def _settle(self, key: ObjectKey, target: Obj, before: Seen, changes: Sequence[Change], due: float | None, *,
                ask_again: bool) -> None:
        """Remember the state this pass left (decorators.settled); `ask_again`: its echo asks the hook
        once more (`again`)."""
        after = {version[:3]: version[3] for version in before.attachments}
        for change in changes:
            ident = identity(change.kind, {"metadata": {"namespace": change.key.namespace, "name": change.key.name}})
            if change.action in ("delete", "recreate"):
                after.pop(ident, None)
            else:
                after[ident] = change.resource_version
        self.memory.put(key, Seen(target_version(target), frozenset((*k, v) for k, v in after.items()),
                                  before.related, due, self.clock.monotonic(), ask_again))

