"""Python hooks: a function called in-process, its copies, errors, timeout and close()."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from reconcile.hooks import Hook, HookConfigError, HookError, HookRefused
from tests.reconcile.hooks import functions
from tests.reconcile.hooks.conftest import sync_request, wrong_answers
from tests.waiting import eventually

MakeHook = Callable[..., Hook]
MODULE = "tests.reconcile.hooks.functions"


def python_hook(make_hook: MakeHook, function: str, **fields: Any) -> Hook:
    version = fields.pop("version", None)
    return make_hook({"python": {"function": f"{MODULE}:{function}", **fields},
                      **({"version": version} if version else {})})


def test_the_function_answers_the_request(make_hook: MakeHook) -> None:
    hook = python_hook(make_hook, "sync")
    assert (hook.kind, hook.target, hook.version, hook.strict) == ("python", f"{MODULE}:sync", "v1", False)
    assert hook.call(sync_request()) == {"attachments": [{"apiVersion": "v1", "kind": "ConfigMap",
                                                          "metadata": {"name": "web-decorated", "namespace": "shop"}}],
                                         "labels": {"decorated": "yes"}}


def test_a_function_in_a_class_cannot_be_named_even_in_a_local_run(make_hook: MakeHook) -> None:
    with pytest.raises(HookRefused) as raised:
        python_hook(make_hook, "Hooks.nested")
    assert str(raised.value) == (f"spec.hooks.sync.python.function: expected \"package.module:function\" (an "
                                 f"absolute module name and the name of a function in it, nothing more), got "
                                 f"'{MODULE}:Hooks.nested'")


def test_the_function_gets_a_copy_of_the_request(make_hook: MakeHook) -> None:
    request = sync_request()
    answer = python_hook(make_hook, "meddle").call(request)
    assert answer["status"]["name"] == "changed"
    assert request["object"]["metadata"]["name"] == "web"


def test_the_caller_gets_a_copy_of_the_answer(make_hook: MakeHook) -> None:
    hook = python_hook(make_hook, "constant")
    hook.call(sync_request())["labels"]["kept"] = "changed by the caller"
    assert functions.CONSTANT_ANSWER == {"labels": {"kept": "as written"}}


# --- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("function", "message"), [
    ("tests.reconcile.hooks.nowhere:sync", "cannot import 'tests.reconcile.hooks.nowhere': No module named "
                                           "'tests.reconcile.hooks.nowhere'"),
    (f"{MODULE}:missing", f"module '{MODULE}' has no attribute 'missing'"),
    (f"{MODULE}:NOT_A_FUNCTION", f"refused '{MODULE}:NOT_A_FUNCTION': it is an int, not a function; a python hook "
                                 "is a function defined in the module named"),
    (f"{MODULE}.sync", "expected \"package.module:function\" (an absolute module name and the name of a function "
                       f"in it, nothing more), got '{MODULE}.sync'"),
])
def test_a_function_that_cannot_be_loaded_is_a_config_error(function: str, message: str,
                                                            make_hook: MakeHook) -> None:
    with pytest.raises(HookConfigError) as raised:
        make_hook({"python": {"function": function}})
    assert str(raised.value) == f"spec.hooks.sync.python.function: {message}"


def test_an_unknown_field_of_a_python_hook_is_a_config_error(make_hook: MakeHook) -> None:
    with pytest.raises(HookConfigError) as raised:
        make_hook({"python": {"function": f"{MODULE}:sync", "timout": "1s"}})
    assert raised.value.field == "spec.hooks.sync.python.timout"


def test_an_exception_is_a_hook_error_naming_the_function(make_hook: MakeHook) -> None:
    with pytest.raises(HookError) as raised:
        python_hook(make_hook, "explode").call(sync_request())
    assert str(raised.value) == f"{MODULE}:explode raised ValueError: no good"
    assert isinstance(raised.value.__cause__, ValueError)


def test_a_result_that_is_not_a_dict_is_an_error(make_hook: MakeHook) -> None:
    with pytest.raises(HookError, match=f"bad response from {MODULE}:listing: expected a JSON object, got array"):
        python_hook(make_hook, "listing").call(sync_request())


def test_an_unusable_answer_is_deterministic_and_an_exception_is_not(make_hook: MakeHook) -> None:
    failures = []
    for function in ("listing", "explode"):
        with pytest.raises(HookError) as raised:
            python_hook(make_hook, function).call(sync_request())
        failures.append(raised.value.deterministic)
    assert failures == [True, False]  # a function may raise for what it reads elsewhere


def test_strictness_follows_the_version(make_hook: MakeHook) -> None:
    assert python_hook(make_hook, "extra_field").call(sync_request()) == {"children": []}
    with pytest.raises(HookError, match="unknown field 'children'"):
        python_hook(make_hook, "extra_field", version="v2").call(sync_request())


# --- timeout and close() --------------------------------------------------------------------


@pytest.mark.usefixtures("blocked")
def test_a_call_that_outlives_the_timeout_returns_while_the_function_still_runs(make_hook: MakeHook) -> None:
    hook = python_hook(make_hook, "blocked", timeout="200ms")
    started = time.monotonic()
    with pytest.raises(HookError) as raised:
        hook.call(sync_request())
    assert 0.2 <= time.monotonic() - started < 1.0
    assert str(raised.value) == f"{MODULE}:blocked timed out after 0.2s"
    assert functions.started.is_set() and not functions.finished.is_set()


@pytest.mark.usefixtures("blocked")
def test_a_call_stuck_in_the_function_does_not_hold_up_the_next_ones(make_hook: MakeHook) -> None:
    hook = python_hook(make_hook, "blocked_for_stuck", timeout="100ms")
    with pytest.raises(HookError, match="timed out"):
        hook.call(sync_request({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "stuck"}}))
    assert hook.call(sync_request()) == {"labels": {"answered": "web"}}
    assert not functions.finished.is_set()


@pytest.mark.usefixtures("blocked")
def test_close_cancels_a_call_waiting_in_another_thread(make_hook: MakeHook) -> None:
    hook = python_hook(make_hook, "blocked")
    outcome: list[BaseException] = []

    def call() -> None:
        try:
            hook.call(sync_request())
        except BaseException as err:
            outcome.append(err)

    caller = threading.Thread(target=call)
    caller.start()
    eventually(functions.started.is_set)
    hook.close()
    caller.join(5)
    assert [str(err) for err in outcome] == [f"{MODULE}:blocked cancelled: the hook was closed"]
    with pytest.raises(HookError, match="cancelled: the hook was closed"):
        hook.call(sync_request())


def test_calls_from_several_threads_each_get_their_own_answer(make_hook: MakeHook) -> None:
    assert wrong_answers(python_hook(make_hook, "sync"), calls=50) == []
