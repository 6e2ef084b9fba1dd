"""porchvariant.cel: the CEL facade, on both engines, and its messages in cel-go's words."""

from __future__ import annotations

from typing import Any

import pytest

from porchvariant import cel

VARIABLES: dict[str, Any] = {
    "repoDefault": "edge-1",
    "packageDefault": "base",
    "upstream": {"name": "blueprints.base.v1", "namespace": "ns", "labels": {"vendor": "acme"}, "annotations": {}},
    "target": {"name": "edge-1", "namespace": "ns", "labels": {"region": "eu"}, "annotations": {}},
}


@pytest.fixture(params=cel.ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    if request.param not in cel.available_engines():
        pytest.skip(f"{request.param} is not installed")
    return str(request.param)


def evaluate(text: str, engine: str, variables: dict[str, Any] | None = None) -> str:
    return cel.compile_expression(text, engine=engine).evaluate(VARIABLES if variables is None else variables)


def error_of(text: str, engine: str, variables: dict[str, Any] | None = None) -> str:
    with pytest.raises(cel.CelError) as caught:
        evaluate(text, engine, variables)
    message = str(caught.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize(("text", "expected"), [
    ("repoDefault + '-' + packageDefault", "edge-1-base"),
    ("target.name + '/' + target.labels['region']", "edge-1/eu"),
    ("'zone' in target.labels ? target.labels['zone'] : 'none'", "none"),
    ("has(target.labels.region) ? 'yes' : 'no'", "yes"),
    ("target.labels.exists(k, k == 'region') ? upstream.labels['vendor'] : 'x'", "acme"),
    ("string(size(target.labels))", "1"),
    ("target.name.startsWith('edge') && target.name.matches('^[a-z]+-[0-9]$') ? 'edge' : 'core'", "edge"),
])
def test_expressions_evaluate_to_strings(engine: str, text: str, expected: str) -> None:
    assert evaluate(text, engine) == expected


def test_undeclared_variable_is_a_compile_error_in_cel_go_words(engine: str) -> None:
    with pytest.raises(cel.CelError) as caught:
        cel.compile_expression("badvar", engine=engine)
    assert str(caught.value) == "ERROR: <input>:1:1: undeclared reference to 'badvar' (in container '')"


def test_function_outside_the_standard_library_is_undeclared(engine: str) -> None:
    # Porch leaves out Kubernetes' CEL libraries, so string extensions such as upperAscii are unknown.
    with pytest.raises(cel.CelError) as caught:
        cel.compile_expression("target.name.upperAscii()", engine=engine)
    assert str(caught.value) == "ERROR: <input>:1:23: undeclared reference to 'upperAscii' (in container '')"


def test_macro_variable_is_declared_only_inside_its_macro(engine: str) -> None:
    assert evaluate("target.labels.all(k, k != 'zone') ? 'ok' : 'no'", engine) == "ok"
    with pytest.raises(cel.CelError) as caught:
        cel.compile_expression("target.labels.all(k, k != 'zone') ? k : 'no'", engine=engine)
    assert str(caught.value) == "ERROR: <input>:1:37: undeclared reference to 'k' (in container '')"


@pytest.mark.parametrize(("text", "start"), [
    ("/", "ERROR: <input>:1:1: Syntax error: mismatched input '/'"),
    ("repoDefault +", "ERROR: <input>:1:14: Syntax error: mismatched input '<EOF>'"),
    ("", "ERROR: <input>:1:1: Syntax error: mismatched input '<EOF>'"),
])
def test_syntax_error_is_one_line_naming_the_position(engine: str, text: str, start: str) -> None:
    with pytest.raises(cel.CelError) as caught:
        cel.compile_expression(text, engine=engine)
    assert str(caught.value).startswith(start)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(("text", "message"), [
    ("target.labels['zone']", "no such key: zone"),
    ("target.labels.zone", "no such key: zone"),
    ("target.spec", "no such key: spec"),
    ("target.spec['replicas']", "no such key: spec"),
    ("repository.name", "no such attribute(s): repository"),
    ("string(1 / 0)", "division by zero"),
    ("string(1 % 0)", "modulus by zero"),
])
def test_evaluation_errors_read_as_cel_go_reports_them(engine: str, text: str, message: str) -> None:
    assert error_of(text, engine) == message


@pytest.mark.parametrize(("text", "message"), [
    ("1", "expression returned non-string value: 1 (int)"),
    ("1u", "expression returned non-string value: 1 (uint)"),
    ("1.5", "expression returned non-string value: 1.5 (double)"),
    ("2.5 * 2.0", "expression returned non-string value: 5.0 (double)"),
    ("true", "expression returned non-string value: true (bool)"),
    ("null", "expression returned non-string value: null (null_type)"),
    ("b'x'", 'expression returned non-string value: b"x" (bytes)'),
    ("[1, 'a']", 'expression returned non-string value: [1, "a"] (list)'),
    ("{'a': [1, true]}", 'expression returned non-string value: {"a": [1, true]} (map)'),
    ("target.labels", 'expression returned non-string value: {"region": "eu"} (map)'),
    ("type(1)", "expression returned non-string value: int (type)"),
    ("timestamp('2020-01-01T00:00:00Z')", "expression returned non-string value: 2020-01-01T00:00:00Z (timestamp)"),
    ("duration('90s')", "expression returned non-string value: 90s (duration)"),
])
def test_result_that_is_not_a_string_is_an_error(engine: str, text: str, message: str) -> None:
    assert error_of(text, engine) == message


def test_type_error_is_found_when_compiling_by_cel_expr_python_and_when_evaluating_by_cel_python(
        engine: str) -> None:
    # cel-go and cel-expr-python type-check; celpy has no checker and only fails on evaluation.
    if engine == cel.CEL_EXPR_PYTHON:
        with pytest.raises(cel.CelError) as caught:
            cel.compile_expression("repoDefault + 1", engine=engine)
        assert str(caught.value) == \
            "ERROR: <input>:1:13: found no matching overload for '_+_' applied to '(string, int)'"
    else:
        assert error_of("repoDefault + 1", engine) == "no such overload"


def test_list_index_out_of_range_is_an_error_worded_by_each_engine(engine: str) -> None:
    expected = {cel.CEL_EXPR_PYTHON: "index '3' out of range in list size '1'", cel.CEL_PYTHON: "index out of range"}
    assert error_of("['a'][3]", engine) == expected[engine]


def test_compiling_the_same_text_twice_returns_the_same_expression(engine: str) -> None:
    first = cel.compile_expression("packageDefault + '-compiled-once'", engine=engine)
    assert cel.compile_expression("packageDefault + '-compiled-once'", engine=engine) is first
    assert first.engine == engine
    assert first.text == "packageDefault + '-compiled-once'"


def test_each_engine_compiles_its_own_expression() -> None:
    if len(cel.available_engines()) < 2:
        pytest.skip("needs both engines")
    fast = cel.compile_expression("repoDefault", engine=cel.CEL_EXPR_PYTHON)
    slow = cel.compile_expression("repoDefault", engine=cel.CEL_PYTHON)
    assert (fast.engine, slow.engine) == (cel.CEL_EXPR_PYTHON, cel.CEL_PYTHON)
    assert fast.evaluate(VARIABLES) == slow.evaluate(VARIABLES) == "edge-1"


def test_bindings_serve_many_expressions(engine: str) -> None:
    bound = cel.bind({**VARIABLES, "repository": VARIABLES["target"]}, engine=engine)
    results = [cel.compile_expression(text, engine=engine).evaluate(bound)
               for text in ("repoDefault", "repository.labels['region']", "upstream.name")]
    assert results == ["edge-1", "eu", "blueprints.base.v1"]


def test_bindings_of_one_engine_are_refused_by_the_other() -> None:
    if len(cel.available_engines()) < 2:
        pytest.skip("needs both engines")
    bound = cel.bind(VARIABLES, engine=cel.CEL_PYTHON)
    with pytest.raises(ValueError, match="bindings for cel-python used with a cel-expr-python expression"):
        cel.compile_expression("repoDefault", engine=cel.CEL_EXPR_PYTHON).evaluate(bound)


def test_the_cel_project_engine_is_preferred(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(cel.ENGINE_ENV, raising=False)
    assert cel.engine_name() == cel.available_engines()[0]
    monkeypatch.setattr(cel, "_importable", lambda name: True)
    assert cel.engine_name() == cel.CEL_EXPR_PYTHON


def test_environment_variable_forces_an_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cel.ENGINE_ENV, cel.CEL_PYTHON)
    assert cel.engine_name() == cel.CEL_PYTHON
    assert cel.compile_expression("'forced'").engine == cel.CEL_PYTHON


def test_unknown_engine_in_the_environment_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cel.ENGINE_ENV, "cel-go")
    with pytest.raises(cel.CelError) as caught:
        cel.compile_expression("'x'")
    assert str(caught.value) == \
        "unknown CEL engine 'cel-go' ($PORCHKIT_CEL_ENGINE): choose cel-expr-python or cel-python"


def test_forced_engine_that_is_not_installed_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cel, "_importable", lambda name: name == cel.CEL_PYTHON)
    monkeypatch.setenv(cel.ENGINE_ENV, cel.CEL_EXPR_PYTHON)
    with pytest.raises(cel.CelError) as caught:
        cel.engine_name()
    assert str(caught.value) == \
        "CEL engine cel-expr-python ($PORCHKIT_CEL_ENGINE) is not installed: pip install cel-expr-python"
    monkeypatch.delenv(cel.ENGINE_ENV)
    assert cel.engine_name() == cel.CEL_PYTHON


def test_no_engine_installed_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(cel.ENGINE_ENV, raising=False)
    monkeypatch.setattr(cel, "_importable", lambda name: False)
    with pytest.raises(cel.CelError) as caught:
        cel.engine_name()
    assert str(caught.value) == "no CEL engine is installed: pip install cel-expr-python or cel-python"


# --- the two engines agree ------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    # cel-go's string(): booleans in lower case, doubles as Go's strconv 'g' format writes them
    ("string(has(target.labels.region))", "true"),
    ("string('zone' in target.labels)", "false"),
    ("string(double('5'))", "5"),
    ("string(2.5 * 2.0)", "5"),
    ("string(-0.0)", "-0"),
    ("string(123456.0)", "123456"),
    ("string(1234567.0)", "1.234567e+06"),
    ("string(0.0001)", "0.0001"),
    ("string(0.00001)", "1e-05"),
    ("string(0.1 + 0.2)", "0.30000000000000004"),
    ("string(0.25 * 2.0)", "0.5"),
    ("string(1.0e21)", "1e+21"),
    ("string(b'abc')", "abc"),
    ("string(7u)", "7"),
    ("type(repoDefault) == string ? 'yes' : 'no'", "yes"),
])
def test_conversion_to_string_reads_the_same_on_both_engines(engine: str, text: str, expected: str) -> None:
    assert evaluate(text, engine) == expected


@pytest.mark.parametrize("text", [
    "string(target.labels)",
    "string(['a'])",
    "string(type(1))",
    "['a', 'b'][-1]",
    "target.name[0]",
    "dyn([1, 2])[dyn(-1)] == 2 ? 'y' : 'n'",
])
def test_what_cel_go_refuses_fails_on_both_engines(engine: str, text: str) -> None:
    with pytest.raises(cel.CelError):
        evaluate(text, engine)


@pytest.mark.parametrize(("text", "message"), [
    ("has(target.labels['region']) ? 'y' : 'n'", "invalid argument to has() macro"),
    ("has(target) ? 'y' : 'n'", "invalid argument to has() macro"),
    ("target.labels.exists(1, true) ? 'y' : 'n'", "argument must be a simple name"),
])
def test_a_malformed_macro_is_a_compile_error_on_both_engines(engine: str, text: str, message: str) -> None:
    with pytest.raises(cel.CelError) as caught:
        cel.compile_expression(text, engine=engine)
    if engine == cel.CEL_PYTHON:  # cel-expr-python words these its own way
        assert str(caught.value).startswith("ERROR: <input>:1:") and str(caught.value).endswith(message)


@pytest.mark.parametrize("text", [
    "string([1, 2, 3].map(x, x > 1, x * 2).size())",  # cel-go has it; cel-python (0.5) does not
    "target.labels.all(k) ? 'y' : 'n'",
    "dyn()",
    "string(size())",
])
def test_an_engine_failure_is_a_cel_error_never_another_exception(engine: str, text: str) -> None:
    try:
        result = evaluate(text, engine)
    except cel.CelError as err:
        assert "\n" not in str(err)
    else:
        assert result == "2"


def test_a_value_cel_cannot_hold_is_a_cel_error_when_binding(engine: str) -> None:
    import datetime

    with pytest.raises(cel.CelError) as caught:
        bound = cel.bind({**VARIABLES, "target": {"name": "x", "labels": {"since": datetime.date(2026, 1, 1)}}},
                         engine=engine)
        cel.compile_expression("target.name", engine=engine).evaluate(bound)
    assert "\n" not in str(caught.value)
