"""Hostile input is one line and a non-zero exit, never a traceback, in bounded time and memory.

Every command that reads manifests, on a file, in a directory and on stdin, each run under a 1 GB
address-space cap and a 5 s budget after start-up: alias bombs, duplicate keys, text that is not
UTF-8; and `-` with stdin closed. The function (`fn deltapipe`) reads ResourceLists with krmfn's
reader, held to the same rules, and answers unclosed flow collections and a closed stdin as bad
input (exit 2). Flags: a state "directory" that is a file, a timeout that is not above 0, a
kubeconfig that is not there. PackageVariants and sets named as no object may be, or with an
upstream revision Porch could not have: one line naming the file, the object and the field,
before anything is printed or written.
"""

from __future__ import annotations

import io
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from krmfn.errors import KrmfnError
from krmfn.resourcelist import ResourceList
from krmfn.runner import main as krmfn_main

ROOT = Path(__file__).resolve().parents[2]
PIPELINE = ROOT / "testdata/deltapipe/endpoints/pipeline.yaml"
MEMORY_CAP = 2**30
TIME_CAP = 5.0  # seconds of work, beyond the interpreter's own start (measured on `--version`)

BOMB = "\n".join(["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]",
                  *(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10))]) + "\n"
DUPLICATE = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  name: b\n"
HOSTILE = {  # name -> (bytes, what the one line says)
    "bomb": (BOMB.encode(), "aliases expand to an unreasonably large document"),
    "duplicate": (DUPLICATE.encode(), 'mapping key "name" already defined at line 4'),
    "binary": (b"\xff\xfe\x00\x01kind: x\n", "not UTF-8 text"),
}
COMMANDS = {
    "pipeline eval": ["pipeline", "eval", "-p", str(PIPELINE), "-f"],
    "variants render": ["variants", "render", "-f"],
    "variants reconcile": ["variants", "reconcile", "-f"],
    "decorators reconcile": ["decorators", "reconcile", "-f"],
    "map reconcile": ["map", "reconcile", "-f"],
}


def _capped() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def porchkit(*args: str, stdin: bytes = b"") -> tuple[subprocess.CompletedProcess[bytes], float]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "porchkit", *args], input=stdin, capture_output=True,
                          timeout=60, preexec_fn=_capped)
    return done, time.perf_counter() - started


@pytest.fixture(scope="module")
def start_up() -> float:
    return min(porchkit("--version")[1] for _ in range(2))


@pytest.mark.parametrize("channel", ["file", "directory", "stdin"])
@pytest.mark.parametrize("hostile", sorted(HOSTILE))
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_hostile_manifests_are_one_line_in_bounded_time_and_memory(tmp_path: Path, start_up: float, command: str,
                                                                    hostile: str, channel: str) -> None:
    data, words = HOSTILE[hostile]
    (tmp_path / "in").mkdir()
    path = tmp_path / "in" / "hostile.yaml"
    path.write_bytes(data)
    target = {"file": str(path), "directory": str(tmp_path / "in"), "stdin": "-"}[channel]
    done, took = porchkit(*COMMANDS[command], target, stdin=data if channel == "stdin" else b"")
    err = done.stderr.decode(errors="replace")
    lines = err.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1, err
    named = "<stdin>" if channel == "stdin" else str(path)
    assert lines[0].startswith(f"porchkit: {named}") and words in lines[0], lines[0]
    assert "Traceback" not in err and done.stdout == b""
    assert took - start_up < TIME_CAP


@pytest.mark.parametrize("hostile", ["bomb", "duplicate"])
def test_the_function_refuses_the_same_resource_lists_with_exit_2(hostile: str) -> None:
    data, words = HOSTILE[hostile]
    body = "".join(f"  {line}\n" for line in data.decode().splitlines())
    resource_list = f"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- \n{body}"
    done, _ = porchkit("fn", "deltapipe", stdin=resource_list.encode())
    err = done.stderr.decode(errors="replace")
    assert done.returncode == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert words.split(" at line")[0] in err


@pytest.mark.parametrize("text", [
    "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: [\n  {kind: A}\n",
    "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n- a: [1, [2, {b: [",
])
def test_an_unclosed_flow_collection_is_bad_input_not_a_crash(text: str) -> None:
    done, _ = porchkit("fn", "deltapipe", stdin=text.encode())
    err = done.stderr.decode(errors="replace")
    assert done.returncode == 2 and "Traceback" not in err, err
    assert re.match(r"deltapipe: line \d+, column \d+: invalid YAML: ", err), err


def test_a_closed_stdin_is_bad_input_not_a_crash() -> None:
    done = subprocess.run([sys.executable, "-m", "porchkit", "fn", "deltapipe"], capture_output=True,
                          preexec_fn=lambda: os.close(0), timeout=60)
    assert done.returncode == 2 and done.stderr == b"deltapipe: stdin is closed: expected a ResourceList"


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_closed_stdin_named_with_dash_is_one_line_for_every_command(command: str) -> None:
    done = subprocess.run([sys.executable, "-m", "porchkit", *COMMANDS[command], "-"], capture_output=True,
                          preexec_fn=lambda: os.close(0), timeout=60)
    assert (done.returncode, done.stderr, done.stdout) == (1, b"porchkit: <stdin>: closed, nothing to read\n", b"")


@pytest.mark.parametrize(("args", "words"), [
    (["variants", "reconcile", "--state", "{file}"], "argument --state: {file}: not a directory"),
    (["manager", "--embedded", "--state", "{file}"], "argument --state: {file}: not a directory"),
    (["variants", "reconcile", "--timeout", "-5"], "argument --timeout: '-5' must be more than 0"),
    (["decorators", "reconcile", "--timeout", "nan"], "argument --timeout: 'nan' must be more than 0"),
])
def test_a_bad_flag_is_refused_before_anything_runs(tmp_path: Path, args: list[str], words: str) -> None:
    (tmp_path / "state").write_text("a file, not a directory")
    (tmp_path / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n")
    filled = [arg.format(file=tmp_path / "state") for arg in args]
    extra = [] if "manager" in args else ["-f", str(tmp_path / "cm.yaml")]
    done, _ = porchkit(*filled, *extra)
    err = done.stderr.decode()
    assert done.returncode == 2 and words.format(file=tmp_path / "state") in err and "Traceback" not in err


def test_a_missing_kubeconfig_says_so(tmp_path: Path) -> None:
    done, _ = porchkit("manager", "--kubeconfig", str(tmp_path / "missing"), "--controllers", "decorator",
                       "--health-addr", "0")
    assert done.returncode == 1
    assert done.stderr.decode().splitlines()[-1] == f"porchkit: kubeconfig {tmp_path / 'missing'}: no such file"


VARIANT = """apiVersion: config.porch.kpt.dev/v1alpha1
kind: PackageVariant
metadata: {{name: "{name}", namespace: default}}
spec:
  upstream: {{repo: catalog, package: network, revision: {revision}}}
  downstream: {{repo: edge, package: a}}
"""
VARIANT_SET = """apiVersion: config.porch.kpt.dev/v1alpha2
kind: PackageVariantSet
metadata: {{name: "{name}", namespace: default}}
spec:
  upstream: {{repo: catalog, package: network, revision: {revision}}}
  targets: [{{repositories: [{{name: edge, packageNames: [a]}}]}}]
"""
SUBDOMAIN = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
             "must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
             "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
BELOW = "spec.upstream.revision: must be at least -1 (no package revision has a lower number), not {}"
INT64 = "spec.upstream.revision: must be a 64-bit integer, from -9223372036854775808 to 9223372036854775807"
UNLOADABLE = {  # name -> (manifest, what the one line says after "porchkit: <file>: ")
    "set-bad-name-and-revision": (VARIANT_SET.format(name="Bad_Name!", revision=-3),
                                  f"PackageVariantSet default/Bad_Name!: metadata.name: {SUBDOMAIN}; "
                                  f"{BELOW.format(-3)}"),
    "set-revision-past-int64": (VARIANT_SET.format(name="fanout", revision=2**63),  # go-yaml: a uint64
                                f"PackageVariantSet default/fanout: {INT64}"),
    "set-revision-beyond-64-bits": (VARIANT_SET.format(name="fanout", revision=10**29),  # go-yaml: a float
                                    "PackageVariantSet default/fanout: spec.upstream.revision: must be an integer, "
                                    "not a number"),
    "set-revision-a-boolean": (VARIANT_SET.format(name="fanout", revision="true"),
                               "PackageVariantSet default/fanout: spec.upstream.revision: must be an integer, "
                               "not a boolean"),
    "variant-revision-below-minus-one": (VARIANT.format(name="edge-a", revision=-2),
                                         f"PackageVariant default/edge-a: {BELOW.format(-2)}"),
    "variant-name-too-long": (VARIANT.format(name="a" * 254, revision=1),
                              f"PackageVariant default/{'a' * 254}: metadata.name: must be no more than 253 "
                              "characters"),
    "variant-revision-of-5000-digits": (VARIANT.format(name="edge-a", revision="1" + "0" * 4999),  # go-yaml: text
                                        "PackageVariant default/edge-a: spec.upstream.revision: must be an integer, "
                                        "not a string"),
}


@pytest.mark.parametrize("unloadable", sorted(UNLOADABLE))
@pytest.mark.parametrize("command", ["variants render", "variants reconcile"])
def test_a_variant_with_a_bad_name_or_revision_is_one_line_and_nothing_is_written(
        tmp_path: Path, command: str, unloadable: str) -> None:
    manifest, words = UNLOADABLE[unloadable]
    path = tmp_path / "variants.yaml"
    # A valid Repository first: the refusal comes before any object is loaded.
    path.write_text("apiVersion: config.porch.kpt.dev/v1alpha1\nkind: Repository\n"
                    "metadata: {name: edge, namespace: default}\nspec: {type: git}\n---\n" + manifest)
    state = tmp_path / "state"
    extra = ["--state", str(state)] if command == "variants reconcile" else []
    done, _ = porchkit(*COMMANDS[command], str(path), *extra)
    err = done.stderr.decode(errors="replace")
    where = f"{path} (document 2)" if "invalid YAML" not in words else str(path)
    assert done.returncode == 1 and err.splitlines() == [f"porchkit: {where}: {words}"], err
    assert done.stdout == b"" and not state.exists()


@pytest.mark.parametrize("revision", [-1, 2**63 - 1])
def test_a_set_with_the_lowest_or_highest_revision_porch_can_have_is_rendered(tmp_path: Path, revision: int) -> None:
    path = tmp_path / "set.yaml"
    path.write_text(VARIANT_SET.format(name="fanout", revision=revision))
    done, _ = porchkit(*COMMANDS["variants render"], str(path))
    assert done.returncode == 0, done.stderr.decode()
    assert f"revision: {revision}\n" in done.stdout.decode()


HOOKLESS = """apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata: {{name: idle}}
spec:
  resources: [{{apiVersion: v1, resource: configmaps}}]
  hooks: {hooks}
"""


@pytest.mark.parametrize("hooks", ["{}", "{customize: {webhook: {url: 'http://h'}}}"])
def test_a_decorator_controller_with_neither_sync_nor_finalize_is_one_line(tmp_path: Path, hooks: str) -> None:
    path = tmp_path / "dc.yaml"
    path.write_text(HOOKLESS.format(hooks=hooks))
    done, _ = porchkit("decorators", "reconcile", "-f", str(path))
    lines = done.stderr.decode().strip().splitlines()
    assert done.returncode == 1 and lines == [
        f"porchkit: {path}: DecoratorController idle: spec.hooks: needs a sync or a finalize hook; "
        "with neither, no target can ever be synced"]


def test_control_characters_in_a_name_are_escaped_on_stderr(tmp_path: Path) -> None:
    path = tmp_path / "dc.yaml"
    path.write_text(HOOKLESS.format(hooks="{}").replace("name: idle", 'name: "idle\\e[2J\\0"'))
    done, _ = porchkit("decorators", "reconcile", "-f", str(path))
    err = done.stderr.decode()
    assert done.returncode == 1 and "\x1b" not in err and "\x00" not in err
    assert err.startswith(f"porchkit: {path}: DecoratorController idle\\x1b[2J\\x00: ") and err.count("\n") == 1, err


RESOURCE_LIST = b"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems: []\n"


def test_a_krm_function_escapes_control_characters_on_stderr() -> None:
    def fails(rl: ResourceList) -> None:
        raise KrmfnError("bad name \x1b]0;owned\x07 here")

    stderr = io.StringIO()
    code = krmfn_main(fails, name="fails", stdin=io.BytesIO(RESOURCE_LIST), stdout=io.BytesIO(),
                      stderr=stderr)
    assert code != 0 and "\\x1b]0;owned\\x07 here" in stderr.getvalue() and "\x1b" not in stderr.getvalue()
