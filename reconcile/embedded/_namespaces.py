"""Namespaces: the NamespaceLifecycle admission plugin and the namespace controller.

Admission: an object can be created only in a namespace that exists (NotFound otherwise) and is
not being deleted (Forbidden); the namespaces `default`, `kube-system` and `kube-public` cannot
be deleted (Forbidden). A Namespace gets what the server gives it: the
`kubernetes.io/metadata.name` label, the `kubernetes` spec finalizer, and `status.phase`
(`Active`, then `Terminating` once deleted). A plain update cannot change `spec.finalizers`.

Controller: once a namespace is being deleted, every object in it is deleted (Background), the
kinds served by custom storage included. Objects that finalizers hold keep the namespace in
`Terminating`; when the last one is gone the controller removes the `kubernetes` spec finalizer
(the `/finalize` call) and the namespace goes, unless its own metadata finalizers hold it.
"""

from __future__ import annotations

from reconcile.cluster import Kind, Obj, ObjectKey, ResourceInfo
from reconcile.embedded import _errors
from reconcile.embedded._engine import Engine
from reconcile.embedded._kinds import NAMESPACE, GroupKind, group_kind
from reconcile.embedded._lifecycle import is_deleting, section
from reconcile.errors import ApiError

PROTECTED = frozenset({"default", "kube-system", "kube-public"})
KUBERNETES = "kubernetes"
NAME_LABEL = "kubernetes.io/metadata.name"
MANAGER = "kube-controller-manager"
NAMESPACE_GK = group_kind(NAMESPACE)


class Namespaces:
    """A reactor: see the module docstring."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._finalizing = False

    def check_namespace(self, info: ResourceInfo, namespace: str, name: str) -> None:
        """Refuse creating `name` in `namespace` when it does not exist or is being deleted."""
        if not info.namespaced:
            return
        found = self._engine.store.get(NAMESPACE_GK, ObjectKey("", namespace))
        if found is None:
            raise _errors.not_found(self._engine.registry.info(NAMESPACE), namespace)
        if is_deleting(found):
            why = f"unable to create new content in namespace {namespace} because it is being terminated"
            raise _errors.forbidden(info, name, why, causes=[
                {"reason": "NamespaceTerminating", "message": why, "field": "metadata.namespace"}])

    def admit(self, kind: Kind, old: Obj | None, new: Obj) -> None:
        if group_kind(kind) == NAMESPACE_GK:
            self._default(old, new)
        elif old is None:
            meta = new["metadata"]
            self.check_namespace(self._engine.registry.info(kind), meta.get("namespace") or "", meta["name"])

    def admit_delete(self, kind: Kind, obj: Obj) -> None:
        if group_kind(kind) == NAMESPACE_GK and obj["metadata"]["name"] in PROTECTED:
            raise _errors.forbidden(self._engine.registry.info(kind), obj["metadata"]["name"],
                                    "this namespace may not be deleted")

    def written(self, gk: GroupKind, old: Obj | None, new: Obj) -> None:
        if gk == NAMESPACE_GK and is_deleting(new) and (old is None or not is_deleting(old)):
            self._engine.later(self._clear, new["metadata"]["name"])

    def removed(self, gk: GroupKind, obj: Obj) -> None:
        namespace = obj["metadata"].get("namespace")
        if namespace and self._engine.store.population(namespace) == 0:
            self._engine.later(self.finalize, namespace)

    def finalize(self, name: str) -> None:
        """Let a deleting namespace go once nothing is left in it."""
        namespace = self._engine.store.get(NAMESPACE_GK, ObjectKey("", name))
        if namespace is None or not is_deleting(namespace):
            return
        if self._engine.store.population(name) or self._served_objects(name):
            return
        spec = section(namespace, "spec")
        held = [f for f in spec.get("finalizers") or () if f != KUBERNETES]
        body = {**namespace, "metadata": dict(namespace["metadata"]), "spec": {**spec, "finalizers": held}}
        self._finalizing = True
        try:
            self._engine.update(body, manager=MANAGER)
        finally:
            self._finalizing = False

    def _default(self, old: Obj | None, new: Obj) -> None:
        meta = new["metadata"]
        labels = meta.get("labels") or {}
        if labels.get(NAME_LABEL) != meta["name"]:
            meta["labels"] = {**labels, NAME_LABEL: meta["name"]}
        spec = section(new, "spec")
        if old is None:
            finalizers = list(spec.get("finalizers") or [])
            new["spec"] = {**spec, "finalizers": finalizers if KUBERNETES in finalizers else [*finalizers, KUBERNETES]}
            new["status"] = {"phase": "Active"}
            return
        if not self._finalizing:
            before = section(old, "spec")
            new["spec"] = {**spec, "finalizers": before.get("finalizers") or []}
        if is_deleting(new):
            new["status"] = {**section(new, "status"), "phase": "Terminating"}

    def _clear(self, name: str) -> None:
        engine = self._engine
        for gk in engine.store.group_kinds():
            for obj in engine.store.objects(gk, name):
                current = engine.store.get(gk, ObjectKey(name, obj["metadata"]["name"]))
                if current is not None and not is_deleting(current):
                    engine.delete(engine.kind_of(gk, current), ObjectKey(name, current["metadata"]["name"]))
        for kind, handler in engine.registry.handlers():
            if engine.registry.info(kind).namespaced:
                try:
                    for item in handler.list(kind, namespace=name).items:
                        handler.delete(kind, ObjectKey(name, item["metadata"]["name"]))
                except ApiError:
                    continue  # what the storage refuses to delete keeps the namespace Terminating
        self.finalize(name)

    def _served_objects(self, name: str) -> bool:
        registry = self._engine.registry
        for kind, handler in registry.handlers():
            if registry.info(kind).namespaced:
                try:
                    if handler.list(kind, namespace=name).items:
                        return True
                except ApiError:
                    return True
        return False
