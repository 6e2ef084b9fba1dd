"""Webhook answers decoded as Metacontroller decodes them: v1/v2, loose/strict, the shape of fields."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from reconcile.hooks import Hook, HookConfigError, HookError
from tests.reconcile.hooks.conftest import Server, sync_request

MakeHook = Callable[..., Hook]

# (version, responseUnMarshallMode) -> strict?
MODES = {("v1", None): False, ("v2", None): True, ("v1", "strict"): True, ("v2", "loose"): False,
         (None, None): False}


def scripted_hook(make_hook: MakeHook, server: Server, version: str | None, mode: str | None) -> Hook:
    webhook: dict[str, Any] = {"url": server.url("/script")}
    if mode:
        webhook["responseUnMarshallMode"] = mode
    return make_hook({"webhook": webhook, **({"version": version} if version else {})})


def answer_with(hook: Hook, body: str) -> dict[str, Any]:
    return hook.call(sync_request(script={"body": body}))


@pytest.fixture(name="mode", params=list(MODES), ids=[f"{v}-{m}" for v, m in MODES])
def mode_fixture(request: pytest.FixtureRequest) -> tuple[str | None, str | None]:
    mode: tuple[str | None, str | None] = request.param
    return mode


def test_version_and_mode_decide_strictness(mode: tuple[str | None, str | None], plain: Server,
                                            make_hook: MakeHook) -> None:
    hook = scripted_hook(make_hook, plain, *mode)
    assert hook.strict is MODES[mode]
    assert hook.version == (mode[0] or "v1")


def test_an_unknown_field_is_an_error_only_when_strict(mode: tuple[str | None, str | None], plain: Server,
                                                       make_hook: MakeHook) -> None:
    hook = scripted_hook(make_hook, plain, *mode)
    composite_answer = '{"children": [], "status": {}}'  # a CompositeController's answer shape
    if MODES[mode]:
        with pytest.raises(HookError, match=r"unknown field 'children' \(strict mode"):
            answer_with(hook, composite_answer)
    else:
        assert answer_with(hook, composite_answer) == {"children": [], "status": {}}


def test_a_duplicated_key_is_an_error_only_when_strict(mode: tuple[str | None, str | None], plain: Server,
                                                       make_hook: MakeHook) -> None:
    hook = scripted_hook(make_hook, plain, *mode)
    body = '{"labels": {"tier": "web", "tier": "db"}}'
    if MODES[mode]:
        with pytest.raises(HookError, match=r"duplicate key 'tier' \(strict mode\)"):
            answer_with(hook, body)
    else:
        assert answer_with(hook, body) == {"labels": {"tier": "db"}}  # the last one wins


def test_a_field_of_the_wrong_type_is_an_error_in_both_modes(mode: tuple[str | None, str | None], plain: Server,
                                                             make_hook: MakeHook) -> None:
    hook = scripted_hook(make_hook, plain, *mode)
    with pytest.raises(HookError) as raised:
        answer_with(hook, '{"attachments": {"a": 1}}')
    assert str(raised.value) == (f"bad response from {plain.url('/script')}: field 'attachments' must be "
                                 "array or null, got object")


def test_malformed_json_is_an_error_in_both_modes(mode: tuple[str | None, str | None], plain: Server,
                                                  make_hook: MakeHook) -> None:
    hook = scripted_hook(make_hook, plain, *mode)
    with pytest.raises(HookError, match="invalid JSON"):
        answer_with(hook, '{"attachments": [')


@pytest.mark.parametrize("mode_name", ["loose", "strict"])
def test_a_bool_is_not_a_number(mode_name: str, plain: Server, make_hook: MakeHook) -> None:
    hook = scripted_hook(make_hook, plain, "v1", mode_name)
    with pytest.raises(HookError, match="field 'resyncAfterSeconds' must be number or null, got boolean"):
        answer_with(hook, '{"resyncAfterSeconds": true}')
    assert answer_with(hook, '{"resyncAfterSeconds": 1.5, "finalized": true}') == {"resyncAfterSeconds": 1.5,
                                                                                   "finalized": True}


@pytest.mark.parametrize("mode_name", ["loose", "strict"])
def test_field_names_are_case_sensitive(mode_name: str, plain: Server, make_hook: MakeHook) -> None:
    hook = scripted_hook(make_hook, plain, "v1", mode_name)
    if mode_name == "strict":
        with pytest.raises(HookError, match="unknown field 'Attachments'"):
            answer_with(hook, '{"Attachments": []}')
    else:
        assert "attachments" not in answer_with(hook, '{"Attachments": []}')


@pytest.mark.parametrize(("body", "found"), [("[]", "array"), ("null", "null"), ('"ok"', "string")])
def test_an_answer_that_is_not_an_object_is_an_error(body: str, found: str, plain: Server,
                                                     make_hook: MakeHook) -> None:
    hook = scripted_hook(make_hook, plain, "v1", None)
    with pytest.raises(HookError, match=f"expected a JSON object, got {found}"):
        answer_with(hook, body)


def test_nan_is_not_json(plain: Server, make_hook: MakeHook) -> None:
    hook = scripted_hook(make_hook, plain, "v1", None)
    with pytest.raises(HookError, match="invalid JSON: NaN is not JSON"):
        answer_with(hook, '{"resyncAfterSeconds": NaN}')


def test_an_unknown_version_is_a_config_error(plain: Server, make_hook: MakeHook) -> None:
    with pytest.raises(HookConfigError) as raised:
        scripted_hook(make_hook, plain, "v3", None)
    assert str(raised.value) == "spec.hooks.sync.version: expected v1 or v2, got 'v3'"


def test_an_unknown_unmarshal_mode_is_a_config_error(plain: Server, make_hook: MakeHook) -> None:
    with pytest.raises(HookConfigError) as raised:
        scripted_hook(make_hook, plain, "v1", "lenient")
    assert raised.value.field == "spec.hooks.sync.webhook.responseUnMarshallMode"
