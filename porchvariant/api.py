"""The PackageVariant and PackageVariantSet API as pydantic models, field for field as Porch's CRDs.

PackageVariant is `config.porch.kpt.dev/v1alpha1` and PackageVariantSet `config.porch.kpt.dev/v1alpha2`
(spec §a). The kpt Kptfile `Function`, `Selector` and `Pipeline` are shared by both, as in Porch.

The models take and give the JSON names: `model_validate(manifest)` reads a Kubernetes object and
`model_dump(by_alias=True, exclude_none=True)` writes one; Python attributes are the snake_case
twins (`spec.object_selector.match_labels`). They behave as the API server does with Porch's CRDs:

* a field is optional unless Porch's CRD requires it (only a handful are, none at spec level);
* types are strict: a string is never taken for an integer, nor a number for a string;
* unknown fields are dropped and null values count as absent (the API server prunes both);
* there are no defaults: Porch defaults adoptionPolicy and deletionPolicy in memory, never in the
  stored object, so `effective_adoption_policy` and `effective_deletion_policy` give the value
  Porch acts on instead.

Cluster objects stay plain dicts everywhere else; these models are for our own specs, docs and
checks. `structural_schema()` gives a model's shape in openAPIV3Schema terms: the CRDs in
deploy/crds are held to it by tests, and validation.py checks local manifests against it.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

__all__ = [
    "ADOPTION_POLICIES",
    "ADOPT_EXISTING",
    "ADOPT_NONE",
    "DEFAULT_ADOPTION_POLICY",
    "DEFAULT_DELETION_POLICY",
    "DELETE",
    "DELETION_POLICIES",
    "GROUP",
    "ORPHAN",
    "PACKAGE_VARIANT_API_VERSION",
    "PACKAGE_VARIANT_SET_API_VERSION",
    "Condition",
    "Downstream",
    "DownstreamTarget",
    "DownstreamTemplate",
    "Function",
    "FunctionResult",
    "FunctionTemplate",
    "InjectionSelector",
    "InjectionSelectorTemplate",
    "LabelSelector",
    "LabelSelectorRequirement",
    "MapExpr",
    "ObjectSelector",
    "PackageContext",
    "PackageContextTemplate",
    "PackageVariant",
    "PackageVariantSet",
    "PackageVariantSetSpec",
    "PackageVariantSetStatus",
    "PackageVariantSpec",
    "PackageVariantStatus",
    "PackageVariantTemplate",
    "Pipeline",
    "PipelineTemplate",
    "RenderStatus",
    "RepositoryTarget",
    "ResourceIdentifier",
    "ResultField",
    "ResultFile",
    "ResultItem",
    "ResultList",
    "Selector",
    "Target",
    "Upstream",
    "effective_adoption_policy",
    "effective_deletion_policy",
    "structural_schema",
]

GROUP = "config.porch.kpt.dev"
PACKAGE_VARIANT_API_VERSION = f"{GROUP}/v1alpha1"
PACKAGE_VARIANT_SET_API_VERSION = f"{GROUP}/v1alpha2"

ADOPT_EXISTING = "adoptExisting"
ADOPT_NONE = "adoptNone"
ADOPTION_POLICIES = (ADOPT_NONE, ADOPT_EXISTING)
DEFAULT_ADOPTION_POLICY = ADOPT_NONE

DELETE = "delete"
ORPHAN = "orphan"
DELETION_POLICIES = (ORPHAN, DELETE)
DEFAULT_DELETION_POLICY = DELETE

# metav1.Condition's own validation, as every CRD embedding it carries it.
CONDITION_TYPE_PATTERN = (r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                          r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$")
CONDITION_REASON_PATTERN = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"


def _without_nulls(value: Any) -> Any:
    # The API server drops a null wherever the schema does not allow one, map values included
    # (apiextensions-apiserver, defaulting/prunenulls.go), before it validates anything.
    if isinstance(value, Mapping):
        return {key: item for key, item in value.items() if item is not None}
    return value


def _timestamp(value: Any) -> Any:
    # YAML loaders read an unquoted 2024-05-01T10:00:00Z as a datetime; the API has a string.
    if isinstance(value, datetime):
        moment = value.astimezone(UTC) if value.tzinfo else value
        return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    return value


StringMap = Annotated[dict[str, str], BeforeValidator(_without_nulls)]
Timestamp = Annotated[str, BeforeValidator(_timestamp)]


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, strict=True, extra="ignore")

    @model_validator(mode="before")
    @classmethod
    def _drop_nulls(cls, data: Any) -> Any:
        return _without_nulls(data)


# kpt (api/kptfile/v1): the Kptfile pipeline, shared by PackageVariant and PackageVariantSet


class Selector(_Model):
    """Picks resources for a KRM function; every given field must match."""

    api_version: str | None = None
    kind: str | None = None
    name: str | None = None
    namespace: str | None = None
    labels: StringMap | None = None
    annotations: StringMap | None = None


class Function(_Model):
    """A KRM function in a Kptfile pipeline."""

    image: str | None = None
    exec: str | None = None
    config_path: str | None = None
    config_map: StringMap | None = None
    name: str | None = None
    tag: str | None = None
    selectors: list[Selector] | None = None
    exclude: list[Selector] | None = None


class Pipeline(_Model):
    """The functions kpt runs over a package: mutators first, then validators."""

    mutators: list[Function] | None = None
    validators: list[Function] | None = None


# metav1 (k8s.io/apimachinery/pkg/apis/meta/v1)


class Condition(_Model):
    """One aspect of an object's state (metav1.Condition)."""

    type: str = Field(max_length=316, pattern=CONDITION_TYPE_PATTERN)
    status: Literal["True", "False", "Unknown"]
    observed_generation: int | None = Field(default=None, ge=0, json_schema_extra={"format": "int64"})
    last_transition_time: Timestamp = Field(json_schema_extra={"format": "date-time"})
    reason: str = Field(min_length=1, max_length=1024, pattern=CONDITION_REASON_PATTERN)
    message: str = Field(max_length=32768)


class LabelSelectorRequirement(_Model):
    """One `key operator values` term of a label selector."""

    key: str
    operator: str
    values: list[str] | None = Field(default=None, json_schema_extra={"x-kubernetes-list-type": "atomic"})


class LabelSelector(_Model):
    """A label selector (metav1.LabelSelector); all terms must match."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-map-type": "atomic"})

    match_labels: StringMap | None = None
    match_expressions: list[LabelSelectorRequirement] | None = Field(
        default=None, json_schema_extra={"x-kubernetes-list-type": "atomic"})


# Porch's render results (api/porch/v1alpha1 RenderStatus, kpt's fn ResultList)


class ResourceIdentifier(_Model):
    """The object a function result is about."""

    api_version: str | None = None
    kind: str | None = None
    name: str | None = None
    namespace: str | None = None


class ResultField(_Model):
    """The field a function result is about, and a proposed fix."""

    path: str | None = None
    current_value: str | None = None
    proposed_value: str | None = None


class ResultFile(_Model):
    """The file (and the object's index in it) a function result is about."""

    path: str | None = None
    index: int | None = None


class ResultItem(_Model):
    """One message from a function."""

    message: str | None = None
    severity: str | None = None
    resource_ref: ResourceIdentifier | None = None
    field: ResultField | None = None
    file: ResultFile | None = None
    tags: StringMap | None = None


class FunctionResult(_Model):
    """What one function of a render reported."""

    image: str | None = None
    exec: str | None = None
    stderr: str | None = None
    exit_code: int
    results: list[ResultItem] | None = None


class ResultList(_Model):
    """The results of every function a render ran."""

    api_version: str | None = None
    kind: str | None = None
    metadata: dict[str, Any] | None = None
    exit_code: int
    items: list[FunctionResult] | None = None


class RenderStatus(_Model):
    """The outcome of rendering a package when its resources were last written."""

    error: str
    result: ResultList | None = None


# PackageVariant, config.porch.kpt.dev/v1alpha1


class Upstream(_Model):
    """The package revision to clone from: repository, package and workspace."""

    repo: str | None = None
    package: str | None = None
    revision: int | None = None
    workspace_name: str | None = None


class Downstream(_Model):
    """The repository and package the variant is written to."""

    repo: str | None = None
    package: str | None = None


class PackageContext(_Model):
    """Keys to set in, then remove from, the package's kptfile.kpt.dev ConfigMap."""

    data: StringMap | None = None
    remove_keys: list[str] | None = None


class InjectionSelector(_Model):
    """An in-cluster object to inject into matching injection points; unset group, version or kind
    match any."""

    group: str | None = None
    version: str | None = None
    kind: str | None = None
    name: str


class PackageVariantSpec(_Model):
    """One upstream package revision kept in step with one downstream package."""

    upstream: Upstream | None = None
    downstream: Downstream | None = None
    adoption_policy: str | None = None
    deletion_policy: str | None = None
    labels: StringMap | None = None
    annotations: StringMap | None = None
    package_context: PackageContext | None = None
    pipeline: Pipeline | None = None
    injectors: list[InjectionSelector] | None = None


class DownstreamTarget(_Model):
    """A downstream package revision the PackageVariant created or adopted."""

    name: str | None = None
    render_status: RenderStatus | None = None


class PackageVariantStatus(_Model):
    """Conditions (Stalled, Ready) and the downstream package revisions being managed."""

    conditions: list[Condition] | None = None
    downstream_targets: list[DownstreamTarget] | None = None


class PackageVariant(_Model):
    """A PackageVariant object."""

    api_version: str = PACKAGE_VARIANT_API_VERSION
    kind: str = "PackageVariant"
    metadata: dict[str, Any] | None = None
    spec: PackageVariantSpec | None = None
    status: PackageVariantStatus | None = None


# PackageVariantSet, config.porch.kpt.dev/v1alpha2


class RepositoryTarget(_Model):
    """A Repository in the set's namespace, and the package names to create in it."""

    name: str
    package_names: list[str] | None = None


class ObjectSelector(LabelSelector):
    """Objects of one kind in the set's namespace, picked by labels; each becomes a target."""

    api_version: str | None = None
    kind: str | None = None
    name: str | None = None


class MapExpr(_Model):
    """One map entry; key and value are each given literally or as a CEL expression."""

    key: str | None = None
    value: str | None = None
    key_expr: str | None = None
    value_expr: str | None = None


class DownstreamTemplate(_Model):
    """The downstream repository and package, literally or as CEL expressions."""

    repo: str | None = None
    package: str | None = None
    repo_expr: str | None = None
    package_expr: str | None = None


class PackageContextTemplate(_Model):
    """The generated PackageVariant's packageContext, with CEL for keys and values."""

    data: StringMap | None = None
    remove_keys: list[str] | None = None
    data_exprs: list[MapExpr] | None = None
    remove_key_exprs: list[str] | None = None


class InjectionSelectorTemplate(_Model):
    """An injector of the generated PackageVariant; its name literal or a CEL expression."""

    group: str | None = None
    version: str | None = None
    kind: str | None = None
    name: str | None = None
    name_expr: str | None = None


class FunctionTemplate(Function):
    """A pipeline function whose ConfigMap entries may come from CEL expressions."""

    config_map_exprs: list[MapExpr] | None = None


class PipelineTemplate(_Model):
    """The generated PackageVariant's pipeline."""

    validators: list[FunctionTemplate] | None = None
    mutators: list[FunctionTemplate] | None = None


class PackageVariantTemplate(_Model):
    """How to build the PackageVariant for each target."""

    downstream: DownstreamTemplate | None = None
    adoption_policy: str | None = None
    deletion_policy: str | None = None
    labels: StringMap | None = None
    label_exprs: list[MapExpr] | None = None
    annotations: StringMap | None = None
    annotation_exprs: list[MapExpr] | None = None
    package_context: PackageContextTemplate | None = None
    pipeline: PipelineTemplate | None = None
    injectors: list[InjectionSelectorTemplate] | None = None


class Target(_Model):
    """Where variants go: exactly one of repositories, repositorySelector and objectSelector."""

    repositories: list[RepositoryTarget] | None = None
    repository_selector: LabelSelector | None = None
    object_selector: ObjectSelector | None = None
    template: PackageVariantTemplate | None = None


class PackageVariantSetSpec(_Model):
    """One upstream package revision fanned out to many targets."""

    upstream: Upstream | None = None
    targets: list[Target] | None = None


class PackageVariantSetTargetStatus(_Model):
    """One PackageVariant a set generates: its downstream and its readiness (a porchkit addition)."""

    name: str | None = None
    repo: str | None = None
    package: str | None = None
    ready: str | None = None
    reason: str | None = None
    message: str | None = None


class PackageVariantSetStatus(_Model):
    """Conditions (Stalled, Ready) and the PackageVariants generated, one per target."""

    conditions: list[Condition] | None = None
    package_variants: list[PackageVariantSetTargetStatus] | None = None


class PackageVariantSet(_Model):
    """A PackageVariantSet object."""

    api_version: str = PACKAGE_VARIANT_SET_API_VERSION
    kind: str = "PackageVariantSet"
    metadata: dict[str, Any] | None = None
    spec: PackageVariantSetSpec | None = None
    status: PackageVariantSetStatus | None = None


# Porch's in-memory defaults


def effective_adoption_policy(spec: PackageVariantSpec | Mapping[str, Any] | None) -> str:
    """The adoption policy Porch acts on for a PackageVariant spec (a model or its dict): the one
    given, or `adoptNone` when it is unset or empty. An invalid value is returned as it is."""
    return _policy(spec, "adoptionPolicy") or DEFAULT_ADOPTION_POLICY


def effective_deletion_policy(spec: PackageVariantSpec | Mapping[str, Any] | None) -> str:
    """The deletion policy Porch acts on for a PackageVariant spec (a model or its dict): the one
    given, or `delete` when it is unset or empty. An invalid value is returned as it is."""
    return _policy(spec, "deletionPolicy") or DEFAULT_DELETION_POLICY


def _policy(spec: PackageVariantSpec | Mapping[str, Any] | None, key: str) -> Any:
    if isinstance(spec, PackageVariantSpec):
        spec = spec.model_dump(by_alias=True)
    return spec.get(key) if isinstance(spec, Mapping) else None


# The models as openAPIV3Schema


def structural_schema(model: type[BaseModel], *, shared: bool = False) -> dict[str, Any]:
    """`model`'s shape as a CRD's openAPIV3Schema without descriptions: `type`, `properties`,
    sorted `required`, `items`, `additionalProperties`, `enum`, value constraints and the
    `x-kubernetes-*` markers. A fresh copy each call, unless `shared`: then one dict for every
    caller, which must only read it."""
    return _cached_schema(model) if shared else copy.deepcopy(_cached_schema(model))


@functools.cache
def _cached_schema(model: type[BaseModel]) -> dict[str, Any]:
    raw = model.model_json_schema(by_alias=True, mode="validation")
    return _structural(raw, raw.get("$defs", {}))


_NOT_STRUCTURAL = frozenset({"$defs", "title", "default", "description"})


def _structural(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in node:
        node = {**defs[node["$ref"].rsplit("/", 1)[1]], **{k: v for k, v in node.items() if k != "$ref"}}
    if "anyOf" in node:
        # `X | None`: null is never stored (it is pruned), so the field's schema is X's.
        (branch,) = [b for b in node["anyOf"] if b != {"type": "null"}]
        return _structural({**{k: v for k, v in node.items() if k != "anyOf"}, **branch}, defs)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _NOT_STRUCTURAL or (key == "additionalProperties" and value is True):
            continue
        if key == "properties":
            out[key] = {name: _structural(sub, defs) for name, sub in value.items()}
        elif key in ("items", "additionalProperties"):
            out[key] = _structural(value, defs)
        elif key == "required":
            out[key] = sorted(value)
        else:
            out[key] = value
    return out
