"""porchvariant.downstream: a PackageVariant's own revisions, the writes and drafts Porch would make."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from porchvariant.downstream import (
    DeletionPlan,
    DownstreamNotPublished,
    DownstreamPlan,
    ExtraDraft,
    clone_draft,
    deletion_plan,
    downstream_targets,
    edit_draft,
    is_owned,
    needs_upgrade,
    new_workspace_name,
    owner_reference,
    plan_downstreams,
    upgrade_draft,
    workspace_number,
)
from porchvariant.upstream import PlaceholderUpstream, find_locked_upstream, find_upstream

OURS = {"apiVersion": "config.porch.kpt.dev/v1alpha1", "kind": "PackageVariant", "name": "variant",
        "uid": "pv-uid", "controller": True}
THEIRS = {"apiVersion": "config.porch.kpt.dev/v1alpha1", "kind": "PackageVariant", "name": "other",
          "uid": "other-uid", "controller": True}


def pv(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "config.porch.kpt.dev/v1alpha1", "kind": "PackageVariant",
            "metadata": {"name": "variant", "namespace": "ns", "uid": "pv-uid", "labels": {"pv-own": "label"}},
            "spec": {"upstream": {"repo": "blueprints", "package": "base", "workspaceName": "v3.0.0"},
                     "downstream": {"repo": "deploy", "package": "site"}, **spec}}


def pr(ws: str, revision: int = 0, lifecycle: str = "Draft", *, owners: tuple[dict[str, Any], ...] = (OURS,),
       repo: str = "deploy", package: str = "site", namespace: str = "ns", **extra: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": f"{repo}.{package}.{ws}", "namespace": namespace}
    if owners:
        metadata["ownerReferences"] = [dict(owner) for owner in owners]
    return {"apiVersion": "porch.kpt.dev/v1alpha1", "kind": "PackageRevision", "metadata": metadata,
            "spec": {"repository": repo, "packageName": package, "workspaceName": ws, "revision": revision,
                     "lifecycle": lifecycle}, **extra}


def with_lifecycle(obj: dict[str, Any], lifecycle: str) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["spec"]["lifecycle"] = lifecycle
    return out


def without_owners(obj: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    del out["metadata"]["ownerReferences"]
    return out


@contextmanager
def unchanged(*objs: Any) -> Iterator[None]:
    before = copy.deepcopy(objs)
    yield
    assert objs == before


# b.5: which revisions are ours


def test_ownership_is_by_uid_only() -> None:
    renamed = dict(OURS, name="renamed", kind="Other", controller=False)
    impostor = dict(THEIRS, name="variant", kind="PackageVariant")
    assert is_owned(pr("a", owners=(THEIRS, renamed)), pv())
    assert not is_owned(pr("a", owners=(impostor,)), pv())
    assert not is_owned(pr("a", owners=()), pv())
    no_uid = pv()
    del no_uid["metadata"]["uid"]
    assert not is_owned(pr("a", owners=({"name": "variant"},)), no_uid)


def test_nothing_owned_means_a_clone() -> None:
    theirs = [pr("packagevariant-1", 1, "Published", owners=(THEIRS,)), pr("packagevariant-2", owners=())]
    plan = plan_downstreams(pv(), theirs)
    assert plan == DownstreamPlan()
    assert plan.needs_clone


def test_drafts_beat_published_revisions() -> None:
    draft, published = pr("packagevariant-2", 0, "Proposed"), pr("packagevariant-1", 1, "Published")
    with unchanged(draft, published):
        plan = plan_downstreams(pv(), [published, draft])
    assert plan == DownstreamPlan(targets=(draft,))
    assert plan.targets[0] is not draft
    assert not plan.needs_clone


def test_the_highest_published_revision_wins_strictly() -> None:
    first_3, second_3 = pr("a", 3, "Published"), pr("b", 3, "Published")
    plan = plan_downstreams(pv(), [pr("x", 2, "Published"), first_3, second_3, pr("y", 1, "Published")])
    assert plan.targets == (first_3,)
    assert plan_downstreams(pv(), [pr("main", -1, "Published")]).needs_clone


def test_an_empty_lifecycle_counts_as_a_draft() -> None:
    empty = pr("packagevariant-1", 0, "")
    assert plan_downstreams(pv(), [pr("v1", 1, "Published"), empty]).targets == (empty,)


def test_deletion_proposed_counts_as_published_and_is_published_again() -> None:
    doomed, older = pr("packagevariant-4", 4, "DeletionProposed"), pr("packagevariant-3", 3, "Published")
    with unchanged(doomed, older):
        plan = plan_downstreams(pv(), [older, doomed])
    assert plan.targets == plan.to_republish == (with_lifecycle(doomed, "Published"),)
    assert plan.to_adopt == plan.to_delete == plan.to_mark_deletion_proposed == ()


def test_owned_revisions_of_another_package_are_deleted_by_lifecycle() -> None:
    draft, proposed, empty = pr("a", 0, "Draft", package="old"), pr("b", 0, "Proposed", package="old"), pr(
        "c", 0, "", repo="old")
    published, doomed = pr("d", 1, "Published", package="old"), pr("e", 2, "DeletionProposed", package="old")
    odd = pr("f", 2, "Weird", package="old")
    listed = [draft, proposed, empty, published, doomed, odd, pr("g", 1, "Published", package="old", owners=())]
    with unchanged(listed):
        plan = plan_downstreams(pv(), listed)
    assert plan == DownstreamPlan(to_delete=(draft, proposed, empty),
                                  to_mark_deletion_proposed=(with_lifecycle(published, "DeletionProposed"),))
    assert plan.to_delete[0] is draft


def test_owned_revisions_of_another_package_are_orphaned_by_the_orphan_policy() -> None:
    shared, alone = pr("a", 1, "Published", package="old", owners=(THEIRS, OURS)), pr("b", 0, package="old")
    with unchanged(shared, alone):
        plan = plan_downstreams(pv(deletionPolicy="orphan"), [shared, alone])
    expected_shared = copy.deepcopy(shared)
    expected_shared["metadata"]["ownerReferences"] = [THEIRS]
    assert plan == DownstreamPlan(to_orphan=(expected_shared, without_owners(alone)))


def test_an_invalid_deletion_policy_disposes_of_nothing() -> None:
    assert plan_downstreams(pv(deletionPolicy="keep"), [pr("a", package="old")]) == DownstreamPlan()


def test_adopt_none_ignores_unowned_revisions() -> None:
    assert plan_downstreams(pv(adoptionPolicy="adoptNone"), [pr("v1", 1, "Published", owners=())]).needs_clone


def test_adopt_existing_adopts_every_matching_unowned_revision_in_list_order() -> None:
    theirs = pr("v2", 2, "Published", owners=(THEIRS,))
    theirs["metadata"]["labels"] = {"team": "old", "keep": "me"}
    placeholder, elsewhere = pr("main", -1, "Published", owners=()), pr("v9", 9, "Published", owners=(),
                                                                      package="other")
    ours = pr("v1", 1, "Published")
    variant = pv(adoptionPolicy="adoptExisting", labels={"team": "new"}, annotations={"note": "yes"})
    with unchanged(theirs, placeholder, elsewhere, ours, variant):
        plan = plan_downstreams(variant, [placeholder, ours, theirs, elsewhere])
    adopted_theirs = copy.deepcopy(theirs)
    adopted_theirs["metadata"].update(ownerReferences=[THEIRS, OURS], labels={"team": "new", "keep": "me"},
                                      annotations={"note": "yes"})
    adopted_placeholder = copy.deepcopy(placeholder)
    adopted_placeholder["metadata"].update(ownerReferences=[OURS], labels={"team": "new"},
                                           annotations={"note": "yes"})
    assert plan == DownstreamPlan(targets=(adopted_theirs,), to_adopt=(adopted_placeholder, adopted_theirs))
    assert plan.targets[0] is not plan.to_adopt[1]


def test_adoption_without_labels_leaves_the_labels_alone() -> None:
    unowned = pr("v1", 1, "Published", owners=())
    plan = plan_downstreams(pv(adoptionPolicy="adoptExisting", labels={}), [unowned])
    assert plan.to_adopt == (dict(unowned, metadata={**unowned["metadata"], "ownerReferences": [OURS]}),)
    assert "labels" not in plan.to_adopt[0]["metadata"]


def test_an_adopted_deletion_proposed_target_is_written_once() -> None:
    doomed = pr("v4", 4, "DeletionProposed", owners=())
    plan = plan_downstreams(pv(adoptionPolicy="adoptExisting"), [doomed])
    expected = with_lifecycle(doomed, "Published")
    expected["metadata"]["ownerReferences"] = [OURS]
    assert plan == DownstreamPlan(targets=(expected,), to_republish=(expected,))
    assert plan.targets[0] is not plan.to_republish[0]


def test_revisions_of_other_namespaces_are_ignored() -> None:
    assert plan_downstreams(pv(), [pr("v1", 1, "Published", namespace="other")]).needs_clone


# Improvement: at most one draft per variant and downstream


def test_several_drafts_are_reduced_to_the_highest_workspace_number() -> None:
    two, ten, odd = pr("packagevariant-2"), pr("packagevariant-10", 0, "Proposed"), pr("hand-made")
    listed = [two, ten, odd, pr("v1", 1, "Published")]
    with unchanged(listed):
        plan = plan_downstreams(pv(), listed)
    assert plan.targets == (ten,)
    assert plan.to_delete == (two, odd)
    assert plan.extra_drafts == (
        ExtraDraft(two, 'deleted: package variant "variant" keeps one draft per downstream, '
                        '"deploy.site.packagevariant-10"'),
        ExtraDraft(odd, 'deleted: package variant "variant" keeps one draft per downstream, '
                        '"deploy.site.packagevariant-10"'))


def test_extra_drafts_follow_the_orphan_policy() -> None:
    one, two = pr("packagevariant-1"), pr("packagevariant-2")
    plan = plan_downstreams(pv(deletionPolicy="orphan"), [one, two])
    assert plan.targets == (two,)
    assert plan.to_orphan == (without_owners(one),)
    assert plan.to_delete == ()
    assert plan.extra_drafts[0].reason.startswith("orphaned: ")


def test_equal_workspace_numbers_keep_the_first_draft_in_list_order() -> None:
    first, second = pr("alpha"), pr("beta")
    assert plan_downstreams(pv(), [first, second]).targets == (first,)


def test_an_unowned_extra_draft_is_neither_adopted_nor_deleted() -> None:
    ours, unowned_high, unowned_low = pr("packagevariant-1"), pr("packagevariant-5", owners=()), pr(
        "packagevariant-0", owners=())
    plan = plan_downstreams(pv(adoptionPolicy="adoptExisting"), [unowned_low, ours, unowned_high])
    adopted = copy.deepcopy(unowned_high)
    adopted["metadata"]["ownerReferences"] = [OURS]
    assert plan.targets == plan.to_adopt == (adopted,)
    assert plan.to_delete == (ours,)
    assert [extra.reason.split(":")[0] for extra in plan.extra_drafts] == ["not adopted", "deleted"]
    assert [extra.pr for extra in plan.extra_drafts] == [unowned_low, ours]


# b.6: the upstream of a target


def test_needs_upgrade_is_false_when_up_to_date_and_true_for_a_stale_published_downstream() -> None:
    upstream = pr("v3.0.0", -1, "Published", repo="blueprints", package="base", owners=())
    lock = {"upstreamLock": {"git": {"ref": "base/v2.0.0", "directory": "base"}}}
    assert needs_upgrade(pr("packagevariant-1", 1, "Published", status=lock), upstream)
    assert needs_upgrade(pr("packagevariant-1", 1, "DeletionProposed", status=lock), upstream)
    lock["upstreamLock"]["git"]["ref"] = "base/v3.0.0"
    assert not needs_upgrade(pr("packagevariant-1", 0, "Draft", status=lock), upstream)


def test_a_stale_draft_is_porchs_error() -> None:
    upstream = pr("v2", 2, "Published", repo="blueprints", package="base", owners=())
    lock = {"upstreamLock": {"git": {"ref": "base/v1"}}}
    for lifecycle in ("Draft", "Proposed", ""):
        with pytest.raises(DownstreamNotPublished) as caught:
            needs_upgrade(pr("packagevariant-2", 0, lifecycle, status=lock), upstream)
        assert str(caught.value) == ('cannot update upstream of downstream "deploy.site.packagevariant-2" '
                                     "when it is not published")


# b.7: new drafts


def test_workspace_numbers() -> None:
    assert [workspace_number(ws) for ws in ("packagevariant-7", "packagevariant-x", "packagevariant-",
                                             "other-9", "packagevariant-+5", "packagevariant--3", None)] == [
        7, 0, 0, 0, 5, -3, 0]
    listed = [pr("packagevariant-3"), pr("packagevariant-x"), pr("other-99"), pr("packagevariant-10", repo="r2"),
              pr("packagevariant-11", package="p2")]
    assert new_workspace_name(listed, "site", "deploy") == "packagevariant-4"
    assert new_workspace_name([pr("packagevariant-x"), pr("main")], "site", "deploy") == "packagevariant-1"
    assert new_workspace_name([], "site", "deploy") == "packagevariant-1"


def test_a_missing_package_or_repository_counts_as_empty_in_workspace_numbers() -> None:
    # Porch's newWorkspaceName compares Go strings, where a field left out of the JSON is "".
    unnamed = [{"spec": {"workspaceName": "packagevariant-7"}},
               {"spec": {"packageName": "", "repository": "", "workspaceName": "packagevariant-5"}},
               {"spec": {"packageName": None, "repository": "deploy", "workspaceName": "packagevariant-8"}}]
    assert new_workspace_name(unnamed, "", "") == "packagevariant-8"
    assert new_workspace_name(unnamed, "", "deploy") == "packagevariant-9"
    assert new_workspace_name([{"spec": {"workspaceName": "packagevariant-2"}}], "site", "deploy") == "packagevariant-1"


def test_the_clone_draft() -> None:
    variant = pv(labels={"env": "prod"}, annotations={"team": "a"})
    upstream = pr("v3.0.0", -1, "Published", repo="blueprints", package="base", owners=())
    listed = [pr("packagevariant-2", owners=()), pr("packagevariant-9", namespace="other")]
    with unchanged(variant, upstream, listed):
        draft = clone_draft(variant, upstream, listed)
    assert draft == {
        "apiVersion": "porch.kpt.dev/v1alpha1", "kind": "PackageRevision",
        "metadata": {"namespace": "ns", "ownerReferences": [OURS], "labels": {"env": "prod"},
                     "annotations": {"team": "a"}},
        "spec": {"packageName": "site", "repository": "deploy", "workspaceName": "packagevariant-3",
                 "tasks": [{"type": "clone", "clone": {"upstreamRef": {"upstreamRef": {
                     "name": "blueprints.base.v3.0.0"}}}}]}}
    draft["metadata"]["labels"]["env"] = "dev"
    assert variant["spec"]["labels"] == {"env": "prod"}
    assert "labels" not in clone_draft(pv(labels={}), upstream, [])["metadata"]


def test_the_placeholder_is_never_cloned() -> None:
    placeholder = pr("main", -1, "Published", repo="blueprints", package="base", owners=())
    variant = pv(upstream={"repo": "blueprints", "package": "base"})
    assert find_upstream(variant, [placeholder]) is placeholder
    with pytest.raises(PlaceholderUpstream, match="names neither spec.upstream.workspaceName"):
        clone_draft(variant, placeholder, [])


SOURCE = pr("packagevariant-4", 4, "Published", owners=(OURS, THEIRS), namespace="ns",
            status={"upstreamLock": {"git": {"ref": "base/v2.0.0", "directory": "base"}}})
SOURCE["metadata"]["labels"] = {"source": "label"}
SOURCE["spec"].update(readinessGates=[{"conditionType": "Ready"}], tasks=[{"type": "clone"}],
                      packageMetadata={"labels": {"a": "b"}})


def test_the_edit_draft_copies_the_source_spec() -> None:
    variant = pv(labels={"env": "prod"})
    listed = [SOURCE, pr("packagevariant-6", 0, "Draft", owners=())]
    with unchanged(variant, listed):
        draft = edit_draft(variant, SOURCE, listed)
    assert draft == {
        "apiVersion": "porch.kpt.dev/v1alpha1", "kind": "PackageRevision",
        "metadata": {"namespace": "ns", "ownerReferences": [OURS], "labels": {"env": "prod"}},
        "spec": {"repository": "deploy", "packageName": "site", "workspaceName": "packagevariant-7", "revision": 0,
                 "lifecycle": "Draft", "readinessGates": [{"conditionType": "Ready"}],
                 "packageMetadata": {"labels": {"a": "b"}},
                 "tasks": [{"type": "edit", "edit": {"sourceRef": {"name": "deploy.site.packagevariant-4"}}}]}}
    draft["spec"]["packageMetadata"]["labels"]["a"] = "changed"
    assert SOURCE["spec"]["packageMetadata"] == {"labels": {"a": "b"}}


def test_switching_upstream_tags_plans_an_upgrade_draft() -> None:
    tag_2 = pr("v2.0.0", -1, "Published", repo="blueprints", package="base", owners=())
    tag_3 = pr("v3.0.0", -1, "Published", repo="blueprints", package="base", owners=())
    placeholder = pr("main", -1, "Published", repo="blueprints", package="base", owners=())
    listed = [placeholder, tag_2, tag_3, SOURCE]
    variant = pv()
    with unchanged(variant, listed):
        upstream = find_upstream(variant, listed)
        (target,) = plan_downstreams(variant, listed).targets
        assert needs_upgrade(target, upstream)
        old = find_locked_upstream(variant, target, listed)
        draft = upgrade_draft(variant, target, old, upstream, listed)
    assert (upstream, old) == (tag_3, tag_2)
    assert draft["spec"]["workspaceName"] == "packagevariant-5"
    assert draft["spec"]["tasks"] == [{"type": "upgrade", "upgrade": {
        "oldUpstreamRef": {"name": "blueprints.base.v2.0.0"}, "newUpstreamRef": {"name": "blueprints.base.v3.0.0"},
        "localPackageRevisionRef": {"name": "deploy.site.packagevariant-4"}, "strategy": "resource-merge"}}]
    assert (draft["spec"]["revision"], draft["spec"]["lifecycle"]) == (0, "Draft")
    assert draft["metadata"] == {"namespace": "ns", "ownerReferences": [OURS]}


def test_an_upgrade_from_or_to_a_placeholder_is_refused() -> None:
    placeholder = pr("main", -1, "Published", repo="blueprints", package="base", owners=())
    tag = pr("v3.0.0", -1, "Published", repo="blueprints", package="base", owners=())
    with pytest.raises(PlaceholderUpstream, match=r"\Aupstream package revision"):
        upgrade_draft(pv(), SOURCE, tag, placeholder, [])
    with pytest.raises(PlaceholderUpstream, match=r"\Aold upstream package revision"):
        upgrade_draft(pv(), SOURCE, placeholder, tag, [])


def test_the_owner_reference_falls_back_to_the_packagevariant_kind() -> None:
    bare = pv()
    del bare["apiVersion"], bare["kind"]
    assert owner_reference(bare) == owner_reference(pv()) == OURS


# b.8: deleting the PackageVariant


def test_deleting_the_variant_with_the_delete_policy() -> None:
    draft, published = pr("a", 0, "Draft", package="old"), pr("b", 1, "Published")
    doomed, unowned = pr("c", 2, "DeletionProposed", owners=(THEIRS, OURS)), pr("d", 0, "Draft", owners=(THEIRS,))
    listed = [draft, published, doomed, unowned, pr("e", 0, "Draft", namespace="other")]
    with unchanged(listed):
        plan = deletion_plan(pv(), listed)
    doomed_orphan = copy.deepcopy(doomed)
    doomed_orphan["metadata"]["ownerReferences"] = [THEIRS]
    assert plan == DeletionPlan(to_delete=(draft,), to_orphan=(doomed_orphan,),
                                to_mark_deletion_proposed=(without_owners(with_lifecycle(published,
                                                                                         "DeletionProposed")),))


def test_deleting_the_variant_with_the_orphan_policy() -> None:
    draft, published, doomed = pr("a"), pr("b", 1, "Published"), pr("c", 2, "DeletionProposed")
    plan = deletion_plan(pv(deletionPolicy="orphan"), [draft, published, doomed])
    assert plan == DeletionPlan(to_orphan=tuple(without_owners(obj) for obj in (draft, published, doomed)))


def test_deleting_the_variant_with_an_invalid_policy_only_orphans_deletion_proposed() -> None:
    doomed = pr("c", 2, "DeletionProposed")
    plan = deletion_plan(pv(deletionPolicy="keep"), [pr("a"), pr("b", 1, "Published"), doomed])
    assert plan == DeletionPlan(to_orphan=(without_owners(doomed),))
    assert deletion_plan(pv(deletionPolicy=""), [pr("a")]) == DeletionPlan(to_delete=(pr("a"),))


# b.9: status.downstreamTargets


def test_downstream_targets_keep_previous_entries_and_take_new_render_statuses() -> None:
    failed = {"error": "render failed", "result": {"exitCode": 1}}
    previous = [{"name": "deploy.site.a", "renderStatus": {"error": "", "result": {"exitCode": 0}}},
                {"name": "deploy.site.gone"}, {"name": "deploy.site.b", "renderStatus": {"error": "old"}},
                {"name": "deploy.site.a", "renderStatus": {"error": "second"}}]
    statuses = {"deploy.site.b": failed, "deploy.site.c": {"error": ""}, "deploy.site.unlisted": {"error": ""}}
    targets = [pr("c"), pr("a"), pr("b"), pr("new")]
    with unchanged(previous, statuses, targets):
        out = downstream_targets(previous, targets, statuses)
    assert out == [{"name": "deploy.site.c", "renderStatus": {"error": ""}},
                   {"name": "deploy.site.a", "renderStatus": {"error": "", "result": {"exitCode": 0}}},
                   {"name": "deploy.site.b", "renderStatus": failed},
                   {"name": "deploy.site.new"}]
    out[1]["renderStatus"]["result"]["exitCode"] = 9
    out[2]["renderStatus"]["error"] = "changed"
    assert previous[0]["renderStatus"]["result"] == {"exitCode": 0}
    assert failed["error"] == "render failed"
    assert downstream_targets(None, [], None) == []
