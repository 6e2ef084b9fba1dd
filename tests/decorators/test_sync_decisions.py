"""The decisions of a sync pass, apart from the writes and hook calls that carry them out."""

from __future__ import annotations

import pytest

from decorators.sync import first_step, hook_to_call


@pytest.mark.parametrize("deleting", [False, True])
@pytest.mark.parametrize("release_asked", [False, True])
def test_a_target_we_neither_select_nor_hold_is_left_alone(deleting: bool, release_asked: bool) -> None:
    assert first_step(selected=False, held=False, deleting=deleting, release_asked=release_asked) == "none"


def test_a_target_being_deleted_without_our_finalizer_is_left_to_the_garbage_collector() -> None:
    assert first_step(selected=True, held=False, deleting=True, release_asked=False) == "none"
    assert hook_to_call(selected=True, held=False, deleting=True) == "none"


@pytest.mark.parametrize("selected", [False, True])
@pytest.mark.parametrize("deleting", [False, True])
def test_an_operator_may_make_us_let_go_of_a_held_target(selected: bool, deleting: bool) -> None:
    assert first_step(selected=selected, held=True, deleting=deleting, release_asked=True) == "release"


def test_release_asked_of_a_target_we_do_not_hold_changes_nothing() -> None:
    assert first_step(selected=True, held=False, deleting=False, release_asked=True) == "go"


@pytest.mark.parametrize(("selected", "held", "deleting", "hook"), [
    (True, False, False, "sync"),       # a live selected target, no finalize hook
    (True, True, False, "sync"),        # the same, with our finalizer
    (True, True, True, "finalize"),     # being deleted while we hold it
    (False, True, False, "finalize"),   # no longer selected while we hold it
    (False, True, True, "finalize"),
    (False, False, False, "none"),      # we just let go of it
])
def test_the_hook_called_follows_deletion_selection_and_our_finalizer(selected: bool, held: bool, deleting: bool,
                                                                     hook: str) -> None:
    assert hook_to_call(selected=selected, held=held, deleting=deleting) == hook
