"""porchvariant.upstream: finding a PackageVariant's upstream, and whether a downstream is based on it."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from porchvariant.errors import PorchVariantError
from porchvariant.upstream import (
    LockedRef,
    PlaceholderUpstream,
    UpstreamNotFound,
    check_clonable,
    find_locked_upstream,
    find_published_upstream_by_revision,
    find_upstream,
    go_quote,
    is_placeholder,
    is_up_to_date,
    locked_ref,
    revision_from_lock,
)


def pr(repo: str, package: str, ws: str, revision: int = 0, lifecycle: str = "Published", *,
       namespace: str = "ns", lock: dict[str, Any] | None = None, self_commit: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {
        "apiVersion": "porch.kpt.dev/v1alpha1", "kind": "PackageRevision",
        "metadata": {"name": f"{repo}.{package}.{ws}", "namespace": namespace},
        "spec": {"repository": repo, "packageName": package, "workspaceName": ws, "revision": revision,
                 "lifecycle": lifecycle}}
    if lock is not None:
        out["status"] = {"upstreamLock": {"type": "git", "git": lock}}
    if self_commit:
        out.setdefault("status", {})["selfLock"] = {"type": "git", "git": {"commit": self_commit}}
    return out


def pv(**upstream: Any) -> dict[str, Any]:
    return {"apiVersion": "config.porch.kpt.dev/v1alpha1", "kind": "PackageVariant",
            "metadata": {"name": "variant", "namespace": "ns", "uid": "pv-uid"},
            "spec": {"upstream": {"repo": "blueprints", "package": "base", **upstream},
                     "downstream": {"repo": "deploy", "package": "site"}}}


def downstream(ref: str | None, *, commit: str = "", directory: str = "base") -> dict[str, Any]:
    lock = None if ref is None else {"repo": "https://example.com/blueprints.git", "directory": directory,
                                     "ref": ref, **({"commit": commit} if commit else {})}
    return pr("deploy", "site", "packagevariant-1", 1, lock=lock)


@contextmanager
def unchanged(*objs: Any) -> Iterator[None]:
    before = copy.deepcopy(objs)
    yield
    assert objs == before


PLACEHOLDER = pr("blueprints", "base", "main", -1)
V1 = pr("blueprints", "base", "v1", 1)
V2 = pr("blueprints", "base", "v2", 2)
TAG_2 = pr("blueprints", "base", "v2.0.0", -1)
TAG_3 = pr("blueprints", "base", "v3.0.0", -1)
DRAFT = pr("blueprints", "base", "wip", 0, "Draft")
REVISIONS = [pr("blueprints", "other", "main", -1), pr("catalog", "base", "main", -1),
             pr("blueprints", "base", "main", -1, namespace="elsewhere"), PLACEHOLDER, V1, V2, TAG_2, TAG_3, DRAFT]


# b.4: find_upstream


def test_a_workspace_name_picks_the_first_revision_of_that_workspace_in_any_lifecycle() -> None:
    with unchanged(REVISIONS):
        assert find_upstream(pv(workspaceName="wip"), REVISIONS) is DRAFT
        assert find_upstream(pv(workspaceName="v2"), REVISIONS) is V2
        twin = pr("blueprints", "base", "v2", 7)
        assert find_upstream(pv(workspaceName="v2"), [twin, V2]) is twin


def test_a_workspace_name_wins_over_a_revision() -> None:
    assert find_upstream(pv(workspaceName="v1", revision=2), REVISIONS) is V1


def test_a_revision_picks_the_published_revision_with_that_number() -> None:
    proposed = pr("blueprints", "base", "next", 3, "Proposed")
    deletion_proposed = pr("blueprints", "base", "old", 3, "DeletionProposed")
    assert find_upstream(pv(revision=2), REVISIONS) is V2
    assert find_upstream(pv(revision=1), REVISIONS) is V1
    assert find_upstream(pv(revision=3), [*REVISIONS, proposed, deletion_proposed]) is deletion_proposed


def test_without_workspace_or_revision_the_main_placeholder_is_picked_as_porch_does() -> None:
    for spec in ({}, {"revision": -1}, {"revision": 0}, {"workspaceName": ""}):
        assert find_upstream(pv(**spec), REVISIONS) is PLACEHOLDER


def test_only_the_upstream_repository_package_and_namespace_count() -> None:
    # another package, another repository, another namespace: each a "main" placeholder
    with pytest.raises(UpstreamNotFound):
        find_upstream(pv(), REVISIONS[:3])
    assert find_upstream(pv(), [*REVISIONS[:3], PLACEHOLDER]) is PLACEHOLDER


def test_not_found_is_porchs_message_with_gos_struct_formatting() -> None:
    with pytest.raises(UpstreamNotFound) as caught:
        find_upstream(pv(workspaceName="v9", revision=4), REVISIONS)
    assert str(caught.value) == ('could not find upstream package revision &v1alpha1.Upstream{Repo:"blueprints", '
                                 'Package:"base", Revision:-1, WorkspaceName:"v9"}')
    assert isinstance(caught.value, PorchVariantError)
    assert (caught.value.repo, caught.value.package, caught.value.revision) == ("blueprints", "base", -1)
    with pytest.raises(UpstreamNotFound, match=r'Revision:-1, WorkspaceName:""}\Z'):
        find_upstream(pv(), [V1])


def test_not_found_shows_the_revision_when_it_was_looked_up() -> None:
    with pytest.raises(UpstreamNotFound) as caught:
        find_upstream(pv(revision=9), REVISIONS)
    assert str(caught.value) == ('could not find upstream package revision &v1alpha1.Upstream{Repo:"blueprints", '
                                 'Package:"base", Revision:9, WorkspaceName:""}')


def test_a_draft_is_not_found_by_revision() -> None:
    odd_draft = pr("blueprints", "base", "odd", 5, "Draft")
    with pytest.raises(UpstreamNotFound):
        find_upstream(pv(revision=5), [odd_draft])


def test_go_quote_escapes_as_strconv_quote() -> None:
    assert go_quote('a"b\\c\n\t\x01\x7fé\u200b😀\U0010ffff') == (
        '"a\\"b\\\\c\\n\\t\\x01\\x7fé\\u200b😀\\U0010ffff"')
    assert go_quote("") == '""'


# b.4: getPublishedUpstreamByRevision


def test_published_by_revision_ignores_the_workspace_and_takes_deletion_proposed() -> None:
    deletion_proposed = pr("blueprints", "base", "x", 4, "DeletionProposed")
    assert find_published_upstream_by_revision(pv(workspaceName="v2"), 1, REVISIONS) is V1
    assert find_published_upstream_by_revision(pv(), 4, [deletion_proposed]) is deletion_proposed


def test_published_by_revision_errors() -> None:
    with pytest.raises(PorchVariantError, match=r"\Aupstream cannot be published with revision number 0\Z"):
        find_published_upstream_by_revision(pv(), 0, REVISIONS)
    with pytest.raises(UpstreamNotFound) as caught:
        find_published_upstream_by_revision(pv(workspaceName="v3.0.0"), 5,
                                            [*REVISIONS, pr("blueprints", "base", "d", 5, "Draft")])
    assert str(caught.value) == ('could not find upstream package revision &v1alpha1.Upstream{Repo:"blueprints", '
                                 'Package:"base", Revision:5, WorkspaceName:"v3.0.0"}')


# b.6: upstreamLock refs


@pytest.mark.parametrize(("ref", "expected"), [
    ("base/v3", LockedRef("published", "base", "v3", 3)),
    ("catalog/base/v12", LockedRef("published", "catalog/base", "v12", 12)),
    ("refs/tags/base/v3", LockedRef("published", "base", "v3", 3)),
    ("base/v2.0.0", LockedRef("tag", "base", "v2.0.0", -1)),
    ("drafts/catalog/base/wip", LockedRef("draft", "catalog/base", "wip", -1)),
    ("drafts/base/v3", LockedRef("draft", "base", "v3", -1)),
    ("proposed/base/wip", LockedRef("proposed", "base", "wip", -1)),
    ("main", LockedRef("branch", "", "main", -1)),
    ("refs/heads/main", LockedRef("branch", "", "main", -1)),
])
def test_lock_refs_are_parsed(ref: str, expected: LockedRef) -> None:
    assert locked_ref(downstream(ref)) == expected


@pytest.mark.parametrize(("ref", "expected"), [
    ("base/v3", 3), ("a/b/v12", 12), ("base/3", 3), ("base/+4", 4), ("main", -1), ("base/v2.0.0", -1),
    ("base/vv3", -1), ("drafts/base/v7", 7), ("", -1),
])
def test_porchs_revision_from_lock(ref: str, expected: int) -> None:
    assert revision_from_lock(downstream(ref)) == expected


def test_a_downstream_without_a_lock_ref_is_up_to_date_as_in_porch() -> None:
    no_git = pr("deploy", "site", "ws", 1)
    no_git["status"] = {"upstreamLock": {"type": "git"}}
    for target in (pr("deploy", "site", "ws", 1), no_git, downstream(None), downstream("")):
        assert locked_ref(target) is None
        assert is_up_to_date(target, V2)


def test_a_published_lock_is_up_to_date_with_the_same_revision_only() -> None:
    with unchanged(V2, V1):
        assert is_up_to_date(downstream("base/v2"), V2)
        assert is_up_to_date(downstream("catalog/base/v2", directory="catalog/base"), V2)
        assert not is_up_to_date(downstream("base/v1"), V2)
        assert not is_up_to_date(downstream("base/v2"), V1)


def test_a_lock_of_another_package_is_stale() -> None:
    other = pr("blueprints", "other", "v2", 2)
    assert not is_up_to_date(downstream("base/v2"), other)
    assert not is_up_to_date(downstream("xbase/v2"), V2)


def test_switching_tags_is_an_upgrade_where_porch_sees_no_change() -> None:
    stale = downstream("base/v2.0.0")
    assert revision_from_lock(stale) == TAG_3["spec"]["revision"] == -1  # Porch: "up to date"
    assert not is_up_to_date(stale, TAG_3)
    assert is_up_to_date(stale, TAG_2)
    assert not is_up_to_date(stale, V2)


def test_draft_and_proposed_locks_name_that_workspace_in_that_lifecycle() -> None:
    proposed = pr("blueprints", "base", "wip", 0, "Proposed")
    published = pr("blueprints", "base", "wip", 3)
    assert is_up_to_date(downstream("drafts/base/wip"), DRAFT)
    assert not is_up_to_date(downstream("drafts/base/wip"), proposed)
    assert not is_up_to_date(downstream("drafts/base/wip"), published)
    assert is_up_to_date(downstream("proposed/base/wip"), proposed)
    assert not is_up_to_date(downstream("drafts/base/other"), DRAFT)


def test_a_branch_lock_names_the_placeholder() -> None:
    assert is_up_to_date(downstream("main"), PLACEHOLDER)
    assert is_up_to_date(downstream("main", directory=""), PLACEHOLDER)
    assert is_up_to_date(downstream("main", directory="/catalog/base"), PLACEHOLDER)
    assert not is_up_to_date(downstream("main", directory="other"), PLACEHOLDER)
    assert not is_up_to_date(downstream("main"), V1)


def test_commits_are_compared_when_both_are_known() -> None:
    upstream = pr("blueprints", "base", "v2", 2, self_commit="abc")
    assert is_up_to_date(downstream("base/v2", commit="abc"), upstream)
    assert not is_up_to_date(downstream("base/v2", commit="def"), upstream)
    assert is_up_to_date(downstream("base/v2"), upstream)
    assert is_up_to_date(downstream("base/v2", commit="def"), V2)


# The old upstream of an upgrade


def test_the_locked_upstream_of_a_published_lock_is_found_as_porch_does() -> None:
    assert find_locked_upstream(pv(workspaceName="v2"), downstream("base/v1"), REVISIONS) is V1
    with pytest.raises(PorchVariantError, match="revision number 0"):
        find_locked_upstream(pv(), downstream("base/v0"), REVISIONS)


def test_the_locked_upstream_of_a_tag_is_that_tag_not_the_first_revision_minus_one() -> None:
    with unchanged(REVISIONS):
        assert find_locked_upstream(pv(workspaceName="v3.0.0"), downstream("base/v2.0.0"), REVISIONS) is TAG_2
        assert find_locked_upstream(pv(), downstream("drafts/base/wip"), REVISIONS) is DRAFT
        assert find_locked_upstream(pv(), downstream("main"), REVISIONS) is PLACEHOLDER


def test_a_missing_locked_upstream_reports_porchs_number_for_the_ref() -> None:
    with pytest.raises(UpstreamNotFound) as caught:
        find_locked_upstream(pv(workspaceName="v3.0.0"), downstream("base/v1.5.0"), REVISIONS)
    assert str(caught.value) == ('could not find upstream package revision &v1alpha1.Upstream{Repo:"blueprints", '
                                 'Package:"base", Revision:-1, WorkspaceName:"v3.0.0"}')
    with pytest.raises(UpstreamNotFound, match="Revision:7,"):
        find_locked_upstream(pv(), downstream("base/v7"), REVISIONS)


# Placeholders


def test_placeholders_are_revision_minus_one_on_the_branch_workspace() -> None:
    assert is_placeholder(PLACEHOLDER)
    assert not is_placeholder(TAG_2)
    assert not is_placeholder(V1)
    assert is_placeholder(pr("blueprints", "base", "master", -1), branch="master")


def test_cloning_a_placeholder_is_refused_with_the_reason() -> None:
    with pytest.raises(PlaceholderUpstream) as caught:
        check_clonable(pv(), PLACEHOLDER)
    assert str(caught.value) == (
        'upstream package revision "blueprints.base.main" is the placeholder of branch "main" in repository '
        '"blueprints", which Porch refuses to clone from or upgrade with ("upstream revision may not be the '
        'placeholder package revision"); PackageVariant "variant" names neither spec.upstream.workspaceName '
        'nor spec.upstream.revision, so it resolves to the "main" placeholder as Porch does; '
        "set spec.upstream.workspaceName or spec.upstream.revision to a published revision")
    with pytest.raises(PlaceholderUpstream, match=r'\Aold upstream package revision "blueprints.base.main" .*'
                                                  r"\(\"upstream revision may not be the placeholder package "
                                                  r'revision"\); set spec'):
        check_clonable(pv(workspaceName="main"), PLACEHOLDER, role="old upstream")
    check_clonable(pv(), V1)
    check_clonable(pv(), TAG_2)
