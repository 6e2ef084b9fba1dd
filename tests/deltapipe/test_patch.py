"""Δ-controller's Patcher merge: maps merge, null deletes, lists merge by index."""

from __future__ import annotations

import copy

from hypothesis import given
from hypothesis import strategies as st

from deltapipe.patch import merge_patch

JSON = st.recursive(st.none() | st.booleans() | st.integers(-5, 5) | st.text("ab", max_size=2),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text("abc", max_size=1), inner,
                                                                                 max_size=3), max_leaves=10)


def test_maps_merge_recursively_and_null_deletes_a_key() -> None:
    original = {"metadata": {"name": "a", "labels": {"x": "1", "y": "2"}}, "spec": {"r": 1}}
    patch = {"metadata": {"labels": {"y": None, "z": "3"}}, "spec": {"r": 2}}
    assert merge_patch(original, patch) == {"metadata": {"name": "a", "labels": {"x": "1", "z": "3"}},
                                            "spec": {"r": 2}}


def test_lists_merge_by_index_keeping_surplus_originals_and_appending_extra_patch_elements() -> None:
    assert merge_patch([{"a": 1}, {"b": 2}, 3], [{"c": 4}]) == [{"a": 1, "c": 4}, {"b": 2}, 3]
    assert merge_patch([1], [5, 6, 7]) == [5, 6, 7]


def test_a_type_mismatch_replaces() -> None:
    assert merge_patch({"a": [1]}, {"a": {"b": 1}}) == {"a": {"b": 1}}
    assert merge_patch({"a": {"b": 1}}, {"a": "s"}) == {"a": "s"}


def test_nulls_inside_a_new_subtree_are_not_written() -> None:
    assert merge_patch({}, {"a": {"b": None, "c": 1}}) == {"a": {"c": 1}}


@given(JSON, JSON)
def test_merging_is_idempotent_and_leaves_its_arguments_alone(original: object, patch: object) -> None:
    before = (copy.deepcopy(original), copy.deepcopy(patch))
    once = merge_patch(original, patch)
    assert merge_patch(once, patch) == once
    assert (original, patch) == before
