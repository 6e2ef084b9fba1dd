"""Memory follows the selection: a PackageVariantSet's objectSelector is sent to the API server
(here the embedded one), so only the objects it selects are listed, watched and cached, and an
object relabelled out of the selection loses its PackageVariant."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from porchvariant.packagevariant_controller import PACKAGE_VARIANT
from porchvariant.packagevariantset_controller import PACKAGE_VARIANT_SET, object_selector_labels
from reconcile import Kind, ObjectKey
from tests.porchvariant.variants_support import NS, Live, Repos, eventually

CONFIGMAP = Kind("v1", "ConfigMap")


def labelled(name: str, team: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": NS,
                                                                 "labels": {"team": team}}, "data": {"k": name}}


def selecting_set() -> dict[str, Any]:
    """A set giving every ConfigMap labelled team=edge a variant in the Repository of its name."""
    return {"apiVersion": "config.porch.kpt.dev/v1alpha2", "kind": "PackageVariantSet",
            "metadata": {"name": "edge", "namespace": NS},
            "spec": {"upstream": {"repo": "catalog", "package": "web", "revision": 1},
                     "targets": [{"objectSelector": {"apiVersion": "v1", "kind": "ConfigMap",
                                                     "matchLabels": {"team": "edge"}},
                                  "template": {"downstream": {"repoExpr": "target.name"}}}]}}


@pytest.fixture(name="live")
def live_fixture(tmp_path: Path) -> Iterator[Live]:
    running = Live(Repos(tmp_path))
    yield running
    running.stop()


def variants(live: Live) -> list[str]:
    return sorted(pv["spec"]["downstream"]["repo"] for pv in live.cluster.list(PACKAGE_VARIANT, namespace=NS).items)


def test_a_set_caches_only_the_objects_its_selector_selects_and_lets_go_of_one_relabelled(live: Live) -> None:
    for index in range(20):
        live.cluster.create(labelled(f"other-{index}", "other"))
    live.cluster.create(labelled("prod", "edge"))
    live.cluster.create(selecting_set())

    eventually(lambda: variants(live) == ["prod"])
    [informer] = [i for i in live.manager.cache.informers if i.kind == CONFIGMAP]
    assert (informer.namespace, informer.labels, len(informer)) == (NS, "team=edge", 1)

    found = live.cluster.get(CONFIGMAP, ObjectKey(NS, "prod"))
    assert found is not None
    live.cluster.update({**found, "metadata": {**found["metadata"], "labels": {"team": "other"}}})
    eventually(lambda: variants(live) == [])


def test_the_label_part_of_an_object_selector_is_what_the_server_gets() -> None:
    assert object_selector_labels({"apiVersion": "v1", "kind": "ConfigMap", "name": "ignored",
                                   "matchLabels": {"team": "edge"},
                                   "matchExpressions": [{"key": "tier", "operator": "Exists"}]}) == "team=edge,tier"
    assert object_selector_labels({"apiVersion": "v1", "kind": "ConfigMap"}) == ""
    assert object_selector_labels({"matchExpressions": [{"key": "tier", "operator": "Sometimes"}]}) is None


def selections(live: Live) -> list[str]:
    return sorted(str(i.labels) for i in live.manager.cache.informers if i.kind == CONFIGMAP)


def test_a_selection_no_set_makes_any_more_is_no_longer_watched_or_cached(live: Live) -> None:
    for index in range(5):
        live.cluster.create(labelled(f"other-{index}", "other"))
    live.cluster.create(labelled("prod", "edge"))
    live.cluster.create(selecting_set())
    live.cluster.create({**selecting_set(), "metadata": {"name": "edge-too", "namespace": NS}})
    eventually(lambda: selections(live) == ["team=edge"])
    [old] = [i for i in live.manager.cache.informers if i.kind == CONFIGMAP]

    def select_core(obj: dict[str, Any]) -> None:
        obj["spec"]["targets"][0]["objectSelector"]["matchLabels"] = {"team": "core"}
    found = live.cluster.get(PACKAGE_VARIANT_SET, ObjectKey(NS, "edge"))
    assert found is not None
    select_core(found)
    live.cluster.update(found)
    eventually(lambda: selections(live) == ["team=core", "team=edge"])  # edge-too still selects team=edge

    live.cluster.delete(PACKAGE_VARIANT_SET, ObjectKey(NS, "edge-too"))
    eventually(lambda: selections(live) == ["team=core"])
    assert old.closed and len(old) == 0
    eventually(lambda: not old.running)

    live.cluster.delete(PACKAGE_VARIANT_SET, ObjectKey(NS, "edge"))
    eventually(lambda: selections(live) == [])
