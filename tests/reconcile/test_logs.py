"""Structured logs: text and JSON lines, and the reconcile fields on every line logged during a reconcile."""

from __future__ import annotations

import io
import json
import logging
import threading
from collections.abc import Iterator

import pytest

from reconcile import FakeClock, Kind, ObjectKey, Terminal, logs
from reconcile.controller import Controller
from reconcile.outcome import Done

CONFIGMAP = Kind("v1", "ConfigMap")
user_log = logging.getLogger("my.operator")


@pytest.fixture
def output() -> Iterator[io.StringIO]:
    """Where configure() writes; the root logger is put back as it was afterwards."""
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    stream = io.StringIO()
    yield stream
    root.handlers[:] = handlers
    root.setLevel(level)


def lines(stream: io.StringIO) -> list[dict[str, str]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def run_once(controller: Controller, key: ObjectKey) -> str:
    controller.queue.add(key)
    (ready,) = controller.queue.pop_ready()
    try:
        return controller.process(ready)
    finally:
        controller.queue.done(ready)


def test_a_line_the_reconcile_function_logs_carries_controller_key_and_reconcile_id(output: io.StringIO) -> None:
    logs.configure("json", "info", stream=output)

    def reconcile(key: ObjectKey) -> Done:
        user_log.info("looking at %s", key.name)
        return Done()

    run_once(Controller("cm", CONFIGMAP, reconcile, clock=FakeClock()), ObjectKey("default", "a"))
    (line,) = lines(output)
    assert line["message"] == "looking at a"
    assert line["logger"] == "my.operator" and line["level"] == "info"
    assert (line["controller"], line["key"]) == ("cm", "default/a")
    assert len(line["reconcile_id"]) == 16
    assert line["time"].endswith("Z")


def test_the_controllers_own_lines_carry_the_same_reconcile_id_as_the_users(output: io.StringIO) -> None:
    logs.configure("json", "info", stream=output)

    def reconcile(key: ObjectKey) -> Done:
        user_log.warning("the spec is wrong")
        raise Terminal("invalid spec")

    run_once(Controller("cm", CONFIGMAP, reconcile, clock=FakeClock()), ObjectKey("default", "a"))
    user, controller = lines(output)
    assert controller["logger"] == "porchkit.controller" and "invalid spec" in controller["message"]
    assert controller["reconcile_id"] == user["reconcile_id"]


def test_each_reconcile_gets_a_new_reconcile_id(output: io.StringIO) -> None:
    logs.configure("json", "info", stream=output)
    controller = Controller("cm", CONFIGMAP, lambda key: user_log.info("hi") or Done(), clock=FakeClock())
    run_once(controller, ObjectKey("default", "a"))
    run_once(controller, ObjectKey("default", "a"))
    first, second = lines(output)
    assert first["reconcile_id"] != second["reconcile_id"]


def test_lines_outside_a_reconcile_have_no_reconcile_fields(output: io.StringIO) -> None:
    logs.configure("json", "info", stream=output)
    user_log.info("starting up")
    (line,) = lines(output)
    assert set(line) == {"time", "level", "logger", "message"}


def test_concurrent_reconciles_on_two_threads_each_log_their_own_key(output: io.StringIO) -> None:
    logs.configure("json", "info", stream=output)
    both_inside = threading.Barrier(2)

    def reconcile(key: ObjectKey) -> Done:
        both_inside.wait(5)  # both reconciles are running when either logs
        user_log.info("reconciling %s", key.name)
        return Done()

    controller = Controller("cm", CONFIGMAP, reconcile, clock=FakeClock())
    keys = [ObjectKey("default", "a"), ObjectKey("default", "b")]
    threads = [threading.Thread(target=controller.process, args=(key,)) for key in keys]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    found = {line["message"].split()[-1]: line["key"] for line in lines(output)}
    assert found == {"a": "default/a", "b": "default/b"}


def test_text_lines_are_readable_and_end_with_the_reconcile_fields(output: io.StringIO) -> None:
    logs.configure("text", "info", stream=output)
    run_once(Controller("cm", CONFIGMAP, lambda key: user_log.info("hello") or Done(), clock=FakeClock()),
             ObjectKey("default", "a"))
    line = output.getvalue().strip()
    assert " INFO " in line and "my.operator  hello" in line
    assert line.split("  ")[-1].startswith("controller=cm key=default/a reconcile_id=")


def test_a_traceback_goes_into_the_json_line(output: io.StringIO) -> None:
    logs.configure("json", "info", stream=output)
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        user_log.exception("failed")
    (line,) = lines(output)
    assert line["message"] == "failed" and "RuntimeError: boom" in line["exception"]


def test_the_level_filters_lines_and_configuring_again_replaces_the_handler(output: io.StringIO) -> None:
    logs.configure("json", "info", stream=io.StringIO())
    logs.configure("json", "warning", stream=output)
    user_log.info("hidden")
    user_log.warning("shown")
    assert [line["message"] for line in lines(output)] == ["shown"]
    assert sum(h.get_name() == "porchkit" for h in logging.getLogger().handlers) == 1


def test_an_unknown_level_or_format_is_refused_with_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="debug, info"):
        logs.configure("text", "loud")
    with pytest.raises(ValueError, match="text or json"):
        logs.configure("yaml")  # type: ignore[arg-type]


@pytest.mark.parametrize(("level", "shown"), [("info", False), ("warning", False), ("debug", True)])
def test_urllib3s_retry_warnings_show_only_at_debug_level(output: io.StringIO, level: str, shown: bool) -> None:
    urllib3_logger = logging.getLogger("urllib3")
    before = urllib3_logger.level
    logs.configure("text", level, stream=output)
    try:
        logging.getLogger("urllib3.connectionpool").warning("Retrying (Retry(total=2)) after connection broken")
        logging.getLogger("porchkit.informer").warning("watch of X failed")
    finally:
        urllib3_logger.setLevel(before)
    assert ("Retrying" in output.getvalue()) is shown
    assert "watch of X failed" in output.getvalue()
