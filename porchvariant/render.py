"""PackageVariantSet rendering: from a set and what it selects to the PackageVariants that should exist.

The decisions of Porch's PackageVariantSet controller as pure functions over plain dicts (spec
sections c.3-c.6): `find_set_upstream` picks the upstream PackageRevision, `expand_targets`
unrolls `spec.targets` into one `Target` per downstream, and `render_package_variants` renders
each target's template (CEL, see cel.py) into a complete PackageVariant object. Each expression
of a target template is compiled once, when the first target reaches it (so errors come in
Porch's order), and one in which no per-target variable is even named (a literal,
`upstream.name`) is evaluated once, not once per target. The PackageVariant spec holds what
Porch's typed spec would: known fields only, nulls and Go's empty values left out.

Deliberate differences from Porch, each because Porch's behaviour is a bug or an accident:
* PackageVariants get `apiVersion: config.porch.kpt.dev/v1alpha1`; Porch writes the bare group.
* A name Porch would derive that is not a valid object name ("/" in a package path, upper case)
  is replaced by a valid one (`package_variant_name`); Porch's create would fail forever.
* Objects selected by a target are taken in name order, the order the API server lists them
  in, so the result does not depend on the order of a cache.
* A set passed without apiVersion/kind (as a typed client may return it) still gives a complete
  owner reference; Porch copies whatever the object carries.

Does not: read or write the cluster, diff against existing PackageVariants, or set conditions
(that is the controller's job); validate the set (validation reports those problems first);
decide what CEL sees of an object (cel_view.py: no Secrets, no annotation holding a copy of one).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from porchvariant import cel
from porchvariant.cel_view import hidden_annotation_note, is_secret_kind, object_view, secret_target_message
from porchvariant.errors import TemplateError
from reconcile.errors import BadRequest
from reconcile.names import name_problem
from reconcile.patching import clone
from reconcile.selectors import LabelSelector, parse_labels

Obj = Mapping[str, Any]

PACKAGE_VARIANT_API_VERSION = "config.porch.kpt.dev/v1alpha1"
PACKAGE_VARIANT_KIND = "PackageVariant"
PACKAGE_VARIANT_SET_API_VERSION = "config.porch.kpt.dev/v1alpha2"
PACKAGE_VARIANT_SET_KIND = "PackageVariantSet"
REPOSITORY_API_VERSION = "config.porch.kpt.dev/v1alpha1"
REPOSITORY_KIND = "Repository"
OWNER_LABEL = "config.porch.kpt.dev/packagevariantset"
FINALIZER = "config.porch.kpt.dev/packagevariants"
NAME_MAX_LENGTH = 63
NAME_HASH_LENGTH = 8

_NOT_NAME_CHARACTER = re.compile(r"[^a-z0-9]")
# The CEL variables whose values differ between the targets of one template.
_PER_TARGET_VARIABLES = ("repoDefault", "packageDefault", "target", "repository")
# The fields of a kpt Function and a Selector (kptfile/v1), the only ones Porch's typed spec keeps.
_FUNCTION_FIELDS = ("image", "exec", "configPath", "name", "tag")
_SELECTOR_FIELDS = ("apiVersion", "kind", "name", "namespace")


@dataclass(frozen=True, slots=True)
class Target:
    """One downstream a target template is rendered for (Porch's `pvContext`)."""

    index: int  # position of the target in spec.targets
    template: Obj | None
    repo_default: str
    package_default: str
    obj: Obj | None = None  # the selected object; None for an entry of `repositories`
    explicit_package: bool = False  # the package came from `packageNames`

    @property
    def description(self) -> str:
        """How errors name the target: `repository prod`, `Repository/prod`, `Team/alpha`."""
        if self.obj is None:
            suffix = f" (package {self.package_default})" if self.explicit_package else ""
            return f"repository {self.repo_default}{suffix}"
        return f"{self.obj.get('kind', '')}/{_metadata(self.obj).get('name', '')}"


def find_set_upstream(pvs: Obj, package_revisions: Sequence[Obj]) -> dict[str, Any] | None:
    """The first PackageRevision in the set's namespace that is the set's upstream, or None.

    Porch's rule for sets (unlike PackageVariants'): same repository and package, and the same
    revision OR the same workspaceName. An unset revision counts as 0, so a set that names only
    a workspace also matches every draft (revision 0) of the package; Porch does the same, and
    the first such PackageRevision in list order wins. See `upstream_not_found_message`."""
    upstream = _spec(pvs).get("upstream") or {}
    namespace = _metadata(pvs).get("namespace", "")
    # Go's zero values: a missing or null field reads as "" or 0.
    repo, package = upstream.get("repo") or "", upstream.get("package") or ""
    revision, workspace = upstream.get("revision") or 0, upstream.get("workspaceName") or ""
    for pr in package_revisions:
        spec = pr.get("spec") or {}
        if (_metadata(pr).get("namespace", "") == namespace and (spec.get("repository") or "") == repo
                and (spec.get("packageName") or "") == package
                and ((spec.get("revision") or 0) == revision or (spec.get("workspaceName") or "") == workspace)):
            return dict(pr)
    return None


def upstream_not_found_message(pvs: Obj) -> str:
    """Porch's message when `find_set_upstream` finds nothing (condition reason UpstreamNotFound)."""
    upstream = _spec(pvs).get("upstream") or {}
    return (f"could not find upstream package revision '{upstream.get('package') or ''}/"
            f"{upstream.get('revision') or 0}' in repo '{upstream.get('repo') or ''}'")


def expand_targets(pvs: Obj, repositories: Sequence[Obj], target_objects: Sequence[Obj]) -> list[Target]:
    """spec.targets unrolled into one Target per downstream, in target order (spec c.4).

    `repositories` entries give one Target per packageName (default: the upstream package);
    `repositorySelector` selects among `repositories`, and `objectSelector` among
    `target_objects` of its apiVersion and kind (and `repositories`, if it names Repositories);
    only objects in the set's namespace (or of a cluster-scoped kind: without one) count, in name
    order, and objectSelector.name is ignored as it is in Porch. A target with none of the three
    is skipped (validation reports it).
    Raises TemplateError for a label selector that does not parse, and for an objectSelector of
    Secrets (validation refuses those first; see cel_view.py)."""
    spec, name = _spec(pvs), _metadata(pvs).get("name", "")
    namespace = _metadata(pvs).get("namespace", "")
    upstream_package = (spec.get("upstream") or {}).get("package", "")
    targets: list[Target] = []
    for index, target in enumerate(spec.get("targets") or []):
        template = target.get("template")
        if target.get("repositories"):
            for entry in target["repositories"]:
                package_names = entry.get("packageNames") or []
                for package in package_names or [upstream_package]:
                    targets.append(Target(index, template, entry.get("name", ""), package,
                                          explicit_package=bool(package_names)))
            continue
        if target.get("repositorySelector") is not None:
            field, selector = f"spec.targets[{index}].repositorySelector", target["repositorySelector"]
            api_version, kind = REPOSITORY_API_VERSION, REPOSITORY_KIND
        elif target.get("objectSelector") is not None:
            field, selector = f"spec.targets[{index}].objectSelector", target["objectSelector"]
            api_version, kind = selector.get("apiVersion", ""), selector.get("kind", "")
            if is_secret_kind(api_version, kind):
                raise TemplateError(secret_target_message(f"{field}.kind"), pvs=name)
        else:
            continue
        matcher = _label_selector(selector, field=field, pvs=name)
        for obj in _selectable(api_version, kind, namespace, repositories, target_objects):
            if matcher.matches(_metadata(obj).get("labels")):
                targets.append(Target(index, template, _metadata(obj).get("name", ""), upstream_package, obj))
    return targets


def render_package_variants(pvs: Obj, upstream: Obj | None, repositories: Sequence[Obj],
                            target_objects: Sequence[Obj], *, engine: str | None = None) -> list[dict[str, Any]]:
    """The PackageVariant objects the set wants, one per distinct identifier, in target order.

    `upstream` is the PackageRevision `find_set_upstream` chose (the CEL `upstream` variable),
    `repositories` the Repositories and `target_objects` the objects objectSelectors choose from
    (both filtered to the set's namespace here). When two targets render to the same identifier
    the later one wins, in the earlier one's place. `engine` picks the CEL engine (cel.py).
    Raises TemplateError naming the set, the target and the template field that failed."""
    engine = cel.engine_name(engine)
    name, namespace = _metadata(pvs).get("name", ""), _metadata(pvs).get("namespace", "")
    repository_views: dict[str, dict[str, Any]] = {}
    views_by_id: dict[int, dict[str, Any]] = {}  # a selected Repository is also `target`: one view
    for repository in repositories:
        metadata = _metadata(repository)
        if metadata.get("namespace", "") == namespace:
            view = views_by_id[id(repository)] = object_view(repository)
            repository_views.setdefault(metadata.get("name", ""), view)
    upstream_view = object_view(upstream) if upstream is not None else None
    wanted: dict[str, dict[str, Any]] = {}
    renderer: _Renderer | None = None
    for target in expand_targets(pvs, repositories, target_objects):
        if renderer is None or renderer.index != target.index:
            renderer = _Renderer(pvs, target, engine, upstream_view, repository_views, views_by_id)
        spec = renderer.render(target)
        identifier = package_variant_identifier(name, spec)
        wanted[identifier] = _package_variant(pvs, package_variant_name(identifier), spec)
    return list(wanted.values())


def package_variant_identifier(pvs_name: str, spec: Obj) -> str:
    """`<set>-<downstream.repo>-<downstream.package>`: how a set matches its PackageVariants."""
    downstream = spec.get("downstream") or {}
    return f"{pvs_name}-{downstream.get('repo', '')}-{downstream.get('package', '')}"


def package_variant_name(identifier: str) -> str:
    """The object name for an identifier: Porch's, unless Porch's would be invalid.

    Porch uses the identifier when it has at most 63 characters, else its first 54, "-" and 8
    hex digits of its SHA-1. When that is not a DNS-1123 subdomain (Porch would fail to create
    it, on every reconcile), the name is instead the identifier lower-cased with every other
    character but a-z and 0-9 turned to "-", trimmed to 54, plus "-" and the same 8 hex digits,
    so identifiers that differ only in those characters still get different names."""
    digest = hashlib.sha1(identifier.encode()).hexdigest()[:NAME_HASH_LENGTH]
    stem_length = NAME_MAX_LENGTH - NAME_HASH_LENGTH - 1
    porch = identifier if len(identifier) <= NAME_MAX_LENGTH else f"{identifier[:stem_length]}-{digest}"
    if name_problem(porch) is None:
        return porch
    stem = _NOT_NAME_CHARACTER.sub("-", identifier.lower()).strip("-")[:stem_length].rstrip("-")
    return f"{stem}-{digest}" if stem else digest


class _Expr:
    """One template expression: compiled when first evaluated, as Porch compiles it, and its result
    kept when it reads nothing that differs between targets.

    "Reads nothing" is decided on the text alone: an expression can only read a variable whose
    name it spells, so one in which no per-target variable's name appears anywhere (not even in a
    string or a comment) gives the same result for every target. `upstream.name` qualifies;
    `'target-' + upstream.name` does not, which costs an evaluation per target, never a wrong result."""

    __slots__ = ("compiled", "constant", "field", "result", "text")

    def __init__(self, field: str, text: str) -> None:
        self.field, self.text = field, text
        self.compiled: cel.Expression | None = None
        self.constant = not any(name in text for name in _PER_TARGET_VARIABLES)
        self.result: str | None = None


_MapEntry = tuple[str, _Expr | None, str, _Expr | None]  # key, keyExpr, value, valueExpr
_Map = tuple[dict[str, str], tuple[_MapEntry, ...]]  # static map (sorted), then its MapExprs in order


class _Renderer:
    """One target template, rendered for each of its targets (spec c.5).

    Each expression is compiled once, when the first target reaches it: errors then come in the
    order Porch, which compiles as it evaluates, would report them (a missing Repository or an
    earlier field's evaluation error before a later field's syntax error)."""

    def __init__(self, pvs: Obj, first: Target, engine: str, upstream_view: dict[str, Any] | None,
                 repositories: Mapping[str, dict[str, Any]], views_by_id: Mapping[int, dict[str, Any]]) -> None:
        self.index, self.engine = first.index, engine
        self.pvs_name = _metadata(pvs).get("name", "")
        upstream = _spec(pvs).get("upstream")
        self.upstream = None if upstream is None else _upstream(upstream)
        self.upstream_view, self.repositories, self.views_by_id = upstream_view, repositories, views_by_id
        self.expressions: list[_Expr] = []
        self.template = template = first.template
        self.late = False  # whether any expression needs `repository`
        if template is None:
            return
        downstream = template.get("downstream") or {}
        self.repo, self.package = downstream.get("repo") or "", downstream.get("package") or ""
        # Like Porch, an empty repoExpr, packageExpr or nameExpr counts as unset; other expressions
        # that are present are evaluated even when they are "" (and fail).
        self.repo_expr = self._expr("template.downstream.repoExpr", downstream.get("repoExpr") or None)
        self.package_expr = self._expr("template.downstream.packageExpr", downstream.get("packageExpr") or None)
        self.policies = [(field, template[field]) for field in ("adoptionPolicy", "deletionPolicy")
                         if template.get(field)]
        self.labels = self._map("template.labelExprs", template.get("labels"), template.get("labelExprs"))
        self.annotations = self._map("template.annotationExprs", template.get("annotations"),
                                     template.get("annotationExprs"))
        context = template.get("packageContext")
        self.context: tuple[_Map, frozenset[str], list[_Expr]] | None = None
        if context is not None:
            self.context = (
                self._map("template.packageContext.dataExprs", context.get("data"), context.get("dataExprs")),
                frozenset(context.get("removeKeys") or ()),
                [_Expr(f"template.packageContext.removeKeyExprs[{i}]", text)
                 for i, text in enumerate(context.get("removeKeyExprs") or [])])
            self.expressions += self.context[2]
        self.injectors = [self._injector_template(i, injector)
                          for i, injector in enumerate(template.get("injectors") or [])]
        pipeline = template.get("pipeline")
        self.pipeline: list[tuple[str, list[tuple[dict[str, Any], _Map]]]] | None = None
        if pipeline is not None:
            self.pipeline = [(kind, [self._function_template(f"template.pipeline.{kind}[{i}]", function)
                                     for i, function in enumerate(pipeline.get(kind) or [])])
                             for kind in ("validators", "mutators")]
        self.late = any(expr is not self.repo_expr for expr in self.expressions)

    def render(self, target: Target) -> dict[str, Any]:
        spec: dict[str, Any] = {}
        if self.upstream is not None:
            spec["upstream"] = dict(self.upstream)
        repo, package = target.repo_default, target.package_default
        if self.template is None:
            spec["downstream"] = _downstream(repo, package)
            return spec
        if target.obj is None:
            target_view = {"repo": repo, "package": package}
        else:
            target_view = self.views_by_id.get(id(target.obj)) or object_view(target.obj)
        variables: dict[str, Any] = {"repoDefault": repo, "packageDefault": package, "target": target_view}
        if self.upstream_view is not None:
            variables["upstream"] = self.upstream_view
        if self.repo:
            repo = self.repo
        if self.repo_expr is not None:
            early = self._bind(variables, target) if self.repo_expr.result is None else None
            repo = self._eval(self.repo_expr, target, early)
        # `repository` exists only from here on: it is the Repository the PackageVariant lands in.
        repository = self.repositories.get(repo)
        if repository is None:
            raise TemplateError(f'repository "{repo}" could not be loaded', target=target.description,
                                pvs=self.pvs_name)
        variables["repository"] = repository
        bound = self._bind(variables, target) if self.late else None
        if self.package:
            package = self.package
        if self.package_expr is not None:
            package = self._eval(self.package_expr, target, bound)
        spec["downstream"] = _downstream(repo, package)
        for field, value in self.policies:
            spec[field] = value
        if labels := self._overlay(self.labels, target, bound):
            spec["labels"] = labels
        if annotations := self._overlay(self.annotations, target, bound):
            spec["annotations"] = annotations
        if self.context is not None:
            spec["packageContext"] = self._package_context(self.context, target, bound)
        injectors = []
        for fixed, name, name_expr in self.injectors:
            injectors.append({**fixed, "name": self._eval(name_expr, target, bound) if name_expr else name})
        if self.pipeline is not None:
            pipeline = {}
            for kind, functions in self.pipeline:
                rendered = [self._function(fixed, config_map, target, bound) for fixed, config_map in functions]
                if rendered:
                    pipeline[kind] = rendered
            if pipeline:
                spec["pipeline"] = pipeline
        if injectors:
            spec["injectors"] = injectors
        return spec

    def _package_context(self, context: tuple[_Map, frozenset[str], list[_Expr]], target: Target,
                         bound: cel.Bindings | None) -> dict[str, Any]:
        data_map, remove_keys, remove_exprs = context
        out: dict[str, Any] = {}
        if data := self._overlay(data_map, target, bound):
            out["data"] = data
        remove = set(remove_keys)
        remove.update(self._eval(expr, target, bound) for expr in remove_exprs)
        if remove:
            out["removeKeys"] = sorted(remove)
        return out

    def _function(self, fixed: dict[str, Any], config_map: _Map, target: Target,
                  bound: cel.Bindings | None) -> dict[str, Any]:
        function = clone(fixed)
        if overlaid := self._overlay(config_map, target, bound):
            function["configMap"] = overlaid
        return function

    def _overlay(self, overlay: _Map, target: Target, bound: cel.Bindings | None) -> dict[str, str]:
        static, entries = overlay
        if not entries:
            return dict(static)
        out = dict(static)
        for key, key_expr, value, value_expr in entries:
            if key_expr is not None:
                key = self._eval(key_expr, target, bound)
            if value_expr is not None:
                value = self._eval(value_expr, target, bound)
            out[key] = value
        return dict(sorted(out.items()))

    def _eval(self, expr: _Expr, target: Target, bound: cel.Bindings | None) -> str:
        if expr.result is not None:
            return expr.result
        try:
            if expr.compiled is None:
                expr.compiled = cel.compile_expression(expr.text, engine=self.engine)
            assert bound is not None, "bindings are made whenever an expression is left to evaluate"
            result = expr.compiled.evaluate(bound)
        except cel.CelError as err:
            raise TemplateError(hidden_annotation_note(err.message), field=expr.field, target=target.description,
                                pvs=self.pvs_name) from err
        if expr.constant:
            expr.result = result
        return result

    def _bind(self, variables: Mapping[str, Any], target: Target) -> cel.Bindings:
        try:
            return cel.bind(variables, engine=self.engine)
        except cel.CelError as err:
            raise TemplateError(err.message, target=target.description, pvs=self.pvs_name) from err

    def _injector_template(self, i: int, injector: Obj) -> tuple[dict[str, Any], str, _Expr | None]:
        # group, version and kind are pointers in Porch: an empty string is kept, a null is not.
        fixed = {key: injector[key] for key in ("group", "version", "kind") if injector.get(key) is not None}
        name_expr = self._expr(f"template.injectors[{i}].nameExpr", injector.get("nameExpr") or None)
        return fixed, injector.get("name") or "", name_expr

    def _function_template(self, field: str, function: Obj) -> tuple[dict[str, Any], _Map]:
        # The kpt Function Porch's typed spec holds: known fields only, empty ones dropped (omitempty).
        fixed: dict[str, Any] = {key: function[key] for key in _FUNCTION_FIELDS if function.get(key)}
        for key in ("selectors", "exclude"):
            if selectors := [_selector(selector) for selector in function.get(key) or []]:
                fixed[key] = selectors
        return fixed, self._map(f"{field}.configMapExprs", function.get("configMap"), function.get("configMapExprs"))

    def _map(self, field: str, static: Obj | None, map_exprs: Sequence[Obj] | None) -> _Map:
        entries = []
        for i, entry in enumerate(map_exprs or []):
            entries.append((entry.get("key") or "", self._expr(f"{field}[{i}].keyExpr", entry.get("keyExpr")),
                            entry.get("value") or "", self._expr(f"{field}[{i}].valueExpr", entry.get("valueExpr"))))
        return dict(sorted(_without_nulls(static).items())), tuple(entries)

    def _expr(self, field: str, text: str | None) -> _Expr | None:
        if text is None:
            return None
        expr = _Expr(field, text)
        self.expressions.append(expr)
        return expr


def _upstream(upstream: Obj) -> dict[str, Any]:
    """spec.upstream as Porch's typed Upstream writes it: its four fields, empty ones left out."""
    return {key: upstream[key] for key in ("repo", "package", "revision", "workspaceName")
            if upstream.get(key) not in (None, "", 0)}


def _selector(selector: Obj) -> dict[str, Any]:
    """A kpt Selector as Porch's typed spec holds it: known fields, empty ones and nulls left out."""
    out: dict[str, Any] = {key: selector[key] for key in _SELECTOR_FIELDS if selector.get(key)}
    for key in ("labels", "annotations"):
        if values := _without_nulls(selector.get(key)):
            out[key] = values
    return out


def _without_nulls(values: Obj | None) -> dict[str, Any]:
    """A map without its null values, which an API server prunes before Porch sees them."""
    return {key: value for key, value in (values or {}).items() if value is not None}


def _downstream(repo: str, package: str) -> dict[str, str]:
    """spec.downstream with Go's omitempty: an empty repo or package is left out."""
    downstream = {}
    if repo:
        downstream["repo"] = repo
    if package:
        downstream["package"] = package
    return downstream


def _package_variant(pvs: Obj, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    metadata = _metadata(pvs)
    return {
        "apiVersion": PACKAGE_VARIANT_API_VERSION,
        "kind": PACKAGE_VARIANT_KIND,
        "metadata": {
            "name": name,
            "namespace": metadata.get("namespace", ""),
            "finalizers": [FINALIZER],
            "labels": {OWNER_LABEL: metadata.get("uid", "")},
            "ownerReferences": [{
                # A set read through a typed client can lack apiVersion/kind; the owner must not.
                "apiVersion": pvs.get("apiVersion") or PACKAGE_VARIANT_SET_API_VERSION,
                "kind": pvs.get("kind") or PACKAGE_VARIANT_SET_KIND,
                "name": metadata.get("name", ""),
                "uid": metadata.get("uid", ""),
                "controller": True,
            }],
        },
        "spec": spec,
    }


def _selectable(api_version: str, kind: str, namespace: str, repositories: Sequence[Obj],
                target_objects: Sequence[Obj]) -> list[Obj]:
    """The objects of one kind in the namespace, in name order, as the API server would list them.

    An object without a namespace is of a cluster-scoped kind, which the API server lists whatever
    namespace is asked for (Porch lists with the set's namespace, and gets them all)."""
    found: dict[str, Obj] = {}
    if api_version == REPOSITORY_API_VERSION and kind == REPOSITORY_KIND:
        for obj in repositories:
            if _metadata(obj).get("namespace", "") == namespace:
                found.setdefault(_metadata(obj).get("name", ""), obj)
    for obj in target_objects:
        if (obj.get("apiVersion") == api_version and obj.get("kind") == kind
                and _metadata(obj).get("namespace", "") in (namespace, "")):
            found.setdefault(_metadata(obj).get("name", ""), obj)
    return [found[name] for name in sorted(found)]


def _label_selector(selector: Obj, *, field: str, pvs: str) -> LabelSelector:
    try:
        return parse_labels({key: selector[key] for key in ("matchLabels", "matchExpressions") if key in selector})
    except BadRequest as err:
        raise TemplateError(str(err), field=field, pvs=pvs) from err


def _metadata(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


def _spec(obj: Obj) -> Obj:
    return obj.get("spec") or {}
