"""The incremental engine: input deltas in, output deltas out, in time proportional to the delta.

Documents travel between stages as messages `(root, sub, doc)`:
  * `root` is the document's provenance: `(kind, namespace, name)` for a source object, a tuple of
    source roots for a join result, `(gather tag, group)` for a gather output; `sub` holds the
    indexes added by `@unwind`s. Together they identify a document within a stream.
  * `doc is None` retracts every document derived from `root`.
An update is a retraction followed by the new document. Because retractions go by provenance,
not by content, nothing has to be recomputed to be taken back (this also keeps `@now` and `@rnd`
outputs retractable), and stateful stages index their state by root:
  * the join keeps each source's objects, hash indexes on the equality conjuncts of its
    predicate, and which results each object took part in;
  * the gather keeps, per group, its members in identity order (the first one is the template)
    and their values in sorted order;
  * the output keeps what it last emitted per (namespace, name).
Every state change goes through a Journal, so a failing apply changes nothing (an engine that is
thrown away on failure, as `Pipeline.evaluate`'s is, skips the undo log).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any

from deltapipe.errors import DeltapipeError, PipelineError
from deltapipe.expression import NO_LOCAL
from deltapipe.journal import Journal, Unrecorded
from deltapipe.stages import Doc, Gather, Join, Stage, Unwind, set_path
from deltapipe.values import copy_tree, describe, go_json, sort_key, strict_equal

Root = Hashable
Sub = tuple[int, ...]
Message = tuple[Root, Sub, Doc | None]
Tracer = Callable[[str, list[Message]], None]


class Engine:
    """One running instance of a pipeline: all of its state, and `apply`."""

    def __init__(self, stages: Sequence[Stage], sources: Sequence[str] | None,
                 target: dict[str, str] | None, tracer: Tracer | None = None, *, atomic: bool = True) -> None:
        self.sources = Sources(sources)
        self.journal_type = Journal if atomic else Unrecorded
        self.operators = [_operator_for(stage) for stage in stages]
        self.output = Output(target)
        self.tracer = tracer

    def apply(self, deltas: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        journal = self.journal_type()
        try:
            messages = self.sources.receive(deltas, journal)
            self._trace("sources", messages)
            for op in self.operators:
                messages = op.process(messages, journal)
                self._trace(op.stage.label, messages)
            return self.output.settle(messages, journal)
        except BaseException:
            journal.rollback()
            raise

    def _trace(self, label: str, messages: list[Message]) -> None:
        if self.tracer is not None:
            self.tracer(label, messages)


def describe_root(root: Root) -> str:
    """A person's name for a document's provenance: `Deployment default/web`."""
    if type(root) is tuple and len(root) == 3 and all(type(part) is str for part in root):
        kind, namespace, name = root
        return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"
    if type(root) is tuple and root and root[0] == "@gather":
        return f"the group {root[2]} of stage {root[1]}"
    if type(root) is tuple:
        return " + ".join(describe_root(part) for part in root)
    return str(root)


def _located(err: DeltapipeError, stage: Stage, root: Root) -> PipelineError:
    out = err if isinstance(err, PipelineError) else PipelineError(err.message, where=err.where)
    return out.at(f"{stage.label} on {describe_root(root)}")  # type: ignore[return-value]


# ---------------------------------------------------------------------------------------------
# Sources: per-kind caches that turn upserts and deletes into messages


class Sources:
    def __init__(self, kinds: Sequence[str] | None) -> None:
        self.kinds = tuple(kinds) if kinds else None
        self.caches: dict[str, dict[tuple[str, str], Doc]] = {k: {} for k in self.kinds or ()}

    def receive(self, deltas: Iterable[dict[str, Any]], journal: Journal) -> list[Message]:
        out: list[Message] = []
        for number, delta in enumerate(deltas, start=1):
            op, kind, obj = self._check(number, delta)
            namespace, name = _identity(obj, f"delta {number} ({kind})")
            cache = self.caches.get(kind)
            if cache is None:
                cache = journal.set(self.caches, kind, {})
            key, root = (namespace, name), (kind, namespace, name)
            old = cache.get(key)
            if op == "delete":
                if old is not None:
                    journal.pop(cache, key)
                    out.append((root, (), None))
            elif old is None or not strict_equal(old, obj):
                journal.set(cache, key, obj)
                if old is not None:
                    out.append((root, (), None))
                out.append((root, (), obj))
        return out

    def _check(self, number: int, delta: Any) -> tuple[str, str, Doc]:
        where = f"delta {number}"
        if type(delta) is not dict:
            raise PipelineError(f"expected {{op, kind, object}}, got {describe(delta)}", where=where)
        op, kind, obj = delta.get("op"), delta.get("kind"), delta.get("object")
        if op not in ("upsert", "delete"):
            raise PipelineError(f"op must be upsert or delete, got {describe(op)}", where=where)
        if type(kind) is not str or not kind:
            raise PipelineError(f"kind must be a non-empty string, got {describe(kind)}", where=where)
        if self.kinds is not None and kind not in self.kinds:
            raise PipelineError(f"kind {kind} is not a source of this pipeline (sources: {', '.join(self.kinds)})",
                                where=where)
        if type(obj) is not dict:
            raise PipelineError(f"object must be a map, got {describe(obj)}", where=where)
        return op, kind, obj


def _identity(obj: Doc, where: str) -> tuple[str, str]:
    meta = obj.get("metadata")
    name = meta.get("name") if type(meta) is dict else None
    if type(name) is not str or not name:
        raise PipelineError("the object has no metadata.name", where=where)
    namespace = meta.get("namespace") or ""  # type: ignore[union-attr]
    if type(namespace) is not str:
        raise PipelineError(f"metadata.namespace must be a string, got {describe(namespace)}", where=where)
    return namespace, name


# ---------------------------------------------------------------------------------------------
# Stateless stages


class Linear:
    """@select, @project, @unwind: each document on its own, no state."""

    def __init__(self, stage: Stage) -> None:
        self.stage = stage
        self.numbered = isinstance(stage, Unwind)
        self.run: Callable[[Doc], list[Doc]] = stage.run  # type: ignore[attr-defined]

    def process(self, messages: list[Message], journal: Journal) -> list[Message]:
        out: list[Message] = []
        run = self.run
        for message in messages:
            root, sub, doc = message
            if doc is None:
                out.append(message)
                continue
            try:
                results = run(doc)
            except DeltapipeError as err:
                raise _located(err, self.stage, root) from err
            if self.numbered:
                out.extend((root, (*sub, i), result) for i, result in enumerate(results))
            else:
                out.extend((root, sub, result) for result in results)
        return out


# ---------------------------------------------------------------------------------------------
# @join: an inner join over the source kinds, probing hash indexes for its equality conjuncts


class JoinOperator:
    """An inner join over the source kinds.

    For a new object of kind K, the other kinds are bound one at a time in a per-K plan; a kind
    linked to those already bound by `@eq` conjuncts is found through a composite hash index on
    all of those conjuncts, any other kind is scanned. The full predicate then decides.
    """

    def __init__(self, stage: Join) -> None:
        self.stage = stage
        self.kinds = stage.kinds
        self.states: dict[str, dict[Root, Doc]] = {kind: {} for kind in self.kinds}
        self.links: dict[Root, dict[Root, None]] = {}  # source root -> join results it is part of
        self.indexes: dict[str, list[CompositeIndex]] = {kind: [] for kind in self.kinds}
        self.plans = {kind: self._plan(kind) for kind in self.kinds}

    def _plan(self, first: str) -> list[tuple[str, Probe | None]]:
        """The order in which to bind the other kinds, each found by an index probe where possible."""
        bound, remaining, plan = [first], [k for k in self.kinds if k != first], []
        while remaining:
            probe = None
            for kind in remaining:
                links = [(bound_key, key) for eq in self.stage.equalities
                         for this, key, other, bound_key in ((eq.left_kind, eq.left, eq.right_kind, eq.right),
                                                             (eq.right_kind, eq.right, eq.left_kind, eq.left))
                         if this == kind and other in bound]
                if links:
                    probe = self._probe(kind, links)
                    break
            kind = kind if probe else remaining[0]
            plan.append((kind, probe))
            bound.append(kind)
            remaining.remove(kind)
        return plan

    def _probe(self, kind: str, links: list[tuple[Side, Side]]) -> Probe:
        index = CompositeIndex(tuple(_on_own(kind, key) for _, key in links))
        self.indexes[kind].append(index)
        bound_keys = tuple(bound_key for bound_key, _ in links)
        return Probe(bound_keys, index)

    def process(self, messages: list[Message], journal: Journal) -> list[Message]:
        out: list[Message] = []
        for root, _sub, doc in messages:
            kind = root[0]  # type: ignore[index]
            state = self.states[kind]
            if doc is None:
                if root in state:
                    self._forget(kind, root, journal.pop(state, root), journal, out)
                continue
            for result_root, compound in self._partners(kind, root, doc):
                out.append((result_root, (), compound))
                for member in result_root:  # type: ignore[attr-defined]
                    links = self.links.get(member)
                    if links is None:
                        links = journal.set(self.links, member, {})
                    journal.set(links, result_root, None)
            journal.set(state, root, doc)
            for index in self.indexes[kind]:
                index.add(root, doc, journal)
        return out

    def _forget(self, kind: str, root: Root, doc: Doc, journal: Journal, out: list[Message]) -> None:
        for index in self.indexes[kind]:
            index.discard(root, doc, journal)
        if root in self.links:
            for result_root in journal.pop(self.links, root):
                out.append((result_root, (), None))
                for member in result_root:
                    if member != root:
                        journal.pop(self.links[member], result_root)

    def _partners(self, kind: str, root: Root, doc: Doc) -> list[tuple[Root, Doc]]:
        plan, states, kinds = self.plans[kind], self.states, self.kinds
        docs: dict[str, Doc] = {kind: doc}
        roots: dict[str, Root] = {kind: root}
        found: list[tuple[Root, Doc]] = []

        def bind(position: int) -> None:
            if position == len(plan):
                compound = {k: docs[k] for k in kinds}
                members = tuple(roots[k] for k in kinds)
                try:
                    keep = self.stage.predicate(compound, NO_LOCAL)
                except DeltapipeError as err:
                    raise _located(err, self.stage, members) from err
                if type(keep) is not bool:
                    raise PipelineError(f"the join condition must give true or false, got {describe(keep)}",
                                        where=f"{self.stage.label} on {describe_root(members)}")
                if keep:
                    found.append((members, compound))
                return
            other, probe = plan[position]
            state = states[other]
            candidates: Iterable[Root] = state if probe is None else probe.candidates(docs)
            for candidate in list(candidates):
                docs[other], roots[other] = state[candidate], candidate
                bind(position + 1)

        bind(0)
        return found


Side = Callable[[dict[str, Doc]], Any]  # one side of an @eq, read from a compound document


def _on_own(kind: str, side: Side) -> Callable[[Doc], Any]:
    """The side read from one object of `kind` rather than from a compound document."""
    return lambda doc: side({kind: doc})


class CompositeIndex:
    """Objects of one kind by the values of one or more `@eq` sides (all must be non-null)."""

    __slots__ = ("keys", "buckets")

    def __init__(self, keys: tuple[Callable[[Doc], Any], ...]) -> None:
        self.keys = keys
        self.buckets: dict[Hashable, dict[Root, None]] = {}

    def key_of(self, values: Iterable[Any]) -> Hashable | None:
        parts = []
        for value in values:
            if value is None:  # @eq with a null side is false: such an object can never match
                return None
            parts.append(_index_key(value))
        return tuple(parts)

    def add(self, root: Root, doc: Doc, journal: Journal) -> None:
        key = self.key_of(get(doc) for get in self.keys)
        if key is not None:
            bucket = self.buckets.get(key)
            if bucket is None:
                bucket = journal.set(self.buckets, key, {})
            journal.set(bucket, root, None)

    def discard(self, root: Root, doc: Doc, journal: Journal) -> None:
        key = self.key_of(get(doc) for get in self.keys)
        if key is not None:
            bucket = self.buckets[key]
            journal.pop(bucket, root)
            if not bucket:
                journal.pop(self.buckets, key)


class Probe:
    """How to find one kind's partners: the bound objects' side of each `@eq`, looked up in an index."""

    __slots__ = ("bound_keys", "index")

    def __init__(self, bound_keys: tuple[Side, ...], index: CompositeIndex) -> None:
        self.bound_keys = bound_keys
        self.index = index

    def candidates(self, bound: dict[str, Doc]) -> Iterable[Root]:
        key = self.index.key_of(get(bound) for get in self.bound_keys)
        return () if key is None else self.index.buckets.get(key, ())


def _index_key(value: Any) -> Hashable:
    """Equal under `@eq` (type-strict deep equality) implies equal index keys."""
    t = type(value)
    return go_json(value) if t is dict or t is list else (t, value)


# ---------------------------------------------------------------------------------------------
# @gather: per-group state, so a delta touches only its groups


class Group:
    __slots__ = ("ids", "docs", "order", "values")

    def __init__(self) -> None:
        self.ids: list[tuple[Root, Sub]] = []            # members in identity order; ids[0] is the template
        self.docs: dict[tuple[Root, Sub], tuple[Doc, tuple[Any, ...]]] = {}
        self.order: list[tuple[tuple[Any, ...], tuple[Root, Sub]]] = []   # (value sort key, member), sorted
        self.values: list[Any] = []                       # the values, in the same order

    def add(self, member: tuple[Root, Sub], doc: Doc, value: Any) -> None:
        entry = (sort_key(value), member)
        insort(self.ids, member)
        position = bisect_left(self.order, entry)
        self.order.insert(position, entry)
        self.values.insert(position, value)
        self.docs[member] = (doc, entry[0])

    def remove(self, member: tuple[Root, Sub]) -> tuple[Doc, Any]:
        doc, key = self.docs.pop(member)
        del self.ids[bisect_left(self.ids, member)]
        position = bisect_left(self.order, (key, member))
        del self.order[position]
        return doc, self.values.pop(position)


class GatherOperator:
    def __init__(self, stage: Gather) -> None:
        self.stage = stage
        self.groups: dict[str, Group] = {}
        self.memberships: dict[Root, dict[tuple[Sub, str], None]] = {}

    def process(self, messages: list[Message], journal: Journal) -> list[Message]:
        touched: dict[str, None] = {}
        for root, sub, doc in messages:
            if doc is None:
                if root in self.memberships:
                    for member_sub, group_key in journal.pop(self.memberships, root):
                        self._leave(group_key, (root, member_sub), journal)
                        touched[group_key] = None
                continue
            try:
                key = self.stage.key(doc, NO_LOCAL)
            except DeltapipeError as err:
                raise _located(err, self.stage, root) from err
            value = self.stage.value_path.get(doc)
            if key is None or value is None:
                continue
            group_key = go_json(key)
            group = self.groups.get(group_key)
            if group is None:
                group = journal.set(self.groups, group_key, Group())
            group.add((root, sub), doc, value)
            journal.on_rollback(group.remove, (root, sub))
            memberships = self.memberships.get(root)
            if memberships is None:
                memberships = journal.set(self.memberships, root, {})
            journal.set(memberships, (sub, group_key), None)
            touched[group_key] = None
        out: list[Message] = []
        for group_key in touched:
            group_root = ("@gather", self.stage.index, group_key)
            out.append((group_root, (), None))
            group = self.groups[group_key]
            if group.ids:
                out.append((group_root, (), self._summary(group)))
            else:
                journal.pop(self.groups, group_key)
        return out

    def _leave(self, group_key: str, member: tuple[Root, Sub], journal: Journal) -> None:
        group = self.groups[group_key]
        doc, value = group.remove(member)
        journal.on_rollback(group.add, member, doc, value)

    def _summary(self, group: Group) -> Doc:
        template = group.docs[group.ids[0]][0]
        return set_path(template, self.stage.value_path, list(group.values))


def _operator_for(stage: Stage) -> Linear | JoinOperator | GatherOperator:
    if isinstance(stage, Join):
        return JoinOperator(stage)
    if isinstance(stage, Gather):
        return GatherOperator(stage)
    return Linear(stage)


# ---------------------------------------------------------------------------------------------
# Output: conversion to target objects and reconciliation per (namespace, name)


class Output:
    def __init__(self, target: dict[str, str] | None) -> None:
        self.target = target
        self.by_root: dict[Root, dict[tuple[Sub, tuple[str, str]], None]] = {}
        self.by_name: dict[tuple[str, str], dict[tuple[Root, Sub], Doc]] = {}
        self.emitted: dict[tuple[str, str], Doc] = {}

    def settle(self, messages: list[Message], journal: Journal) -> list[dict[str, Any]]:
        touched: set[tuple[str, str]] = set()
        for root, sub, doc in messages:
            if doc is None:
                if root in self.by_root:
                    for member_sub, name in journal.pop(self.by_root, root):
                        journal.pop(self.by_name[name], (root, member_sub))
                        touched.add(name)
                continue
            name, obj = self._convert(doc, root)
            candidates = self.by_name.get(name)
            if candidates is None:
                candidates = journal.set(self.by_name, name, {})
            journal.set(candidates, (root, sub), obj)
            entries = self.by_root.get(root)
            if entries is None:
                entries = journal.set(self.by_root, root, {})
            journal.set(entries, (sub, name), None)
            touched.add(name)
        deletes, upserts = [], []
        for name in sorted(touched):
            candidates = self.by_name.get(name) or {}
            if not candidates:
                if name in self.by_name:
                    journal.pop(self.by_name, name)
                if name in self.emitted:
                    deletes.append({"op": "delete", "object": copy_tree(journal.pop(self.emitted, name))})
                continue
            # Several documents under one name: the one with the smallest provenance wins, so the
            # outcome does not depend on the order in which they arrived.
            chosen = candidates[min(candidates)]
            before = self.emitted.get(name)
            if before is None or not strict_equal(before, chosen):
                journal.set(self.emitted, name, chosen)
                upserts.append({"op": "upsert", "object": copy_tree(chosen)})
        return deletes + upserts

    def _convert(self, doc: Doc, root: Root) -> tuple[tuple[str, str], Doc]:
        where = f"output of {describe_root(root)}"
        meta = doc.get("metadata")
        if type(meta) is not dict:
            raise PipelineError("the output object has no metadata map (build one in a @project stage)",
                                where=where)
        name = meta.get("name")
        if type(name) is not str or not name:
            raise PipelineError(f"the output object needs a non-empty string metadata.name, got {describe(name)}",
                                where=where)
        namespace = meta.get("namespace")
        if namespace is not None and type(namespace) is not str:
            raise PipelineError(f"metadata.namespace must be a string, got {describe(namespace)}", where=where)
        if self.target is None:
            obj = dict(doc)
        else:
            obj = {"apiVersion": self.target["apiVersion"], "kind": self.target["kind"]}
            obj.update((k, v) for k, v in doc.items() if k not in obj)
        if namespace == "":
            obj["metadata"] = {k: v for k, v in meta.items() if k != "namespace"}
        return (namespace or "", name), obj

