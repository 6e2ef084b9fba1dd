"""Python hooks under a HookPolicy: only plain functions of allowed modules, checked before import.

The modules are written into a temporary directory put on sys.path: an allowed package
`mycompany.hooks` (with modules that re-export, shadow or hide dangerous callables), and modules
outside it (`mycompany.hooksevil`, `outsider`) whose import would leave a trace in sys.modules.
The policy is a manager's, `porchkit manager --python-hooks mycompany.hooks`, unless a test says.
"""

from __future__ import annotations

import builtins
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from reconcile.hooks import Hook, HookConfigError, HookPolicy, HookRefused
from reconcile.hooks.policy import is_loopback
from tests.reconcile.hooks.conftest import sync_request

MakeHook = Callable[..., Hook]

MANAGER = HookPolicy.for_manager(["mycompany.hooks"], [])
FIELD = "spec.hooks.sync.python.function"
ALLOWED = "modules under mycompany.hooks (--python-hooks)"
PLAIN = "a python hook is a function defined in the module named"

MODULES = {
    "mycompany/__init__.py": "",
    "mycompany/hooks/__init__.py": """
        def at_the_top(request):
            return {"labels": {"from": "mycompany.hooks"}}
    """,
    "mycompany/hooks/mod.py": """
        import os
        from subprocess import run

        os_system = os.system
        NOT_CALLABLE = 42


        def sync(request):
            return {"labels": {"from": "mycompany.hooks.mod"}}


        lam = lambda request: {"labels": {"from": "a lambda"}}  # noqa: E731


        class Class:
            def __init__(self, request):
                self.request = request

            def method(self, request):
                return {}


        class _Callable:
            def __call__(self, request):
                return {}


        obj = Class({})
        instance = _Callable()
        bound = obj.method


        async def coroutine(request):
            return {}


        def generator(request):
            yield {}
    """,
    "mycompany/hooks/sub/__init__.py": "",
    "mycompany/hooks/sub/deep.py": """
        def sync(request):
            return {"labels": {"from": "mycompany.hooks.sub.deep"}}
    """,
    # Replaces itself in sys.modules by a module outside the prefix.
    "mycompany/hooks/shadow.py": """
        import sys

        import outsider_shadow

        sys.modules[__name__] = outsider_shadow
    """,
    # Answers any name with os.system, through a module __getattr__ (PEP 562).
    "mycompany/hooks/lazy.py": """
        import os

        ASKED = []


        def __getattr__(name):
            ASKED.append(name)
            return os.system
    """,
    "mycompany/hooks/__main__.py": "raise SystemExit('the package command line ran')\n",
    "mycompany/hooksevil.py": "def sync(request):\n    return {}\n",
    "outsider.py": "def sync(request):\n    return {}\n",
    "outsider_shadow.py": "def sync(request):\n    return {'labels': {'from': 'outsider_shadow'}}\n",
}
OUR_MODULES = ("mycompany", "outsider", "outsider_shadow")


@pytest.fixture(autouse=True)
def modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """MODULES importable from a temporary directory; forgotten by sys.modules afterwards."""
    for name, text in MODULES.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    for name in [n for n in sys.modules if n.split(".")[0] in OUR_MODULES]:
        del sys.modules[name]


def imported(name: str) -> bool:
    return name in sys.modules


def refused(make_hook: MakeHook, reference: str, policy: HookPolicy = MANAGER) -> str:
    """The message of the HookRefused that building a python hook for `reference` raises."""
    with pytest.raises(HookRefused) as raised:
        make_hook({"python": {"function": reference}}, policy=policy)
    assert raised.value.field == FIELD
    return str(raised.value)


# --- what a manager refuses before importing anything ------------------------------------------


@pytest.mark.parametrize("reference", ["subprocess:Popen", "os:system", "builtins:print", "importlib:import_module",
                                       "mycompany.hooksevil:sync", "outsider:sync", "mycompany:sync",
                                       "MYCOMPANY.hooks.mod:sync"])
def test_a_module_outside_the_prefixes_is_refused_and_never_imported(make_hook: MakeHook, reference: str) -> None:
    assert refused(make_hook, reference) == f"{FIELD}: refused {reference!r}: python hooks may come from {ALLOWED}"
    assert not imported("mycompany.hooksevil") and not imported("outsider") and not imported("mycompany")


@pytest.mark.parametrize("reference", ["builtins:__dict__.update", "mycompany.hooks.mod:obj.method",
                                       "mycompany.hooks.mod:Class.method", ".mod:sync", "mycompany..hooks:sync",
                                       "mycompany.hooks.mod", "mycompany.hooks.mod:", "mycompany.hooks.mod:sync:x",
                                       "mycompany.hooks.mod:sync ", "mycompany.hooks.__main__:sync",
                                       "mycompany.hooks.mod:__init__", "mycompany.hooks.mod:ｓync"])
def test_anything_but_module_colon_function_is_refused_before_importing(make_hook: MakeHook,
                                                                         reference: str) -> None:
    assert refused(make_hook, reference) == (
        f"{FIELD}: expected \"package.module:function\" (an absolute module name and the name of a function in it, "
        f"nothing more), got {reference!r}")
    assert not imported("mycompany")  # nor its package's command line (__main__), nor anything else


@pytest.mark.parametrize("reference", ["mycompany.hooks.mod:_helper", "outsider:_sync"])
def test_a_private_name_is_refused_before_importing(make_hook: MakeHook, reference: str) -> None:
    assert refused(make_hook, reference, HookPolicy.local()) == (
        f"{FIELD}: refused {reference!r}: a name beginning with _ is private to its module, not a hook")
    assert not imported("mycompany") and not imported("outsider")


def test_a_manager_without_python_hooks_refuses_every_module(make_hook: MakeHook) -> None:
    message = refused(make_hook, "mycompany.hooks.mod:sync", HookPolicy())
    assert message == (f"{FIELD}: refused 'mycompany.hooks.mod:sync': python hooks may come from none: python hooks "
                       "are off in this manager (--python-hooks PREFIX allows modules under PREFIX)")
    assert not imported("mycompany")


def test_the_refusal_is_a_config_error_naming_the_field(make_hook: MakeHook) -> None:
    with pytest.raises(HookConfigError) as raised:
        make_hook({"python": {"function": "subprocess:Popen"}}, policy=MANAGER)
    assert raised.value.field == FIELD


# --- what a module under the prefix may hold ---------------------------------------------------


@pytest.mark.parametrize(("reference", "answer"), [
    ("mycompany.hooks.mod:sync", "mycompany.hooks.mod"),
    ("mycompany.hooks:at_the_top", "mycompany.hooks"),  # the prefix itself is a module under it
    ("mycompany.hooks.sub.deep:sync", "mycompany.hooks.sub.deep"),
    ("mycompany.hooks.mod:lam", "a lambda"),  # a function the module defines, whatever its syntax
])
def test_a_plain_function_of_a_module_under_the_prefix_runs(make_hook: MakeHook, reference: str,
                                                            answer: str) -> None:
    hook = make_hook({"python": {"function": reference}}, policy=MANAGER)
    assert hook.call(sync_request()) == {"labels": {"from": answer}}


@pytest.mark.parametrize(("name", "problem"), [
    ("os_system", "it is a builtin_function_or_method, not a function"),
    ("run", "it is a function of module 'subprocess', which 'mycompany.hooks.mod' only imports"),
    ("Class", "it is a class, not a function"),
    ("instance", "it is a _Callable, not a function"),
    ("bound", "it is a method, not a function"),
    ("NOT_CALLABLE", "it is an int, not a function"),
    ("coroutine", "it is an async or generator function, which returns no answer when called"),
    ("generator", "it is an async or generator function, which returns no answer when called"),
])
def test_anything_but_a_function_the_module_defines_is_refused(make_hook: MakeHook, name: str,
                                                               problem: str) -> None:
    reference = f"mycompany.hooks.mod:{name}"
    assert refused(make_hook, reference) == f"{FIELD}: refused {reference!r}: {problem}; {PLAIN}"


def test_a_module_that_shadows_itself_with_another_is_refused(make_hook: MakeHook) -> None:
    message = refused(make_hook, "mycompany.hooks.shadow:sync")
    assert message == f"{FIELD}: refused: importing 'mycompany.hooks.shadow' gave module 'outsider_shadow'"


def test_a_module_getattr_is_never_asked_for_the_function(make_hook: MakeHook) -> None:
    with pytest.raises(HookConfigError) as raised:
        make_hook({"python": {"function": "mycompany.hooks.lazy:sync"}}, policy=MANAGER)
    assert str(raised.value) == f"{FIELD}: module 'mycompany.hooks.lazy' has no attribute 'sync'"
    assert sys.modules["mycompany.hooks.lazy"].ASKED == []


def test_prefixes_match_whole_components() -> None:
    policy = HookPolicy.for_manager(["mycompany.hooks", "decorators.examples"], [])
    assert policy.allows_module("mycompany.hooks") and policy.allows_module("mycompany.hooks.sub.deep")
    assert policy.allows_module("decorators.examples.service_per_pod")
    assert not policy.allows_module("mycompany.hooksevil") and not policy.allows_module("mycompany")
    assert not policy.allows_module("decorators") and not policy.allows_module("decorators.examplesx")


@pytest.mark.parametrize("prefix", [".hooks", "mycompany..hooks", "mycompany.hooks.", "my-company", "", "a.__main__",
                                    "mycompany.hooks:f"])
def test_a_prefix_that_is_not_a_module_name_is_refused(prefix: str) -> None:
    with pytest.raises(ValueError, match="is not a module name"):
        HookPolicy.for_manager([prefix], [])


# --- local runs ------------------------------------------------------------------------------


def test_a_local_run_allows_any_module_with_the_same_rules_for_the_rest(make_hook: MakeHook) -> None:
    local = HookPolicy.local()
    assert make_hook({"python": {"function": "outsider:sync"}}, policy=local).call(sync_request()) == {}
    assert refused(make_hook, "subprocess:Popen", local).endswith("it is a class, not a function; " + PLAIN)
    assert refused(make_hook, "os:system", local).endswith("it is a builtin_function_or_method, not a function; "
                                                           + PLAIN)
    assert refused(make_hook, "builtins:print", local).endswith("not a function; " + PLAIN)
    assert "expected \"package.module:function\"" in refused(make_hook, "builtins:__dict__.update", local)
    assert builtins.print is print and not hasattr(builtins, "controller")


# --- loopback ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.1.2.3", True), ("::1", True), ("localhost", True), ("LocalHost", True),
    ("::ffff:127.0.0.1", True), ("10.0.0.1", False), ("0.0.0.0", False), ("localhost.evil.example", False),
    ("hooks.default", False), ("::", False),
])
def test_loopback_is_127_8_ipv6_one_and_localhost(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback
    assert HookPolicy.local().allows_plain_http_to(host) is loopback
    assert HookPolicy.for_manager([], []).allows_plain_http_to(host) is False
