"""PackageVariantSet controller: one set keeps one PackageVariant per target it selects.

Reads the set, its namespace's PackageRevisions, Repositories and PackageVariants and the objects
its objectSelectors name (all cached); writes the PackageVariants it generates (created, updated
and deleted by their identity `<set>-<repo>-<package>`) and its status: Stalled, Ready, and
`packageVariants`, one entry per generated PackageVariant with its downstream and whether it is
Ready. Each new reason to be Stalled is also told once as a Warning Event on the set. The
decisions live in validation.py and render.py (pure). A set is validated before any object it
selects is read, so one that selects Secrets (refused) never starts an informer on them.

Where this goes beyond Porch's controller (spec c.1-c.6):
* Repositories and the kinds objectSelectors name are watched, so a newly labelled Repository or
  target object gets its PackageVariant at once (Porch waits for an unrelated event); the objects
  of those kinds are listed and watched with the objectSelector's label selector, in the set's
  namespace, so that only what some set selects is cached; a selection no set makes any more (its
  set edited or deleted) is no longer watched, and its informer stops unless something else holds it.
* A PackageVariant is updated only when what the set wants of it differs (Porch rewrites every
  one on every pass), and never deleted and re-created for a template edit.
* `status.packageVariants` reports each target (Porch has no per-target status, nephio#646).
* Secrets cannot be targets, and templates never see the annotations that hold a copy of an
  object (cel_view.py): Porch lets a template copy a Secret's data into git.
* An upstream that cannot be found because its Repository is not Ready (its git server refused)
  is Stalled with reason RepositoryNotReady and that Repository's message, as a PackageVariant
  is; Porch says only that the upstream was not found.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import logging
import threading
from collections.abc import Mapping
from typing import Any

from porchvariant.errors import PorchVariantError
from porchvariant.packagevariant_controller import PACKAGE_VARIANT
from porchvariant.porch_client import PACKAGE_REVISION, REPOSITORY
from porchvariant.render import (
    OWNER_LABEL,
    find_set_upstream,
    package_variant_identifier,
    render_package_variants,
    upstream_not_found_message,
)
from porchvariant.validation import validate_package_variant_set
from reconcile import conditions
from reconcile.cache import InformerCache
from reconcile.clock import Clock
from reconcile.cluster import Cluster, Kind, Obj, ObjectKey
from reconcile.controller import Controller, Watch, Watches
from reconcile.errors import AlreadyExists, ApiError, BadRequest, NotFound
from reconcile.informer import Informer
from reconcile.objects import controller_of
from reconcile.outcome import Done, Outcome, RequeueAfter
from reconcile.selectors import parse_labels

__all__ = ["PACKAGE_VARIANT_SET", "PackageVariantSetController", "package_variant_set_controller"]

PACKAGE_VARIANT_SET = Kind("config.porch.kpt.dev/v1alpha2", "PackageVariantSet")
STALLED, READY = "Stalled", "Ready"
RECHECK_KINDS = 30.0  # seconds: how often a set whose objectSelector names an unserved kind looks again
STATUS_BATCH = 1.0  # seconds: how long changes of a set's PackageVariants are gathered before it looks

log = logging.getLogger("porchkit.packagevariantset")


Selection = tuple[Kind, str, str]  # what an objectSelector selects: kind, namespace, label selector


class _Stalled(Exception):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class PackageVariantSetController:
    """The reconcile function; `controller` is set by `package_variant_set_controller`."""

    def __init__(self, cluster: Cluster, cache: InformerCache, clock: Clock) -> None:
        self.cluster, self.cache, self.clock = cluster, cache, clock
        self.controller: Controller | None = None
        self._lock = threading.Lock()
        # Rendering a thousand targets takes a while and every PackageVariant status change wakes
        # the set: keep the last rendering per set with a fingerprint of its inputs.
        self._rendered: dict[ObjectKey, tuple[tuple[Any, ...], list[dict[str, Any]]]] = {}
        # what each set's objectSelectors select, and the informers watching each such selection
        self._selection_lock = threading.Lock()
        self._selects: dict[ObjectKey, set[Selection]] = {}
        self._watched: dict[Selection, Informer] = {}

    def reconcile(self, key: ObjectKey) -> Outcome:
        pvs = self.cluster.get(PACKAGE_VARIANT_SET, key)
        if pvs is None or pvs["metadata"].get("deletionTimestamp"):
            with self._lock:
                self._rendered.pop(key, None)
            self._keep(key, set())
            return Done()  # its PackageVariants are owned by it: garbage collection deletes them
        status = dict(pvs.get("status") or {})
        outcome: Outcome = Done()
        failure: ApiError | None = None
        try:
            wanted = self._wanted(pvs)
            self._ensure(pvs, wanted)
        except (_Stalled, ApiError) as err:
            reason = err.reason if isinstance(err, _Stalled) else "UnexpectedError"
            if isinstance(err, _Stalled):
                self._tell(pvs, reason, str(err))  # an ApiError is told by the Controller, which retries it
            status["conditions"] = self._conditions(pvs, ("True", reason, str(err)), ("False", reason, str(err)))
            if reason == "NoMatchingTargets":
                outcome = RequeueAfter(RECHECK_KINDS)  # nothing watches for a CRD that is yet to come
            if isinstance(err, ApiError):
                failure = err
        else:
            status["conditions"] = self._conditions(pvs, ("False", "Valid", "all validation checks passed"),
                                                    ("True", "Reconciled", "package variants successfully reconciled"))
            status["packageVariants"] = self._target_status(pvs, wanted)
        if status != (pvs.get("status") or {}):
            self.cluster.update_status({**pvs, "status": status})
        if failure is not None:
            raise failure  # retried with back-off, the reason in the status meanwhile
        return outcome

    def _wanted(self, pvs: Obj) -> list[dict[str, Any]]:
        """The PackageVariants the set renders; _Stalled says why there are none."""
        if problems := validate_package_variant_set(pvs):
            raise _Stalled("ValidationError", "; ".join(problems))
        namespace = pvs["metadata"].get("namespace", "")
        upstream = find_set_upstream(pvs, self.cache.list(PACKAGE_REVISION, namespace))
        repositories = self.cache.list(REPOSITORY, namespace)
        if upstream is None:
            if unready := _unready_upstream(pvs, repositories):  # it cannot be listed: say why
                raise _Stalled("RepositoryNotReady", unready)
            raise _Stalled("UpstreamNotFound", upstream_not_found_message(pvs))
        target_objects = self._target_objects(pvs)
        inputs = (pvs["metadata"].get("uid"), pvs["metadata"].get("generation"), _versions([upstream]),
                  _versions(repositories), _versions(target_objects))
        key = ObjectKey.of(pvs)
        with self._lock:
            rendered = self._rendered.get(key)
        if rendered is not None and rendered[0] == inputs:
            return rendered[1]
        try:
            wanted = render_package_variants(pvs, upstream, repositories, target_objects)
        except PorchVariantError as err:
            raise _Stalled("UnexpectedError", str(err)) from err
        with self._lock:
            self._rendered[key] = (inputs, wanted)
        return wanted

    def _target_objects(self, pvs: Obj) -> list[Obj]:
        """The objects of every kind an objectSelector names, in the set's namespace (watched from
        now on, and what the set selected before no longer, unless another set selects it too);
        _Stalled for a kind the cluster does not serve (what the set selected is then kept)."""
        found: list[Obj] = []
        selections: set[Selection] = set()
        namespace = pvs["metadata"].get("namespace", "")
        for target in (pvs.get("spec") or {}).get("targets") or ():
            selector = target.get("objectSelector")
            if target.get("repositories") or target.get("repositorySelector") is not None or selector is None:
                continue
            kind = Kind(selector.get("apiVersion", ""), selector.get("kind", ""))
            try:
                info = self.cluster.resource(kind)
            except NotFound:
                raise _Stalled("NoMatchingTargets", f'no matches for kind "{kind.kind}" in version '
                                                    f'"{kind.api_version}"') from None
            if kind == REPOSITORY:
                continue  # render_package_variants selects among the Repositories it is given
            labels = object_selector_labels(selector)
            if labels is None:
                continue  # render_package_variants reports the selector that does not parse
            selection = (kind, namespace if info.namespaced else "", labels)
            selections.add(selection)
            # only what the selector selects is listed and cached: the server applies it
            informer = self._select(ObjectKey.of(pvs), selection)
            found.extend(self.cache.narrowed(lists={kind: functools.partial(_only, informer)}).list(kind, selection[1]))
        self._keep(ObjectKey.of(pvs), selections)
        return found

    def _select(self, key: ObjectKey, selection: Selection) -> Informer:
        """The informer of `selection`, which the set `key` selects (watched from now on)."""
        with self._selection_lock:
            self._selects.setdefault(key, set()).add(selection)
            informer = self._watched.get(selection)
            if informer is None:
                informer = self._watched[selection] = self._watch(*selection)
            return informer

    def _keep(self, key: ObjectKey, selections: set[Selection]) -> None:
        """Record that the set `key` selects `selections` now, and stop watching what no set selects."""
        with self._selection_lock:
            before = self._selects.pop(key, set())
            if selections:
                self._selects[key] = selections
            still = set().union(*self._selects.values())
            for selection in before - still:
                self._watched.pop(selection, None)
                if self.controller is not None:
                    self.controller.unwatch(self._watching(*selection))

    def _ensure(self, pvs: Obj, wanted: list[dict[str, Any]]) -> None:
        """Create, update and delete the set's PackageVariants, matched by identifier."""
        name = pvs["metadata"]["name"]
        existing = {package_variant_identifier(name, _spec(pv)): pv for pv in self._owned(pvs)}
        desired = {package_variant_identifier(name, pv["spec"]): pv for pv in wanted}
        for identifier, pv in existing.items():
            if identifier not in desired:
                log.info("package variant set %s: deleting %s", name, pv["metadata"]["name"])
                with contextlib.suppress(NotFound):
                    self.cluster.delete(PACKAGE_VARIANT, ObjectKey.of(pv))
        for identifier, pv in desired.items():
            current = existing.get(identifier)
            if current is None:
                log.info("package variant set %s: creating %s", name, pv["metadata"]["name"])
                self._create(pvs, pv)
            elif (updated := _updated(current, pv)) is not None:
                log.info("package variant set %s: updating %s", name, pv["metadata"]["name"])
                self.cluster.update(updated)

    def _create(self, pvs: Obj, pv: dict[str, Any]) -> None:
        try:
            self.cluster.create(pv)
        except AlreadyExists:
            live = self.cluster.get(PACKAGE_VARIANT, ObjectKey.of(pv))
            if live is not None and ((live["metadata"].get("labels") or {}).get(OWNER_LABEL)
                                     != pvs["metadata"].get("uid")):
                raise _Stalled("UnexpectedError", f'package variant "{pv["metadata"]["name"]}" already exists '
                                                  "and does not belong to this set") from None
            # else: created by an earlier pass that the cache does not show yet

    def _owned(self, pvs: Obj) -> list[Obj]:
        uid = pvs["metadata"].get("uid")
        return [pv for pv in self.cache.list(PACKAGE_VARIANT, pvs["metadata"].get("namespace", ""))
                if ((pv.get("metadata") or {}).get("labels") or {}).get(OWNER_LABEL) == uid]

    def _target_status(self, pvs: Obj, wanted: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """One entry per generated PackageVariant, in target order, with its Ready condition."""
        namespace = pvs["metadata"].get("namespace", "")
        out = []
        for pv in wanted:
            live = self.cache.get(PACKAGE_VARIANT, ObjectKey(namespace, pv["metadata"]["name"]))
            ready = conditions.find(conditions.conditions_of(live or {}), READY)
            stalled = conditions.find(conditions.conditions_of(live or {}), STALLED)
            condition = stalled if stalled is not None and stalled.get("status") == "True" else ready
            entry = {"name": pv["metadata"]["name"], "repo": pv["spec"]["downstream"]["repo"],
                     "package": pv["spec"]["downstream"]["package"],
                     "ready": str(ready.get("status")) if ready else "Unknown",
                     "reason": str(condition.get("reason") or "") if condition else "Pending",
                     "message": str(condition.get("message") or "") if condition else "not reconciled yet"}
            out.append(entry)
        return out

    def _tell(self, pvs: Obj, reason: str, message: str) -> None:
        """A Warning Event for a problem the Stalled condition does not say yet: told once, not on
        every pass (the same problem after another one is told again)."""
        before = conditions.find(conditions.conditions_of(pvs), STALLED)
        if before is not None and (before.get("status"), before.get("message")) == ("True", message):
            return
        events = self.controller.events if self.controller is not None else None
        if events is not None:
            events.record(PACKAGE_VARIANT_SET, ObjectKey.of(pvs), "Warning", reason, message)  # never raises

    def _conditions(self, pvs: Obj, stalled: tuple[Any, str, str], ready: tuple[Any, str, str]) -> list[dict[str, Any]]:
        out = (pvs.get("status") or {}).get("conditions")
        generation = pvs["metadata"].get("generation")
        for type_, (state, reason, message) in ((STALLED, stalled), (READY, ready)):
            out = conditions.set_condition(out, type_, state, reason, message, now=self.clock.time(),
                                           observed_generation=generation if isinstance(generation, int) else None)
        return list(out or [])

    def _watch(self, kind: Kind, namespace: str, labels: str) -> Informer:
        """Wake every set in an object's namespace when an object of `kind` an objectSelector
        selects changes (or stops being selected: the server sends that as a deletion); returns
        the informer of that selection."""
        if self.controller is None:
            return self.cache.informer(kind, namespace=namespace, labels=labels)
        return self.controller.watch_more(self.cache, self._watching(kind, namespace, labels))

    def _watching(self, kind: Kind, namespace: str, labels: str) -> Watch[ObjectKey]:
        return Watches(kind, self._sets_beside, namespace=namespace, labels=labels)

    def _sets_beside(self, obj: Obj) -> list[ObjectKey]:
        namespace = (obj.get("metadata") or {}).get("namespace", "")
        return [ObjectKey.of(pvs) for pvs in self.cache.list(PACKAGE_VARIANT_SET, namespace)]


def _only(informer: Informer, namespace: str) -> list[Informer]:
    return [informer]


def object_selector_labels(selector: Mapping[str, Any]) -> str | None:
    """The label selector of an objectSelector, as sent to the API server ("" for everything);
    None when it does not parse."""
    try:
        return str(parse_labels({key: selector[key] for key in ("matchLabels", "matchExpressions") if key in selector}))
    except BadRequest:
        return None


def package_variant_set_controller(cluster: Cluster, cache: InformerCache, clock: Clock, *,
                                   workers: int = 2) -> Controller:
    """The PackageVariantSet controller, woken by its own objects, the PackageVariants it owns, and
    any PackageRevision or Repository of their namespace (plus objectSelector kinds, once seen)."""
    reconciler = PackageVariantSetController(cluster, cache, clock)

    def whole_namespace(obj: Obj) -> list[ObjectKey]:
        namespace = (obj.get("metadata") or {}).get("namespace", "")
        return [ObjectKey.of(pvs) for pvs in cache.list(PACKAGE_VARIANT_SET, namespace)]

    def upstream_of(pr: Obj) -> list[ObjectKey]:
        """Only a revision of a set's upstream package can change what the set renders (Porch wakes
        every set of the namespace on any PackageRevision change)."""
        spec = _spec(pr)
        package = (spec.get("repository"), spec.get("packageName"))
        namespace = (pr.get("metadata") or {}).get("namespace", "")
        return [ObjectKey.of(pvs) for pvs in cache.list(PACKAGE_VARIANT_SET, namespace)
                if _upstream_package(pvs) == package]

    def owner_soon(pv: Obj) -> list[ObjectKey]:
        """The owning set, STATUS_BATCH seconds from now: while a thousand variants become Ready one
        after the other, the set reconciles (and rewrites its per-target status) once a batch."""
        ref, namespace = controller_of(pv), pv["metadata"].get("namespace", "")
        if ref is not None and ref.get("kind") == PACKAGE_VARIANT_SET.kind:
            controller.queue.add_after(ObjectKey(namespace, str(ref.get("name"))), STATUS_BATCH)
        else:  # not a set's: it may hold a name a set wants (rare enough to wake them all)
            for pvs in cache.list(PACKAGE_VARIANT_SET, namespace):
                controller.queue.add_after(ObjectKey.of(pvs), STATUS_BATCH)
        return []

    controller = Controller("packagevariantset", PACKAGE_VARIANT_SET, reconciler.reconcile,
                            watches=[Watches(PACKAGE_VARIANT, owner_soon), Watches(PACKAGE_REVISION, upstream_of),
                                     Watches(REPOSITORY, whole_namespace)],
                            workers=workers, clock=clock)
    reconciler.controller = controller
    return controller


def _updated(current: Obj, wanted: Obj) -> dict[str, Any] | None:
    """`current` with the spec, owner label and owner reference the set wants; None if it has them
    (checked without copying: a set with a thousand PackageVariants checks them all on every pass)."""
    meta, wanted_meta = current.get("metadata") or {}, wanted["metadata"]
    owner = wanted_meta["ownerReferences"][0]
    labels = meta.get("labels") or {}
    has_owner = any(ref.get("uid") == owner["uid"] for ref in meta.get("ownerReferences") or ())
    if (current.get("spec") == wanted["spec"] and has_owner
            and all(labels.get(key) == value for key, value in wanted_meta["labels"].items())):
        return None
    out = copy.deepcopy(dict(current))
    out["spec"] = copy.deepcopy(wanted["spec"])
    out["metadata"]["labels"] = {**labels, **wanted_meta["labels"]}
    if not has_owner:
        out["metadata"]["ownerReferences"] = [*(meta.get("ownerReferences") or []), owner]
    return out


def _versions(objects: list[Obj]) -> tuple[tuple[str, str, str], ...]:
    """Which objects, at which resourceVersion: equal tuples mean equal inputs to rendering."""
    return tuple(sorted((str(o["metadata"].get("namespace")), str(o["metadata"].get("name")),
                         str(o["metadata"].get("resourceVersion"))) for o in objects))


def _upstream_package(pvs: Obj) -> tuple[Any, Any]:
    upstream = _spec(pvs).get("upstream")
    return (upstream.get("repo"), upstream.get("package")) if isinstance(upstream, Mapping) else (None, None)


def _spec(obj: Obj) -> Mapping[str, Any]:
    """obj.spec, or an empty one when it is not a mapping (mappers see objects before validation)."""
    spec = obj.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _unready_upstream(pvs: Obj, repositories: list[Obj]) -> str:
    """Why the set's upstream Repository cannot be read (its Ready condition is False), or ""."""
    name = ((pvs.get("spec") or {}).get("upstream") or {}).get("repo")
    for repository in repositories:
        if repository["metadata"].get("name") == name:
            ready = conditions.find(conditions.conditions_of(repository), READY)
            if ready is not None and ready.get("status") == "False":
                return f'upstream repository "{name}" is not ready: {ready.get("message") or ready.get("reason")}'
    return ""
