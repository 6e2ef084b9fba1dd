"""One running DecoratorController: its spec compiled, its hooks built, one reconcile controller per target kind.

`DecoratorInstance(obj, ...)` parses the DecoratorController, resolves its resource and
attachment rules through discovery, builds its hooks (reconcile.hooks) and one
`reconcile.Controller` per target kind, named `decorator/<name>/<plural>[.<group>]`:

* its primary watch enqueues a target that is selected or still holds our finalizer (with
  `ignoreStatusChanges`, an update that changes neither generation, labels, annotations nor
  deletion is dropped: TargetSelector.ignores_update), except the echo of its pass's own write
  (the target at the resourceVersion that pass left: decorators.settled); it lists and watches
  with the rule's label selector, so that memory follows the selection, not the cluster
  (server_selection), and passes read targets through a view of the cache narrowed to that
  informer; with a finalize hook, targets that left the selection holding our finalizer while no
  manager ran are looked for once, at start (_leavers);
* a watch per attachment kind enqueues the target named by an attachment's controller owner
  reference, when the attachment carries this decorator's annotation, except the echo of the
  target's pass's own write (the attachment at the resourceVersion that pass left);
* with a customize hook, a watch per related kind (started as rules name them) enqueues the
  targets whose cached customize answers select the changed object.

The supervisor (decorators.supervisor) adds these controllers to the manager and removes them
when the DecoratorController changes or goes away; removing them releases their informers, and
`close()` the ones the instance holds itself (the target selections its passes read), so that the
informers of kinds and selections no other controller uses stop (reconcile.cache).
Building raises SpecError for an invalid spec, HookConfigError for an unusable hook (HookRefused
for one the process's HookPolicy does not allow), and UnknownResource when discovery does not
know a rule's resource yet (a CRD not installed: retried).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from decorators.attachments import AttachmentKind
from decorators.customize import CUSTOMIZE_SHAPE
from decorators.protocol import RESPONSE_SHAPE
from decorators.related import Related
from decorators.selection import TargetSelector
from decorators.settled import Memory
from decorators.spec import DECORATOR_ANNOTATION, DecoratorSpec, ResourceRule, SpecError, parse_decorator, resolve_rule
from decorators.sync import Hooks, SyncResult, TargetSync
from reconcile import finalizers, objects
from reconcile.cache import InformerCache
from reconcile.children import APPLY_STRATEGY_ANNOTATION, apply_mode
from reconcile.clock import SYSTEM_CLOCK, Clock
from reconcile.cluster import Cluster, Kind, ListResult, Obj, ObjectKey, ResourceInfo
from reconcile.controller import Controller, Watch, Watches
from reconcile.errors import ApiError
from reconcile.hooks import HookMetrics, HookPolicy, build_hook
from reconcile.informer import PagedSource
from reconcile.supervisor import UnknownResource

log = logging.getLogger("porchkit.decorators")

ATTACHMENT_SETTLE = 0.05
"""Seconds a change of an attachment waits before it wakes its target: the attachments one pass
creates then wake the target once, and the pass after sees them all (rather than one pass per
attachment, each racing the cache)."""


@dataclass(frozen=True)
class Options:
    """How a process runs its DecoratorControllers."""

    workers: int = 5
    resolve: Mapping[str, str] = field(default_factory=dict)  # webhook host -> address (see reconcile.hooks)
    # what hook specs may ask for (python modules, credential namespaces); by default, nothing
    hook_policy: HookPolicy = HookPolicy()
    follow_resync: bool = True  # honour resyncPeriodSeconds and resyncAfterSeconds (a local preview does not)
    # every pass's result: (decorator name, target kind, target key, what it did or why it failed)
    report: Callable[[str, Kind, ObjectKey, SyncResult | Exception], None] | None = None


class DecoratorInstance:
    """See the module docstring."""

    def __init__(self, obj: Obj, *, cluster: Cluster, cache: InformerCache, clock: Clock = SYSTEM_CLOCK,
                 metrics: HookMetrics | None = None, options: Options = Options()) -> None:
        self.spec = spec = parse_decorator(obj)
        self.fingerprint = fingerprint(obj)
        self.cache = cache
        served = cluster.resources()
        targets = [(self._resolve(rule.api_version, rule.resource, f"spec.resources[{i}]", served), rule)
                   for i, rule in enumerate(spec.resources)]
        self.selector = TargetSelector(targets)
        self.attachments = [AttachmentKind(info.kind, info.namespaced, rule.method) for info, rule in (
            (self._resolve(rule.api_version, rule.resource, f"spec.attachments[{i}]", served), rule)
            for i, rule in enumerate(spec.attachments))]
        mode = apply_mode(obj, SpecError)
        self.hooks = self._hooks(spec, cluster, metrics, options)
        controller_obj = {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
                          "metadata": obj.get("metadata") or {}, "spec": obj.get("spec") or {}, "status": {}}
        chosen = [(info, self._rule(info)) for info in _one_per_group_kind(targets)]
        # targets are read from the informers that select them (a miss read live: see narrowed);
        # held until close(), as the target watches hold them until the controllers are removed
        self._held = {info.kind: cache.acquire(info.kind, labels=labels, metadata_only=metadata_only)
                      for info, (labels, metadata_only) in ((info, server_selection(rule)) for info, rule in chosen)}
        targets_cache = cache.narrowed(self._held)
        self.related = None
        if self.hooks.customize is not None:
            self.related = Related(self.hooks.customize, controller_obj, targets_cache, served=cluster.resources,
                                   watch=self._watch_related)
        self.controllers: list[Controller] = []
        self._target_of: dict[str, ResourceInfo] = {}
        for info, rule in chosen:
            sync = TargetSync(spec=spec, controller=controller_obj, target=info, selector=self.selector,
                              attachments=self.attachments, hooks=self.hooks, cluster=cluster, cache=targets_cache,
                              related=self.related, mode=mode, follow_resync=options.follow_resync,
                              report=options.report, clock=clock)
            controller = Controller(name=_controller_name(spec.name, info), kind=info.kind, reconcile=sync,
                                    primary=self._targets(info, rule, sync.memory),
                                    watches=self._attachment_watches(info, sync.memory),
                                    workers=options.workers, clock=clock)
            self._target_of[controller.name] = info
            self.controllers.append(controller)
            if spec.finalize_enabled and server_selection(rule)[0] is not None:
                for key in _leavers(cluster, info.kind, rule, spec.finalizer):
                    controller.queue.add(key)

    def close(self) -> None:
        """Cancel hook calls in flight and refuse new ones, and release the target informers the
        instance holds (the controllers' own watches hold them until they are removed)."""
        self.hooks.close()
        held, self._held = self._held, {}
        for informer in held.values():
            self.cache.release(informer)

    def target_kinds(self) -> list[Kind]:
        return [info.kind for info in self._target_of.values()]

    # --- building -----------------------------------------------------------------------------

    @staticmethod
    def _resolve(api_version: str, resource: str, where: str, served: list[ResourceInfo]) -> ResourceInfo:
        info = resolve_rule(api_version, resource, served)
        if info is None:
            raise UnknownResource(f"{where}: can't find resource {resource!r} in apiVersion {api_version!r}")
        return info

    @staticmethod
    def _hooks(spec: DecoratorSpec, cluster: Cluster, metrics: HookMetrics | None, options: Options) -> Hooks:
        def build(name: str, hook_spec: Mapping[str, Any] | None, shape: Any) -> Any:
            return build_hook(hook_spec, field=f"spec.hooks.{name}", controller=spec.name, hook=name, shape=shape,
                              output_field="attachments", policy=options.hook_policy, cluster=cluster,
                              endpoint_configs=spec.endpoint_configs, resolve=options.resolve, metrics=metrics)
        return Hooks(sync=build("sync", spec.sync, RESPONSE_SHAPE),
                     finalize=build("finalize", spec.finalize, RESPONSE_SHAPE),
                     customize=build("customize", spec.customize, CUSTOMIZE_SHAPE))

    def _rule(self, info: ResourceInfo) -> ResourceRule:
        rule = self.selector.rule_for({"apiVersion": info.kind.api_version, "kind": info.kind.kind})
        assert rule is not None
        return rule

    def _targets(self, info: ResourceInfo, rule: ResourceRule, memory: Memory) -> Watch:
        """The watch of one target kind: listed and watched with the rule's label selector, so
        that the server sends only what is selected (an object leaving the selection arrives as
        a DELETED event carrying its last selected state, which still maps to its key, so that a
        pass lets go of it). An annotation selector alone cannot be sent: then the whole kind is
        watched, metadata only, and targets are read in full when a pass needs them. A change that
        is the echo of a pass's own write (the target at the resourceVersion that pass left) wakes
        nothing (decorators.settled)."""
        selector, finalizer, ignore_status = self.selector, self.spec.finalizer, rule.ignore_status_changes

        def keys(obj: Obj, primary: Kind) -> list[ObjectKey]:
            return [ObjectKey.of(obj)] if selector.matches(obj) or finalizers.has(obj, finalizer) else []
        def worth(old: Obj | None, new: Obj | None) -> bool:
            if old is None or new is None:
                return True
            return not memory.wrote_target(new) and not (ignore_status and selector.ignores_update(old, new))
        labels, metadata_only = server_selection(rule)
        return Watch(info.kind, keys, labels=labels, metadata_only=metadata_only, changes=worth)

    def _attachment_watches(self, target: ResourceInfo, memory: Memory) -> list[Watch]:
        """A change of an attachment wakes its target, unless it is the version the target's last
        pass wrote or kept (decorators.settled)."""
        name, group, kind = self.spec.name, target.kind.group, target.kind.kind

        def keys(obj: Obj) -> list[ObjectKey]:
            ref = objects.controller_of(obj)
            if (ref is None or ref.get("kind") != kind or Kind(str(ref.get("apiVersion", "")), kind).group != group
                    or objects.annotations_of(obj).get(DECORATOR_ANNOTATION) != name):
                return []
            return [ObjectKey(ObjectKey.of(obj).namespace if target.namespaced else "", str(ref.get("name", "")))]

        def changes_for(attachment: Kind) -> Callable[[Obj | None, Obj | None], bool]:
            def worth(old: Obj | None, new: Obj | None) -> bool:
                if new is None:
                    return True
                owners = keys(new)
                return not owners or not memory.wrote_attachment(owners[0], attachment, new)
            return worth
        return [Watches(attachment.kind, keys, delay=ATTACHMENT_SETTLE, changes=changes_for(attachment.kind))
                for attachment in {a.kind: a for a in self.attachments}.values()]

    def _watch_related(self, kind: Kind) -> None:
        related = self.related
        assert related is not None
        for controller in self.controllers:
            target = self._target_of[controller.name]

            def keys(obj: Obj, target: ResourceInfo = target) -> list[ObjectKey]:
                return related.keys_for(obj, target.kind, target.namespaced)
            controller.watch_more(self.cache, Watches(kind, keys))


def server_selection(rule: ResourceRule) -> tuple[str | None, bool]:
    """What the API server can select of a rule's targets: (label selector to send, or None for
    the whole kind; whether to watch metadata only). The annotation selector is applied in
    process either way (TargetSelector.matches)."""
    if not rule.labels.empty:
        return str(rule.labels), False
    return None, not rule.annotations.empty


def _leavers(cluster: Cluster, kind: Kind, rule: ResourceRule, finalizer: str) -> list[ObjectKey]:
    """Targets outside the rule's label selection that still hold our finalizer: they left it
    while no manager watched (the DELETED event that lets a running one see them leave was never
    heard), and only a pass can let go of them. Listed once, metadata only, page by page where
    the cluster offers pages; a failure is logged and leaves them to a later start."""
    try:
        pages: Iterable[ListResult] = [cluster.list(kind)] if not isinstance(cluster, PagedSource) else \
            cluster.pages(kind, metadata_only=True)
        return [ObjectKey.of(obj) for page in pages for obj in page.items
                if finalizers.has(obj, finalizer) and not rule.labels.matches(objects.labels_of(obj))]
    except ApiError as err:
        log.warning("could not look for %s targets that left the selection holding %s: %s", kind, finalizer, err)
        return []


def fingerprint(obj: Obj) -> str:
    """What makes a running DecoratorController out of date when it changes: its spec and apply
    strategy (labels and other annotations do not restart it, as in Metacontroller)."""
    apply = objects.annotations_of(obj).get(APPLY_STRATEGY_ANNOTATION, "")
    return json.dumps([obj.get("spec"), apply], sort_keys=True, default=str)


def _one_per_group_kind(targets: list[tuple[ResourceInfo, ResourceRule]]) -> list[ResourceInfo]:
    """Target kinds, one per group+kind (the last rule's version, as its selectors are the ones kept)."""
    chosen: dict[tuple[str, str], ResourceInfo] = {}
    for info, _ in targets:
        chosen.pop((info.kind.group, info.kind.kind), None)
        chosen[(info.kind.group, info.kind.kind)] = info
    return list(chosen.values())


def _controller_name(decorator: str, info: ResourceInfo) -> str:
    group = info.kind.group
    return f"decorator/{decorator}/{info.plural}" + (f".{group}" if group else "")

