"""Porch's layout in refs and trees, pure: ref names built and taken apart, names checked, the
output of `git for-each-ref` parsed, and packages found in a `git ls-tree` listing.

For a package P (its full path in the repository, the Repository's directory included) and a
registered branch B, Porch names (pkg/externalrepo/git/ref.go):

    refs/tags/P/vN                      published revision N (lightweight tag on B's approval commit)
    refs/heads/drafts/P/<ws>            Draft
    refs/heads/proposed/P/<ws>          Proposed
    refs/heads/deletionProposed/P/vN    marks published revision N DeletionProposed
    refs/heads/B                        the placeholder revision of every package on B

porchkit adds one namespace Porch never fetches (it fetches refs/heads/* and refs/tags/* only):

    refs/porchkit/metadata/<P>/<ws>     the revision's Kubernetes metadata (git/repository.py says why)

A package is a directory holding a Kptfile (a file); Porch does not look for packages inside a
package (package_tree.go, discoverPackages).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

HEADS = "refs/heads/"
TAGS = "refs/tags/"
DRAFTS = HEADS + "drafts/"
PROPOSED = HEADS + "proposed/"
DELETION_PROPOSED = HEADS + "deletionProposed/"
METADATA = "refs/porchkit/metadata/"

KPTFILE = "Kptfile"
# `git for-each-ref` output: name and target of each ref, NUL-terminated (what they point at is
# read, once per object id, through `git cat-file`: see git/repository.py).
TARGET_FORMAT = "%(refname)%00%(objectname)%00"

# Go's strconv.Atoi after Porch strips one leading "v" (repository.Revision2Int).
_GO_INT = re.compile(r"[+-]?[0-9]+")
_BAD_REF_CHARS = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]")
_PLAIN = re.compile(r"[A-Za-z0-9_-]")


def draft_ref(package: str, workspace: str) -> str:
    return f"{DRAFTS}{package}/{workspace}"


def proposed_ref(package: str, workspace: str) -> str:
    return f"{PROPOSED}{package}/{workspace}"


def deletion_proposed_ref(package: str, version: str) -> str:
    """`version` is the tag's last component: "v3", or "v2.0.0" for a catalog tag."""
    return f"{DELETION_PROPOSED}{package}/{version}"


def tag_ref(package: str, version: str) -> str:
    return f"{TAGS}{package}/{version}"


def branch_ref(branch: str) -> str:
    return HEADS + branch


def metadata_ref(package: str, workspace: str) -> str:
    """One ref per revision identity (P, ws), each part one escaped component.

    Escaping P's slashes keeps every metadata ref two components deep, so that package `a` with
    workspace `b` and package `a/b` with workspace `c` never collide the way a file and a
    directory of the same name would.
    """
    return f"{METADATA}{escape_component(package)}/{escape_component(workspace)}"


def escape_component(text: str) -> str:
    """Percent-encode everything but [A-Za-z0-9_-]: always one valid ref component."""
    return "".join(ch if _PLAIN.fullmatch(ch) else "".join(f"%{b:02X}" for b in ch.encode()) for ch in text)


def split_package_ref(name: str) -> tuple[str, str] | None:
    """`P/<last>` → (P, last); None when there is no package part or no last part.

    Porch's parseDraftName rejects a slash at position 0 and loadTaggedPackage ignores names
    without a slash; an empty last part can name nothing either.
    """
    slash = name.rfind("/")
    if slash <= 0 or slash == len(name) - 1:
        return None
    return name[:slash], name[slash + 1 :]


def revision_number(version: str) -> int:
    """Porch's revision of a tag's last component: "v3" → 3, "3" → 3, "v2.0.0" → -1."""
    digits = version[1:] if version.startswith("v") else version
    if not _GO_INT.fullmatch(digits):
        return -1
    value = int(digits)
    return value if -(2**63) <= value < 2**63 else -1


def in_directory(package: str, directory: str) -> bool:
    """Whether package P lies under the registered directory (and is not the directory itself)."""
    return not directory or package.startswith(directory + "/")


def path_problem(path: str, what: str) -> str | None:
    """Why `path` cannot be a package path / workspace inside ref names and trees, or None.

    The rules are git's (git check-ref-format) applied to every slash-separated component,
    plus "no empty, `.` or `..` component", which trees need too.
    """
    if not path:
        return f"{what} must not be empty"
    for part in path.split("/"):
        if part in ("", ".", ".."):
            return f"{what} {path!r} has an empty, '.' or '..' component"
        if part.startswith(".") or part.endswith(".") or part.endswith(".lock"):
            return f"{what} {path!r}: a component must not start or end with '.', or end with '.lock'"
        if _BAD_REF_CHARS.search(part) or "@{" in part or ".." in part:
            return f"{what} {path!r} contains a character git does not allow in ref names"
    return None


@dataclass(frozen=True, slots=True)
class RefInfo:
    """A ref that ends at a commit: what it points at (`target`), that commit, its author and message."""

    name: str
    target: str
    commit: str
    author_email: str
    author_time: int
    message: str


def parse_ref_targets(out: bytes) -> list[tuple[str, str]]:
    """(ref name, target id) of each ref in `git for-each-ref --format=TARGET_FORMAT` output."""
    fields = out.split(b"\0")
    # Each record ends in the newline for-each-ref adds, which opens the next record's first field.
    return [(fields[i].decode("utf-8", "surrogateescape").lstrip("\n"), fields[i + 1].decode())
            for i in range(0, len(fields) - 1, 2)]


def discover_packages(ls_tree: bytes, directory: str) -> list[tuple[str, str]]:
    """(P, tree id) of each package in `git ls-tree -r -t -z` output, sorted, under `directory`.

    Like Porch's discovery from `directory` down: a package's subdirectories are not searched,
    and a Kptfile at `directory` itself ends the search (that package has no name, so it is not
    listed either).
    """
    trees: dict[str, str] = {}
    packages: set[str] = set()
    for entry in ls_tree.split(b"\0"):
        if not entry:
            continue
        meta, _, raw_path = entry.partition(b"\t")
        _mode, kind, oid = meta.decode().split()
        path = raw_path.decode("utf-8", "surrogateescape")
        if kind == "tree":
            trees[path] = oid
        elif kind == "blob" and (path == KPTFILE or path.endswith("/" + KPTFILE)):
            packages.add(path[: -len(KPTFILE) - 1] if "/" in path else "")
    if directory in packages:
        return []
    start = len(directory.split("/")) if directory else 0
    found = []
    for path in sorted(packages):
        parts = path.split("/")
        inside_package = any("/".join(parts[:i]) in packages for i in range(start + 1, len(parts)))
        if in_directory(path, directory) and path in trees and not inside_package:
            found.append((path, trees[path]))
    return found
