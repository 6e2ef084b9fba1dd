"""Children: make the cluster hold what a hook asked for as one owner's children.

A DecoratorController's attachments (one target's) and a MapController's outputs (one parent's,
for one input) are both "children": objects a hook answers with, owned by an object through a
controller reference and marked as ours by a `Stamp` (labels and annotations). After the hook
answered, the caller passes `manage_children` what it observed (the owner's children carrying
the stamp) and what the hook wants; this module decides, per object, whether to create, update,
delete or recreate it, does it, and reports what it did (Metacontroller's manage_children, spec
b.5 of decorators.md). It owns the child's identity (which rule an object belongs to, and under
which key), the update strategies (OnDelete, Recreate, InPlace) and the stamp. The merge itself
(`three_way_update`, `with_last_applied`, `apply_ssa`) lives in reconcile/apply.py; choosing what
is observed and calling the hook belong to the controllers. Messages speak the caller's words
(`Terms`: "attachment", "spec.attachments", "target").

Promises: every operation is attempted, and the failures are raised together afterwards; no
object passed in is changed (the desired ones and the owner may be shared cache entries); a pass
with nothing to change writes nothing, and in 3-way mode does not even copy the observed objects.
Each `Change` carries the resourceVersion the server stored, so that a controller can tell the
echo of its own write from someone else's change.

Differences from Metacontroller, on purpose:
- a create that finds the name taken (AlreadyExists) is a failure saying so, not silence
  (Appendix B 4); the object is never adopted. When the live object turns out to be ours (the
  caller's view was stale), it is not a failure. In SSA mode the same holds: an object of that
  name that is not ours is reported instead of being taken over by the apply;
- a desired object of a kind no rule declares is a failure, not a create that is never seen
  again (a leak, Appendix B 8);
- desired objects are matched to a rule by group and kind, not by apiVersion: an object in
  another version of the rule's kind is that rule's child, compared in its own version (one
  live read), instead of a delete plus a failing create on every pass (Appendix B 9);
- children whose owner reference Kubernetes would not honour are failures: a cluster-scoped
  child of a namespaced owner, a namespaced one of a namespaced owner in another namespace (the
  garbage collector would delete it), and a namespaced one of a cluster-scoped owner without a
  namespace;
- desired and observed are compared as JSON (reconcile/apply.py), so objects Metacontroller
  wrote are neither rewritten nor, under Recreate, deleted on the first pass;
- a hook's `status` is never written, not even on create (it stays in the last-applied record,
  so records read as Metacontroller writes them);
- a delete whose uid precondition fails (the name now holds another object) counts as done;
- SSA mode has no dry-run: Recreate approximates Metacontroller's server-side dry-run by
  "some field of desired is missing from or differs in observed". Lists are compared whole,
  except lists of objects with a merge key (MERGE_KEYS: ports, containers, ...), compared item
  by item, so fields the server defaults in them (a port's protocol) do not recreate the object
  on every pass. Fields the server rewrites (a Secret's stringData) always differ: avoid them
  under Recreate, in either mode (Metacontroller's 3-way merge loops on them too). An InPlace
  apply is always sent (the server writes nothing when nothing changed) instead of being skipped
  by a process-wide hash cache.

Speed: an idle pass is a containment check and a string comparison per child (`_holds`), with
no copy of the observed object; the full 3-way merge runs only when that check fails.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from reconcile import objects
from reconcile.apply import (
    LAST_APPLIED,
    MERGE_KEYS,
    SYSTEM_FIELDS,
    apply_ssa,
    last_applied,
    last_applied_json,
    three_way_update,
    with_last_applied,
)
from reconcile.cluster import Cluster, Kind, Obj, ObjectKey
from reconcile.errors import AlreadyExists, ApiError, BadRequest, Conflict, Invalid, NotFound, ReconcileError
from reconcile.fields import FieldError
from reconcile.patching import json_equal

ApplyMode = Literal["3way", "ssa"]

APPLY_STRATEGY_ANNOTATION = "porchkit.dev/apply-strategy"
"""On a controller object (a DecoratorController, a MapController): "server-side-apply", or
"dynamic-apply" (the default, Metacontroller's 3-way merge). Metacontroller chooses this for the
whole process with --apply-strategy."""

APPLY_STRATEGIES: dict[str, ApplyMode] = {"dynamic-apply": "3way", "server-side-apply": "ssa"}
Action = Literal["create", "update", "delete", "recreate"]

# updateStrategy.method as a rule gives it: the rolling methods have no rolling logic
# outside CompositeController and behave as their plain counterparts (spec (a)).
_METHODS = {"": "OnDelete", "OnDelete": "OnDelete", "Recreate": "Recreate", "RollingRecreate": "Recreate",
            "InPlace": "InPlace", "RollingInPlace": "InPlace"}
_LAST_APPLIED_POINTER = "/metadata/annotations/" + LAST_APPLIED.replace("~", "~0").replace("/", "~1")

_Identity = tuple[str, str, str, str]  # group, kind, namespace, name


@dataclass(frozen=True, slots=True)
class Change:
    """One write made: `recreate` is a delete because the object differs, to be created again by
    the next pass (Recreate strategy). `resource_version` is what the server stored (a create or
    an update), `uid` the object deleted (a delete or a recreate); neither counts in equality,
    which says what was done."""

    action: Action
    kind: Kind
    key: ObjectKey
    resource_version: str = field(default="", compare=False)
    uid: str = field(default="", compare=False)


@dataclass(frozen=True, slots=True)
class Stamp:
    """The marks that make an owner's child ours: labels and annotations set on every desired
    child (replacing what the hook wrote for them), and required on an observed one."""

    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)

    def on(self, obj: Obj) -> bool:
        """Whether `obj` carries every mark."""
        labels, annotations = objects.labels_of(obj), objects.annotations_of(obj)
        return (all(labels.get(k) == v for k, v in self.labels.items())
                and all(annotations.get(k) == v for k, v in self.annotations.items()))


@dataclass(frozen=True, slots=True)
class Terms:
    """The caller's words, for messages: a DecoratorController's are "attachment", "attachments",
    "spec.attachments", "target" and "attached to this target"."""

    noun: str = "child"  # one object (vowel-initial nouns read best: "an attachment needs ...")
    answer: str = "children"  # the hook answer's field
    rules: str = "the declared kinds"  # where the kinds are declared
    owner: str = "owner"
    belongs: str = "a child of this owner"  # what an object of a taken name is not


class ChildrenError(ReconcileError):
    """Some operations failed; the others were done. The message lists each failure as
    `<action> <Kind> <ns/name>: <why>`; `changes` holds the writes that succeeded. Deterministic
    (reconcile.errors) when some desired object could not be used at all (no name, a kind no
    rule declares, an owner reference Kubernetes would not honour): the same answer fails again."""

    def __init__(self, failures: Sequence[str], changes: Sequence[Change] = (), noun: str = "child", *,
                 deterministic: bool = False) -> None:
        self.failures = tuple(failures)
        self.changes = tuple(changes)
        count = len(self.failures)
        super().__init__(f"{count} {noun} operation{'s' if count != 1 else ''} failed: {'; '.join(failures)}",
                         deterministic=deterministic)


@dataclass(frozen=True, slots=True)
class ChildKind:
    """One rule: `kind` as the rule names it (apiVersion from the rule, kind from discovery),
    whether that kind is namespaced, and its update method (OnDelete, Recreate, InPlace; the
    Rolling ones behave as their plain counterparts)."""

    kind: Kind
    namespaced: bool
    method: str = "OnDelete"


_Wanted = dict[_Identity, tuple[ChildKind, Obj]]  # desired objects, stamped, with their rule


def manage_children(cluster: Cluster, owner: Obj, kinds: Sequence[ChildKind],
                    observed: Mapping[Kind, Sequence[Obj]], desired: Sequence[Obj], *, stamp: Stamp,
                    terms: Terms = Terms(), mode: ApplyMode = "3way",
                    field_manager: str = "metacontroller") -> list[Change]:
    """Make the cluster hold `desired` as the children of `owner`; returns the changes made,
    deletes first, then creates, updates and recreates in desired order.

    `observed` holds, per rule kind, the children found for the owner; `desired` is the hook's
    answer with namespaces defaulted. Each desired object gets `stamp` and is owned by `owner`
    (a controller reference). Observed objects not desired are deleted (Background, uid
    precondition), unless some desired object could not be used (then nothing is deleted in this
    pass). Desired ones are created when absent, else handled by their rule's method. `mode`
    "3way" is Metacontroller's dynamic apply (last-applied annotation), "ssa" server-side apply
    as `field_manager`.

    Raises ChildrenError, after attempting every operation, when any failed; deterministic when
    each failure would only come back (an object that cannot be used, an invalid one, a kind not
    served, a name another child of `owner` holds; not a name anything else holds, which its
    owner may yet free). Never changes `owner`, the observed objects or the desired ones.
    """
    run = _Pass(cluster, owner, stamp, terms, field_manager)
    wanted = run.plan(kinds, desired)
    present = _index(observed)
    # An answer with a child we cannot use may have meant to keep one we observe: delete
    # nothing until the whole answer is understood.
    for identity, (kind, obj) in present.items() if not run.failures else ():
        if identity not in wanted and not objects.is_deleting(obj):
            run.delete(kind, obj, "delete")
    for identity, (rule, obj) in wanted.items():
        found = present.get(identity)
        try:
            if mode == "ssa":
                run.apply_ssa(rule, obj, found[1] if found else None)
            else:
                run.apply_3way(rule, obj, found[1] if found else None)
        except _Skip:
            continue
    if run.failures:
        raise ChildrenError(run.failures, run.changes, terms.noun, deterministic=run.unusable or not run.transient)
    return run.changes


def apply_mode(controller: Mapping[str, Any], error: type[FieldError] = FieldError) -> ApplyMode:
    """The apply mode a controller object's APPLY_STRATEGY_ANNOTATION asks for; `error` naming
    the annotation for a value that is not a strategy."""
    value = objects.annotations_of(controller).get(APPLY_STRATEGY_ANNOTATION, "dynamic-apply")
    if value not in APPLY_STRATEGIES:
        raise error(f"metadata.annotations[{APPLY_STRATEGY_ANNOTATION!r}]",
                    f"{value!r} is not one of {', '.join(APPLY_STRATEGIES)}")
    return APPLY_STRATEGIES[value]


def delete_children(cluster: Cluster, children: Sequence[tuple[Kind, Obj]], *, terms: Terms = Terms()) -> list[Change]:
    """Delete these observed children (Background, uid precondition; one gone already, or being
    deleted, counts as done); returns the deletes made. Raises ChildrenError, after trying every
    one, when any failed."""
    run = _Pass(cluster, {}, Stamp(), terms, "")
    for kind, obj in children:
        if not objects.is_deleting(obj):
            run.delete(kind, obj, "delete")
    if run.failures:
        raise ChildrenError(run.failures, run.changes, terms.noun)
    return run.changes


@dataclass
class _Pass:
    """The state of one call: what was done and what failed."""

    cluster: Cluster
    owner: Obj
    stamp: Stamp
    terms: Terms
    field_manager: str
    changes: list[Change] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    unusable: bool = False  # some desired object failed `plan`
    transient: bool = False  # some failure may not come back on a retry (see `fail`)

    # --- planning (pure) ----------------------------------------------------------------------

    def plan(self, kinds: Sequence[ChildKind], desired: Sequence[Obj]) -> _Wanted:
        """The desired objects by identity, each with its rule, stamped and normalised (copies);
        an object that cannot be a child is a failure and left out. The last duplicate wins."""
        exact = {rule.kind: rule for rule in reversed(kinds)}
        by_group_kind = {(rule.kind.group, rule.kind.kind): rule for rule in reversed(kinds)}  # first rule wins
        owner_namespace = str(objects.metadata(self.owner).get("namespace") or "")
        terms = self.terms
        wanted: _Wanted = {}
        for index, obj in enumerate(desired):
            kind, key = Kind.of(obj), ObjectKey.of(obj)
            if not kind.api_version or not kind.kind or not key.name:
                self.unusable = True
                self.failures.append(f"apply {terms.answer}[{index}]: an {terms.noun} needs apiVersion, kind and "
                                     f"metadata.name")
                continue
            rule = exact.get(kind) or by_group_kind.get((kind.group, kind.kind))
            why = _unownable(rule, key, owner_namespace, terms.owner)
            if rule is None or why:
                self.unusable = True
                self.fail("apply", kind, key, why or f"{kind} is not declared in {terms.rules}")
                continue
            stamped = _stamped(obj, self.stamp, rule.namespaced)
            wanted[(kind.group, kind.kind, key.namespace if rule.namespaced else "", key.name)] = (rule, stamped)
        return wanted

    # --- 3-way (dynamic apply) ----------------------------------------------------------------

    def apply_3way(self, rule: ChildKind, want: Obj, current: Obj | None) -> None:
        if current is None:
            self.create_3way(rule, want)
            return
        if objects.is_deleting(current) or _method(rule) == "OnDelete":
            return
        if current.get("apiVersion") != want.get("apiVersion"):
            current = self.read_as(rule, want)
            if current is None:
                self.create_3way(rule, want)
                return
        if _holds(current, want):
            return  # the common idle case: no copy, no merge
        update = three_way_update(current, want)
        if update is not None:
            self.change(rule, want, current, update)

    def create_3way(self, rule: ChildKind, want: Obj) -> None:
        body = with_last_applied(want, owner=self.owner)  # a fresh copy: ours to change
        body.pop("status", None)  # never set by a hook; kept in the record, as Metacontroller records it
        try:
            stored = self.cluster.create(body)
        except AlreadyExists:
            self.taken(rule, want)
        except ApiError as err:
            self.fail("create", rule.kind, ObjectKey.of(want), err)
        else:
            self.changes.append(Change("create", rule.kind, ObjectKey.of(want), _version(stored)))

    def change(self, rule: ChildKind, want: Obj, current: Obj, update: Obj) -> None:
        """Apply a needed update as the rule's method says."""
        method = _method(rule)
        if method == "Recreate":
            self.delete(rule.kind, current, "recreate")
        elif method == "InPlace":
            try:
                stored = self.cluster.update(update)
            except (NotFound, Conflict):
                return  # gone or changed since it was read: the next pass starts from a fresh read
            except ApiError as err:
                self.fail("update", rule.kind, ObjectKey.of(want), err)
                return
            if _version(stored) != _version(current):  # the server may find nothing to store
                self.changes.append(Change("update", rule.kind, ObjectKey.of(want), _version(stored)))
        else:
            self.fail("update", rule.kind, ObjectKey.of(want),
                      f'updateStrategy.method "{rule.method}" is not one of OnDelete, Recreate, InPlace')

    # --- server-side apply --------------------------------------------------------------------

    def apply_ssa(self, rule: ChildKind, want: Obj, current: Obj | None) -> None:
        key = ObjectKey.of(want)
        intent = _sanitised(want)  # a copy of the stamped copy: ours to change
        if current is None:
            try:
                current = self.cluster.get(rule.kind, key)  # an apply would take over any object of that name
            except ApiError as err:
                self.fail("create", rule.kind, key, err)
                return
            if current is not None and not self.owns(current):
                self.taken(rule, want, current)
                return
        body = _with_owner(intent, self.owner)
        if current is None:
            stored = self.ssa(rule, key, "create", body)
            if stored is not None:
                self.changes.append(Change("create", rule.kind, key, _version(stored)))
            return
        if objects.is_deleting(current):
            return
        method = _method(rule)
        if method == "Recreate":
            if current.get("apiVersion") != want.get("apiVersion"):
                current = self.read_as(rule, want)
            if current is not None and not _contains(current, intent):
                self.delete(rule.kind, current, "recreate")
        elif method == "InPlace":
            self.update_ssa(rule, key, current, body)
        elif method != "OnDelete":
            self.fail("update", rule.kind, key,
                      f'updateStrategy.method "{rule.method}" is not one of OnDelete, Recreate, InPlace')

    def update_ssa(self, rule: ChildKind, key: ObjectKey, current: Obj, body: Obj) -> None:
        if LAST_APPLIED in objects.annotations_of(current):
            # left by a 3-way apply before the switch to SSA: it is not a field the apply owns,
            # so only a patch removes it (metacontroller #1139)
            try:
                self.cluster.patch(rule.kind, key, [{"op": "remove", "path": _LAST_APPLIED_POINTER}],
                                   patch_type="json")
            except NotFound:
                return
            except ApiError as err:
                self.fail("update", rule.kind, key, err)
                return
        stored = self.ssa(rule, key, "update", body)
        if stored is not None and _version(stored) != _version(current):
            self.changes.append(Change("update", rule.kind, key, _version(stored)))

    def ssa(self, rule: ChildKind, key: ObjectKey, action: Action, body: Obj) -> Obj | None:
        try:
            return apply_ssa(self.cluster, body, self.field_manager)
        except ApiError as err:
            self.fail(action, rule.kind, key, err)
            return None

    # --- shared steps -------------------------------------------------------------------------

    def delete(self, kind: Kind, obj: Obj, action: Action) -> None:
        key = ObjectKey.of(obj)
        uid = objects.metadata(obj).get("uid")
        try:
            self.cluster.delete(kind, key, propagation="Background",
                                preconditions={"uid": str(uid)} if uid else None)
        except (NotFound, Conflict):
            return  # gone already, or the name now holds another object: the one we meant is gone
        except ApiError as err:
            self.fail(action, kind, key, err)
        else:
            self.changes.append(Change(action, kind, key, uid=str(uid or "")))

    def read_as(self, rule: ChildKind, want: Obj) -> Obj | None:
        """The live object in the version `want` is written in (another than the rule's)."""
        try:
            return self.cluster.get(Kind.of(want), ObjectKey.of(want))
        except ApiError as err:
            self.fail("update", rule.kind, ObjectKey.of(want), err)
            raise _Skip from err

    def taken(self, rule: ChildKind, want: Obj, found: Obj | None = None) -> None:
        """A create found the name taken: a failure unless the object is ours after all."""
        key = ObjectKey.of(want)
        if found is None:
            try:
                found = self.cluster.get(rule.kind, key)
            except ApiError:
                found = None
            if found is not None and self.owns(found):
                return  # created by an earlier pass the caller has not seen yet: nothing to report
        holder = objects.controller_of(found) if found is not None else None
        whose = f"; its controller is {holder.get('kind')} {holder.get('name')}" if holder else ""
        # Held by another child of the same owner (another input's output, another decorator's
        # attachment): two answers want one name, and the one holding it keeps it. Held by
        # anything else, its owner may yet free it.
        sibling = holder is not None and holder.get("uid") == objects.metadata(self.owner).get("uid")
        self.fail("create", rule.kind, key, f"an object of that name exists and is not {self.terms.belongs} "
                                            f"(it is not adopted{whose})", transient=not sibling)

    def owns(self, obj: Obj) -> bool:
        ref = objects.controller_of(obj)
        return (ref is not None and ref.get("uid") == objects.metadata(self.owner).get("uid")
                and self.stamp.on(obj))

    def fail(self, action: str, kind: Kind, key: ObjectKey, why: str | ApiError, *, transient: bool | None = None,
             ) -> None:
        """Record a failure. A refusal of our own (a string) comes back on a retry; an API error
        comes back only when the request itself is wrong: invalid (400, 422), or for a kind the
        server does not serve (404 naming no object). Anything else may pass (a conflict, 5xx)."""
        if transient is None:
            transient = isinstance(why, ApiError) and not (
                isinstance(why, BadRequest | Invalid) or (isinstance(why, NotFound) and _unserved(why)))
        self.transient = self.transient or transient
        self.failures.append(f"{action} {kind} {key}: {why}")


def _unserved(err: NotFound) -> bool:
    """A 404 for the resource itself (its Status names no object), not for an object of it."""
    details = err.status.get("details") if isinstance(err.status, dict) else None
    return not (isinstance(details, dict) and details.get("name"))


class _Skip(Exception):
    """Internal: the object's step failed (already recorded); go on with the next one."""


def _index(observed: Mapping[Kind, Sequence[Obj]]) -> dict[_Identity, tuple[Kind, Obj]]:
    """Observed objects by identity (an object listed under two rules of one kind appears once)."""
    out: dict[_Identity, tuple[Kind, Obj]] = {}
    for kind, found in observed.items():
        for obj in found:
            key = ObjectKey.of(obj)
            out.setdefault((kind.group, kind.kind, key.namespace, key.name), (kind, obj))
    return out


def _unownable(rule: ChildKind | None, key: ObjectKey, owner_namespace: str, owner: str) -> str:
    """Why an object of this rule at `key` cannot be owned by the owner ("" when it can)."""
    if rule is None:
        return ""
    if not rule.namespaced:
        return f"a cluster-scoped {rule.kind.kind} cannot be owned by a namespaced {owner}" if owner_namespace \
            else ""
    if not key.namespace:
        return f"metadata.namespace is required: {rule.kind.kind} is namespaced and the {owner} is cluster-scoped"
    if owner_namespace and key.namespace != owner_namespace:
        return (f"metadata.namespace must be the {owner}'s namespace ({owner_namespace}): owner references do not "
                f"cross namespaces")
    return ""


def _stamped(obj: Obj, stamp: Stamp, namespaced: bool) -> Obj:
    """A copy of `obj` (new top level and metadata, shared below) carrying the stamp and no
    last-applied annotation; a cluster-scoped object loses its namespace (the API server drops
    it, and the record must match what is stored)."""
    meta = dict(objects.metadata(obj))
    annotations = {k: v for k, v in objects.annotations_of(obj).items() if k != LAST_APPLIED}
    annotations.update(stamp.annotations)
    meta["annotations"] = annotations
    if stamp.labels:
        meta["labels"] = {**objects.labels_of(obj), **stamp.labels}
    if not namespaced or not meta.get("namespace"):
        meta.pop("namespace", None)
    return {**obj, "metadata": meta}


def _sanitised(stamped: Obj) -> Obj:
    """The stamped object as an SSA body: no server-owned metadata, no status."""
    meta = {k: v for k, v in stamped["metadata"].items() if k not in SYSTEM_FIELDS}
    return {**{k: v for k, v in stamped.items() if k != "status"}, "metadata": meta}


def _with_owner(intent: Obj, owner: Obj) -> Obj:
    ref = objects.owner_reference(owner)
    refs = intent["metadata"].get("ownerReferences")
    refs = list(refs) if isinstance(refs, list) else []
    if not any(isinstance(r, Mapping) and r.get("uid") == ref["uid"] for r in refs):
        refs.append(ref)
    return {**intent, "metadata": {**intent["metadata"], "ownerReferences": refs}}


def _method(rule: ChildKind) -> str:
    return _METHODS.get(rule.method, rule.method)


def _version(obj: Obj) -> str:
    return str(objects.metadata(obj).get("resourceVersion") or "")


def _holds(observed: Obj, intent: Obj) -> bool:
    """True when a 3-way update of `observed` to `intent` would change nothing: it holds every
    field of `intent` (server-owned ones and status aside, as the update puts them back) and
    records `intent` as last applied. False means "maybe": the caller then merges."""
    if not _contains(observed, intent):
        return False
    recorded = objects.annotations_of(observed).get(LAST_APPLIED)
    if recorded == last_applied_json(intent):
        return True  # recorded as we write it: the common case, and the cheapest to check
    return json_equal(last_applied(observed), intent)  # Metacontroller, or another serialiser, wrote it


def _contains(observed: Obj, intent: Obj) -> bool:
    """Every field of `intent` is in `observed` with an equal value (a null means "absent"; lists
    compared whole, but see `_same`), leaving out status and server-owned metadata."""
    meta = {k: v for k, v in objects.metadata(intent).items() if k not in SYSTEM_FIELDS}
    return _subset(observed, {**{k: v for k, v in intent.items() if k != "status"}, "metadata": meta})


def _subset(observed: dict[str, Any], intent: dict[str, Any]) -> bool:
    for key, value in intent.items():
        if value is None:
            if key in observed:
                return False
            continue
        if key not in observed:
            return False
        found, kind = observed[key], type(value)
        if kind is dict:
            if type(found) is not dict or not _subset(found, value):
                return False
        elif kind is type(found) and kind is not list:
            if found != value:  # same scalar type: Python's equality is JSON's
                return False
        elif not _same(found, value):
            return False
    return True


def _same(observed: Any, intent: Any) -> bool:
    """JSON equality, except that a list of objects the merge pairs by a key only needs each item
    to hold the item of `intent` at the same place (see `_keyed_items_hold`)."""
    if type(intent) is list and type(observed) is list and len(observed) == len(intent):
        return _equal(observed, intent) or _keyed_items_hold(observed, intent)
    return _equal(observed, intent)


def _equal(a: Any, b: Any) -> bool:
    """`json_equal`, quicker on values of the same plain types (this runs over every child
    on every pass), and False for an object in `b` holding a null (the merge may drop it)."""
    kind = type(a)
    if kind is not type(b):
        return json_equal(a, b)  # 1 and 1.0 are equal; True and 1 are not
    if kind is dict:
        return a.keys() == b.keys() and all(b[key] is not None and _equal(value, b[key]) for key, value in a.items())
    if kind is list:
        return len(a) == len(b) and all(map(_equal, a, b))
    return bool(a == b)


def _keyed_items_hold(observed: list[Any], intent: list[Any]) -> bool:
    """A list of objects the merge pairs by a key (MERGE_KEYS) holds `intent` when each item holds
    the item at the same place: fields the server defaulted in them (a Service port's protocol,
    a container's imagePullPolicy) are then no difference, as in the 3-way merge and in SSA."""
    if not intent or not all(type(item) is dict for item in observed) \
            or not all(type(item) is dict for item in intent):
        return False
    if not any(_unique_key(observed, key) and _unique_key(intent, key) for key in MERGE_KEYS):
        return False  # the merge replaces such a list whole
    return all(map(_subset, observed, intent))


def _unique_key(items: list[dict[str, Any]], key: str) -> bool:
    """Every item has `key`, with distinct values all strings or all integers (narrower than the
    merge's own rule on purpose: wherever this says yes, the merge pairs items by this key)."""
    values = [item.get(key) for item in items]
    plain = all(type(v) is str for v in values) or all(type(v) is int for v in values)
    return plain and len(set(values)) == len(values)


__all__ = ["APPLY_STRATEGIES", "APPLY_STRATEGY_ANNOTATION", "ApplyMode", "Change", "ChildKind", "ChildrenError",
           "Stamp", "Terms", "apply_mode", "delete_children", "manage_children"]
