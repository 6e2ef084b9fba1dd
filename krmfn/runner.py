"""Running a function: stdin to ResourceList, the function, ResourceList to stdout, exit code.

    if __name__ == "__main__":
        krmfn.run(my_function)        # my_function(rl: ResourceList) -> None

The contract with kpt (krm-functions spec §1, §2.2, §8), kept on every path:

| what happened                                 | stdout                         | exit |
|-----------------------------------------------|--------------------------------|------|
| the function returned, no error result        | the items as the function left them, results | 0 |
| the function reported an error result         | the input items unchanged, results           | 1 |
| it raised KrmfnError (ConfigError, ...)        | the input items unchanged, results + error   | 1 |
| its output cannot be written (e.g. a set)     | the input items unchanged, results + error   | 1 |
| it raised anything else: a bug                | the input items unchanged, results + error   | 3 |
| stdin is not a readable ResourceList          | nothing                        | 2 |

It never exits 0 without a complete ResourceList on stdout (an empty stdout with exit 0 makes
kpt delete the package). stderr gets one line per failure, `NAME: message` (without a final newline unless
stderr is a terminal: kpt would show it as an extra empty line); only a bug adds its traceback,
after that line, so that kpt's four-line excerpt starts with the message.

`process` is the same thing without I/O, for tests and for embedding.
"""

from __future__ import annotations

import re
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import IO, Any, NamedTuple, NoReturn

from krmfn import resourcelist, results
from krmfn.errors import InputError, KrmfnError, OutputError
from krmfn.resourcelist import MAX_INPUT, ResourceList

Function = Callable[[ResourceList], Any]

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_BUG = 0, 1, 2, 3


class Outcome(NamedTuple):
    """What a run produced: the bytes for stdout, the lines for stderr, the exit code."""

    exit_code: int
    output: bytes
    messages: list[str]
    resource_list: ResourceList | None = None  # what was written, when something was


def run(function: Function, *, name: str | None = None, argv: Sequence[str] | None = None) -> NoReturn:
    """The entry point of a function script: runs `main` with the process's streams and exits."""
    sys.exit(main(function, name=name, argv=sys.argv[1:] if argv is None else argv))


def main(
    function: Function,
    *,
    name: str | None = None,
    argv: Sequence[str] = (),
    stdin: IO[bytes] | None = None,
    stdout: IO[bytes] | None = None,
    stderr: IO[str] | None = None,
) -> int:
    """Read stdin, run `function`, write stdout and stderr; returns the exit code.

    Accepts `-h`/`--help` (prints the function's docstring, else its module's) and no other
    argument.
    """
    name = name or _default_name(function)
    err_stream = stderr if stderr is not None else sys.stderr
    if list(argv) in (["-h"], ["--help"]):
        print(_help(function, name), file=_text_stream(stdout) if stdout is not None else sys.stdout)
        return EXIT_OK
    if argv:
        _say(err_stream, [f"{name}: unexpected argument {argv[0]!r}: a KRM function reads a ResourceList on stdin"])
        return EXIT_BAD_INPUT
    if stdin is None and sys.stdin is None:  # started with stdin closed (`<&-`)
        _say(err_stream, [f"{name}: stdin is closed: expected a ResourceList"])
        return EXIT_BAD_INPUT
    in_stream = stdin if stdin is not None else sys.stdin.buffer
    # One byte past the limit is enough for `read` to refuse it, and no more is ever held.
    outcome = process(function, in_stream.read(MAX_INPUT + 1), name=name)
    out_stream = stdout if stdout is not None else sys.stdout.buffer
    try:
        out_stream.write(outcome.output)
        out_stream.flush()
    except OSError as err:  # e.g. a closed pipe: the output is incomplete, so this run failed
        _say(err_stream, [f"{name}: cannot write the output: {err.strerror or err}"])
        return outcome.exit_code or EXIT_FAILED
    _say(err_stream, outcome.messages)
    return outcome.exit_code


def process(function: Function, data: bytes | str, *, name: str | None = None) -> Outcome:
    """Run `function` over the ResourceList in `data`, without touching any stream.

    Never raises for bad input or a failing function: every outcome is an `Outcome` (see the
    table in the module docstring). KeyboardInterrupt and other BaseExceptions pass through.
    """
    name = name or _default_name(function)
    try:
        rl = resourcelist.read(data)
    except InputError as err:
        return Outcome(EXIT_BAD_INPUT, b"", [f"{name}: {err}"])
    try:
        returned = function(rl)
        if returned is not None and returned is not rl:
            raise TypeError(
                f"the function returned {type(returned).__name__}: "
                "it must edit the ResourceList in place and return None"
            )
    except KrmfnError as err:
        return _failed(data, rl, EXIT_FAILED, f"{name}: {err}", results.error(str(err)))
    except SystemExit as exit_:
        if exit_.code not in (None, 0):
            message = f"the function exited with {exit_.code!r}"
            return _failed(data, rl, EXIT_FAILED, f"{name}: {message}", results.error(message))
    except Exception as err:
        message = f"internal error: {type(err).__name__}: {' '.join(str(err).split())}".rstrip(": ")
        trace = traceback.format_exc().rstrip("\n").split("\n")
        return _failed(data, rl, EXIT_BUG, f"{name}: {message}", results.error(message), trace)
    if results.exit_code(rl.results):
        errors = sum(1 for r in rl.results if r.severity == "error")
        return _failed(data, rl, EXIT_FAILED, f"{name}: failed with {errors} error result(s)", None)
    try:
        output = resourcelist.write(rl)
    except OutputError as err:
        message = f"cannot write the output: {err}"
        return _failed(data, rl, EXIT_FAILED, f"{name}: {message}", results.error(message))
    return Outcome(EXIT_OK, output.encode("utf-8"), [], rl)


def _failed(
    data: bytes | str,
    rl: ResourceList,
    code: int,
    message: str,
    extra: results.Result | None,
    trace: list[str] | None = None,
) -> Outcome:
    """The input items, re-read as they came, with the function's results and `extra`."""
    pristine = resourcelist.read(data)  # it was read once already: cannot fail now
    reported = [r for r in rl.results if isinstance(r, results.Result)] if isinstance(rl.results, list) else []
    pristine.results = reported + ([extra] if extra is not None else [])
    try:
        output = resourcelist.write(pristine)
    except OutputError as err:  # a result the function built holds something unwritable
        pristine.results = [results.error(f"cannot write the results: {err}")] + ([extra] if extra else [])
        try:
            output = resourcelist.write(pristine)
        except OutputError as again:  # items with no text to copy (JSON) and too deep to write anew
            return Outcome(code, b"", [f"{message} (and the input cannot be written back: {again})",
                                       *(trace or [])], pristine)
    return Outcome(code, output.encode("utf-8"), [message, *(trace or [])], pristine)


def _say(stream: IO[str], lines: list[str]) -> None:
    """Write `lines` to stderr. kpt shows stderr split at every newline, so a final newline
    would show as an empty `""` line under the message: only a person's terminal gets one."""
    if not lines:
        return
    try:
        end = "\n" if stream.isatty() else ""
    except (AttributeError, ValueError):
        end = ""
    stream.write(_CONTROL.sub(_escaped, "\n".join(lines)) + end)
    stream.flush()


# Every control character but newline and tab: an ESC in an object's name must not drive the terminal.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _escaped(match: re.Match[str]) -> str:
    return f"\\x{ord(match.group()):02x}"


def _default_name(function: Function) -> str:
    return str(getattr(function, "__name__", "function")).replace("_", "-")


def _help(function: Function, name: str) -> str:
    module = sys.modules.get(getattr(function, "__module__", "") or "")
    doc = (function.__doc__ or getattr(module, "__doc__", None) or "").strip()
    usage = (
        f"usage: {name} < resource-list.yaml > resource-list.yaml\n\n"
        "A KRM function: reads a ResourceList on stdin and writes one on stdout. With kpt:\n"
        f"  kpt fn eval DIR --exec '{name}' [--fn-config CONFIG.yaml | -- key=value ...]\n"
        "  kpt fn render DIR --allow-exec   (with `exec:` in the Kptfile pipeline)"
    )
    return f"{usage}\n\n{doc}" if doc else usage


def _text_stream(stream: IO[bytes]) -> Any:
    class _Writer:
        def write(self, text: str) -> int:
            return stream.write(text.encode("utf-8"))

        def flush(self) -> None:
            stream.flush()

    return _Writer()
