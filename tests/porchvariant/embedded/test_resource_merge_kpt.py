"""merge_packages against the real `kpt pkg update` (kpt 1.0.0-beta.56), on testdata/porchvariant/upgrade.

Each case directory holds the packages original/, upstream/ and local/. For kpt, original and
upstream become the tags pkg/v1 and pkg/v2 of a throwaway git repository; `kpt pkg get` fetches
pkg/v1, its files are replaced by local/ (the Kptfile keeps the upstream and upstreamLock that get
wrote), and `kpt pkg update` moves it to pkg/v2. The result is compared with
merge_packages(original, upstream, local).

What is compared: YAML files and Kptfiles as data, document by document, keyed by kind,
namespace and name, so the order of documents within a file does not count (kpt sorts them by
their upstream index; merge_packages keeps local's order and puts upstream's new ones last). kpt's
own additions are taken out first: the `internal.kpt.dev/upstream-identifier` annotation (and an
`annotations` map left empty by that) and, in Kptfiles, `upstream` and `upstreamLock`, which
merge_packages leaves to its caller. Comments are not compared (kpt adds `# kpt-merge: ns/name`
to every resource). Every other file is compared as text.

Where the two differ on purpose, the case's kpt-differences.yaml lists each difference: file,
resource, field path, kpt's value and ours (`<absent>`: no such field), and why. The test checks
both values, so that a kpt that changes its mind shows up here, and then compares everything
else. An entry with `kpt-error` says kpt refuses the update with that message.

All kpt runs happen once, in parallel, in a module fixture (about 0.7 s each).
"""

from __future__ import annotations

import os
import posixpath
import shutil
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from krmfn.testing import kpt_binary
from krmyaml.textedit import load_fast, same_data
from porchvariant.embedded.merge.resources import merge_packages

pytestmark = pytest.mark.kpt

CASES_ROOT = Path(__file__).resolve().parents[3] / "testdata" / "porchvariant" / "upgrade"
CASES = sorted(path.name for path in CASES_ROOT.iterdir() if (path / "local").is_dir())
DIFFERENCES = "kpt-differences.yaml"
ABSENT = "<absent>"
IDENTIFIER = "internal.kpt.dev/upstream-identifier"
GIT_ENV = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "test",
           "GIT_AUTHOR_EMAIL": "test@example.com", "GIT_COMMITTER_NAME": "test",
           "GIT_COMMITTER_EMAIL": "test@example.com"}


def read_tree(directory: Path) -> dict[str, str]:
    return {path.relative_to(directory).as_posix(): path.read_text(encoding="utf-8")
            for path in sorted(directory.rglob("*")) if path.is_file()}


def write_tree(directory: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


@dataclass(frozen=True)
class KptUpdate:
    files: dict[str, str]
    returncode: int
    stderr: str


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=120, env={**os.environ, **GIT_ENV})


def checked(*args: str, cwd: Path) -> None:
    done = run(*args, cwd=cwd)
    assert done.returncode == 0, f"{' '.join(args)} failed: {done.stdout}{done.stderr}"


def kpt_update(kpt: str, case: Path, work: Path) -> KptUpdate:
    """What `kpt pkg update` makes of the case (see the module docstring)."""
    repo = work / "repo"
    repo.mkdir()
    checked("git", "init", "-q", "-b", "main", cwd=repo)
    for side, tag in (("original", "pkg/v1"), ("upstream", "pkg/v2")):
        shutil.rmtree(repo / "pkg", ignore_errors=True)
        write_tree(repo / "pkg", read_tree(case / side))
        checked("git", "add", "-A", cwd=repo)
        checked("git", "commit", "-q", "--allow-empty", "-m", tag, cwd=repo)
        checked("git", "tag", tag, cwd=repo)
    checked(kpt, "pkg", "get", f"file://{repo}.git/pkg@pkg/v1", "dst", cwd=work)
    dst = work / "dst"
    got = yaml.safe_load((dst / "Kptfile").read_text(encoding="utf-8"))
    shutil.rmtree(dst)
    local = read_tree(case / "local")
    kptfile = yaml.safe_load(local["Kptfile"])
    kptfile.update(upstream=got["upstream"], upstreamLock=got["upstreamLock"])
    write_tree(dst, {**local, "Kptfile": yaml.safe_dump(kptfile, sort_keys=False)})
    done = run(kpt, "pkg", "update", "dst@pkg/v2", cwd=work)
    return KptUpdate(read_tree(dst), done.returncode, done.stderr)


@pytest.fixture(scope="module")
def kpt_results(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, KptUpdate]]:
    kpt = kpt_binary()
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {case: pool.submit(kpt_update, kpt, CASES_ROOT / case, tmp_path_factory.mktemp(case))
                   for case in CASES}
        yield {case: future.result() for case, future in futures.items()}


def ours(case: str) -> dict[str, str]:
    directory = CASES_ROOT / case
    return merge_packages(*(read_tree(directory / side) for side in ("original", "upstream", "local")))


# --- comparing ------------------------------------------------------------------------------------


def as_data(files: dict[str, str]) -> dict[str, Any]:
    """YAML files and Kptfiles as {document key: data}, less what kpt adds; other files as text."""
    out: dict[str, Any] = {}
    for path, text in files.items():
        name = posixpath.basename(path)
        if name != "Kptfile" and not name.endswith((".yaml", ".yml")):
            out[path] = text
            continue
        documents: dict[str, Any] = {}
        for data in load_fast(text):
            if data is None:
                continue
            data = without_kpt_additions(data, kptfile=name == "Kptfile")
            key = document_key(data)
            documents[key if key not in documents else f"{key}#{len(documents)}"] = data
        out[path] = documents
    return out


def document_key(data: Any) -> str:
    if not isinstance(data, dict):
        return f"<{type(data).__name__}>"
    metadata = data.get("metadata") or {}
    return "/".join(str(part) for part in (data.get("kind"), metadata.get("namespace"), metadata.get("name"))
                    if part is not None)


def without_kpt_additions(data: Any, *, kptfile: bool) -> Any:
    if not isinstance(data, dict):
        return data
    data = {k: v for k, v in data.items() if not (kptfile and k in ("upstream", "upstreamLock"))}
    metadata = data.get("metadata")
    if isinstance(metadata, dict) and isinstance(metadata.get("annotations"), dict):
        annotations = {k: v for k, v in metadata["annotations"].items() if k != IDENTIFIER}
        metadata = {k: v for k, v in metadata.items() if k != "annotations"}
        data["metadata"] = {**metadata, **({"annotations": annotations} if annotations else {})}
    return data


def differences(case: str) -> list[dict[str, Any]]:
    path = CASES_ROOT / case / DIFFERENCES
    return (load_fast(path.read_text(encoding="utf-8"))[0] or []) if path.exists() else []


def value_at(files: dict[str, Any], difference: dict[str, Any]) -> Any:
    node = files.get(difference["file"], {}).get(difference["resource"], ABSENT)
    for step in difference["path"]:
        if isinstance(node, dict) and step in node or isinstance(node, list) and isinstance(step, int) and (
                step < len(node)):
            node = node[step]
        else:
            return ABSENT
    return node


def drop(files: dict[str, Any], difference: dict[str, Any]) -> None:
    *parents, last = difference["path"]
    node = files[difference["file"]][difference["resource"]]
    for step in parents:
        node = node[step]
    if isinstance(node, dict):
        node.pop(last, None)
    elif isinstance(last, int) and last < len(node):
        node[last] = ABSENT


# --- the tests --------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES)
def test_merge_packages_agrees_with_kpt_pkg_update(case: str, kpt_results: dict[str, KptUpdate]) -> None:
    kpt, mine = kpt_results[case], as_data(ours(case))
    expected_differences = differences(case)
    refusal = next((d["kpt-error"] for d in expected_differences if "kpt-error" in d), None)
    if refusal is not None:
        assert kpt.returncode != 0 and refusal in kpt.stderr, kpt.stderr
        for difference in expected_differences:
            assert same_data(value_at(mine, difference), difference["ours"]), difference["why"]
        return
    assert kpt.returncode == 0, kpt.stderr
    theirs = as_data(kpt.files)
    for difference in expected_differences:
        assert same_data(value_at(theirs, difference), difference["kpt"]), f"kpt no longer: {difference['why']}"
        assert same_data(value_at(mine, difference), difference["ours"]), difference["why"]
        drop(theirs, difference)
        drop(mine, difference)
    assert mine == theirs


def test_every_case_is_compared() -> None:
    assert len(CASES) >= 15
    for case in CASES:
        assert {p.name for p in (CASES_ROOT / case).iterdir() if p.is_dir()} >= {"original", "upstream", "local"}
