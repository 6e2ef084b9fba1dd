"""ETag mode: If-None-Match from a per-object cache, 304 answered from it, and expiry."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from reconcile import FakeClock
from reconcile.hooks import Hook, HookError
from tests.reconcile.hooks.conftest import Server, sync_request

MakeHook = Callable[..., Hook]
WEB = ("StatefulSet", "shop", "web")


def etag_hook(make_hook: MakeHook, server: Server, path: str = "/etag", clock: FakeClock | None = None,
              **etag: Any) -> Hook:
    return make_hook({"webhook": {"url": server.url(path), "etag": {"enabled": True, **etag}}},
                     clock=clock or FakeClock())


def labelled(value: str, etag: str = '"v1"') -> dict[str, Any]:
    """A request to /etag: answer labels {n: value} with `etag`, or 304 when If-None-Match is `etag`."""
    return sync_request(script={"etag": etag, "json": {"labels": {"n": value}}})


def test_a_304_answers_with_the_cached_body(plain: Server, make_hook: MakeHook) -> None:
    hook = etag_hook(make_hook, plain)
    assert hook.call(labelled("first"), cache_key=WEB) == {"labels": {"n": "first"}}
    assert hook.call(labelled("second"), cache_key=WEB) == {"labels": {"n": "first"}}  # 304: not re-sent


def test_a_new_etag_replaces_the_cached_body(plain: Server, make_hook: MakeHook) -> None:
    hook = etag_hook(make_hook, plain)
    hook.call(labelled("first"), cache_key=WEB)
    assert hook.call(labelled("second", etag='"v2"'), cache_key=WEB) == {"labels": {"n": "second"}}
    assert hook.call(labelled("third", etag='"v2"'), cache_key=WEB) == {"labels": {"n": "second"}}


def test_each_object_has_its_own_entry(plain: Server, make_hook: MakeHook) -> None:
    hook = etag_hook(make_hook, plain)
    hook.call(labelled("web"), cache_key=WEB)
    assert hook.call(labelled("db"), cache_key=("StatefulSet", "shop", "db")) == {"labels": {"n": "db"}}
    assert hook.call(labelled("none"), cache_key=None) == {"labels": {"n": "none"}}


def test_the_cached_answer_is_a_fresh_copy_each_time(plain: Server, make_hook: MakeHook) -> None:
    hook = etag_hook(make_hook, plain)
    hook.call(labelled("first"), cache_key=WEB)["labels"]["n"] = "changed by the caller"
    assert hook.call(labelled("second"), cache_key=WEB) == {"labels": {"n": "first"}}


def test_entries_expire_after_cache_timeout_seconds_without_cleanup_seconds(plain: Server,
                                                                            make_hook: MakeHook) -> None:
    clock = FakeClock()
    hook = etag_hook(make_hook, plain, cacheTimeoutSeconds=60, clock=clock)
    hook.call(labelled("first"), cache_key=WEB)
    clock.advance(59)
    assert hook.call(labelled("second"), cache_key=WEB) == {"labels": {"n": "first"}}
    clock.advance(1)
    assert hook.call(labelled("third"), cache_key=WEB) == {"labels": {"n": "third"}}  # no If-None-Match sent


def test_without_a_timeout_entries_never_expire(plain: Server, make_hook: MakeHook) -> None:
    clock = FakeClock()
    hook = etag_hook(make_hook, plain, cacheCleanupSeconds=1, clock=clock)
    hook.call(labelled("first"), cache_key=WEB)
    clock.advance(86_400)
    assert hook.call(labelled("second"), cache_key=WEB) == {"labels": {"n": "first"}}


def test_a_412_answers_with_the_cached_body_too(plain: Server, make_hook: MakeHook) -> None:
    hook = etag_hook(make_hook, plain, path="/script")
    first = sync_request(script={"headers": {"ETag": '"v1"'}, "json": {"labels": {"n": "first"}}})
    assert hook.call(first, cache_key=WEB) == {"labels": {"n": "first"}}
    assert hook.call(sync_request(script={"status": 412}), cache_key=WEB) == {"labels": {"n": "first"}}


def test_a_304_without_a_cached_entry_is_an_error(plain: Server, make_hook: MakeHook) -> None:
    hook = etag_hook(make_hook, plain, path="/script")
    with pytest.raises(HookError, match="unsupported status code 304"):
        hook.call(sync_request(script={"status": 304}), cache_key=WEB)


def test_with_etag_disabled_nothing_is_cached(plain: Server, make_hook: MakeHook) -> None:
    hook = make_hook({"webhook": {"url": plain.url("/etag"), "etag": {"enabled": False}}})
    hook.call(labelled("first"), cache_key=WEB)
    assert hook.call(labelled("second"), cache_key=WEB) == {"labels": {"n": "second"}}
