"""MapControllers whose hooks fail, answer nonsense, or that cannot start.

A failing input is reported where a user looks (a Warning Event `MapError` on the parent naming
the input, and the parent's `Mapped` condition counting the failures) while the other inputs of
the parent are mapped as usual. Webhooks are served by tests/mapctl/hookservers/faulty.py (a
process of its own), which fails per input as the input's annotation `faulty-path` says.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from reconcile.cluster import Obj
from tests.mapctl import pyhooks
from tests.mapctl.support import (
    CONFIGMAP,
    MAP_CONTROLLER,
    SECRET,
    SERVICE,
    WAIT,
    HookServer,
    Stage,
    bucket,
    hook_server,
    map_controller,
    python,
    rule,
    service,
    stage,
    webhook,
)
from tests.waiting import eventually

__all__ = ["hook_server", "stage"]  # fixtures, imported to be found here

MakeStage = Callable[..., Stage]
URL = "http://faulty.hooks/map"
ERROR_BODY = "internal trouble: this hook fails on purpose"  # what faulty.py's /500 answers

FAULTS = {
    "/500": rf"map Service/default/b: unsupported status code 500 from {re.escape(URL)}: {ERROR_BODY}",
    "/garbage": rf"map Service/default/b: bad response from {re.escape(URL)}: invalid JSON: .+",
    "/slow": rf"map Service/default/b: POST {re.escape(URL)} timed out after 0\.3s",
}


def map_errors(live: Stage, parent: str = "bucket") -> list[str]:
    return [event["message"] for event in live.events(parent, "MapError")]


def not_mapped(live: Stage) -> str:
    """The message of the parent's Mapped condition once it is False."""
    condition = eventually(lambda: (found := live.mapped()) is not None and found["status"] == "False" and found,
                           WAIT)
    assert condition["reason"] == "MapError"
    message: str = condition["message"]
    return message


# --- python hooks ----------------------------------------------------------------------------------


@pytest.fixture
def one_broken(stage: MakeStage) -> Stage:
    """map_unless_broken over the Services a, b and c, with b broken."""
    live = stage()
    pyhooks.BROKEN.add("b")
    live.prepare(map_controller("fragile", map_hook=python("map_unless_broken")), bucket())
    live.create(service("a"), service("b"), service("c"))
    return live


class TestPythonHookFailures:
    def test_a_raising_hook_is_a_map_error_naming_its_input_and_the_others_are_mapped(self,
                                                                                      one_broken: Stage) -> None:
        live = one_broken
        [event] = eventually(lambda: live.events("bucket", "MapError"), WAIT)
        assert (event["type"], event["involvedObject"]["kind"]) == ("Warning", "Bucket")
        assert event["message"] == ("map Service/default/b: tests.mapctl.pyhooks:map_unless_broken raised "
                                    "RuntimeError: cannot map b today")
        message = not_mapped(live)
        assert message == f"1 of 3 inputs failed; first: {event['message']}"
        eventually(lambda: live.output_names("fragile") == {"a-service", "c-service"}, WAIT)

    def test_once_the_hook_heals_the_input_is_mapped_and_mapped_turns_true(self, one_broken: Stage) -> None:
        live = one_broken
        not_mapped(live)
        pyhooks.BROKEN.clear()  # the next retry succeeds
        eventually(lambda: (found := live.mapped()) is not None and found["status"] == "True", WAIT)
        assert live.output_names("fragile") == {"a-service", "b-service", "c-service"}
        assert live.status()["outputs"] == {"configmaps": {"total": 3}}


BAD_ANSWERS = {
    "undeclared": "map Service/default/b: 1 output operation failed: apply Secret default/b-secret: Secret is not "
                  "declared in spec.outputResources",
    "elsewhere": 'map Service/default/b: outputs[0].metadata.namespace: "elsewhere" is not the parent\'s '
                 'namespace "default"',
}


class TestBadAnswers:
    @pytest.mark.parametrize("answer", list(BAD_ANSWERS))
    def test_an_output_the_map_controller_may_not_make_is_reported_for_its_input_alone(self, stage: MakeStage,
                                                                                         answer: str) -> None:
        live = stage()
        live.prepare(map_controller("picky", map_hook=python("map_by_annotation")), bucket())
        live.create(service("a"), service("b", answer=answer))
        message = eventually(lambda: map_errors(live), WAIT)[0]
        assert message == BAD_ANSWERS[answer]
        assert not_mapped(live) == f"1 of 2 inputs failed; first: {message}"
        eventually(lambda: live.output_names("picky") == {"a-service"}, WAIT)
        assert live.get(SECRET, "b-secret") is None
        assert "b-elsewhere" not in [obj["metadata"]["name"]
                                     for obj in live.cluster.list(CONFIGMAP, namespace="elsewhere").items]


# --- webhooks --------------------------------------------------------------------------------------


def faulty_service(name: str, path: str, data: str = "") -> Obj:
    """A Service that faulty.py answers as `path` says."""
    obj = service(name)
    obj["metadata"]["annotations"].update({"faulty-path": path, "faulty-data": data})
    return obj


class Faulty:
    """A stage running MapController `faulty` (webhook at faulty.py, 300ms timeout), its server,
    and a Bucket selecting every Service."""

    def __init__(self, live: Stage, hook: HookServer) -> None:
        self.live, self.hook = live, hook
        live.prepare(map_controller("faulty", map_hook=webhook(URL, timeout="300ms")), bucket())


@pytest.fixture
def faulty(hook_server: Callable[[str], HookServer], stage: MakeStage) -> Faulty:
    hook = hook_server("faulty")
    return Faulty(stage({"faulty.hooks": hook.address}), hook)


class TestWebhookFailures:
    @pytest.mark.parametrize("path", list(FAULTS))
    def test_a_failing_webhook_is_reported_for_its_input_and_the_other_inputs_carry_on(self, faulty: Faulty,
                                                                                       path: str) -> None:
        live = faulty.live
        live.create(faulty_service("a", "/ok", data="first"), faulty_service("b", path))
        message = eventually(lambda: map_errors(live), WAIT)[0]
        assert re.fullmatch(FAULTS[path], message), message
        assert "\n" not in message
        assert not_mapped(live) == f"1 of 2 inputs failed; first: {message}"
        eventually(lambda: live.output_names("faulty") == {"a-ok"}, WAIT)
        live.edit(SERVICE, "a", lambda obj: obj["metadata"]["annotations"].update({"faulty-data": "second"}))
        eventually(lambda: (live.get(CONFIGMAP, "a-ok") or {}).get("data") == {"data": "second"}, WAIT)
        assert all("Service/default/a" not in text for text in map_errors(live))

    def test_429_brings_the_input_back_after_retry_after_without_an_error(self, faulty: Faulty) -> None:
        live = faulty.live
        live.create(faulty_service("a", "/ok"), faulty_service("b", "/429"))
        first, second = eventually(lambda: len(found := faulty.hook.times("/429", "b")) >= 2 and found[:2], WAIT)
        assert 0.75 <= second - first <= 3.0  # Retry-After: 1 (less a little: the times are the server's)
        assert map_errors(live) == []
        assert live.output_names("faulty") == {"a-ok"}
        mapped = live.mapped()
        assert mapped is not None and mapped["status"] == "True"


# --- MapControllers that cannot start --------------------------------------------------------------


def broken_spec(case: str) -> dict[str, Any]:
    """The spec fields that make a MapController `copy` unusable, per case."""
    cases: dict[str, dict[str, Any]] = {
        "duplicate": {"inputResources": [rule("v1", "services"), rule("v1", "services")]},
        "hook": {"hooks": {"map": python("no_such_hook")}},
        "resource": {"inputResources": [rule("example.com/v1", "widgets")]},
    }
    return cases[case]


CREATE_ERRORS = {
    "duplicate": 'spec.inputResources[1].resource: "services" is already named by spec.inputResources[0] '
                 "(status counts are keyed by resource)",
    "hook": "spec.hooks.map.python.function: module 'tests.mapctl.pyhooks' has no attribute 'no_such_hook'",
    "resource": "spec.inputResources[0]: can't find resource 'widgets' in apiVersion 'example.com/v1'",
}


class TestMapControllersThatCannotStart:
    @pytest.mark.parametrize("case", list(CREATE_ERRORS))
    def test_an_unusable_map_controller_is_a_create_error_and_starts_nothing(self, stage: MakeStage,
                                                                            case: str) -> None:
        live = stage()
        controller = map_controller("copy", map_hook=python("map_copy"))
        controller["spec"].update(broken_spec(case))
        live.create(service("a"), bucket(), controller)
        [event] = eventually(lambda: live.events("copy", "CreateError"), WAIT)
        assert (event["type"], event["involvedObject"]["kind"]) == ("Warning", "MapController")
        assert event["message"] == f"Cannot create new controller: {CREATE_ERRORS[case]}"
        assert "copy" not in live.maps.running
        assert not [c for c in live.manager.controllers if c.name.startswith("map/copy")]
        assert live.output_names("copy") == set() and pyhooks.CALLS.total() == 0

    def test_fixing_an_invalid_map_controller_starts_it(self, stage: MakeStage) -> None:
        live = stage()
        controller = map_controller("copy", map_hook=python("map_copy"))
        controller["spec"].update(broken_spec("duplicate"))
        live.create(service("a"), bucket(), controller)
        eventually(lambda: live.events("copy", "CreateError"), WAIT)
        live.edit(MAP_CONTROLLER, "copy", lambda obj: obj["spec"].update(inputResources=[rule("v1", "services")]),
                  namespace="")
        eventually(lambda: live.output_names("copy") == {"a-service"}, WAIT)
        assert "copy" in live.maps.running
