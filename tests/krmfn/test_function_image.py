"""The fn-deltapipe function image, tested without a container runtime.

kpt runs a function image with no arguments and the ResourceList on stdin (`kpt fn eval --image
IMG`, `image:` in a Kptfile, Porch); `kpt fn doc --image IMG` runs it with `--help`. These tests
read the Dockerfile (tests/krmfn/dockerfile.py), take the fn-deltapipe stage's ENTRYPOINT + CMD
exactly, and install porchkit the way the image does, with the pip arguments of the Dockerfile's
own RUN lines: the wheel built from the builder stage's COPYs with the locked build backend, then
a fresh venv that gets the requirement file the function stage installs (lock/fn.txt), then the wheel, both
without dependencies (uv stands in for pip; it accepts the same options). The argv then runs
from that venv only (no PYTHONPATH, no project venv on PATH), over ResourceLists exactly as kpt
sends them and under the real kpt (`--exec` and a Kptfile `exec:` take the argv that the image's
ENTRYPOINT would run). The venv is made once per session, in about a second with a warm uv cache.

uv is $PORCHKIT_UV, else the one `make setup` installs in .venv/.uv, else `uv` on PATH; without
one the tests that need the venv skip, or fail when REQUIRE_KPT=1 (CI, where make installs uv).

testdata/krmfn/resourcelists/deltapipe-*.yaml are byte-exact captures of what kpt 1.0.0-beta.56
sent a function (through `--exec`: kpt builds the ResourceList the same way for `--image`, and
only then hands it to docker or to the executable), for testdata/krmfn/deltapipe/expose:
  deltapipe-fn-config.yaml   kpt fn eval expose --fn-config expose/expose-pipeline.yaml
                             (beta.56 also sends a config file that lies in the package as an item)
  deltapipe-key-value.yaml   kpt fn eval expose-without-its-pipeline-file -- 'pipeline=[...]'
                             'sources=[{kind: Deployment}]' 'target={apiVersion: v1, kind: Service}'
                             name=expose
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from krmfn import read_resource_list, yamlio
from krmfn.deltapipe_fn import GENERATED_BY
from tests.krmfn.conftest import ROOT, TESTDATA
from tests.krmfn.dockerfile import Dockerfile, Run

FUNCTION_STAGE = "fn-deltapipe"
MANAGER_STAGE = "manager"
CAPTURES = TESTDATA / "resourcelists"
EXPOSE = TESTDATA / "deltapipe" / "expose"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))

# The pip options the Dockerfile uses, as uv pip install spells them. None: nothing to do outside
# an image (--no-cache-dir keeps a layer small; uv's cache holds files checked against the same
# hashes). An option missing here fails the test: teach it what the new option means.
PIP_INSTALL_OPTIONS: dict[str, str | None] = {
    "--no-cache-dir": None,
    "--require-hashes": "--require-hashes",
    "--no-deps": "--no-deps",
    "--only-binary=:all:": "--only-binary=:all:",
}
PIP_WHEEL_OPTIONS = {"--no-cache-dir", "--no-deps", "--no-build-isolation"}

PIPELINE_KEY_VALUES = [
    'pipeline=[{"@select": {"@exists": "$.metadata.annotations[\\"porchkit.dev/expose\\"]"}}, '
    '{"@project": {metadata: {name: "$.metadata.name", namespace: "$.metadata.namespace"}, '
    'spec: {ports: [{port: {"@int": "$.metadata.annotations[\\"porchkit.dev/expose\\"]"}}]}}}]',
    "sources=[{kind: Deployment}]",
    "target={apiVersion: v1, kind: Service}",
    "name=expose",
]


@pytest.fixture(scope="session")
def dockerfile() -> Dockerfile:
    return Dockerfile.read(ROOT / "Dockerfile")


# --- the Dockerfile, read -----------------------------------------------------------------------

def test_the_function_image_runs_the_function_with_no_arguments(dockerfile: Dockerfile) -> None:
    image = dockerfile.image(FUNCTION_STAGE)
    assert image.entrypoint == ["porchkit", "fn", "deltapipe"]
    assert image.cmd == []  # kpt adds no arguments, and neither may the image
    assert dockerfile.chain(FUNCTION_STAGE)[0].base == "python:3.11-slim"


def test_the_function_image_runs_as_non_root_and_carries_oci_labels(dockerfile: Dockerfile) -> None:
    image = dockerfile.image(FUNCTION_STAGE)
    assert image.user == "65532:65532"
    labels = image.labels
    assert labels["org.opencontainers.image.title"] == "porchkit-fn-deltapipe"
    assert "fn.porchkit.dev/v1alpha1 Pipeline" in labels["org.opencontainers.image.description"]
    assert labels["org.opencontainers.image.licenses"] == PYPROJECT["project"]["license"]
    assert labels["org.opencontainers.image.version"] == PYPROJECT["project"]["version"]


def test_the_manager_image_is_the_default_target_and_runs_porchkit(dockerfile: Dockerfile) -> None:
    assert dockerfile.stages[-1].name == MANAGER_STAGE  # `docker build .` builds the last stage
    image = dockerfile.image(MANAGER_STAGE)
    assert (image.entrypoint, image.cmd, image.user) == (["porchkit"], [], "65532:65532")


# The function image carries only what the function imports; the manager every dependency.
IMAGE_LOCKS = {FUNCTION_STAGE: ROOT / "lock" / "fn.txt", MANAGER_STAGE: ROOT / "lock" / "runtime.txt"}


@pytest.mark.parametrize("target", [FUNCTION_STAGE, MANAGER_STAGE])
def test_each_image_installs_its_lock_then_the_wheel_without_dependencies(
    dockerfile: Dockerfile, target: str
) -> None:
    installs = [(stage.name, run) for stage in dockerfile.chain(target) for run in dockerfile.runs(stage.name)
                if run.argv[:2] == ["pip", "install"]]
    assert len(installs) == 2
    (lock_stage, lock_run), (wheel_stage, wheel_run) = installs
    assert {"--require-hashes", "--no-deps", "--only-binary=:all:"} <= set(lock_run.argv)
    assert requirement_files(dockerfile, lock_stage, lock_run) == [IMAGE_LOCKS[target]]
    assert "--no-deps" in wheel_run.argv
    (package,) = positionals(wheel_run.argv[2:])
    assert dockerfile.source_of(wheel_stage, wheel_run, package) == ("builder", "/wheels/porchkit-*.whl")


def test_the_builder_builds_the_wheel_with_the_locked_backend_and_no_isolation(dockerfile: Dockerfile) -> None:
    install, wheel = (run for run in dockerfile.runs("builder") if run.argv[0] == "pip")
    assert install.argv[:2] == ["pip", "install"] and "--require-hashes" in install.argv
    assert requirement_files(dockerfile, "builder", install) == [ROOT / "lock" / "build.txt"]
    assert wheel.argv[:2] == ["pip", "wheel"]
    assert {"--no-deps", "--no-build-isolation"} <= set(wheel.argv)


def test_the_builder_copies_every_package_and_the_context_holds_only_what_is_copied(
    dockerfile: Dockerfile,
) -> None:
    copied = {source for copy in dockerfile.copies("builder") for source in copy.sources}
    packages = {pattern.rstrip("*") for pattern in PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]}
    assert packages <= copied, "a package pyproject.toml builds is not copied into the builder"
    sources = {source for stage in dockerfile.stages for copy in dockerfile.copies(stage.name)
               if copy.from_stage is None for source in copy.sources}
    rules = dockerignore_rules(ROOT / ".dockerignore")
    assert [s for s in sorted(sources) if not in_context(s, rules)] == []
    for path in (".venv/bin/python", ".git/HEAD", "build/lib/x.py", "tests/krmfn/conftest.py",
                 "krmfn/__pycache__/cli.cpython-311.pyc", "lock/dev.txt"):
        assert not in_context(path, rules), path


def test_the_final_stages_leave_no_sources_and_no_installation_files(dockerfile: Dockerfile) -> None:
    final = {stage.name for target in (FUNCTION_STAGE, MANAGER_STAGE) for stage in dockerfile.chain(target)}
    assert "builder" not in final
    for name in sorted(final):
        for copy in dockerfile.copies(name):  # only the lock file and the wheel, into a scratch directory
            assert copy.dest.startswith("/tmp/porchkit"), f"{name} copies into {copy.dest}"
            later = [run.argv for run in dockerfile.runs(name) if run.position > copy.position]
            assert ["rm", "-rf", "/tmp/porchkit"] in later, f"{name}: {copy.dest} is never removed"
        assert not [i for i in dockerfile.stage(name).instructions if "/src" in i.text and i.keyword != "LABEL"]


# --- porchkit installed the way the image installs it --------------------------------------------

@dataclass(frozen=True)
class InstalledImage:
    venv: Path
    argv: list[str]  # the ENTRYPOINT + CMD, exactly
    command: list[str]  # the same with argv[0] resolved on the image's PATH
    env: dict[str, str]
    home: Path


@pytest.fixture(scope="session")
def installed(dockerfile: Dockerfile, tmp_path_factory: pytest.TempPathFactory) -> InstalledImage:
    uv = find_uv()
    work = tmp_path_factory.mktemp("function-image")
    # builder: the COPYs into a fresh tree, the locked backend into a venv, the wheel
    build_venv, wheels = work / "build-venv", {}  # wheels: the builder's --wheel-dir -> where they are here
    run_uv(uv, work, "venv", "--quiet", "--python", sys.executable, str(build_venv))
    for run in dockerfile.runs("builder"):
        if run.argv[:2] == ["pip", "install"]:
            uv_pip_install(uv, work, dockerfile, "builder", run, build_venv)
        elif run.argv[:2] == ["pip", "wheel"]:
            *options, source = run.argv[2:]
            wheel_dir = options.pop(options.index("--wheel-dir") + 1)
            assert set(options) == PIP_WHEEL_OPTIONS | {"--wheel-dir"}, f"pip wheel {options}: teach this test"
            wheels[wheel_dir] = work / "wheels"
            tree = copy_context(dockerfile, "builder", run, work / "image") / source
            run_uv(uv, work, "build", "--quiet", "--wheel", "--no-build-isolation", "--python",
                   str(build_venv / "bin" / "python"), "--out-dir", str(wheels[wheel_dir]), str(tree))
        else:
            pytest.fail(f"builder: RUN {shlex.join(run.argv)} is not understood by this test")
    # the function's stages: every pip install, in order, into a fresh venv
    venv = work / "venv"
    run_uv(uv, work, "venv", "--quiet", "--python", sys.executable, str(venv))
    for stage in dockerfile.chain(FUNCTION_STAGE):
        for run in dockerfile.runs(stage.name):
            if run.argv[:2] == ["pip", "install"]:
                uv_pip_install(uv, work, dockerfile, stage.name, run, venv, wheels=wheels)
            elif run.argv[0] != "rm":
                pytest.fail(f"{stage.name}: RUN {shlex.join(run.argv)} is not understood by this test")
    home = work / "home"
    home.mkdir()
    env = {"PATH": os.pathsep.join([str(venv / "bin"), "/usr/local/bin", "/usr/bin", "/bin"]),
           "HOME": str(home), "LANG": "C.UTF-8"}
    assert str(Path(sys.prefix) / "bin") not in env["PATH"].split(os.pathsep)
    argv = dockerfile.image(FUNCTION_STAGE).argv
    program = shutil.which(argv[0], path=env["PATH"])
    assert program is not None and Path(program).parent == venv / "bin", program
    return InstalledImage(venv, argv, [program, *argv[1:]], env, home)


def test_the_entrypoint_runs_porchkit_from_the_wheel_and_nothing_but_the_lock(installed: InstalledImage) -> None:
    where = subprocess.run(
        [str(installed.venv / "bin" / "python"), "-c",
         "import deltapipe, krmfn, porchkit; print(deltapipe.__file__, krmfn.__file__, porchkit.__file__)"],
        env=installed.env, cwd=installed.home, capture_output=True, text=True, check=True,
    ).stdout.split()
    assert all(Path(path).is_relative_to(installed.venv) for path in where), where
    frozen = subprocess.run([find_uv(), "pip", "freeze", "--python", str(installed.venv / "bin" / "python")],
                            cwd=installed.home, capture_output=True, text=True, check=True).stdout
    locked = pins(IMAGE_LOCKS[FUNCTION_STAGE])
    installed_pins = {normalise(line) for line in frozen.splitlines() if "==" in line}
    assert installed_pins == locked, "the function's environment is not exactly lock/fn.txt"
    assert pins(IMAGE_LOCKS[FUNCTION_STAGE]) <= pins(IMAGE_LOCKS[MANAGER_STAGE])  # the same versions
    (porchkit,) = [line for line in frozen.splitlines() if "==" not in line]
    assert re.fullmatch(rf"porchkit @ file://\S+/porchkit-{PYPROJECT['project']['version']}-py3-none-any\.whl",
                        porchkit)


def test_help_is_the_function_documentation_and_its_example_works(installed: InstalledImage) -> None:
    shown = run_image(installed, b"", "--help")  # what `kpt fn doc --image IMG` runs
    assert shown.returncode == 0, shown.stderr
    doc = shown.stdout.decode()
    for needed in ("kpt fn eval PKG --image IMAGE --fn-config", "kind: Pipeline", "data.pipeline",
                   "target:", "sources:", "Patcher", GENERATED_BY):
        assert needed in doc, needed
    example = re.search(r"\n(  apiVersion: fn\.porchkit\.dev/v1alpha1\n(?:(?:  .*)?\n)*?)\n(?!  )", doc)
    assert example, "no Pipeline example in --help"
    resources = """\
apiVersion: config.kubernetes.io/v1
kind: ResourceList
items:
- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: web, namespace: shop, annotations: {example.com/port: "8080"}}
  spec: {selector: {matchLabels: {app: web}}}
- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: worker, namespace: shop}
  spec: {selector: {matchLabels: {app: worker}}}
functionConfig:
""" + textwrap.indent(textwrap.dedent(example.group(1)), "  ")
    items = output_items(run_image(installed, resources.encode()))
    (service,) = [item for item in items if item["kind"] == "Service"]
    assert service["metadata"]["name"] == "web"
    assert service["spec"] == {"selector": {"app": "web"}, "ports": [{"port": 8080}]}


def test_a_pipeline_from_fn_config_as_kpt_sends_it(installed: InstalledImage) -> None:
    sent = (CAPTURES / "deltapipe-fn-config.yaml").read_bytes()
    done = run_image(installed, sent)
    assert (done.returncode, done.stderr) == (0, b"")
    # every resource kpt sent comes back byte for byte, the config file among them
    assert done.stdout.startswith(sent[: sent.index(b"\nfunctionConfig:") + 1])
    items = output_items(done)
    assert [i["kind"] for i in items] == ["Kptfile", "ConfigMap", "Deployment", "Deployment", "Deployment",
                                          "Pipeline", "Service", "Service"]
    services = {i["metadata"]["name"]: i for i in items if i["kind"] == "Service"}
    assert sorted(services) == ["api", "web"]
    web = services["web"]
    assert web["spec"] == {"type": "ClusterIP", "selector": {"app": "web"},
                           "ports": [{"name": "http", "port": 8080, "targetPort": 8080}]}
    annotations = web["metadata"]["annotations"]
    assert annotations[GENERATED_BY] == "expose"
    assert annotations["internal.config.kubernetes.io/path"] == "shop/service_web.yaml"


def test_a_configmap_from_key_value_arguments_as_kpt_sends_it(installed: InstalledImage) -> None:
    sent = (CAPTURES / "deltapipe-key-value.yaml").read_bytes()
    assert b"name: function-input" in sent and b"kind: ConfigMap" in sent.split(b"\nfunctionConfig:")[1]
    done = run_image(installed, sent)
    assert (done.returncode, done.stderr) == (0, b"")
    assert done.stdout.startswith(sent[: sent.index(b"\nfunctionConfig:") + 1])
    services = {i["metadata"]["name"]: i for i in output_items(done) if i["kind"] == "Service"}
    assert {name: s["spec"] for name, s in services.items()} == {"web": {"ports": [{"port": 8080}]},
                                                                 "api": {"ports": [{"port": 9090}]}}
    assert services["api"]["metadata"]["annotations"][GENERATED_BY] == "expose"


def test_no_config_and_bad_input_fail_with_one_line(installed: InstalledImage) -> None:
    sent = (CAPTURES / "deltapipe-key-value.yaml").read_bytes()
    # what kpt sends for `--image IMG` with neither --fn-config nor arguments
    placeholder = sent[: sent.index(b"\nfunctionConfig:") + 1] + (
        b"functionConfig:\n  metadata:\n    name: function-input\n  data: {}\n  kind: ConfigMap\n  apiVersion: v1\n")
    done = run_image(installed, placeholder)
    assert done.returncode == 1
    assert done.stdout.startswith(sent[: sent.index(b"\nfunctionConfig:") + 1])  # the package unchanged
    assert done.stderr.decode().startswith("deltapipe: functionConfig: no pipeline given")
    assert b"\n" not in done.stderr.rstrip(b"\n")
    empty = run_image(installed, b"")
    assert (empty.returncode, empty.stdout) == (2, b"")
    assert empty.stderr.decode().strip() == "deltapipe: empty input: expected a ResourceList"


# --- the real kpt, running the image's argv -------------------------------------------------------

@pytest.mark.kpt
def test_kpt_fn_eval_with_fn_config(installed: InstalledImage, kpt: str, tmp_path: Path) -> None:
    package = Path(shutil.copytree(EXPOSE, tmp_path / "expose"))
    run_kpt(installed, kpt, "fn", "eval", str(package), "--exec", shlex.join(installed.argv),
            "--fn-config", str(package / "expose-pipeline.yaml"))
    service = yamlio.load((package / "shop" / "service_web.yaml").read_text())
    assert service["spec"]["ports"] == [{"name": "http", "port": 8080, "targetPort": 8080}]
    assert (package / "shop" / "service_api.yaml").exists()


@pytest.mark.kpt
def test_kpt_fn_eval_with_key_value_arguments(installed: InstalledImage, kpt: str, tmp_path: Path) -> None:
    package = Path(shutil.copytree(EXPOSE, tmp_path / "expose"))
    (package / "expose-pipeline.yaml").unlink()
    run_kpt(installed, kpt, "fn", "eval", str(package), "--exec", shlex.join(installed.argv),
            "--", *PIPELINE_KEY_VALUES)
    service = yamlio.load((package / "shop" / "service_api.yaml").read_text())
    assert service == {"apiVersion": "v1", "kind": "Service",
                       "metadata": {"name": "api", "namespace": "shop", "annotations": {GENERATED_BY: "expose"}},
                       "spec": {"ports": [{"port": 9090}]}}


@pytest.mark.kpt
def test_kpt_fn_render_runs_it_from_a_kptfile_pipeline(installed: InstalledImage, kpt: str, tmp_path: Path) -> None:
    package = Path(shutil.copytree(EXPOSE, tmp_path / "expose"))
    kptfile = yamlio.load((package / "Kptfile").read_text())
    kptfile["pipeline"]["mutators"] = [{"exec": shlex.join(installed.argv), "configPath": "expose-pipeline.yaml"}]
    (package / "Kptfile").write_text(yamlio.dump(kptfile))
    run_kpt(installed, kpt, "fn", "render", str(package), "--allow-exec")
    assert sorted(p.relative_to(package).as_posix() for p in package.rglob("*.yaml")) == [
        "defaults.yaml", "deployments.yaml", "expose-pipeline.yaml", "shop/service_api.yaml", "shop/service_web.yaml"]
    assert "# kept: comments survive the function" in (package / "deployments.yaml").read_text()
    before = {p: p.read_bytes() for p in package.rglob("*") if p.is_file()}
    run_kpt(installed, kpt, "fn", "render", str(package), "--allow-exec")
    assert {p: p.read_bytes() for p in package.rglob("*") if p.is_file()} == before


# --- helpers --------------------------------------------------------------------------------------

def find_uv() -> str:
    """uv: $PORCHKIT_UV, else the one `make` installs beside this venv, else uv on PATH."""
    for candidate in (os.environ.get("PORCHKIT_UV"), str(Path(sys.prefix) / ".uv" / "bin" / "uv"), shutil.which("uv")):
        if candidate and Path(candidate).is_file():
            return candidate
    reason = "uv not found (make setup installs it in .venv/.uv; or set PORCHKIT_UV)"
    if os.environ.get("REQUIRE_KPT") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


def run_uv(uv: str, cwd: Path, *args: str) -> None:
    done = subprocess.run([uv, *args], cwd=cwd, capture_output=True, text=True, check=False, timeout=300)
    assert done.returncode == 0, f"uv {shlex.join(args)}:\n{done.stderr}"


def uv_pip_install(uv: str, cwd: Path, dockerfile: Dockerfile, stage: str, run: Run, venv: Path,
                   wheels: dict[str, Path] | None = None) -> None:
    """The RUN's `pip install`, with uv, into `venv`: the same options, the same files."""
    args, words = [], run.argv[2:]
    while words:
        word = words.pop(0)
        if word == "-r":
            requirement = words.pop(0)
            origin, source = dockerfile.source_of(stage, run, requirement)
            assert origin is None, f"{requirement} comes from stage {origin}"
            args += ["-r", str(ROOT / source)]
        elif word.startswith("-"):
            assert word in PIP_INSTALL_OPTIONS, f"pip install {word}: teach PIP_INSTALL_OPTIONS what it means"
            args += [PIP_INSTALL_OPTIONS[word]] if PIP_INSTALL_OPTIONS[word] else []
        else:
            origin, source = dockerfile.source_of(stage, run, word)
            directory, pattern = posixpath.split(source)
            assert origin == "builder" and wheels and directory in wheels, f"{word}: not a wheel this test built"
            matches = sorted(wheels[directory].glob(pattern))
            assert len(matches) == 1, f"{word}: {matches}"
            args.append(str(matches[0]))
    run_uv(uv, cwd, "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"), *args)


def copy_context(dockerfile: Dockerfile, stage: str, run: Run, root: Path) -> Path:
    """The files the stage's COPYs put into the image before `run`, under root; root/WORKDIR."""
    for copy in dockerfile.copies(stage):
        if copy.position > run.position:
            break
        assert copy.from_stage is None
        for source in copy.sources:
            origin = ROOT / source
            dest = root / copy.dest.lstrip("/")
            if origin.is_dir():
                shutil.copytree(origin, dest, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            else:
                target = dest / origin.name if copy.into_directory else dest
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(origin, target)
    return root / run.workdir.lstrip("/")


def requirement_files(dockerfile: Dockerfile, stage: str, run: Run) -> list[Path]:
    words = run.argv
    files = [words[i + 1] for i, word in enumerate(words) if word == "-r"]
    found = []
    for file in files:
        origin, source = dockerfile.source_of(stage, run, file)
        assert origin is None
        found.append(ROOT / source)
    return found


def positionals(words: list[str]) -> list[str]:
    return [w for i, w in enumerate(words) if not w.startswith("-") and (i == 0 or words[i - 1] != "-r")]


def dockerignore_rules(path: Path) -> list[tuple[bool, str]]:
    """(excluded, pattern) per line. Matching below follows Docker's rules closely enough for an
    allow-list: the last matching rule wins, and a rule that matches a directory matches its files."""
    rules = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            rules.append((not line.startswith("!"), line.lstrip("!").rstrip("/")))
    return rules


def in_context(path: str, rules: list[tuple[bool, str]]) -> bool:
    parts = path.strip("/").split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    included = True
    for excluded, pattern in rules:
        if any(_matches(prefix, pattern) for prefix in prefixes):
            included = not excluded
    return included


def _matches(path: str, pattern: str) -> bool:
    if pattern.startswith("**/"):
        return any(fnmatch.fnmatchcase(tail, pattern[3:]) for tail in _tails(path))
    return path.count("/") == pattern.count("/") and fnmatch.fnmatchcase(path, pattern)


def _tails(path: str) -> list[str]:
    parts = path.split("/")
    return ["/".join(parts[i:]) for i in range(len(parts))]


def pins(requirements: Path) -> set[str]:
    return {normalise(m.group(0)) for m in re.finditer(r"^[A-Za-z0-9][\w.-]*==[^\s;\\]+", requirements.read_text(),
                                                     re.M)}


def normalise(pin: str) -> str:
    name, _, version = pin.strip().partition("==")
    return f"{re.sub(r'[-_.]+', '-', name).lower()}=={version}"


def run_image(installed: InstalledImage, stdin: bytes, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*installed.command, *args], input=stdin, env=installed.env, cwd=installed.home,
                          capture_output=True, timeout=60, check=False)


def output_items(done: subprocess.CompletedProcess[bytes]) -> list[dict]:
    assert done.returncode == 0, done.stderr.decode()
    return read_resource_list(done.stdout).items


def run_kpt(installed: InstalledImage, kpt: str, *args: str) -> None:
    done = subprocess.run([kpt, *args], env=installed.env, cwd=installed.home, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, f"kpt {shlex.join(args)} exited {done.returncode}\n{done.stdout}\n{done.stderr}"
