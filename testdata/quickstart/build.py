"""Build the quickstart: its git repositories and its manifests, in a fresh directory.

    .venv/bin/python testdata/quickstart/build.py WORKDIR [--force]

writes

    WORKDIR/repos/blueprints.git     bare; the package `app` at app/ on main: blueprint/v1 committed
                                     and tagged app/v1, then blueprint/v2 committed and tagged app/v2,
                                     which is how Porch lays out published revisions 1 and 2
    WORKDIR/repos/edge-*.git         bare deployment repositories: one commit on main (a README)
    WORKDIR/manifests/*.yaml         manifests/*.yaml with `${repos}` replaced by WORKDIR/repos

Every commit has a fixed author, committer, date and message, and git runs without the user's
configuration, so the same inputs always give the same commit ids. WORKDIR must be missing or
empty; `--force` first removes a WORKDIR that an earlier run of this script made (it holds
BUILD_MARKER), and nothing else.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import string
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
BUILD_MARKER = ".porchkit-quickstart"

BLUEPRINT_REPOSITORY = "blueprints"
PACKAGE = "app"
# (published revision, the blueprint directory that holds it, commit date)
BLUEPRINT_REVISIONS = ((1, "v1", "2024-01-01T09:00:00+00:00"), (2, "v2", "2024-02-01T09:00:00+00:00"))
DEPLOYMENT_REPOSITORIES = ("edge-us", "edge-eu", "edge-ap")
DEPLOYMENT_DATE = "2024-01-01T08:00:00+00:00"
AUTHOR_NAME, AUTHOR_EMAIL = "porchkit quickstart", "quickstart@porchkit.dev"


def build(workdir: Path, *, force: bool = False) -> None:
    """Create WORKDIR with the repositories and manifests; SystemExit with one line if it cannot."""
    workdir = workdir.absolute()
    _prepare(workdir, force=force)
    repos = workdir / "repos"
    repos.mkdir()
    _build_blueprints(repos / f"{BLUEPRINT_REPOSITORY}.git")
    for name in DEPLOYMENT_REPOSITORIES:
        _build_deployment_repository(repos / f"{name}.git", name)
    _write_manifests(workdir / "manifests", repos)


def _prepare(workdir: Path, *, force: bool) -> None:
    if workdir.exists() and any(workdir.iterdir()):
        if not force:
            raise SystemExit(f"build.py: {workdir} is not empty (pass --force to rebuild it)")
        if not (workdir / BUILD_MARKER).is_file():
            raise SystemExit(f"build.py: {workdir} was not made by build.py (no {BUILD_MARKER}); "
                             "not removing it")
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / BUILD_MARKER).write_text("made by testdata/quickstart/build.py; --force may remove it\n")


def _build_blueprints(bare: Path) -> None:
    """Each blueprint version committed at app/ on main, as Porch's approval would, and tagged."""
    with tempfile.TemporaryDirectory(prefix="quickstart-") as tmp:
        work = Path(tmp)
        _git("-c", "init.defaultBranch=main", "init", "--quiet", str(work))
        for revision, directory, date in BLUEPRINT_REVISIONS:
            shutil.rmtree(work / PACKAGE, ignore_errors=True)
            # Plain copies, with new modification times: copytree keeps the old ones, and a file of
            # the same size and time as the one it replaces (v1 -> v2 of a one-character change)
            # looks unchanged to git's index, which would commit v1's text as v2's.
            shutil.copytree(HERE / "blueprint" / directory, work / PACKAGE, copy_function=shutil.copyfile)
            _git("add", "--all", cwd=work)
            _commit(work, _approval_message(PACKAGE, f"v{revision}", revision), date)
            _git("tag", f"{PACKAGE}/v{revision}", cwd=work)  # lightweight, as Porch tags
        _publish(work, bare)


def _build_deployment_repository(bare: Path, name: str) -> None:
    with tempfile.TemporaryDirectory(prefix="quickstart-") as tmp:
        work = Path(tmp)
        _git("-c", "init.defaultBranch=main", "init", "--quiet", str(work))
        (work / "README.md").write_text(f"# {name}\n\nDeployment packages for one edge cluster, "
                                        "written by porchkit's PackageVariants.\n")
        _git("add", "--all", cwd=work)
        _commit(work, "Initial commit\n", DEPLOYMENT_DATE)
        _publish(work, bare)


def _approval_message(package: str, workspace: str, revision: int) -> str:
    """Porch's approval commit message, `kpt:` trailer included (compact JSON, Porch's field order)."""
    trailer = json.dumps({"package": package, "workspaceName": workspace, "revision": str(revision)},
                         separators=(",", ":"))
    return f"Approving package revision {package}/{revision}\n\nkpt:{trailer}\n"


def _commit(work: Path, message: str, date: str) -> None:
    # --cleanup=verbatim: the message is stored byte for byte, as Porch writes it.
    _git("commit", "--quiet", "--no-verify", "--cleanup=verbatim", "-m", message, cwd=work,
         env={"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date})


def _publish(work: Path, bare: Path) -> None:
    _git("-c", "init.defaultBranch=main", "init", "--quiet", "--bare", str(bare))
    _git("push", "--quiet", str(bare), "refs/heads/main", "--tags", cwd=work)


def _write_manifests(target: Path, repos: Path) -> None:
    # The path goes inside a double-quoted YAML string: JSON's escaping is valid there.
    quoted = json.dumps(str(repos))[1:-1]
    target.mkdir()
    for template in sorted((HERE / "manifests").glob("*.yaml")):
        text = string.Template(template.read_text(encoding="utf-8")).substitute(repos=quoted)
        (target / template.name).write_text(text, encoding="utf-8")


def _git(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> None:
    """Run git apart from the user's configuration and any repository the caller's environment names."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    clean.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, LC_ALL="C",
                 GIT_AUTHOR_NAME=AUTHOR_NAME, GIT_AUTHOR_EMAIL=AUTHOR_EMAIL,
                 GIT_COMMITTER_NAME=AUTHOR_NAME, GIT_COMMITTER_EMAIL=AUTHOR_EMAIL, **(env or {}))
    done = subprocess.run(["git", *args], cwd=cwd, env=clean, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"build.py: git {' '.join(args)} failed: {done.stderr.strip()}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build the quickstart's git repositories and manifests.")
    parser.add_argument("workdir", type=Path, help="the directory to build into (missing or empty)")
    parser.add_argument("--force", action="store_true", help="rebuild a directory an earlier run made")
    args = parser.parse_args(argv)
    build(args.workdir, force=args.force)
    print(f"built {args.workdir}: repos/ ({BLUEPRINT_REPOSITORY}.git, "
          f"{', '.join(name + '.git' for name in DEPLOYMENT_REPOSITORIES)}) and manifests/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
