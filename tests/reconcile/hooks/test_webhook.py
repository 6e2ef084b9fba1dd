"""Webhooks over HTTP: addressing, the whole-call timeout, statuses, connections and close()."""

from __future__ import annotations

import email.utils
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from reconcile import FakeClock
from reconcile.hooks import Hook, HookConfigError, HookError, HookRetryAfter
from tests.reconcile.hooks.conftest import Server, sync_request, wrong_answers
from tests.waiting import eventually

MakeHook = Callable[..., Hook]


def webhook(url: str, **fields: Any) -> dict[str, Any]:
    return {"webhook": {"url": url, **fields}}


def script(**reply: Any) -> dict[str, Any]:
    """A request asking the scripted server's /script for this reply."""
    return sync_request(script=reply)


# --- addressing and the exchange ---------------------------------------------------------------


def test_a_sync_hook_answering_http_1_0_without_content_length_is_read_to_the_end(
        plain: Server, make_hook: MakeHook) -> None:
    hook = make_hook(webhook(plain.url("/sync")))
    answer = hook.call(sync_request())
    assert answer == {"attachments": [{"apiVersion": "v1", "kind": "ConfigMap",
                                       "metadata": {"name": "web-decorated", "namespace": "shop"},
                                       "data": {"source": "StatefulSet/web"}}],
                      "labels": {"decorated": "yes"}}


def test_the_request_is_posted_as_json(plain: Server, make_hook: MakeHook) -> None:
    hook = make_hook(webhook(plain.url("/echo")))
    request = sync_request()
    seen = hook.call(request)["status"]
    assert seen["request"] == request
    assert seen["headers"]["content-type"] == "application/json"
    assert "authorization" not in seen["headers"] and "if-none-match" not in seen["headers"]


def test_a_service_url_is_built_from_service_and_path_and_resolve_points_it_elsewhere(
        plain: Server, make_hook: MakeHook) -> None:
    spec = {"webhook": {"service": {"name": "hooks", "namespace": "default", "port": 8080}, "path": "/echo"}}
    hook = make_hook(spec, resolve={"hooks.default:8080": f"127.0.0.1:{plain.port}"})
    assert hook.target == "http://hooks.default:8080/echo"
    assert hook.call(sync_request())["status"]["headers"]["host"] == "hooks.default:8080"


def test_a_service_url_defaults_to_port_80_and_http(plain: Server, make_hook: MakeHook) -> None:
    spec = {"webhook": {"service": {"name": "hooks", "namespace": "default"}, "path": "echo"}}
    hook = make_hook(spec, resolve={"hooks.default": f"127.0.0.1:{plain.port}"})
    assert hook.target == "http://hooks.default:80/echo"
    assert hook.call(sync_request())["status"]["headers"]["host"] == "hooks.default"


def test_url_wins_over_service(plain: Server, make_hook: MakeHook) -> None:
    spec = {"webhook": {"url": plain.url("/echo"), "service": {"name": "x", "namespace": "y"}, "path": "/p"}}
    assert make_hook(spec).target == plain.url("/echo")


@pytest.mark.parametrize("spec", [{"webhook": {}}, {"webhook": {"service": {"name": "a", "namespace": "b"}}},
                                  {"webhook": {"path": "/sync"}}])
def test_a_webhook_without_url_or_service_and_path_is_refused(spec: dict[str, Any], make_hook: MakeHook) -> None:
    with pytest.raises(HookConfigError) as raised:
        make_hook(spec)
    assert str(raised.value) == ("spec.hooks.sync.webhook: must specify either a full 'url', "
                                 "or both 'service' and 'path'")


def test_a_service_without_a_namespace_is_refused(make_hook: MakeHook) -> None:
    with pytest.raises(HookConfigError) as raised:
        make_hook({"webhook": {"service": {"name": "hooks"}, "path": "/sync"}})
    assert raised.value.field == "spec.hooks.sync.webhook.service.namespace"


# --- the whole-call timeout ------------------------------------------------------------------


def test_a_server_that_sleeps_is_abandoned_when_the_timeout_passes(plain: Server, make_hook: MakeHook) -> None:
    hook = make_hook(webhook(plain.url("/script"), timeout="300ms"))
    started = time.monotonic()
    with pytest.raises(HookError) as raised:
        hook.call(script(sleep=5))
    assert 0.3 <= time.monotonic() - started < 1.0
    assert str(raised.value) == f"POST {plain.url('/script')} timed out after 0.3s"


def test_the_timeout_bounds_the_whole_call_not_each_read(plain: Server, make_hook: MakeHook) -> None:
    hook = make_hook(webhook(plain.url("/script"), timeout="500ms"))
    started = time.monotonic()
    with pytest.raises(HookError, match="timed out after 0.5s"):
        hook.call(script(json={"labels": {"a": "b"}}, drip=0.1))  # each byte in time, the whole not
    assert 0.5 <= time.monotonic() - started < 1.2


@pytest.mark.parametrize(("timeout", "seconds"), [(None, 10.0), ("0s", 10.0), ("-5s", 10.0), ("1m30s", 90.0)])
def test_the_timeout_defaults_to_ten_seconds(timeout: str | None, seconds: float, plain: Server,
                                             make_hook: MakeHook) -> None:
    hook = make_hook(webhook(plain.url("/sync"), **({"timeout": timeout} if timeout else {})))
    assert getattr(hook, "timeout") == seconds  # noqa: B009 (not part of the Hook protocol)


def test_an_unparsable_timeout_is_a_config_error_naming_the_field(plain: Server, make_hook: MakeHook) -> None:
    with pytest.raises(HookConfigError) as raised:
        make_hook(webhook(plain.url("/sync"), timeout="10x"))
    assert str(raised.value) == ('spec.hooks.sync.webhook.timeout: "10x" is not a duration '
                                 '(like "10s", "1m30s", "500ms")')


# --- statuses ------------------------------------------------------------------------------


def test_429_with_seconds_asks_to_retry_after_them(plain: Server, make_hook: MakeHook) -> None:
    hook = make_hook(webhook(plain.url("/script")))
    with pytest.raises(HookRetryAfter) as raised:
        hook.call(script(status=429, headers={"Retry-After": "3"}))
    assert raised.value.seconds == 3.0
    assert not isinstance(raised.value, HookError)


def test_429_with_an_http_date_asks_to_retry_until_then(plain: Server, make_hook: MakeHook) -> None:
    clock = FakeClock(start=1_750_000_000.0)
    hook = make_hook(webhook(plain.url("/script")), clock=clock)
    when = email.utils.formatdate(clock.time() + 90, usegmt=True)
    with pytest.raises(HookRetryAfter) as raised:
        hook.call(script(status=429, headers={"Retry-After": when}))
    assert raised.value.seconds == 90.0


@pytest.mark.parametrize("header", [{"Retry-After": "soon"}, {"Retry-After": "-4"}, {}])
def test_429_without_a_readable_retry_after_retries_at_once(header: dict[str, str], plain: Server,
                                                            make_hook: MakeHook) -> None:
    hook = make_hook(webhook(plain.url("/script")))
    with pytest.raises(HookRetryAfter) as raised:
        hook.call(script(status=429, headers=header))
    assert raised.value.seconds == 0.0


def test_500_is_an_error_quoting_the_body(plain: Server, make_hook: MakeHook) -> None:
    hook = make_hook(webhook(plain.url("/script")))
    with pytest.raises(HookError) as raised:
        hook.call(script(status=500, body="jsonnet: RUNTIME ERROR\n  at line 3"))
    assert str(raised.value) == (f"unsupported status code 500 from {plain.url('/script')}: "
                                 "jsonnet: RUNTIME ERROR at line 3")


def test_a_long_error_body_is_cut_to_200_characters(plain: Server, make_hook: MakeHook) -> None:
    hook = make_hook(webhook(plain.url("/script")))
    with pytest.raises(HookError) as raised:
        hook.call(script(status=503, body="x" * 500))
    assert str(raised.value).endswith(": " + "x" * 200 + "...")


def test_a_garbage_body_is_an_error(plain: Server, make_hook: MakeHook) -> None:
    hook = make_hook(webhook(plain.url("/script")))
    with pytest.raises(HookError, match=r"bad response from .*/script: invalid JSON"):
        hook.call(script(body="<html>Bad Gateway</html>"))


def test_only_an_unusable_answer_is_deterministic(plain: Server, make_hook: MakeHook) -> None:
    hook = make_hook(webhook(plain.url("/script")))
    failures = []
    for request in (script(body="<html>Bad Gateway</html>"), script(body="[]"), script(status=500, body="x")):
        with pytest.raises(HookError) as raised:
            hook.call(request)
        failures.append(raised.value.deterministic)
    assert failures == [True, True, False]  # a 500 may answer differently next time


def test_a_refused_connection_is_an_error_naming_the_url(make_hook: MakeHook) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    hook = make_hook(webhook(f"http://127.0.0.1:{port}/sync"))
    with pytest.raises(HookError) as raised:
        hook.call(sync_request())
    assert str(raised.value) == f"POST http://127.0.0.1:{port}/sync failed: connection refused"


def test_a_server_that_closes_a_fresh_connection_without_answering_is_not_retried(
        serve: Callable[..., Server], make_hook: MakeHook) -> None:
    server = serve()
    hook = make_hook(webhook(server.url("/script")))
    with pytest.raises(HookError, match="the server closed the connection without a complete answer"):
        hook.call(script(close=True))
    assert server.stats()["requests"] == 1


# --- connections -----------------------------------------------------------------------------


def test_http_1_0_servers_get_a_connection_per_call(serve: Callable[..., Server], make_hook: MakeHook) -> None:
    server = serve()
    hook = make_hook(webhook(server.url("/sync")))
    for _ in range(3):
        assert hook.call(sync_request())["labels"] == {"decorated": "yes"}
    assert server.stats() == {"connections": 3, "requests": 3}


def test_keep_alive_connections_are_reused(serve: Callable[..., Server], make_hook: MakeHook) -> None:
    server = serve("--http11")
    hook = make_hook(webhook(server.url("/sync")))
    for _ in range(5):
        assert hook.call(sync_request())["labels"] == {"decorated": "yes"}
    assert server.stats() == {"connections": 1, "requests": 5}


def test_a_stale_keep_alive_connection_is_retried_once_on_a_fresh_one(serve: Callable[..., Server],
                                                                       make_hook: MakeHook) -> None:
    server = serve("--http11", "--drop-reused")  # drops every second request on a connection
    hook = make_hook(webhook(server.url("/sync")))
    for _ in range(3):
        assert hook.call(sync_request())["labels"] == {"decorated": "yes"}
    assert server.stats() == {"connections": 3, "requests": 5}


def test_calls_from_several_threads_each_get_their_own_answer(serve: Callable[..., Server],
                                                              make_hook: MakeHook) -> None:
    server = serve("--http11")
    assert wrong_answers(make_hook(webhook(server.url("/sync"))), calls=20) == []
    assert server.stats()["connections"] <= 5


# --- close() -----------------------------------------------------------------------------------


def test_close_cancels_a_call_in_flight_in_another_thread(serve: Callable[..., Server], make_hook: MakeHook) -> None:
    server = serve()
    hook = make_hook(webhook(server.url("/script")))
    outcome: list[BaseException] = []

    def call() -> None:
        try:
            hook.call(script(sleep=5))
        except BaseException as err:
            outcome.append(err)

    caller = threading.Thread(target=call)
    caller.start()
    eventually(lambda: server.stats()["requests"] == 1)
    started = time.monotonic()
    hook.close()
    caller.join(5)
    assert time.monotonic() - started < 0.5
    assert [str(err) for err in outcome] == [f"POST {server.url('/script')} cancelled: the hook was closed"]
    assert isinstance(outcome[0], HookError)


def test_a_closed_webhook_refuses_calls(plain: Server, make_hook: MakeHook) -> None:
    hook = make_hook(webhook(plain.url("/sync")))
    hook.call(sync_request())
    hook.close()
    with pytest.raises(HookError, match="cancelled: the hook was closed"):
        hook.call(sync_request())
