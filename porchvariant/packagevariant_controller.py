"""PackageVariant controller: one PackageVariant keeps one downstream package in step with its upstream.

Reads the PackageVariant, its namespace's PackageRevisions and Repositories (cached), the
resources of its downstream revisions (live) and the in-cluster objects its injectors may
inject (cached); writes downstream drafts and their resources, adoptions and disposals, its
finalizer, and its status (Stalled, Ready, downstreamTargets). The decisions live in the pure
modules: validation.py, upstream.py, downstream.py, mutations.py.

Where this goes beyond Porch's controller (spec b.1-b.10), each for a pain its users reported:
* A missing downstream Repository is Stalled, naming it, before anything is written; a missing
  upstream is Stalled too (Porch leaves Stalled False and retries). Both are re-examined when a
  Repository or a PackageRevision changes, so neither needs a back-off loop.
* The in-cluster objects of the package's injection points are watched: editing an injected
  ConfigMap produces a new draft (Porch notices only at the next unrelated event). Secrets are
  never read, even for an injection point of kind Secret (which has nothing to inject: injection
  copies a ConfigMap's data or another kind's spec).
* A draft whose mutations failed carries a False condition MUTATIONS_CONDITION and a readiness
  gate on it in its Kptfile, so it does not look approvable (nephio#615).
* Drafts this controller creates are remembered until the cache shows them, so a reconcile that
  runs before the watch event arrives does not create a second draft.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from porchvariant import injection
from porchvariant.cel_view import is_secret_kind
from porchvariant.downstream import (
    DownstreamPlan,
    clone_draft,
    deletion_plan,
    downstream_targets,
    edit_draft,
    needs_upgrade,
    plan_downstreams,
    upgrade_draft,
)
from porchvariant.errors import MutationError, PorchVariantError
from porchvariant.mutations import apply_mutations, resources_changed
from porchvariant.porch_client import PACKAGE_REVISION, REPOSITORY, PorchClient, is_published
from porchvariant.render import FINALIZER
from porchvariant.upstream import UpstreamNotFound, find_locked_upstream, find_upstream
from porchvariant.validation import validate_package_variant
from reconcile import conditions, finalizers
from reconcile.cache import InformerCache
from reconcile.clock import Clock
from reconcile.cluster import Cluster, Kind, Obj, ObjectKey
from reconcile.controller import Controller, Watches
from reconcile.errors import ApiError, NotFound
from reconcile.outcome import Done, Outcome

__all__ = ["MUTATIONS_CONDITION", "PACKAGE_VARIANT", "PackageVariantController", "package_variant_controller"]

PACKAGE_VARIANT = Kind("config.porch.kpt.dev/v1alpha1", "PackageVariant")
MUTATIONS_CONDITION = "porchkit.dev/package-variant-mutations"
STALLED, READY = "Stalled", "Ready"

log = logging.getLogger("porchkit.packagevariant")


class PackageVariantController:
    """The reconcile function and its watches; `controller` is set by `package_variant_controller`."""

    def __init__(self, cluster: Cluster, cache: InformerCache, clock: Clock) -> None:
        self.cluster, self.cache, self.clock = cluster, cache, clock
        self.porch = PorchClient(cluster)
        self.controller: Controller | None = None
        self._created = _RecentlyCreated(clock)

    def reconcile(self, key: ObjectKey) -> Outcome:
        pv = self.cluster.get(PACKAGE_VARIANT, key)
        if pv is None:
            return Done()
        revisions = self._revisions(pv)
        if finalizers.is_deleting(pv):
            if not finalizers.should_release(pv, FINALIZER):  # an operator may let it go as it is
                self._dispose_of_downstreams(pv, revisions)
            finalizers.release(self.cluster, PACKAGE_VARIANT, pv, FINALIZER)
            return Done()
        pv = finalizers.ensure(self.cluster, PACKAGE_VARIANT, pv, FINALIZER)
        status = _Status(pv, self.clock.time())
        try:
            return self._reconcile(pv, revisions, status)
        finally:
            self._write_status(pv, status)

    def _reconcile(self, pv: Obj, revisions: list[Obj], status: _Status) -> Outcome:
        if problems := validate_package_variant(pv):
            status.stalled("ValidationError", "; ".join(problems))
            status.not_ready("Error", "invalid packagevariant object")
            return Done()  # only an edit of the PackageVariant can fix it
        if missing := self._missing_repositories(pv):
            status.stalled("RepositoryNotFound", missing)
            status.not_ready("Error", missing)
            return Done()  # a new Repository wakes it
        if unready := self._unready_repositories(pv):
            status.stalled("RepositoryNotReady", unready)
            status.not_ready("Error", unready)
            return Done()  # its Ready condition turning True wakes it
        try:
            upstream = find_upstream(pv, revisions)
        except UpstreamNotFound as err:
            status.stalled("UpstreamNotFound", str(err))
            status.not_ready("Error", str(err))
            return Done()  # a new PackageRevision wakes it
        status.valid()
        try:
            targets, render_statuses = self._ensure_downstream(pv, upstream, revisions)
        except PorchVariantError as err:  # the same inputs fail the same way: wait for a change
            status.not_ready("Error", str(err))
            return Done()
        except ApiError as err:
            status.not_ready("Error", str(err))
            raise  # retried with back-off
        status.ready(downstream_targets((pv.get("status") or {}).get("downstreamTargets"), targets, render_statuses))
        return Done()

    # --- the downstream -----------------------------------------------------------------------

    def _ensure_downstream(self, pv: Obj, upstream: Mapping[str, Any],
                           revisions: list[Obj]) -> tuple[list[Obj], dict[str, Any]]:
        plan = plan_downstreams(pv, revisions)
        self._carry_out(plan)
        if plan.needs_clone:
            targets = [self._create(pv, clone_draft(pv, upstream, revisions), revisions)]
        else:
            targets = list(plan.targets)
        render_statuses: dict[str, Any] = {}
        kept = []
        for target in targets:
            if needs_upgrade(target, upstream):
                old = find_locked_upstream(pv, target, revisions)
                target = self._create(pv, upgrade_draft(pv, target, old, upstream, revisions), revisions)
            target = self._mutate(pv, target, revisions, render_statuses)
            kept.append(target)
        return kept, render_statuses

    def _carry_out(self, plan: DownstreamPlan) -> None:
        """Porch's writes while listing: adoptions and disposals are logged when they fail, a
        failed republish is an error."""
        for extra in plan.extra_drafts:
            log.info("draft %s: %s", _name(extra.pr), extra.reason)
        for pr in (*plan.to_adopt, *plan.to_orphan, *plan.to_mark_deletion_proposed):
            _logged(lambda pr=pr: self.porch.update_revision(pr), "update", pr)
        for gone in plan.to_delete:
            _logged(lambda gone=gone: self._delete(gone), "delete", gone)
        for pr in plan.to_republish:
            self.porch.update_revision(pr)

    def _mutate(self, pv: Obj, target: Obj, revisions: list[Obj], render_statuses: dict[str, Any]) -> Obj:
        """Apply the mutations to `target`'s package; write them to it if it is a draft, or to a new
        edit draft if it is published and they change it. Returns the (possibly new) target."""
        resources = self._resources(target)
        try:
            files, mutated = self._mutated(pv, resources)
        except MutationError as err:
            if not is_published(target):
                self._mark_not_ready(resources, str(err))
            raise
        if not resources_changed(files, mutated):
            return target
        if is_published(target):
            target = self._create(pv, edit_draft(pv, target, revisions), revisions)
            resources = self._resources(target)
            _, mutated = self._mutated(pv, resources)
        _, render_statuses[_name(target)] = self.porch.update_resources(resources, mutated)
        return target

    def _mutated(self, pv: Obj, resources: Obj) -> tuple[dict[str, str], dict[str, str]]:
        """The package's files, and the same with the mutations applied (and an earlier failure's
        condition turned True). Raises MutationError."""
        files = dict(resources["spec"]["resources"])
        result = apply_mutations(pv, files, self._injectable(pv, files), prr=_ref(resources))
        return files, _with_mutations_condition(result.resources, "True", "Applied", "", _ref(resources))

    def _mark_not_ready(self, resources: Obj, message: str) -> None:
        files = dict(resources["spec"]["resources"])
        marked = _with_mutations_condition(files, "False", "MutationFailed", message, _ref(resources), gate=True)
        if marked != files:
            _logged(lambda: self.porch.update_resources(resources, marked), "mark not ready", resources)

    def _dispose_of_downstreams(self, pv: Obj, revisions: list[Obj]) -> None:
        """b.8: every owned revision deleted or orphaned by the deletion policy; errors are logged and
        retried on the next pass, and keep the finalizer (Porch drops it, leaving revisions behind)."""
        plan = deletion_plan(pv, revisions)
        failed = 0
        for pr in (*plan.to_orphan, *plan.to_mark_deletion_proposed):
            failed += not _logged(lambda pr=pr: self.porch.update_revision(pr), "update", pr)
        for gone in plan.to_delete:
            failed += not _logged(lambda gone=gone: self._delete(gone), "delete", gone)
        if failed:
            raise PorchVariantError(f"{failed} downstream package revision(s) could not be deleted or orphaned")

    # --- reads ----------------------------------------------------------------------------------

    def _revisions(self, pv: Obj) -> list[Obj]:
        """The PackageRevisions the PackageVariant's decisions read, in name order (Porch's list
        order): those of its upstream and downstream packages and those it owns, from the cache's
        indexes, plus those created here that the cache does not show yet."""
        revisions = self.cache.informer(PACKAGE_REVISION)
        packages = {_package_key(pv, _spec(pv).get(role)) for role in ("upstream", "downstream")}
        uid = str((pv.get("metadata") or {}).get("uid") or "")
        found = {_name(pr): pr for key in packages for pr in revisions.by_index(_PACKAGE, key)}
        found.update((_name(pr), pr) for pr in revisions.by_index("owner", uid))
        namespace = _namespace(pv)
        for pr in self._created.not_in(namespace, lambda name: revisions.get(ObjectKey(namespace, name)) is not None):
            if _revision_package_key(pr) in packages or any(ref.get("uid") == uid for ref in _owners(pr)):
                found[_name(pr)] = pr
        return [found[name] for name in sorted(found)]

    def _resources(self, revision: Obj) -> Obj:
        resources = self.porch.resources(revision)
        if resources is None:
            raise NotFound(f"packagerevisionresources {_name(revision)!r} not found")
        if not isinstance((resources.get("spec") or {}).get("resources"), Mapping):
            raise PorchVariantError(f"nil resources found for PackageRevisionResources '{_ref(resources)}'")
        return resources

    def _missing_repositories(self, pv: Obj) -> str:
        spec, namespace = pv.get("spec") or {}, _namespace(pv)
        present = {_name(repo) for repo in self.cache.list(REPOSITORY, namespace)}
        for role in ("upstream", "downstream"):
            repo = (spec.get(role) or {}).get("repo")
            if repo not in present:
                return f'{role} repository "{repo}" not found in namespace "{namespace}"'
        return ""

    def _unready_repositories(self, pv: Obj) -> str:
        """The first upstream or downstream Repository whose Ready condition is False (Porch's
        repository controller, or the embedded Porch, could not use its git server), with why."""
        spec, namespace = pv.get("spec") or {}, _namespace(pv)
        found = {_name(repo): repo for repo in self.cache.list(REPOSITORY, namespace)}
        for role in ("upstream", "downstream"):
            name = (spec.get(role) or {}).get("repo")
            ready = conditions.find(conditions.conditions_of(found.get(str(name)) or {}), READY)
            if ready is not None and ready.get("status") == "False":
                return f'{role} repository "{name}" is not ready: {ready.get("message") or ready.get("reason")}'
        return ""

    def _injectable(self, pv: Obj, files: Mapping[str, str]) -> list[Obj]:
        """The in-cluster objects of the package's injection point kinds in the PackageVariant's
        namespace (a kind the cluster does not serve has none), each kind watched from now on."""
        if not (pv.get("spec") or {}).get("injectors"):
            return []
        found: list[Obj] = []
        for api_version, kind_name in injection.injection_point_types(files):
            if is_secret_kind(api_version, kind_name):
                continue  # never read: a Secret has no spec to inject, and its data must not reach git
            kind = Kind(api_version, kind_name)
            try:
                self.cluster.resource(kind)
            except NotFound:
                continue
            self._watch(kind)
            found.extend(self.cache.list(kind, _namespace(pv)))
        return found

    def _watch(self, kind: Kind) -> None:
        """Wake the PackageVariants with injectors in an object's namespace when it changes."""
        if self.controller is not None:
            self.controller.watch_more(self.cache, Watches(kind, self._injecting_beside))

    def _injecting_beside(self, obj: Obj) -> list[ObjectKey]:
        return _with_injectors(self.cache, _namespace(obj))

    # --- writes ---------------------------------------------------------------------------------

    def _create(self, pv: Obj, revision: Obj, revisions: list[Obj]) -> Obj:
        created = self.cluster.create(revision)
        self._created.add(created)
        revisions.append(created)
        log.info("package variant %s/%s created %s (%s)", _namespace(pv), _name(pv), _name(created),
                 ((created.get("spec") or {}).get("tasks") or [{}])[0].get("type"))
        return created

    def _delete(self, pr: Mapping[str, Any]) -> None:
        self._created.forget(pr)
        self.porch.delete(dict(pr))

    def _write_status(self, pv: Obj, status: _Status) -> None:
        events = self.controller.events if self.controller is not None else None
        told: set[str] = set()
        for reason, message in status.warnings:
            if events is not None and message not in told:  # Stalled and Ready often say the same
                told.add(message)
                try:
                    events.record(PACKAGE_VARIANT, ObjectKey.of(pv), "Warning", reason, message)
                except Exception:  # an Event is best effort
                    log.debug("could not record an event for %s", _ref(pv), exc_info=True)
        wanted = status.applied_to(pv)
        if wanted != (pv.get("status") or {}):
            self.cluster.update_status({**pv, "status": wanted})


# A reconcile spends most of its time waiting: on the Porch API, on renders in other processes and,
# with the embedded Porch on a git server, on pushes. Writers to one repository at once share a
# push (embedded.git.mirror.Mirror.push_together), so more of them means fewer pushes: bench/variants_bench.py's
# remote fan-out of 1,000 drafts took 108 s with 4 workers and 35-44 s with 32; the local one is
# no slower with 32.
WORKERS = 32


def package_variant_controller(cluster: Cluster, cache: InformerCache, clock: Clock, *,
                               workers: int = WORKERS) -> Controller:
    """The PackageVariant controller, woken by its own objects, by the PackageRevisions that concern
    them, by any Repository of their namespace, and (once seen in a package) by the objects they
    inject.

    Porch wakes every PackageVariant of a namespace on any PackageRevision change; with a thousand
    variants each new draft would cost a thousand reconciles. Here a PackageRevision wakes only its
    owners and the variants whose upstream or downstream is its repository and package: every
    decision a variant makes reads only those."""
    reconciler = PackageVariantController(cluster, cache, clock)
    cache.informer(PACKAGE_REVISION).add_index(_PACKAGE, lambda pr: [_revision_package_key(pr)])
    variants = cache.informer(PACKAGE_VARIANT)
    variants.add_index(_UPSTREAM, lambda pv: [_package_key(pv, _spec(pv).get("upstream"))])
    variants.add_index(_DOWNSTREAM, lambda pv: [_package_key(pv, _spec(pv).get("downstream"))])

    def concerned(pr: Obj) -> list[ObjectKey]:
        namespace, key = _namespace(pr), _revision_package_key(pr)
        keys = {ObjectKey(namespace, str(ref.get("name"))) for ref in _owners(pr)
                if ref.get("kind") == PACKAGE_VARIANT.kind}
        keys.update(ObjectKey.of(pv) for index in (_UPSTREAM, _DOWNSTREAM) for pv in variants.by_index(index, key))
        return sorted(keys, key=str)

    def whole_namespace(obj: Obj) -> list[ObjectKey]:
        return [ObjectKey.of(pv) for pv in cache.list(PACKAGE_VARIANT, _namespace(obj))]

    controller = Controller("packagevariant", PACKAGE_VARIANT, reconciler.reconcile,
                            watches=[Watches(PACKAGE_REVISION, concerned), Watches(REPOSITORY, whole_namespace)],
                            workers=workers, clock=clock)
    reconciler.controller = controller
    return controller


_UPSTREAM, _DOWNSTREAM, _PACKAGE = "upstream-package", "downstream-package", "package"


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """obj.spec, or an empty one when it is not a mapping: mappers and indexes see objects before
    validation does, and must not fail on them (a failing index stops the informer's watch)."""
    spec = obj.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _revision_package_key(pr: Mapping[str, Any]) -> str:
    spec = _spec(pr)
    return f"{_namespace(pr)}/{spec.get('repository')}/{spec.get('packageName')}"


def _owners(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list((obj.get("metadata") or {}).get("ownerReferences") or ())


def _package_key(pv: Obj, ref: Any) -> str:
    ref = ref if isinstance(ref, Mapping) else {}
    return f"{_namespace(pv)}/{ref.get('repo')}/{ref.get('package')}"


class _Status:
    """The PackageVariant's status as this reconcile leaves it, written once at the end."""

    def __init__(self, pv: Obj, now: float) -> None:
        self.now = now
        self.generation = (pv.get("metadata") or {}).get("generation")
        previous = pv.get("status") or {}
        self.conditions: list[dict[str, Any]] = [dict(c) for c in previous.get("conditions") or ()]
        self.targets: list[dict[str, Any]] | None = previous.get("downstreamTargets")
        self.warnings: list[tuple[str, str]] = []

    def _set(self, type_: str, status: conditions.Status, reason: str, message: str) -> None:
        before = conditions.find(self.conditions, type_)
        bad = (type_ == STALLED) == (status == "True")
        if bad and (before is None or (before.get("status"), before.get("message")) != (status, message)):
            self.warnings.append((reason, message))  # news: told once, as an Event, not on every pass
        generation = self.generation if isinstance(self.generation, int) else None
        self.conditions = conditions.set_condition(self.conditions, type_, status, reason, message, now=self.now,
                                                   observed_generation=generation)

    def stalled(self, reason: str, message: str) -> None:
        self._set(STALLED, "True", reason, message)

    def valid(self) -> None:
        self._set(STALLED, "False", "Valid", "all validation checks passed")

    def not_ready(self, reason: str, message: str) -> None:
        self._set(READY, "False", reason, message)

    def ready(self, targets: list[dict[str, Any]]) -> None:
        self.targets = targets
        self._set(READY, "True", "NoErrors", "successfully ensured downstream package variant")

    def applied_to(self, pv: Obj) -> dict[str, Any]:
        out = dict(pv.get("status") or {})
        out["conditions"] = self.conditions
        if self.targets is not None:
            out["downstreamTargets"] = self.targets
        return out


class _RecentlyCreated:
    """PackageRevisions created here, by namespace and name, until the cache has them, this
    controller deletes them, or FORGET_AFTER seconds pass (the watch event has surely come by then;
    one created and deleted by someone else before the cache saw it must not linger)."""

    FORGET_AFTER = 60.0

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._by_namespace: dict[str, dict[str, tuple[float, Obj]]] = {}

    def add(self, pr: Obj) -> None:
        with self._lock:
            self._by_namespace.setdefault(_namespace(pr), {})[_name(pr)] = (self.clock.monotonic(), pr)

    def forget(self, pr: Mapping[str, Any]) -> None:
        with self._lock:
            self._by_namespace.get(_namespace(pr), {}).pop(_name(pr), None)

    def not_in(self, namespace: str, cached: Callable[[str], bool]) -> list[Obj]:
        """Those of the namespace that `cached(name)` says the cache does not show yet (the others
        are forgotten)."""
        oldest = self.clock.monotonic() - self.FORGET_AFTER
        with self._lock:
            recent = self._by_namespace.get(namespace, {})
            for name in [name for name, (when, _) in recent.items() if when < oldest or cached(name)]:
                del recent[name]
            return [pr for _, pr in recent.values()]


def _with_mutations_condition(files: Mapping[str, str], status: str, reason: str, message: str, prr: str, *,
                              gate: bool = False) -> dict[str, str]:
    """The files with MUTATIONS_CONDITION recorded in the Kptfile: always when `gate` (a failure,
    which also adds the readiness gate), otherwise only where an earlier failure left it."""
    kptfile = files.get(injection.KPTFILE)
    if kptfile is None or (not gate and MUTATIONS_CONDITION not in kptfile):
        return dict(files)
    condition = {"type": MUTATIONS_CONDITION, "status": status, "message": message, "reason": reason}
    gates = [{"conditionType": MUTATIONS_CONDITION}] if gate else []
    try:
        text = injection.record_in_kptfile(kptfile, [condition], gates, prr)
    except MutationError:
        return dict(files)  # a Kptfile that cannot hold a condition; the PackageVariant's status says why
    return {**files, injection.KPTFILE: text}


def _with_injectors(cache: InformerCache, namespace: str) -> list[ObjectKey]:
    return [ObjectKey.of(pv) for pv in cache.list(PACKAGE_VARIANT, namespace)
            if _spec(pv).get("injectors")]


def _logged(write: Any, what: str, obj: Mapping[str, Any]) -> bool:
    """Run a write Porch only logs the failure of; True when it was done, or needs no doing
    (NotFound: the revision is gone already)."""
    try:
        write()
        return True
    except NotFound:
        return True
    except ApiError as err:
        log.warning("could not %s package revision %s: %s", what, _name(obj), err)
        return False


def _ref(obj: Mapping[str, Any]) -> str:
    return f"{_namespace(obj)}/{_name(obj)}"


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _namespace(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "")

