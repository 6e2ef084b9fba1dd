"""CustomResourceDefinitions: what apiextensions-apiserver does with them.

Admission checks a CRD the way the server validates one (name is `<plural>.<group>`, a group
with a dot, the `api-approved.kubernetes.io` annotation on a CRD of a `k8s.io` or
`kubernetes.io` group, a kind, a scope of Namespaced or Cluster that never changes, versions with exactly
one storage version, selectable fields that are paths). Once stored, its served versions are
served at once, each with the CRD's scope, plural, status subresource (`versions[].subresources`,
or the older top-level `spec.subresources`; `scale` is not served) and the field labels of its `selectableFields`; its
status gets `acceptedNames`, `storedVersions` and the `NamesAccepted` and `Established`
conditions (a separate status write, as the server's controllers make it). An update of the
CRD re-syncs what is served.

Deleting a CRD adds the `customresourcecleanup.apiextensions.k8s.io` finalizer and the
`Terminating` condition; its objects are deleted (creating new ones is refused with
MethodNotAllowed), and when the last is gone the finalizer is removed, the CRD goes and its
kinds are no longer served. Objects of all served versions are one set, stored together.
The CRD's OpenAPI schema is kept but not enforced.
"""

from __future__ import annotations

from typing import Any

from reconcile import conditions
from reconcile.cluster import Kind, Obj, ObjectKey, ResourceInfo
from reconcile.embedded import _errors
from reconcile.embedded._engine import Engine
from reconcile.embedded._errors import Cause
from reconcile.embedded._kinds import CRD, GroupKind, group_kind
from reconcile.embedded._lifecycle import finalizers, is_deleting, section, without_finalizer
from reconcile.names import name_problem

CLEANUP = "customresourcecleanup.apiextensions.k8s.io"
APPROVAL = "api-approved.kubernetes.io"
MANAGER = "kube-apiserver"
CRD_GK = group_kind(CRD)
# The subresources served for a CRD's kinds. `scale` (a Scale object mapped onto the replicas
# paths) is not modelled, so it is not served: a request for it is NotFound rather than wrong.
_SUBRESOURCES = ("status",)


def origin(name: str) -> str:
    """The registry origin of the kinds a CRD defines."""
    return f"crd:{name}"


def served(crd: Obj) -> list[ResourceInfo]:
    """The kinds a (valid) CRD serves, one per served version."""
    spec = crd["spec"]
    group, names = spec["group"], spec["names"]
    infos = []
    for version in spec["versions"]:
        if not version.get("served", True):
            continue
        declared = version.get("subresources") or spec.get("subresources") or {}
        subresources = frozenset(s for s in _SUBRESOURCES if s in declared)
        infos.append(ResourceInfo(Kind(f"{group}/{version['name']}", names["kind"]), names["plural"],
                                  spec["scope"] == "Namespaced", subresources))
    return infos


def selectable(crd: Obj) -> dict[Kind, frozenset[str]]:
    """The field labels each served version adds with `selectableFields` (`.spec.color` is
    selected as `spec.color`)."""
    spec = crd["spec"]
    out = {}
    for version in spec["versions"]:
        paths = [f.get("jsonPath") for f in version.get("selectableFields") or () if isinstance(f, dict)]
        kind = Kind(f"{spec['group']}/{version['name']}", spec["names"]["kind"])
        out[kind] = frozenset(p[1:] for p in paths if isinstance(p, str) and p.startswith("."))
    return out


def _protected(group: str) -> bool:
    """Kubernetes' own API groups: a CRD in one must name its API review (APPROVAL)."""
    return group in ("k8s.io", "kubernetes.io") or group.endswith((".k8s.io", ".kubernetes.io"))


def check(crd: Obj, old: Obj | None) -> list[Cause]:
    """What is wrong with a CRD, as field causes."""
    spec = crd.get("spec")
    if not isinstance(spec, dict):
        return [_errors.required("spec")]
    causes: list[Cause] = []
    group = spec.get("group")
    names = section(spec, "names")
    plural, kind = names.get("plural"), names.get("kind")
    if not group or not isinstance(group, str):
        causes.append(_errors.required("spec.group"))
    elif "." not in group:
        causes.append(_errors.invalid_value("spec.group", group, "should be a domain with at least one dot"))
    elif _protected(group) and not (crd["metadata"].get("annotations") or {}).get(APPROVAL):
        causes.append(_errors.required(f"metadata.annotations[{APPROVAL}]",
                                       f'protected groups must have approval annotation "{APPROVAL}", '
                                       "see https://github.com/kubernetes/enhancements/pull/1111"))
    if not plural or not isinstance(plural, str):
        causes.append(_errors.required("spec.names.plural"))
    elif problem := name_problem(plural, "label"):
        causes.append(_errors.invalid_value("spec.names.plural", plural, problem))
    if not kind or not isinstance(kind, str):
        causes.append(_errors.required("spec.names.kind"))
    name = crd["metadata"].get("name")
    if isinstance(plural, str) and isinstance(group, str) and name != f"{plural}.{group}":
        causes.append(_errors.invalid_value("metadata.name", name, 'must be spec.names.plural+"."+spec.group'))
    scope = spec.get("scope")
    if scope not in ("Namespaced", "Cluster"):
        causes.append(_errors.unsupported("spec.scope", scope, ["Cluster", "Namespaced"]))
    elif old is not None and (old.get("spec") or {}).get("scope") != scope:
        causes.append(_errors.invalid_value("spec.scope", scope, "field is immutable"))
    causes += _check_versions(spec.get("versions"))
    return causes


def desired_status(crd: Obj, now: float) -> dict[str, Any]:
    """The status the apiextensions controllers give a CRD."""
    status = section(crd, "status")
    spec = crd["spec"]
    names = spec["names"]
    accepted = {"plural": names["plural"], "singular": names.get("singular") or names["kind"].lower(),
                "kind": names["kind"], "listKind": names.get("listKind") or f"{names['kind']}List"}
    for extra in ("shortNames", "categories"):
        if names.get(extra):
            accepted[extra] = names[extra]
    found = conditions.set_condition(status.get("conditions"), "NamesAccepted", "True", "NoConflicts",
                                     "no conflicts found", now=now)
    found = conditions.set_condition(found, "Established", "True", "InitialNamesAccepted",
                                     "the initial names have been accepted", now=now)
    if is_deleting(crd):
        found = conditions.set_condition(found, "Terminating", "True", "InstanceDeletionInProgress",
                                         "CustomResource deletion is in progress", now=now)
    stored = list(status.get("storedVersions") or [])
    storage = next(v["name"] for v in spec["versions"] if v.get("storage"))
    if storage not in stored:
        stored.append(storage)
    return {**status, "acceptedNames": accepted, "conditions": found, "storedVersions": stored}


class Crds:
    """A reactor: see the module docstring."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def admit(self, kind: Kind, old: Obj | None, new: Obj) -> None:
        if group_kind(kind) == CRD_GK:
            causes = check(new, old)
            if causes:
                raise _errors.invalid(kind, new["metadata"].get("name") or "", causes)
            if is_deleting(new) and (old is None or not is_deleting(old)) and CLEANUP not in finalizers(new):
                new["metadata"]["finalizers"] = [*finalizers(new), CLEANUP]
        elif old is None:
            definition = self._definition(kind)
            if definition is not None and is_deleting(definition):
                raise _errors.method_not_allowed(self._engine.registry.info(kind),
                                                 "create not allowed while custom resource definition is terminating")

    def admit_delete(self, kind: Kind, obj: Obj) -> None:
        return None

    def written(self, gk: GroupKind, old: Obj | None, new: Obj) -> None:
        if gk == CRD_GK:
            self._engine.later(self.sync, new["metadata"]["name"])

    def removed(self, gk: GroupKind, obj: Obj) -> None:
        if gk == CRD_GK:
            self._engine.registry.remove(origin(obj["metadata"]["name"]))
            return
        definition = self._definition(self._engine.kind_of(gk, obj))
        if definition is not None and is_deleting(definition):
            self._engine.later(self._clean_up, definition["metadata"]["name"])

    def sync(self, name: str) -> None:
        """Serve what the CRD defines and bring its status up to date."""
        crd = self._engine.store.get(CRD_GK, ObjectKey("", name))
        if crd is None:
            return
        self._engine.registry.set_origin(origin(name), served(crd), selectable(crd))
        status = desired_status(crd, self._engine.clock.time())
        if status != crd.get("status"):
            body = {**crd, "metadata": dict(crd["metadata"]), "status": status}
            crd = self._engine.update(body, manager=MANAGER, subresource="status")
        if is_deleting(crd):
            self._clean_up(name)

    def _clean_up(self, name: str) -> None:
        engine = self._engine
        crd = engine.store.get(CRD_GK, ObjectKey("", name))
        if crd is None or not is_deleting(crd):
            return
        gk = (crd["spec"]["group"], crd["spec"]["names"]["kind"])
        for obj in engine.store.objects(gk):
            meta = obj["metadata"]
            current = engine.store.get(gk, ObjectKey(meta.get("namespace") or "", meta["name"]))
            if current is not None and not is_deleting(current):
                engine.delete(engine.kind_of(gk, current), ObjectKey(meta.get("namespace") or "", meta["name"]))
        if next(engine.store.objects(gk), None) is None and CLEANUP in finalizers(crd):
            crd = engine.store.get(CRD_GK, ObjectKey("", name)) or crd
            engine.write_metadata(CRD_GK, crd, without_finalizer(crd, CLEANUP), manager=MANAGER)

    def _definition(self, kind: Kind) -> Obj | None:
        found = self._engine.registry.origin(kind)
        if not found.startswith("crd:"):
            return None
        return self._engine.store.get(CRD_GK, ObjectKey("", found[4:]))


def _check_versions(versions: Any) -> list[Cause]:
    if not isinstance(versions, list) or not versions:
        return [_errors.required("spec.versions", "must have exactly one version marked as storage version")]
    causes, seen, storage = [], set(), 0
    for index, version in enumerate(versions):
        field = f"spec.versions[{index}]"
        name = version.get("name") if isinstance(version, dict) else None
        if not isinstance(name, str) or not name:
            causes.append(_errors.required(f"{field}.name"))
            continue
        if problem := name_problem(name, "label"):
            causes.append(_errors.invalid_value(f"{field}.name", name, problem))
        if name in seen:
            causes.append(_errors.invalid_value(f"{field}.name", name, "must be unique"))
        seen.add(name)
        storage += version.get("storage") is True
        for number, selectable_field in enumerate(version.get("selectableFields") or ()):
            path = selectable_field.get("jsonPath") if isinstance(selectable_field, dict) else None
            if not isinstance(path, str) or not path.startswith(".") or path in (".metadata.name",
                                                                                 ".metadata.namespace"):
                causes.append(_errors.invalid_value(f"{field}.selectableFields[{number}].jsonPath", path,
                                                    "must be a path to a field of the object, like .spec.color"))
    if storage != 1 and not causes:
        causes.append(_errors.invalid_value("spec.versions", [v.get("name") for v in versions],
                                            "must have exactly one version marked as storage version"))
    return causes
