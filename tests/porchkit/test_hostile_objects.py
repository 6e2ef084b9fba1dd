"""Hostile input on the channels past the manifest reader: a function's config, and the objects a
controller is given. Each runs as a subprocess under a 1 GB address-space cap and a 5 s budget
after start-up, and must give exit 1, one line per problem naming the object and the field, no
traceback, no line holding a huge value whole, and nothing written: a function hands its input
items back unchanged with an error result, a preview changes nothing, and `variants reconcile`
leaves every git ref where it was (its controllers report the object Stalled and say why).
"""

from __future__ import annotations

import copy
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from krmfn.resourcelist import read
from tests.porchkit.test_hostile_input import BOMB
from tests.porchvariant.variants_support import NS, Repos, package_variant

ROOT = Path(__file__).resolve().parents[2]
MEMORY_CAP = 2**30
TIME_CAP = 5.0  # seconds of work, beyond the interpreter's own start (measured on `--version`)
LONGEST_LINE = 1_000
# The cap is on address space, and glibc reserves 64 MiB of it for each thread's malloc arena: with
# the controllers' threads that alone would pass 1 GB, though little of it is ever used.
ENV = {**os.environ, "MALLOC_ARENA_MAX": "2"}


def _capped() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def porchkit(*args: str, stdin: bytes = b"") -> tuple[subprocess.CompletedProcess[bytes], float]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "porchkit", *args], input=stdin, capture_output=True, timeout=60,
                          preexec_fn=_capped, env=ENV, cwd=ROOT)
    return done, time.perf_counter() - started


@pytest.fixture(scope="module")
def start_up() -> float:
    return min(porchkit("--version")[1] for _ in range(2))


def _error_lines(done: subprocess.CompletedProcess[bytes]) -> list[str]:
    err = done.stderr.decode(errors="replace")
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert lines and all(len(line) <= LONGEST_LINE for line in lines), err[:2000]
    return lines


def _nested(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


def _put(obj: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    changed = copy.deepcopy(obj)
    target: Any = changed
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return changed


# --- function config: `porchkit fn deltapipe` with a hostile functionConfig in its ResourceList ----

ITEMS = """items:
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: settings
    annotations:
      config.kubernetes.io/path: settings.yaml
  data:
    color: blue
"""


def _pipeline(stages: str, **fields: str) -> str:
    lines = ["apiVersion: fn.porchkit.dev/v1alpha1", "kind: Pipeline", "metadata: {name: p}", f"pipeline: {stages}",
             *(f"{key}: {value}" for key, value in fields.items())]
    return "\n".join(lines) + "\n"


def _config_map(**data: str) -> str:
    return yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": data})


DEEP_EXPRESSION = '{"@and": [' * 300 + "true" + "]}" * 300  # 600 YAML levels: read, then too deep to compile
FUNCTION_CONFIGS = {  # name -> (functionConfig, exit code, what the one line says after "deltapipe: ")
    "stages-a-number": (_pipeline("5"), 1, "pipeline p: stage 1: expected a map with one operation"),
    "unknown-operation": (_pipeline('[{"@bogus": 1}]'), 1, "pipeline p: stage 1: unknown pipeline operation '@bogus'"),
    "expression-nested-too-deeply": (_pipeline(f'[{{"@select": {DEEP_EXPRESSION}}}]'), 1,
                                     "pipeline p: an expression is nested too deeply to compile"),
    "setter-past-the-padding-cap": (_pipeline("[{\"@project\": {metadata: {name: $.metadata.name}, "
                                              "'$.x[100000000]': 1}}]", target="{apiVersion: v1, kind: ConfigMap}"),
                                    1, "cannot write $.x[100000000]: [100000000] would pad the list of 0 with too "
                                       "many nulls (at most 65,536)"),
    "sources-a-string": (_pipeline("[]", sources="x"), 1,
                         'functionConfig Pipeline/p: sources: expected a list, got string "x"'),
    "target-kind-a-number": (_pipeline("[]", target="{apiVersion: v1, kind: 5}"), 1,
                             "functionConfig Pipeline/p: target.kind: expected a kind name, got int 5"),
    "kind-not-a-config": ("apiVersion: v1\nkind: Secret\nmetadata: {name: c}\n", 1,
                          "functionConfig: kind 'Secret' is not supported"),
    "config-map-stages-alias-bomb": (_config_map(pipeline=BOMB), 1, "functionConfig ConfigMap/c: data.pipeline: "
                                     "invalid YAML: aliases expand to an unreasonably large document"),
    "config-map-target-key-twice": (_config_map(pipeline="[]", target="apiVersion: v1\nkind: A\nkind: B\n"), 1,
                                    'functionConfig ConfigMap/c: data.target: invalid YAML: mapping key "kind" '
                                       "already defined at line 2"),
    "config-map-stages-nested-too-deeply": (_config_map(pipeline="[" * 5000), 1,
                                            "functionConfig ConfigMap/c: data.pipeline: invalid YAML: nested too "
                                            "deeply"),
    "config-alias-bomb-in-the-resource-list": (BOMB, 2, "invalid YAML: aliases expand to an unreasonably large "
                                                        "document"),
}


@pytest.mark.parametrize("hostile", sorted(FUNCTION_CONFIGS))
def test_a_hostile_function_config_is_one_line_and_the_items_come_back_unchanged(start_up: float,
                                                                                  hostile: str) -> None:
    config, code, words = FUNCTION_CONFIGS[hostile]
    body = "".join(f"  {line}\n" for line in config.splitlines())
    text = f"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\n{ITEMS}functionConfig:\n{body}"
    done, took = porchkit("fn", "deltapipe", stdin=text.encode())
    [line] = _error_lines(done)
    assert done.returncode == code and line.startswith("deltapipe: ") and words in line, line
    assert took - start_up < TIME_CAP
    if code == 2:  # unreadable input: nothing at all on stdout
        assert done.stdout == b""
        return
    out = done.stdout.decode()
    assert out.startswith(f"apiVersion: config.kubernetes.io/v1\nkind: ResourceList\n{ITEMS}")  # verbatim
    returned = read(out)
    assert returned.items == read(text).items and returned.results[-1].severity == "error"


# --- cluster objects: previews of DecoratorControllers and MapControllers -------------------------

DECORATORS = ROOT / "testdata/decorators/service-per-pod"
MAPS = ROOT / "testdata/mapctl/configmap-per-service"
DECORATOR = "DecoratorController service-per-pod: "
MAPPER = "MapController configmap-per-service: "
CONTROLLER_OBJECTS = {  # name -> (command, folder, file, path, value, what every line says)
    "decorator-resources-a-string": ("decorators", DECORATORS, "decoratorcontroller.yaml", ("spec", "resources"), "x",
                                     f"{DECORATOR}spec.resources: must be a list, not a string"),
    "decorator-selector-operator": ("decorators", DECORATORS, "decoratorcontroller.yaml",
                                    ("spec", "resources", 0, "labelSelector"),
                                    {"matchExpressions": [{"key": "a", "operator": "Bogus"}]},
                                    f'{DECORATOR}spec.resources[0].labelSelector.matchExpressions[0].operator: "Bogus" '
                                    "is not a selector operator"),
    "decorator-resync-past-64-bits": ("decorators", DECORATORS, "decoratorcontroller.yaml",
                                      ("spec", "resyncPeriodSeconds"), 10**30,
                                      f"{DECORATOR}spec.resyncPeriodSeconds: must be an integer, not a number"),
    "decorator-huge-update-method": ("decorators", DECORATORS, "decoratorcontroller.yaml",
                                     ("spec", "attachments", 0, "updateStrategy", "method"), "a" * 200_000,
                                     f"{DECORATOR}spec.attachments[0].updateStrategy.method: "),
    "decorator-attachments-nested": ("decorators", DECORATORS, "decoratorcontroller.yaml", ("spec", "attachments"),
                                     _nested(300), f"{DECORATOR}spec.attachments[0]: must be a map, not a list"),
    "decorator-pipeline-hook-operator": ("decorators", DECORATORS, "decoratorcontroller.yaml",
                                         ("spec", "hooks", "sync"),
                                         {"pipeline": {"pipeline": [{"@select": {"@bogus": 1}}]}},
                                         f"{DECORATOR}spec.hooks.sync.pipeline: stage 1 (@select): unknown operator "
                                         "@bogus"),
    "map-parent-a-string": ("map", MAPS, "mapcontroller.yaml", ("spec", "parentResource"), "x",
                            f"{MAPPER}spec.parentResource: must be a map, not a string"),
    "map-huge-resource-name": ("map", MAPS, "mapcontroller.yaml", ("spec", "parentResource", "resource"),
                               "a" * 200_000, f"{MAPPER}spec.parentResource: can't find resource "),
    "map-parallelism-past-64-bits": ("map", MAPS, "mapcontroller.yaml", ("spec", "parallelism"), 10**30,
                                     f"{MAPPER}spec.parallelism: must be an integer, not a number"),
    "map-outputs-nested": ("map", MAPS, "mapcontroller.yaml", ("spec", "outputResources"), _nested(300),
                           f"{MAPPER}spec.outputResources[0]: must be a map, not a list"),
    # Known only once the hook answers, for each input: one line per input, not retried.
    "map-output-name-invalid": ("map", MAPS, "mapcontroller.yaml",
                                ("spec", "hooks", "map", "pipeline", "pipeline", 0, "@project", 0, "metadata", "name"),
                                "Bad_Name!", f'{MAPPER}map Service/default/'),
    "map-one-output-name-for-every-input": ("map", MAPS, "mapcontroller.yaml",
                                            ("spec", "hooks", "map", "pipeline", "pipeline", 0, "@project", 0,
                                             "metadata", "name"), "same-for-all",
                                            "create ConfigMap default/same-for-all: an object of that name exists "
                                            "and is not an output of this parent for this input"),
    "map-output-kind-not-served": ("map", MAPS, "mapcontroller.yaml",
                                   ("spec", "hooks", "map", "pipeline", "target", "apiVersion"), "x",
                                   "(ConfigMap in x is not served)"),
}


@pytest.mark.parametrize("hostile", sorted(CONTROLLER_OBJECTS))
def test_a_hostile_controller_object_is_one_line_naming_it_and_its_field(tmp_path: Path, start_up: float,
                                                                         hostile: str) -> None:
    command, folder, name, path, value, words = CONTROLLER_OBJECTS[hostile]
    shutil.copytree(folder, tmp_path / "in")
    manifest = tmp_path / "in" / name
    manifest.write_text(yaml.safe_dump(_put(yaml.safe_load(manifest.read_text()), path, value), sort_keys=False,
                                       width=10**9))
    done, took = porchkit(command, "reconcile", "-f", str(tmp_path / "in"))
    lines = _error_lines(done)
    assert done.returncode == 1 and 1 <= len(lines) <= 2, lines  # at most one per input (two Services)
    assert all(line.startswith("porchkit: ") and words in line for line in lines), lines
    assert took - start_up < TIME_CAP


# --- cluster objects: PackageVariants and sets, reconciled over git ------------------------------

VARIANT_SET = {"apiVersion": "config.porch.kpt.dev/v1alpha2", "kind": "PackageVariantSet",
               "metadata": {"name": "fan", "namespace": NS},
               "spec": {"upstream": {"repo": "catalog", "package": "web", "revision": 1},
                        "targets": [{"repositories": [{"name": "prod", "packageNames": ["a"]}],
                                     "template": {"downstream": {"packageExpr": "'x-' + target.package"}}}]}}
PACKAGE_EXPR = ("spec", "targets", 0, "template", "downstream", "packageExpr")
VARIANT = f"PackageVariant {NS}/web-prod is Stalled (ValidationError): "
SET = f"PackageVariantSet {NS}/fan is Stalled "
VARIANT_OBJECTS = {  # name -> (which object, path, value, what the one line says after "porchkit: ")
    "variant-upstream-a-string": ("variant", ("spec", "upstream"), "x",
                                  f"{VARIANT}spec.upstream: must be an object, not a string"),
    "variant-huge-package": ("variant", ("spec", "downstream", "package"), "a" * 200_000,
                             f"{VARIANT}spec.downstream.package: must be no more than 253 characters (a package "
                             "revision's name holds it), not 200,000"),
    "variant-injectors-nested": ("variant", ("spec", "injectors"), _nested(300),
                                 f"{VARIANT}spec.injectors[0]: must be an object, not a list"),
    "set-targets-a-number": ("set", ("spec", "targets"), 5,
                             f"{SET}(ValidationError): spec.targets: must be a list, not an integer"),
    "set-thousands-of-wrong-targets": ("set", ("spec", "targets"), ["x"] * 20_000,
                                       f"{SET}(ValidationError): spec.targets[0]: must be an object, not a string; "),
    "set-cel-syntax-error": ("set", PACKAGE_EXPR, "1 +",
                             f"{SET}(UnexpectedError): PackageVariantSet fan, target repository prod (package a): "
                             "template.downstream.packageExpr: ERROR: <input>:1:4: Syntax error"),
    "set-cel-string-times-a-number": ("set", PACKAGE_EXPR, "'a' * 100000000",
                                      f"{SET}(UnexpectedError): PackageVariantSet fan, target repository prod "
                                      "(package a): template.downstream.packageExpr: ERROR: <input>:1:5: found no "
                                      "matching overload for '_*_'"),
}


@pytest.fixture(scope="module")
def repos(tmp_path_factory: pytest.TempPathFactory) -> Repos:
    return Repos(tmp_path_factory.mktemp("repos"))


@pytest.mark.parametrize("hostile", sorted(VARIANT_OBJECTS))
def test_a_hostile_variant_or_set_is_stalled_with_one_line_and_nothing_is_written_to_git(
        tmp_path: Path, start_up: float, repos: Repos, hostile: str) -> None:
    which, path, value, words = VARIANT_OBJECTS[hostile]
    obj = _put(package_variant("web-prod") if which == "variant" else VARIANT_SET, path, value)
    (tmp_path / "objects.yaml").write_text(yaml.safe_dump_all([*repos.repositories(), obj], width=10**9))
    before = repos.all_refs()
    done, took = porchkit("variants", "reconcile", "-f", str(tmp_path / "objects.yaml"), "--state",
                          str(tmp_path / "state"))
    [line] = _error_lines(done)
    assert done.returncode == 1 and line.startswith(f"porchkit: {words}"), line
    assert done.stdout == b"no package revisions created or changed\n" and repos.all_refs() == before
    assert took - start_up < TIME_CAP
