"""One running MapController: its spec resolved, its hooks built, and its two reconcile controllers.

`MapInstance(obj, ...)` parses the MapController, resolves its parent, input and output
resources through discovery, builds its hooks (reconcile.hooks) and two `reconcile.Controller`s:

* `map/<name>` over parents (parents.ParentSync), keyed by the parent's ObjectKey, woken by
  every change of a parent but those of its status alone (the MapController's own writes),
  and (after `STATUS_SETTLE` seconds or more, so that a burst of changes brings one status
  write) by every input pass and every change of an output it stamped;
* `map/<name>/inputs` over one parent's one input (inputs.InputSync), keyed by `InputKey`, with
  `spec.parallelism` workers: so many hook calls run at once, each for a different input. Its
  watches: every input kind (a change wakes the key of each parent in the input's namespace
  whose selector matches the object before or after the change; each input kind is listed and
  watched with each parent's selector, in its namespace: `_select`) and every output kind (a change
  of an output this MapController stamped wakes its parent and map key, `OUTPUT_SETTLE` seconds
  later, unless it is the version that key's last pass wrote). Its Events are about the parent.

A parent's selection (its namespace and selector) is watched while some parent has it: when the
last parent of a selection changes its selector or goes away, the inputs controller stops
watching it and releases its informers, which stop unless another MapController selects alike
(reconcile.cache). The supervisor (supervisor.py) adds the controllers to the manager and
removes them when the MapController changes or goes away, which releases the rest.
Building raises SpecError for an invalid spec, HookConfigError for an unusable hook (HookRefused
for one the process's HookPolicy does not allow), and UnknownResource when discovery does not
know a resource yet (a CRD not installed: retried).
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mapctl.context import InputKey, InputKind, MapContext, OutputKind, output_index, output_kind
from mapctl.inputs import InputSync, MapResult
from mapctl.keys import CONTROLLER_LABEL, INPUT_ANNOTATION, MAP_KEY_LABEL, map_key
from mapctl.parents import ParentSync
from mapctl.protocol import MAP_SHAPE, TOMBSTONE_SHAPE, controller_object
from mapctl.selection import STAMPED, SelectorError, is_input, server_selector
from mapctl.spec import MapSpec, SpecError, parse_map_controller
from reconcile import objects
from reconcile.cache import InformerCache
from reconcile.children import APPLY_STRATEGY_ANNOTATION, ChildKind, apply_mode
from reconcile.clock import SYSTEM_CLOCK, Clock
from reconcile.cluster import Cluster, Kind, Obj, ObjectKey, ResourceInfo
from reconcile.controller import Controller, Watch
from reconcile.hooks import HookMetrics, HookPolicy, build_hook
from reconcile.informer import Informer
from reconcile.supervisor import UnknownResource

OUTPUT_SETTLE = 0.05
"""Seconds an output's change waits before it wakes its input's pass: the outputs one pass wrote
are then seen together (their echo costs no hook call: see inputs.py)."""

STATUS_SETTLE = 1.0
"""Seconds an input pass waits before it wakes its parent's pass: a burst of input passes brings
one status write (a parent's pass reads all its inputs and outputs: with 10,000 of each it takes
some tens of milliseconds)."""


STATUS_SHARE = 20
"""A parent is counted again no sooner than this many times as long as its last count took."""


@dataclass(frozen=True)
class Options:
    """How a process runs its MapControllers."""

    resolve: Mapping[str, str] = field(default_factory=dict)  # webhook host -> address (see reconcile.hooks)
    # what hook specs may ask for (python modules, credential namespaces); by default, nothing
    hook_policy: HookPolicy = HookPolicy()
    follow_resync: bool = True  # honour resyncPeriodSeconds and resyncAfterSeconds (a local preview does not)
    # every input pass's result: (MapController name, key, what it did or why it failed)
    report: Callable[[str, InputKey, MapResult | Exception], None] | None = None


class MapInstance:
    """See the module docstring."""

    def __init__(self, obj: Obj, *, cluster: Cluster, cache: InformerCache, clock: Clock = SYSTEM_CLOCK,
                 metrics: HookMetrics | None = None, options: Options = Options()) -> None:
        self.spec = spec = parse_map_controller(obj)
        self.fingerprint = fingerprint(obj)
        served = cluster.resources()
        parent = _resolve(spec.parent.api_version, spec.parent.resource, "spec.parentResource", served)
        inputs: dict[tuple[str, str], InputKind] = {}
        for i, ref in enumerate(spec.inputs):
            info = _resolve(ref.api_version, ref.resource, f"spec.inputResources[{i}]", served)
            inputs[(info.kind.group, info.kind.kind)] = InputKind(info, ref.resource)
        outputs: list[OutputKind] = []
        for i, rule in enumerate(spec.outputs):
            info = _resolve(rule.api_version, rule.resource, f"spec.outputResources[{i}]", served)
            outputs.append(output_kind(ChildKind(info.kind, info.namespaced, rule.method), rule.resource))
        mode = apply_mode(obj, SpecError)
        hooks = self._hooks(spec, cluster, metrics, options)
        self._cache = cache
        output_kinds = list(dict.fromkeys(o.child.kind for o in outputs))
        # only stamped objects of an output kind are listed and watched (selection.STAMPED), and
        # only what some parent selects of an input kind (see _select)
        index_name, index = output_index(spec.name)
        # held until close(), as the controllers' watches of the same scopes hold them until removed
        self._parents = cache.acquire(parent.kind)
        self._released = False
        self._indexed = [cache.acquire(kind, labels=STAMPED) for kind in output_kinds]
        for informer in self._indexed:
            informer.add_index(index_name, index)
        narrowed = cache.narrowed(lists={rule.info.kind: functools.partial(self._selected, rule.info.kind)
                                         for rule in inputs.values()},
                                  indexes=dict(zip(output_kinds, self._indexed, strict=True)))
        self.context = context = MapContext(
            spec=spec, controller=controller_object(obj), parent=parent, inputs=inputs, outputs=outputs,
            map_hook=hooks[0], tombstone_hook=hooks[1], cluster=cluster, cache=narrowed, clock=clock, mode=mode,
            follow_resync=options.follow_resync, report=options.report)
        self.parents: Controller[ObjectKey] = Controller(
            name=f"map/{spec.name}", kind=parent.kind, reconcile=ParentSync(context), clock=clock,
            primary=Watch(parent.kind, lambda obj, primary: [ObjectKey.of(obj)], changes=_beyond_status),
            watches=[Watch(kind, self._output_parents, labels=STAMPED) for kind in output_kinds])
        output_watches = [Watch(kind, self._output_keys, labels=STAMPED, changes=self._not_an_echo,
                                delay=OUTPUT_SETTLE) for kind in output_kinds]
        # input watches are added as parents show their selectors (_select) and removed as the
        # last parent of a selection lets go of it; a parent's own change maps to no input key
        # here (its pass queues its inputs)
        self._lock = threading.Lock()
        self._selections: dict[ObjectKey, Selection] = {}  # parent -> what it selects
        self._watched: dict[tuple[Kind, Selection], Informer] = {}
        self.inputs: Controller[InputKey] = Controller(
            name=f"map/{spec.name}/inputs", kind=parent.kind, reconcile=InputSync(context),
            primary=Watch(parent.kind, _no_keys, changes=self._parent_changed), watches=output_watches,
            workers=spec.parallelism, clock=clock, event_key=lambda key: key.parent_key)
        context.enqueue_input = self.inputs.queue.add
        context.refresh_parent = self._refresh_parent
        self.controllers: list[Controller[Any]] = [self.parents, self.inputs]

    def close(self) -> None:
        """Cancel hook calls in flight and refuse new ones, drop the output index, and release the
        informers the instance holds (the controllers' own watches hold them until removed)."""
        self.context.closed.append(True)
        for hook in (self.context.map_hook, self.context.tombstone_hook):
            if hook is not None:
                hook.close()
        if self._released:
            return
        self._released = True
        for informer in self._indexed:
            informer.remove_index(self.context.index)
            self._cache.release(informer)
        # the passes still in flight read on: the controllers hold these scopes until removed
        self._cache.release(self._parents)

    # --- building -----------------------------------------------------------------------------

    @staticmethod
    def _hooks(spec: MapSpec, cluster: Cluster, metrics: HookMetrics | None, options: Options) -> tuple[Any, Any]:
        def build(name: str, hook_spec: Mapping[str, Any] | None, shape: Any) -> Any:
            return build_hook(hook_spec, field=f"spec.hooks.{name}", controller=spec.name, hook=name, shape=shape,
                              output_field="outputs", policy=options.hook_policy, cluster=cluster,
                              resolve=options.resolve, metrics=metrics)
        map_hook = build("map", spec.map_hook, MAP_SHAPE)
        if map_hook is None:
            raise SpecError("spec.hooks.map", "a webhook, python or pipeline hook is required")
        return map_hook, build("tombstone", spec.tombstone_hook, TOMBSTONE_SHAPE)

    # --- watches ------------------------------------------------------------------------------

    def _parent_changed(self, old: Obj | None, new: Obj | None) -> bool:
        """Keep the inputs a parent selects listed and watched, and let go of what it no longer
        selects (its selector changed, or it is gone); no key to queue."""
        if new is None:
            if old is not None:
                self._forget(ObjectKey.of(old))
        else:
            self._select(new)
        return False

    def _select(self, parent: Obj) -> None:
        """Record what the parent selects: its namespace and its selector (server_selector), whose
        inputs of every kind it can take the inputs controller lists and watches from the first
        parent selecting them on. A parent whose selector is broken (its pass reports it) selects
        nothing. A parent no longer cached (deleted meanwhile) is not recorded."""
        key = ObjectKey.of(parent)
        try:
            selection: Selection | None = (key.namespace, server_selector(self.context.memory.selector(parent)))
        except SelectorError:
            selection = None
        with self._lock:
            if self._selections.get(key) == selection or self._parents.get(key) is None:
                return
            before = self._selections.pop(key, None)
            if selection is not None:
                self._selections[key] = selection
                self._watch(selection)
            self._unwatch_unused(before)

    def _forget(self, key: ObjectKey) -> None:
        with self._lock:
            self._unwatch_unused(self._selections.pop(key, None))

    def _watch(self, selection: Selection) -> None:  # with self._lock held
        namespace, selector = selection
        for rule in self.context.inputs.values():
            if rule.info.namespaced != bool(namespace):
                continue  # is_input: a namespaced parent takes namespaced inputs, a cluster-scoped one the others
            if (rule.info.kind, selection) not in self._watched:
                self._watched[(rule.info.kind, selection)] = self.inputs.watch_more(
                    self._cache, Watch(rule.info.kind, self._input_keys, namespace=namespace, labels=selector))

    def _unwatch_unused(self, selection: Selection | None) -> None:  # with self._lock held
        """Stop watching `selection` when no parent selects it any more (its informers stop unless
        something else holds them)."""
        if selection is None or selection in self._selections.values():
            return
        namespace, selector = selection
        for kind, watched in [k for k in self._watched if k[1] == selection]:
            del self._watched[(kind, watched)]
            self.inputs.unwatch(Watch(kind, self._input_keys, namespace=namespace, labels=selector))

    def _selected(self, kind: Kind, namespace: str) -> list[Informer]:
        """The informers whose union holds every input of `kind` a parent in `namespace` selects
        (what a pass reads: the view in context.cache lists and gets inputs from them). Parents
        are recorded first, should a pass come before the change that wakes it has been seen."""
        for parent in self._parents.list(namespace):
            self._select(parent)
        with self._lock:
            return [informer for (of, (where, _)), informer in self._watched.items()
                    if of == kind and (where == namespace or not namespace)]

    def _input_keys(self, obj: Obj, primary: Kind) -> list[InputKey]:
        """The keys of the parents in the object's namespace that select it (read from the parent
        informer as it stands: before the parents are listed, their own first passes map everything)."""
        context = self.context
        kind = Kind.of(obj)
        rule = context.input_kind(kind.group, kind.kind)
        if rule is None:
            return []
        key = ObjectKey.of(obj)
        namespace = key.namespace if rule.info.namespaced else ""
        mk = map_key(rule.info.kind, namespace, key.name)
        keys = []
        for parent in self._parents.list(namespace):
            try:
                if is_input(obj, parent, context.memory.selector(parent), controller=self.spec.name):
                    keys.append(InputKey(namespace, ObjectKey.of(parent).name, mk, kind.group, kind.kind, key.name))
            except SelectorError:
                continue
        return keys

    def _output_parents(self, obj: Obj, primary: Kind) -> list[ObjectKey]:
        """Nothing to queue at once: a stamped output's parent, whose counts it changes (now that
        the cache holds it), is asked to count again a little later."""
        for key in self._output_keys(obj, primary):
            self.context.memory.touch(key.parent_key)
            self._refresh_parent(key.parent_key)
        return []

    def _refresh_parent(self, key: ObjectKey) -> None:
        """Count the parent again after STATUS_SETTLE seconds, or STATUS_SHARE times as long as
        its last count took (a count reads every input and output of the namespace): counting
        then takes at most 1/STATUS_SHARE of the time, however large the parent."""
        cost = self.context.memory.count_cost.get(key, 0.0)
        self.parents.queue.add_after(key, max(STATUS_SETTLE, STATUS_SHARE * cost))

    def _not_an_echo(self, old: Obj | None, new: Obj | None) -> bool:
        """False for an output written or kept by its input's last pass, in the version that pass
        left (the echo of its own write: no pass needed); True for any other change, deletions
        included."""
        if new is None:
            return True
        keys = self._output_keys(new, self.context.parent.kind)
        if not keys:
            return True
        meta, kind = objects.metadata(new), Kind.of(new)
        ident = (f"{kind.group}/{kind.kind}", str(meta.get("name")), str(meta.get("resourceVersion") or ""))
        with self.context.memory.lock:
            last = self.context.memory.settled.get(keys[0])
        return last is None or ident not in last.outputs

    def _output_keys(self, obj: Obj, primary: Kind) -> list[InputKey]:
        meta = objects.metadata(obj)
        labels = meta.get("labels")
        if not isinstance(labels, dict) or labels.get(CONTROLLER_LABEL) != self.spec.name:
            return []
        mk, ref = labels.get(MAP_KEY_LABEL), objects.controller_of(obj)
        parent = self.context.parent
        if not isinstance(mk, str) or ref is None or ref.get("kind") != parent.kind.kind \
                or Kind(str(ref.get("apiVersion", "")), parent.kind.kind).group != parent.kind.group:
            return []
        namespace = str(meta.get("namespace") or "") if parent.namespaced else ""
        parent_key = ObjectKey(namespace, str(ref.get("name", "")))
        annotations = meta.get("annotations")
        reference = annotations.get(INPUT_ANNOTATION, "") if isinstance(annotations, dict) else ""
        return [self.context.input_key(parent_key, mk, str(reference))]


Selection = tuple[str, str | None]  # a parent's namespace and server_selector: what its inputs are listed with


def _no_keys(obj: Obj, primary: Kind) -> list[InputKey]:
    return []


def _beyond_status(old: Obj | None, new: Obj | None) -> bool:
    """Whether a parent's change is more than a status write: what a map request carries that a
    hook may answer differently to (spec, labels, annotations), or its deletion."""
    if old is None or new is None:
        return True
    before, after = objects.metadata(old), objects.metadata(new)
    return (old.get("spec") != new.get("spec") or before.get("labels") != after.get("labels")
            or before.get("annotations") != after.get("annotations")
            or before.get("deletionTimestamp") != after.get("deletionTimestamp")
            or before.get("uid") != after.get("uid"))


def fingerprint(obj: Obj) -> str:
    """What makes a running MapController out of date when it changes: its spec and apply strategy."""
    apply = objects.annotations_of(obj).get(APPLY_STRATEGY_ANNOTATION, "")
    return json.dumps([obj.get("spec"), apply], sort_keys=True, default=str)


def _resolve(api_version: str, resource: str, where: str, served: list[ResourceInfo]) -> ResourceInfo:
    for info in served:
        if info.plural == resource and info.kind.api_version == api_version:
            return info
    raise UnknownResource(f"{where}: can't find resource {resource!r} in apiVersion {api_version!r}")

