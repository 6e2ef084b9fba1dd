"""decorators.settled and sync.again: when a pass may skip the sync hook, decided on plain values."""

from __future__ import annotations

from decorators.protocol import SyncResponse
from decorators.settled import CATCH_UP, Memory, Seen, verdict
from decorators.sync import again
from reconcile import Kind, ObjectKey
from reconcile.children import Change

CONFIGMAP = Kind("v1", "ConfigMap")
NOW = 100.0


def seen(target: str = "u1/10", attachments: dict[str, str] | None = None, related: dict[str, str] | None = None,
         due: float | None = None, at: float = NOW) -> Seen:
    """A Seen of target `uid/resourceVersion`, with ConfigMap attachments and related objects name -> version."""
    return Seen(target, frozenset(("/ConfigMap", "default", name, rv) for name, rv in (attachments or {}).items()),
                frozenset(("ConfigMap.v1", "default", name, rv) for name, rv in (related or {}).items()), due, at)


LAST = seen(attachments={"web-a": "12"}, related={"settings": "7"})


def test_no_memory_asks() -> None:
    assert verdict(None, seen(), NOW) == "ask"


def test_the_state_a_pass_left_is_its_echo() -> None:
    assert verdict(LAST, seen(attachments={"web-a": "12"}, related={"settings": "7"}), NOW + 1) == "unchanged"


def test_a_resync_due_asks_though_nothing_changed() -> None:
    last = seen(attachments={"web-a": "12"}, related={"settings": "7"}, due=NOW + 30)
    now = seen(attachments={"web-a": "12"}, related={"settings": "7"})
    assert verdict(last, now, NOW + 29) == "unchanged"
    assert verdict(last, now, NOW + 30) == "ask"


def test_an_attachment_changed_by_someone_else_asks_even_before_our_write_is_seen() -> None:
    # we stored version 12; someone wrote 13 on top of it before either watch event arrived
    assert verdict(LAST, seen(attachments={"web-a": "13"}, related={"settings": "7"}), NOW) == "ask"


def test_a_cache_behind_our_writes_waits_then_asks() -> None:
    for lagging in ({}, {"web-a": "11"}):  # our create not seen yet; an older version of what we updated
        now = seen(attachments=lagging, related={"settings": "7"})
        assert verdict(LAST, now, NOW + 0.1) == "behind"
        assert verdict(LAST, now, NOW + CATCH_UP) == "ask"  # someone else may have deleted it: ask at last


def test_a_target_behind_our_write_back_waits_but_a_newer_one_asks() -> None:
    last = seen("u1/20", attachments={"web-a": "12"})
    assert verdict(last, seen("u1/19", attachments={"web-a": "12"}), NOW) == "behind"
    assert verdict(last, seen("u1/21", attachments={"web-a": "12"}), NOW) == "ask"
    assert verdict(last, seen("u2/19", attachments={"web-a": "12"}), NOW) == "ask"  # another object of that name
    assert verdict(last, seen("u2/30"), NOW) == "ask"  # whose attachments are not the old one's to wait for


def test_a_change_by_someone_else_asks_once_the_cache_shows_our_own_writes() -> None:
    # The watches dropped our create's echo: asking before the cache has it would leave a memory
    # without it, and no event would ever correct that.
    assert verdict(LAST, seen(attachments={"web-a": "12"}, related={"settings": "8"}), NOW) == "ask"
    assert verdict(LAST, seen(attachments={}, related={"settings": "8"}), NOW) == "behind"
    assert verdict(LAST, seen("u1/11", attachments={}, related={"settings": "7"}), NOW) == "behind"
    assert verdict(LAST, seen("u1/11", attachments={"web-a": "12"}, related={"settings": "7"}), NOW) == "ask"


def test_an_attachment_we_did_not_leave_is_waited_for_then_asked_about() -> None:
    now = seen(attachments={"web-a": "12", "web-b": "3"}, related={"settings": "7"})
    assert verdict(LAST, now, NOW) == "behind"
    assert verdict(LAST, now, NOW + CATCH_UP) == "ask"


def test_the_watch_filters_know_exactly_the_versions_a_pass_left() -> None:
    memory = Memory()
    key = ObjectKey("default", "web")
    memory.put(key, seen("u1/10", attachments={"web-a": "12"}))
    target = {"metadata": {"namespace": "default", "name": "web", "uid": "u1", "resourceVersion": "10"}}
    assert memory.wrote_target(target)
    assert not memory.wrote_target({**target, "metadata": {**target["metadata"], "resourceVersion": "11"}})
    attachment = {"metadata": {"namespace": "default", "name": "web-a", "resourceVersion": "12"}}
    assert memory.wrote_attachment(key, CONFIGMAP, attachment)
    newer = {"metadata": {**attachment["metadata"], "resourceVersion": "13"}}
    assert not memory.wrote_attachment(key, CONFIGMAP, newer)
    memory.forget(key)
    assert not memory.wrote_target(target)


def answer(**fields: object) -> SyncResponse:
    values: dict[str, object] = {"labels": None, "annotations": None, "status": None, "attachments": (),
                                 "resync_after": None, "finalized": False}
    values.update(fields)
    return SyncResponse(**values)  # type: ignore[arg-type]


CREATE = Change("create", CONFIGMAP, ObjectKey("default", "web-a"), "12")


def test_a_hook_answering_attachments_alone_is_asked_once() -> None:
    assert not again("sync", answer(), [CREATE])


def test_a_hook_reporting_on_its_target_sees_the_attachments_it_created() -> None:
    assert again("sync", answer(annotations={"seen": "0"}), [CREATE])
    assert not again("sync", answer(annotations={"seen": "1"}), [])  # nothing changed: its report stands


def test_deletes_and_a_waiting_finalize_hook_are_asked_again() -> None:
    assert again("sync", answer(), [Change("delete", CONFIGMAP, ObjectKey("default", "web-a"))])
    assert again("finalize", answer(finalized=False), [])
    assert not again("finalize", answer(finalized=True), [])


def test_a_pass_marked_again_asks_once_the_cache_shows_its_writes_and_not_before() -> None:
    last = Seen(LAST.target, LAST.attachments, LAST.related, at=NOW, again=True)
    assert verdict(last, seen(attachments={}, related={"settings": "7"}), NOW) == "behind"
    assert verdict(last, seen(attachments={"web-a": "12"}, related={"settings": "7"}), NOW) == "ask"
    memory = Memory()
    memory.put(ObjectKey("default", "web"), last)
    attachment = {"metadata": {"namespace": "default", "name": "web-a", "resourceVersion": "12"}}
    assert not memory.wrote_attachment(ObjectKey("default", "web"), CONFIGMAP, attachment)  # its echo must wake us
