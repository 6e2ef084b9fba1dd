"""build_hook: disabled hooks, one kind per hook, spec errors naming the field, and the face."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

from reconcile import hooks
from reconcile.hooks import Hook, HookConfigError, HookPolicy, build_hook
from tests.reconcile.hooks.conftest import DECORATOR_SHAPE

MakeHook = Callable[..., Hook]
PYTHON = {"function": "tests.reconcile.hooks.functions:sync"}


def build(spec: Any) -> Hook | None:
    return build_hook(spec, field="spec.hooks.finalize", controller="demo", hook="finalize", shape=DECORATOR_SHAPE,
                      output_field="attachments", policy=HookPolicy.local())


@pytest.mark.parametrize("spec", [None, {}, {"version": "v2"}, {"webhook": None}])
def test_a_hook_without_webhook_python_or_pipeline_is_disabled(spec: Any) -> None:
    assert build(spec) is None


def test_a_hook_with_two_kinds_is_refused() -> None:
    with pytest.raises(HookConfigError) as raised:
        build({"webhook": {"url": "http://h/x"}, "python": PYTHON})
    assert str(raised.value) == ("spec.hooks.finalize: set only one of webhook, python or pipeline, "
                                 "not webhook and python")


def test_an_unknown_field_beside_the_kind_is_refused_rather_than_disabling_the_hook() -> None:
    with pytest.raises(HookConfigError) as raised:
        build({"webhok": {"url": "http://h/x"}})
    assert raised.value.field == "spec.hooks.finalize.webhok"


@pytest.mark.parametrize(("spec", "field"), [
    ("http://h/x", "spec.hooks.finalize"),
    ({"webhook": "http://h/x"}, "spec.hooks.finalize.webhook"),
    ({"webhook": {"url": "ftp://h/x"}}, "spec.hooks.finalize.webhook.url"),
    ({"webhook": {"url": "http://h/x", "timeout": 10}}, "spec.hooks.finalize.webhook.timeout"),
    ({"webhook": {"url": "http://h/x", "etag": {"enabled": "yes"}}}, "spec.hooks.finalize.webhook.etag.enabled"),
    ({"webhook": {"service": {"name": "a", "namespace": "b", "port": "80"}, "path": "/x"}},
     "spec.hooks.finalize.webhook.service.port"),
    ({"python": {"function": "tests.reconcile.hooks.functions:sync", "timeout": "soon"}},
     "spec.hooks.finalize.python.timeout"),
    ({"version": 2, "python": PYTHON}, "spec.hooks.finalize.version"),
])
def test_an_invalid_spec_names_the_field_at_fault(spec: Any, field: str) -> None:
    with pytest.raises(HookConfigError) as raised:
        build(spec)
    assert raised.value.field == field
    assert str(raised.value).startswith(f"{field}: ")


@pytest.mark.parametrize(("spec", "kind", "target"), [
    ({"webhook": {"url": "http://hooks.example/finalize"}}, "webhook", "http://hooks.example/finalize"),
    ({"python": PYTHON}, "python", "tests.reconcile.hooks.functions:sync"),
    ({"pipeline": {"name": "p", "pipeline": [{"@select": True}]}}, "pipeline", "pipeline p"),
])
def test_each_kind_says_what_it_is_and_where_it_goes(spec: dict[str, Any], kind: str, target: str,
                                                      make_hook: MakeHook) -> None:
    hook = make_hook({**spec, "version": "v2"})
    assert (hook.kind, hook.target, hook.version, hook.strict) == (kind, target, "v2", True)


def test_every_name_in_all_is_importable_from_the_face() -> None:
    assert [name for name in hooks.__all__ if not hasattr(hooks, name)] == []
    assert sorted(hooks.__all__) == sorted(set(hooks.__all__))


def test_importing_the_hooks_loads_neither_deltapipe_nor_prometheus() -> None:
    loaded = subprocess.run([sys.executable, "-c", "import sys, reconcile.hooks; print(' '.join(sys.modules))"],
                            capture_output=True, text=True, check=True).stdout.split()
    assert "deltapipe" not in loaded and "prometheus_client" not in loaded
