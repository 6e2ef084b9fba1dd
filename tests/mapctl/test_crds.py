"""The MapController CRD: deploy/crds holds what mapctl/crds.py builds, the embedded API server
serves it, and its schema keeps every field spec.py reads (a real API server prunes what a schema
leaves out) and refuses what spec.py refuses.

EmbeddedCluster keeps a CRD's schema without enforcing it, so `schema_problems` below checks a
MapController against the schema as a real API server would (pruning, type, enum, required,
minItems, minimum).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from mapctl.crds import map_controller_crd
from mapctl.protocol import MAP_SHAPE, map_request, parse_map_response
from mapctl.spec import MAP_CONTROLLER, MAX_PARALLELISM, SpecError, parse_map_controller
from reconcile.cluster import Kind, ObjectKey
from reconcile.embedded import EmbeddedCluster
from reconcile.hooks import HookPolicy, build_hook

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "deploy" / "crds" / "porchkit.dev_mapcontrollers.yaml"
# the example MapControllers shipped with porchkit (files of other kinds are not read)
EXAMPLES = sorted(p for p in (ROOT / "testdata" / "mapctl").rglob("*.yaml")
                  if "kind: MapController" in p.read_text(encoding="utf-8"))
CRD = Kind("apiextensions.k8s.io/v1", "CustomResourceDefinition")

Path_ = tuple[str, ...]  # a field's path; "[]" stands for any item of a list


def snapshot_each_claim(request: dict[str, Any]) -> dict[str, Any]:
    """The SnapshotSchedule map hook as a python hook: one VolumeSnapshot per PVC."""
    claim = request["input"]["metadata"]["name"]
    return {"outputs": [{"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
                         "metadata": {"name": f"{claim}-snapshot"},
                         "spec": {"source": {"persistentVolumeClaimName": claim}}}]}


SNAPSHOT_SCHEDULE: dict[str, Any] = {
    "apiVersion": "porchkit.dev/v1alpha1", "kind": "MapController",
    "metadata": {"name": "snapshotschedule-controller"},
    "spec": {
        "parentResource": {"apiVersion": "ark.example.com/v1alpha1", "resource": "snapshotschedules"},
        "inputResources": [{"apiVersion": "v1", "resource": "persistentvolumeclaims"}],
        "outputResources": [{"apiVersion": "snapshot.storage.k8s.io/v1", "resource": "volumesnapshots"}],
        "resyncPeriodSeconds": 5,
        "hooks": {
            "map": {"python": {"function": f"{__name__}:snapshot_each_claim", "timeout": "2s"}},
            "tombstone": {"webhook": {"url": "http://snapshotschedule-controller.metacontroller/tombstone"}},
        },
    },
}

EVERY_FIELD: dict[str, Any] = {
    **SNAPSHOT_SCHEDULE,
    "metadata": {"name": "everything"},
    "spec": {
        "parentResource": {"apiVersion": "ark.example.com/v1alpha1", "resource": "snapshotschedules"},
        "inputResources": [{"apiVersion": "v1", "resource": "persistentvolumeclaims"},
                           {"apiVersion": "apps/v1", "resource": "statefulsets"}],
        "outputResources": [{"apiVersion": "snapshot.storage.k8s.io/v1", "resource": "volumesnapshots",
                             "updateStrategy": {"method": "RollingInPlace"}},
                            {"apiVersion": "v1", "resource": "configmaps", "updateStrategy": {"method": "Recreate"}}],
        "resyncPeriodSeconds": 30,
        "parallelism": 4,
        "hooks": {
            "map": {"version": "v2", "python": {"function": f"{__name__}:snapshot_each_claim", "timeout": "2s"}},
            "tombstone": {"version": "v1", "webhook": {
                "url": "https://hooks.example/tombstone", "timeout": "5s", "responseUnMarshallMode": "strict",
                "service": {"name": "hooks", "namespace": "hooks", "port": 8443, "protocol": "https"},
                "path": "/tombstone",
                "etag": {"enabled": True, "cacheTimeoutSeconds": 60, "cacheCleanupSeconds": 30},
                "caBundle": {"inline": "-----BEGIN CERTIFICATE-----",
                             "secretRef": {"name": "ca", "namespace": "hooks", "key": "ca.crt"},
                             "configMapRef": {"name": "ca", "namespace": "hooks", "key": "ca.crt"}},
                "clientTLS": {"secretRef": {"name": "client", "namespace": "hooks"}, "certKey": "tls.crt",
                              "privateKeyKey": "tls.key"},
                "authorization": {"type": "Bearer", "secretRef": {"name": "token", "namespace": "hooks",
                                                                  "key": "token"}},
                "basicAuth": {"secretRef": {"name": "basic", "namespace": "hooks"}, "usernameKey": "user",
                              "passwordKey": "pass"}}},
        },
    },
}


def schema() -> dict[str, Any]:
    [version] = map_controller_crd()["spec"]["versions"]
    found: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return found


def schema_problems(value: Any, node: Mapping[str, Any], path: str = "") -> list[str]:
    """What a real API server would do to `value` under `node`, one line each: a field it prunes,
    or a value it refuses. [] when the value is stored as it is."""
    if node.get("x-kubernetes-preserve-unknown-fields"):
        return []
    kind = node.get("type")
    if kind == "object":
        if not isinstance(value, dict):
            return [f"{path}: not an object"]
        properties = node.get("properties")
        problems = [f"{path}.{name}: required" for name in node.get("required", ()) if name not in value]
        for name, item in value.items():
            if properties is None:  # metadata: ObjectMeta, the server's own
                continue
            problems += (schema_problems(item, properties[name], f"{path}.{name}") if name in properties
                         else [f"{path}.{name}: unknown field, pruned"])
        return problems
    if kind == "array":
        if not isinstance(value, list):
            return [f"{path}: not a list"]
        problems = [f"{path}: fewer than {node['minItems']} items"] if len(value) < node.get("minItems", 0) else []
        for i, item in enumerate(value):
            problems += schema_problems(item, node["items"], f"{path}[{i}]")
        return problems
    expected = {"string": str, "integer": int, "boolean": bool}[kind]
    if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
        return [f"{path}: not {'an' if kind == 'integer' else 'a'} {kind}"]
    if "enum" in node and value not in node["enum"]:
        return [f"{path}: {value!r} not in the enum"]
    if "minimum" in node and value < node["minimum"]:
        return [f"{path}: below the minimum {node['minimum']}"]
    if "maximum" in node and value > node["maximum"]:
        return [f"{path}: above the maximum {node['maximum']}"]
    return []


class Reads(Mapping[str, Any]):
    """A read-only view of a JSON object that logs the path of every field read through it
    (present or not), and hands out views of what it holds."""

    def __init__(self, value: Mapping[str, Any], path: Path_, log: set[Path_]) -> None:
        self._value, self._path, self._log = value, path, log

    def __getitem__(self, key: str) -> Any:
        self._log.add((*self._path, key))
        return view(self._value[key], (*self._path, key), self._log)

    def __iter__(self) -> Iterator[str]:
        return iter(self._value)

    def __len__(self) -> int:
        return len(self._value)


def view(value: Any, path: Path_, log: set[Path_]) -> Any:
    if isinstance(value, Mapping):
        return Reads(value, path, log)
    if isinstance(value, list):
        return [view(item, (*path, "[]"), log) for item in value]
    return value


def fields_read_by_spec_py(obj: dict[str, Any]) -> set[Path_]:
    log: set[Path_] = set()
    parse_map_controller(Reads(obj, (), log))
    return log


def schema_at(node: Mapping[str, Any], path: Path_) -> Mapping[str, Any] | None:
    """The schema of the field at `path`, or None when the schema has no such field."""
    for segment in path:
        if node.get("x-kubernetes-preserve-unknown-fields"):
            return node
        found = node.get("items") if segment == "[]" else node.get("properties", {}).get(segment)
        if found is None:
            return None
        node = found
    return node


def without(obj: dict[str, Any], *path: str | int) -> dict[str, Any]:
    """A copy of obj without the field at `path`."""
    out = copy.deepcopy(obj)
    parent: Any = out
    for key in path[:-1]:
        parent = parent[key]
    del parent[path[-1]]
    return out


def replaced(obj: dict[str, Any], value: Any, *path: str | int) -> dict[str, Any]:
    """A copy of obj with the field at `path` set to `value`."""
    out = copy.deepcopy(obj)
    parent: Any = out
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    return out


def test_the_shipped_crd_is_the_one_the_code_builds() -> None:
    [shipped] = [doc for doc in yaml.safe_load_all(SHIPPED.read_text(encoding="utf-8")) if doc]
    assert shipped == map_controller_crd()


def test_porchkits_group_names_scope_and_status_subresource() -> None:
    spec = map_controller_crd()["spec"]
    assert (spec["group"], spec["scope"], spec["names"]["kind"], spec["names"]["plural"]) == (
        "porchkit.dev", "Cluster", "MapController", "mapcontrollers")
    assert spec["names"]["shortNames"] == ["mapc"]
    [version] = spec["versions"]
    assert Kind(f"{spec['group']}/{version['name']}", spec["names"]["kind"]) == MAP_CONTROLLER
    assert version["subresources"] == {"status": {}}


def test_the_printer_columns_show_the_parent_resource_and_age() -> None:
    [version] = map_controller_crd()["spec"]["versions"]
    columns = {c["name"]: c for c in version["additionalPrinterColumns"]}
    assert list(columns) == ["Parent", "Age"]
    assert columns["Age"] == {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
    shown: Any = SNAPSHOT_SCHEDULE
    for step in columns["Parent"]["jsonPath"].split(".")[1:]:
        shown = shown[step]
    assert shown == "snapshotschedules"


def test_the_embedded_cluster_accepts_the_crd_and_serves_the_kind() -> None:
    cluster = EmbeddedCluster()
    cluster.create(map_controller_crd())
    stored = cluster.get(CRD, ObjectKey("", "mapcontrollers.porchkit.dev"))
    assert stored is not None
    established = [c for c in stored["status"]["conditions"] if c["type"] == "Established"]
    assert [c["status"] for c in established] == ["True"]
    created = cluster.create(copy.deepcopy(SNAPSHOT_SCHEDULE))
    assert "namespace" not in created["metadata"]  # cluster-scoped
    assert [o["metadata"]["name"] for o in cluster.list(MAP_CONTROLLER).items] == ["snapshotschedule-controller"]


def test_the_snapshot_schedule_reads_back_unchanged_and_its_python_hook_answers() -> None:
    assert schema_problems(SNAPSHOT_SCHEDULE, schema()) == []
    cluster = EmbeddedCluster()
    cluster.create(map_controller_crd())
    cluster.create(copy.deepcopy(SNAPSHOT_SCHEDULE))
    stored = cluster.get(MAP_CONTROLLER, ObjectKey("", "snapshotschedule-controller"))
    assert stored is not None and stored["spec"] == SNAPSHOT_SCHEDULE["spec"]
    spec = parse_map_controller(stored)
    hook = build_hook(spec.map_hook, field="spec.hooks.map", controller=spec.name, hook="map", shape=MAP_SHAPE,
                      output_field="outputs", policy=HookPolicy.for_manager([__name__], []))
    assert hook is not None
    try:
        claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                 "metadata": {"name": "data-0", "namespace": "default"}}
        answer = hook.call(map_request(stored, {"metadata": {"name": "s", "namespace": "default"}}, "mk-1", claim, {}))
    finally:
        hook.close()
    [output] = parse_map_response(answer, namespace="default").outputs
    assert output["metadata"]["name"] == "data-0-snapshot"


def test_a_map_controller_using_every_field_survives_the_schema_whole() -> None:
    assert schema_problems(EVERY_FIELD, schema()) == []
    cluster = EmbeddedCluster()
    cluster.create(map_controller_crd())
    cluster.create(copy.deepcopy(EVERY_FIELD))
    stored = cluster.get(MAP_CONTROLLER, ObjectKey("", "everything"))
    assert stored is not None and stored["spec"] == EVERY_FIELD["spec"]
    assert [rule.method for rule in parse_map_controller(stored).outputs] == ["InPlace", "Recreate"]


def test_every_field_spec_py_reads_is_in_the_schema() -> None:
    read = fields_read_by_spec_py(EVERY_FIELD)
    assert ("spec", "outputResources", "[]", "updateStrategy", "method") in read  # the log sees deep reads
    missing = [".".join(path).replace(".[]", "[]") for path in sorted(read)
               if path[0] != "metadata" and schema_at(schema(), path) is None]  # ObjectMeta is the server's
    assert missing == []


@pytest.mark.parametrize("path", EXAMPLES, ids=[str(p.relative_to(ROOT)) for p in EXAMPLES])
def test_the_shipped_examples_survive_the_schema_whole(path: Path) -> None:
    examples = [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8"))
                if doc and doc.get("kind") == "MapController"]
    assert examples
    for example in examples:
        assert schema_problems(example, schema()) == []


def test_a_pipeline_hook_is_kept_whole() -> None:
    pipeline = {"pipeline": [{"@project": {"metadata": {"name": {"@concat": ["$.metadata.name", "-x"]}}}}],
                "target": {"apiVersion": "v1", "kind": "ConfigMap"}}
    obj = replaced(SNAPSHOT_SCHEDULE, {"pipeline": pipeline}, "spec", "hooks", "map")
    assert schema_problems(obj, schema()) == []
    assert parse_map_controller(obj).map_hook == {"pipeline": pipeline}


def test_the_hooks_accept_exactly_what_the_decorator_hooks_accept() -> None:
    """The hook schema is written twice (mapctl may not import decorators) until it moves to
    reconcile; this keeps the copies equal."""
    from decorators.crds import decorator_controller_crd

    [decorators] = decorator_controller_crd()["spec"]["versions"]
    decorator_hook = decorators["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["hooks"][
        "properties"]["sync"]
    hooks = schema()["properties"]["spec"]["properties"]["hooks"]
    assert hooks["required"] == ["map"]
    for name in ("map", "tombstone"):
        assert {k: v for k, v in hooks["properties"][name].items() if k != "description"} == decorator_hook


@pytest.mark.parametrize(("obj", "problem"), [
    (without(SNAPSHOT_SCHEDULE, "spec", "parentResource"), ".spec.parentResource: required"),
    (without(SNAPSHOT_SCHEDULE, "spec", "parentResource", "apiVersion"), ".spec.parentResource.apiVersion: required"),
    (without(SNAPSHOT_SCHEDULE, "spec", "inputResources"), ".spec.inputResources: required"),
    (replaced(SNAPSHOT_SCHEDULE, [], "spec", "inputResources"), ".spec.inputResources: fewer than 1 items"),
    (replaced(SNAPSHOT_SCHEDULE, [], "spec", "outputResources"), ".spec.outputResources: fewer than 1 items"),
    (without(SNAPSHOT_SCHEDULE, "spec", "outputResources", 0, "resource"),
     ".spec.outputResources[0].resource: required"),
    (replaced(SNAPSHOT_SCHEDULE, {"method": "Rolling"}, "spec", "outputResources", 0, "updateStrategy"),
     ".spec.outputResources[0].updateStrategy.method: 'Rolling' not in the enum"),
    (replaced(SNAPSHOT_SCHEDULE, "5s", "spec", "resyncPeriodSeconds"), ".spec.resyncPeriodSeconds: not an integer"),
    (without(SNAPSHOT_SCHEDULE, "spec", "hooks"), ".spec.hooks: required"),
    (without(SNAPSHOT_SCHEDULE, "spec", "hooks", "map"), ".spec.hooks.map: required"),
    (replaced(SNAPSHOT_SCHEDULE, "v3", "spec", "hooks", "map", "version"),
     ".spec.hooks.map.version: 'v3' not in the enum"),
], ids=["no-parent", "parent-without-apiVersion", "no-inputs", "empty-inputs", "empty-outputs",
        "output-without-resource", "unknown-method", "resync-as-string", "no-hooks", "no-map-hook", "hook-version-v3"])
def test_the_schema_refuses_what_spec_py_refuses(obj: dict[str, Any], problem: str) -> None:
    assert schema_problems(obj, schema()) == [problem]
    with pytest.raises(SpecError):
        parse_map_controller(obj)


def test_unknown_fields_would_be_pruned() -> None:
    obj = replaced(SNAPSHOT_SCHEDULE, {"apiVersion": "v1", "resource": "secrets", "selector": {}},
                   "spec", "inputResources", 0)
    assert schema_problems(obj, schema()) == [".spec.inputResources[0].selector: unknown field, pruned"]


@pytest.mark.parametrize(("value", "problem"), [
    (0, ".spec.parallelism: below the minimum 1"),
    (MAX_PARALLELISM + 1, f".spec.parallelism: above the maximum {MAX_PARALLELISM}"),
    (True, ".spec.parallelism: not an integer"),
])
def test_parallelism_is_refused_out_of_spec_pys_range(value: Any, problem: str) -> None:
    obj = replaced(SNAPSHOT_SCHEDULE, value, "spec", "parallelism")
    assert schema_problems(obj, schema()) == [problem]
    with pytest.raises(SpecError):
        parse_map_controller(obj)


def test_parallelism_defaults_to_what_spec_py_assumes_when_it_is_absent() -> None:
    node = schema_at(schema(), ("spec", "parallelism"))
    assert node is not None and node["default"] == 8
    assert parse_map_controller(SNAPSHOT_SCHEDULE).parallelism == node["default"]
    assert parse_map_controller(replaced(SNAPSHOT_SCHEDULE, MAX_PARALLELISM, "spec", "parallelism")).parallelism == \
        MAX_PARALLELISM
