"""What only EmbeddedCluster has: persistence to a directory, the custom Storage seam, kinds
registered in code, and thread safety under concurrent writers. (What it shares with a real
API server is the contract suite, tests/reconcile/contract/.)"""

from __future__ import annotations

import re
import shutil
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from reconcile.cluster import Kind, LabelSelector, ListResult, Obj, ObjectKey, PatchType, Propagation, ResourceInfo
from reconcile.cluster import WatchEvent as Event
from reconcile.embedded import EmbeddedCluster
from reconcile.errors import AlreadyExists, Conflict, Gone, NotFound, ServerError
from reconcile.patching import apply_patch, clone
from reconcile.selectors import parse_fields, parse_labels

CONFIGMAP = Kind("v1", "ConfigMap")
NAMESPACE = Kind("v1", "Namespace")
CRD = Kind("apiextensions.k8s.io/v1", "CustomResourceDefinition")
GADGET = ResourceInfo(Kind("gadgets.example.dev/v1", "Gadget"), "gadgets", True, frozenset({"status"}))
THING = ResourceInfo(Kind("things.example.dev/v1", "Thing"), "things", True)


def configmap(name: str, namespace: str = "default", **meta: Any) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace, **meta},
            "data": {"k": name}}


def namespace(name: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def widget_crd() -> Obj:
    return {"apiVersion": CRD.api_version, "kind": CRD.kind, "metadata": {"name": "widgets.example.dev"},
            "spec": {"group": "example.dev", "scope": "Namespaced", "names": {"plural": "widgets", "kind": "Widget"},
                     "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}}}]}}


def version(obj: Obj) -> int:
    return int(obj["metadata"]["resourceVersion"])


def drain(events: Iterator[Event], count: int) -> list[Event]:
    """The next `count` events other than bookmarks (already queued: nothing waits)."""
    out: list[Event] = []
    for event in events:
        if event.type != "BOOKMARK":
            out.append(event)
        if len(out) == count:
            break
    return out


# persistence


def test_objects_crds_and_registered_kinds_survive_close_and_reopen(tmp_path: Path) -> None:
    with EmbeddedCluster(persist_to=tmp_path) as cluster:
        made = cluster.create(configmap("a"))
        cluster.create(widget_crd())
        widget = cluster.create({"apiVersion": "example.dev/v1", "kind": "Widget",
                                 "metadata": {"name": "w", "namespace": "default"}, "spec": {"size": 1}})
        cluster.register(GADGET)
        cluster.create({"apiVersion": GADGET.kind.api_version, "kind": "Gadget",
                        "metadata": {"name": "g", "namespace": "default"}})

    with EmbeddedCluster(persist_to=tmp_path) as reopened:
        again = reopened.get(CONFIGMAP, ObjectKey("default", "a"))
        assert again == made
        assert reopened.get(Kind("example.dev/v1", "Widget"), ObjectKey("default", "w")) == widget
        assert reopened.resource(GADGET.kind) == GADGET
        assert reopened.get(GADGET.kind, ObjectKey("default", "g")) is not None


def test_a_deletion_stays_deleted_after_a_restart(tmp_path: Path) -> None:
    with EmbeddedCluster(persist_to=tmp_path) as cluster:
        cluster.create(configmap("a"))
        cluster.delete(CONFIGMAP, ObjectKey("default", "a"))

    with EmbeddedCluster(persist_to=tmp_path) as reopened:
        assert reopened.get(CONFIGMAP, ObjectKey("default", "a")) is None


def test_resource_versions_keep_increasing_across_a_restart(tmp_path: Path) -> None:
    with EmbeddedCluster(persist_to=tmp_path) as cluster:
        last = cluster.create(configmap("a"))

    with EmbeddedCluster(persist_to=tmp_path) as reopened:
        after = reopened.create(configmap("b"))
        listed = reopened.list(CONFIGMAP, namespace="default")

    assert version(after) > version(last)
    assert int(listed.resource_version) >= version(after)


def test_a_watch_from_a_version_before_the_restart_gets_gone(tmp_path: Path) -> None:
    with EmbeddedCluster(persist_to=tmp_path) as cluster:
        before = cluster.create(configmap("a"))["metadata"]["resourceVersion"]
        cluster.create(configmap("b"))

    with EmbeddedCluster(persist_to=tmp_path) as reopened, pytest.raises(Gone):
        reopened.watch(CONFIGMAP, resource_version=before)


def test_writes_of_a_process_that_never_closed_are_recovered_from_the_journal(tmp_path: Path) -> None:
    live, crashed = tmp_path / "live", tmp_path / "crashed"
    with EmbeddedCluster(persist_to=live) as cluster:
        cluster.create(configmap("a"))
        cluster.delete(CONFIGMAP, ObjectKey("default", "a"))
        cluster.create(configmap("b"))
        shutil.copytree(live, crashed)  # the directory as a crash right now would leave it
    with (crashed / "journal.jsonl").open("a", encoding="utf-8") as journal:
        journal.write('{"r": 999, "t": "put", "g"')  # torn by the crash in mid-write

    with EmbeddedCluster(persist_to=crashed) as recovered:
        assert [o["metadata"]["name"] for o in recovered.list(CONFIGMAP, namespace="default").items] == ["b"]


# custom storage


class ThingStorage:
    """A tiny Storage keeping Things in a dict; `calls` records what was routed to it."""

    def __init__(self) -> None:
        self.objects: dict[ObjectKey, Obj] = {}
        self.calls: list[tuple[str, str]] = []
        self.revision = 0

    def get(self, kind: Kind, key: ObjectKey) -> Obj | None:
        self.calls.append(("get", key.name))
        found = self.objects.get(key)
        return clone(found) if found is not None else None

    def list(self, kind: Kind, *, namespace: str = "", labels: LabelSelector = None,
             fields: str | None = None) -> ListResult:
        self.calls.append(("list", namespace))
        wanted, matching = parse_labels(labels), parse_fields(fields)
        items = [clone(o) for k, o in sorted(self.objects.items()) if (not namespace or k.namespace == namespace)
                 and wanted.matches(o["metadata"].get("labels")) and matching.matches(o)]
        return ListResult(items, str(self.revision))

    def watch(self, kind: Kind, *, resource_version: str, namespace: str = "", labels: LabelSelector = None,
              fields: str | None = None, timeout: float | None = None) -> Iterator[Event]:
        self.calls.append(("watch", resource_version))
        return iter([Event("ADDED", clone(o)) for o in self.objects.values()])

    def create(self, obj: Obj) -> Obj:
        key = ObjectKey.of(obj)
        self.calls.append(("create", key.name))
        if key in self.objects:
            raise AlreadyExists(f'things "{key.name}" already exists')
        self.revision += 1
        stored = clone(obj)
        stored["metadata"].update(uid=f"thing-{key.name}", resourceVersion=str(self.revision))
        self.objects[key] = stored
        return clone(stored)

    def update(self, obj: Obj) -> Obj:
        self.calls.append(("update", ObjectKey.of(obj).name))
        self.objects[ObjectKey.of(obj)] = clone(obj)
        return clone(obj)

    def update_status(self, obj: Obj) -> Obj:
        return self.update(obj)

    def patch(self, kind: Kind, key: ObjectKey, patch: Any, *, patch_type: PatchType = "merge",
              subresource: str | None = None) -> Obj:
        self.calls.append(("patch", key.name))
        self.objects[key] = apply_patch(self.objects[key], patch, patch_type)
        return clone(self.objects[key])

    def apply(self, obj: Obj, *, field_manager: str, force: bool = False, subresource: str | None = None) -> Obj:
        self.calls.append(("apply", ObjectKey.of(obj).name))
        self.objects[ObjectKey.of(obj)] = clone(obj)
        return clone(obj)

    def delete(self, kind: Kind, key: ObjectKey, *, propagation: Propagation = "Background",
               preconditions: Mapping[str, str] | None = None) -> Obj | None:
        self.calls.append(("delete", f"{key.namespace}/{key.name}"))
        if self.objects.pop(key, None) is None:
            raise NotFound(f'things "{key.name}" not found')
        return None


def thing(name: str, namespace: str = "default") -> Obj:
    return {"apiVersion": THING.kind.api_version, "kind": "Thing", "metadata": {"name": name, "namespace": namespace}}


@pytest.fixture
def served() -> Iterator[tuple[EmbeddedCluster, ThingStorage]]:
    storage = ThingStorage()
    with EmbeddedCluster() as cluster:
        cluster.serve(THING, storage)
        yield cluster, storage


def test_every_request_for_a_served_kind_is_routed_to_its_storage(served: tuple[EmbeddedCluster, ThingStorage]) -> None:
    cluster, storage = served

    made = cluster.create(thing("t"))
    fetched = cluster.get(THING.kind, ObjectKey("default", "t"))
    listed = cluster.list(THING.kind, namespace="default")
    patched = cluster.patch(THING.kind, ObjectKey("default", "t"), {"spec": {"size": 2}})
    events = list(cluster.watch(THING.kind, resource_version="0"))
    cluster.delete(THING.kind, ObjectKey("default", "t"))

    assert made["metadata"]["uid"] == "thing-t" and fetched == made
    assert [o["metadata"]["name"] for o in listed.items] == ["t"]
    assert patched["spec"] == {"size": 2}
    assert [e.type for e in events] == ["ADDED"]
    assert [call for call, _ in storage.calls][:5] == ["create", "get", "list", "patch", "watch"]
    assert storage.calls[-1] == ("delete", "default/t")  # after a get: the cluster collects dependents
    assert cluster.resource(THING.kind) == THING


def test_a_served_kind_cannot_be_created_in_a_namespace_that_does_not_exist(
        served: tuple[EmbeddedCluster, ThingStorage]) -> None:
    cluster, storage = served

    with pytest.raises(NotFound):
        cluster.create(thing("t", namespace="nowhere"))
    assert storage.calls == []


def test_deleting_a_namespace_deletes_the_served_objects_in_it(served: tuple[EmbeddedCluster, ThingStorage]) -> None:
    cluster, storage = served
    cluster.create(namespace("doomed"))
    cluster.create(thing("t1", namespace="doomed"))
    cluster.create(thing("t2", namespace="doomed"))
    cluster.create(thing("kept"))

    cluster.delete(NAMESPACE, ObjectKey("", "doomed"))

    assert ("delete", "doomed/t1") in storage.calls and ("delete", "doomed/t2") in storage.calls
    assert list(storage.objects) == [ObjectKey("default", "kept")]
    assert cluster.get(NAMESPACE, ObjectKey("", "doomed")) is None


def test_dependents_of_a_served_object_deleted_through_the_cluster_are_collected(
        served: tuple[EmbeddedCluster, ThingStorage]) -> None:
    cluster, _ = served
    owner = cluster.create(thing("owner"))
    ref = {"apiVersion": owner["apiVersion"], "kind": "Thing", "name": "owner", "uid": owner["metadata"]["uid"]}
    cluster.create(configmap("dependent", ownerReferences=[ref]))

    cluster.delete(THING.kind, ObjectKey("default", "owner"))

    assert cluster.get(CONFIGMAP, ObjectKey("default", "dependent")) is None


# kinds registered in code


def test_a_registered_kind_is_served_from_the_generic_store_with_full_semantics() -> None:
    with EmbeddedCluster() as cluster:
        cluster.register(GADGET)
        made = cluster.create({"apiVersion": GADGET.kind.api_version, "kind": "Gadget",
                               "metadata": {"name": "g", "namespace": "default"}, "spec": {"size": 1},
                               "status": {"ignored": True}})
        resized = cluster.update({**made, "spec": {"size": 2}})
        with_status = cluster.update_status({**resized, "status": {"phase": "Ready"}})

        assert cluster.resource(GADGET.kind) == GADGET
        assert "status" not in made and made["metadata"]["generation"] == 1
        assert resized["metadata"]["generation"] == 2
        assert with_status["status"] == {"phase": "Ready"} and with_status["metadata"]["generation"] == 2
        with pytest.raises(Conflict):
            cluster.update({**made, "spec": {"size": 3}})


def test_registering_a_kind_again_replaces_how_it_is_served() -> None:
    with EmbeddedCluster() as cluster:
        cluster.register(GADGET)
        cluster.register(GADGET._replace(subresources=frozenset()))

        made = cluster.create({"apiVersion": GADGET.kind.api_version, "kind": "Gadget",
                               "metadata": {"name": "g", "namespace": "default"}, "status": {"phase": "Kept"}})

        assert made["status"] == {"phase": "Kept"}  # no status subresource any more
        with pytest.raises(NotFound):
            cluster.update_status(made)


def test_a_built_in_kind_cannot_be_registered() -> None:
    with EmbeddedCluster() as cluster, pytest.raises(AlreadyExists):
        cluster.register(ResourceInfo(CONFIGMAP, "configmaps", True))


def test_a_crds_scale_subresource_is_not_served_rather_than_served_wrong() -> None:
    crd = widget_crd()
    crd["spec"]["versions"][0]["subresources"]["scale"] = {"specReplicasPath": ".spec.replicas",
                                                           "statusReplicasPath": ".status.replicas"}
    with EmbeddedCluster() as cluster:
        cluster.create(crd)
        widgets = Kind("example.dev/v1", "Widget")
        cluster.create({"apiVersion": "example.dev/v1", "kind": "Widget",
                        "metadata": {"name": "w", "namespace": "default"}, "spec": {"replicas": 1}})

        assert cluster.resource(widgets).subresources == {"status"}
        with pytest.raises(NotFound):
            cluster.patch(widgets, ObjectKey("default", "w"), {"spec": {"replicas": 3}}, subresource="scale")


# threads


def test_concurrent_writers_get_unique_increasing_versions_and_a_watch_sees_each_change_once_in_order() -> None:
    writers, rounds = 6, 40
    with EmbeddedCluster() as cluster:
        start = cluster.list(CONFIGMAP).resource_version
        stream = cluster.watch(CONFIGMAP, resource_version=start)
        seen: dict[int, list[int]] = {}

        def write(index: int) -> None:
            versions = seen.setdefault(index, [])
            current = cluster.create(configmap(f"w{index}"))
            versions.append(version(current))
            for round_ in range(rounds - 1):
                current = cluster.update({**current, "data": {"round": str(round_)}})
                versions.append(version(current))

        threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        events = drain(stream, writers * rounds)

    written = [v for versions in seen.values() for v in versions]
    assert len(set(written)) == writers * rounds
    assert all(versions == sorted(versions) for versions in seen.values())
    watched = [version(e.object) for e in events]
    assert watched == sorted(watched) and sorted(watched) == sorted(written)


def test_optimistic_concurrency_loses_no_increment_between_threads() -> None:
    threads_count, increments = 4, 25
    with EmbeddedCluster() as cluster:
        cluster.create({**configmap("counter"), "data": {"n": "0"}})

        def increment() -> None:
            for _ in range(increments):
                while True:
                    current = cluster.get(CONFIGMAP, ObjectKey("default", "counter"))
                    assert current is not None
                    try:
                        cluster.update({**current, "data": {"n": str(int(current["data"]["n"]) + 1)}})
                        break
                    except Conflict:
                        continue

        threads = [threading.Thread(target=increment) for _ in range(threads_count)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        final = cluster.get(CONFIGMAP, ObjectKey("default", "counter"))

    assert final is not None and final["data"]["n"] == str(threads_count * increments)


def test_closing_the_cluster_ends_every_open_watch() -> None:
    cluster = EmbeddedCluster()
    stream = cluster.watch(CONFIGMAP, resource_version=cluster.list(CONFIGMAP).resource_version)
    assert cluster.watchers() == 1

    cluster.close()

    assert list(stream) == []


# the examples of docs/embedded-cluster.md


DOC = (Path(__file__).resolve().parents[2] / "docs" / "embedded-cluster.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", ["persistence", "clock", "storage"])
def test_the_documented_example_runs(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    match = re.search(rf"<!-- example: {name} -->\n```python\n(.*?)```", DOC, re.S)
    assert match, f"no `{name}` example in docs/embedded-cluster.md"
    monkeypatch.chdir(tmp_path)
    exec(compile(match.group(1), f"docs/embedded-cluster.md:{name}", "exec"), {"__name__": f"example_{name}"})


@pytest.mark.parametrize(("name", "text"), [
    ("state.json", '{"format": 1}'),
    ("journal.jsonl", '{"t": "put", "r": 1}\n{"t": "put", "r": 2}\n'),
    ("journal.jsonl", '[1, 2]\n{}\n'),
])
def test_a_state_directory_it_cannot_read_is_one_error_naming_it(tmp_path: Path, name: str, text: str) -> None:
    (tmp_path / name).write_text(text, encoding="utf-8")
    with pytest.raises(ServerError, match=str(tmp_path)):
        EmbeddedCluster(persist_to=tmp_path)


def test_a_failure_of_the_embedded_controllers_never_fails_the_request_that_caused_it() -> None:
    with EmbeddedCluster() as cluster:
        role = cluster.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                               "metadata": {"name": "owner"}})
        public = cluster.get(NAMESPACE, ObjectKey("", "kube-public"))
        assert public is not None
        public["metadata"]["ownerReferences"] = [{"apiVersion": role["apiVersion"], "kind": "ClusterRole",
                                                  "name": "owner", "uid": role["metadata"]["uid"]}]
        cluster.update(public)

        # the collector then tries to delete kube-public, which is forbidden: the delete still succeeds
        assert cluster.delete(Kind("rbac.authorization.k8s.io/v1", "ClusterRole"), ObjectKey("", "owner")) is None
        assert cluster.get(NAMESPACE, ObjectKey("", "kube-public")) is not None


class LockingStorage(ThingStorage):
    """A storage with a lock of its own, which it holds while it reads the cluster (as a storage
    that checks other objects on create would)."""

    def __init__(self, cluster: EmbeddedCluster) -> None:
        super().__init__()
        self.cluster, self.lock = cluster, threading.Lock()

    def get(self, kind: Kind, key: ObjectKey) -> Obj | None:
        with self.lock:
            return super().get(kind, key)

    def create(self, obj: Obj) -> Obj:
        with self.lock:
            for _ in range(200):  # keep the cluster busy meanwhile
                self.cluster.get(CONFIGMAP, ObjectKey("default", "settings"))
            return super().create(obj)


def test_the_cluster_never_calls_a_storage_while_holding_its_own_lock() -> None:
    with EmbeddedCluster() as cluster:
        storage = LockingStorage(cluster)
        cluster.serve(THING, storage)
        owner = cluster.create(thing("owner"))
        ref = {"apiVersion": owner["apiVersion"], "kind": "Thing", "name": "owner", "uid": owner["metadata"]["uid"]}

        def dependents() -> None:  # each create makes the garbage collector look at the owner
            for i in range(200):
                cluster.create(configmap(f"dep{i}", ownerReferences=[ref]))

        threads = [threading.Thread(target=dependents), threading.Thread(target=lambda: cluster.create(thing("m")))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        assert not any(t.is_alive() for t in threads), "deadlock between the cluster's lock and the storage's"
        assert len(cluster.list(CONFIGMAP, namespace="default").items) == 200


def test_an_identical_write_through_another_version_of_a_crd_stores_nothing_new() -> None:
    versions = [{"name": name, "served": True, "storage": name == "v1",
                 "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}
                for name in ("v1", "v1beta1")]
    with EmbeddedCluster() as cluster:
        cluster.create({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                        "metadata": {"name": "gizmos.example.com"},
                        "spec": {"group": "example.com", "scope": "Namespaced", "versions": versions,
                                 "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo"}}})
        made = cluster.create({"apiVersion": "example.com/v1", "kind": "Gizmo",
                               "metadata": {"name": "g", "namespace": "default"}, "spec": {"size": 1}})
        through_beta = cluster.update({**made, "apiVersion": "example.com/v1beta1"})
        back = cluster.update({**through_beta, "apiVersion": "example.com/v1"})
        assert made["metadata"]["resourceVersion"] == through_beta["metadata"]["resourceVersion"] \
            == back["metadata"]["resourceVersion"]
