"""Git objects under the embedded Porch: reading trees and blobs, planning new ones, writing them.

Promises: a change is planned in memory first (a `Plan`: every new blob, tree and commit with the
id computed here), and `ObjectStore.store` then writes only what git lacks, as loose objects,
without starting a git process.
Writing objects moves no ref, so a plan stored and never referenced stays invisible (git/repository.py
moves the refs afterwards, in one transaction). Only the trees on the path from the root to a
replaced directory are rebuilt; every other subtree is reused by id.

Does not: know Porch's layout or messages (git/repository.py, git/messages.py), or lock anything.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
import zlib
from collections.abc import Iterator, Mapping
from typing import Any

from porchvariant.embedded.git import messages
from porchvariant.embedded.git.commands import Git
from porchvariant.embedded.git.errors import GitInvalidRequest, GitNotFound
from porchvariant.embedded.git.messages import PORCH_SIGNATURE, Signature

TREE_MODE, FILE_MODE, EXEC_MODE, LINK_MODE = "40000", "100644", "100755", "120000"
FILE_MODES = (FILE_MODE, EXEC_MODE)


class Plan(dict[str, tuple[str, bytes]]):
    """New objects by id → (type, content), in the order they were planned."""

    def __init__(self, algorithm: str) -> None:
        super().__init__()
        self.algorithm = algorithm

    def add(self, kind: str, data: bytes) -> str:
        oid = messages.object_id(kind, data, self.algorithm)
        self[oid] = (kind, data)
        return oid

    def blob(self, data: bytes) -> str:
        return self.add("blob", data)

    def tree(self, entries: list[tuple[str, str, str]]) -> str:
        return self.add("tree", messages.tree_object(entries))

    def commit(self, tree: str, parents: list[str], message: str, author: Signature) -> tuple[str, int]:
        """A commit by `author`, committed by Porch's signature, now, in the local time zone."""
        now = time.time()
        when, offset = int(now), time.localtime(now).tm_gmtoff // 60
        data = messages.commit_object(tree, parents, author, PORCH_SIGNATURE, message, when=when,
                                      offset_minutes=offset)
        return self.add("commit", data), when


class ObjectStore:
    """Reads and writes the objects of one repository through a `Git`."""

    def __init__(self, git: Git, algorithm: str, objects_dir: str) -> None:
        self.git, self.algorithm, self.objects_dir = git, algorithm, objects_dir
        self.hash_size = 32 if algorithm == "sha256" else 20

    def plan(self) -> Plan:
        return Plan(self.algorithm)

    # Reading -----------------------------------------------------------------------------------

    def root_tree(self, commit: str | None) -> str | None:
        if commit is None:
            return None
        found = self.git.read_object(commit)
        if found is None or found[0] != "commit":
            raise GitNotFound(f"commit {commit} not found")
        return found[1].split(b"\n", 1)[0].split()[1].decode()

    def entries(self, tree: str) -> list[tuple[str, str, str]]:
        found = self.git.read_object(tree)
        if found is None or found[0] != "tree":
            raise GitNotFound(f"tree {tree} not found")
        return messages.parse_tree(found[1], self.hash_size)

    def walk(self, tree: str, prefix: str = "") -> Iterator[tuple[str, str, str]]:
        """(path, mode, id) of every non-tree entry under `tree`, depth first."""
        for mode, name, oid in self.entries(tree):
            if mode == TREE_MODE:
                yield from self.walk(oid, f"{prefix}{name}/")
            else:
                yield f"{prefix}{name}", mode, oid

    def blob(self, oid: str) -> bytes:
        found = self.git.read_object(oid)
        if found is None:
            raise GitNotFound(f"blob {oid} not found")
        return found[1]

    def files(self, tree: str) -> Iterator[tuple[str, str, bytes]]:
        """(path, mode, content) of each regular file under `tree`."""
        for path, mode, oid in self.walk(tree):
            if mode in FILE_MODES:
                yield path, mode, self.blob(oid)

    # Planning ----------------------------------------------------------------------------------

    def directory_tree(self, files: Mapping[str, tuple[str, str]], plan: Plan) -> str:
        """Plan a directory holding `files` ({relative path: (mode, id)}); its tree id."""
        root: dict[str, Any] = {}
        for path, (mode, oid) in files.items():
            *dirs, name = path.split("/")
            node = root
            for part in dirs:
                child = node.setdefault(part, {})
                if not isinstance(child, dict):
                    raise GitInvalidRequest(f"{path!r}: {part!r} is both a file and a directory")
                node = child
            if isinstance(node.get(name), dict):
                raise GitInvalidRequest(f"{path!r} is both a file and a directory")
            node[name] = (mode, oid)

        def build(node: dict[str, Any]) -> str:
            return plan.tree([(TREE_MODE, name, build(child)) if isinstance(child, dict) else (child[0], name, child[1])
                              for name, child in node.items()])

        return build(root)

    def replace(self, root: str | None, path: str, tree: str | None, plan: Plan) -> str:
        """Plan the root tree that is `root` with directory `path` replaced by `tree` (removed if None).

        A directory the removal leaves empty is removed too.
        """
        parts = path.split("/")

        def rebuild(current: str | None, depth: int) -> str | None:
            entries = self.entries(current) if current else []
            name = parts[depth]
            existing = next((e for e in entries if e[1] == name), None)
            kept = [e for e in entries if e[1] != name]
            if depth == len(parts) - 1:
                child = tree
            else:
                if existing is not None and existing[0] != TREE_MODE:
                    raise GitInvalidRequest(f"{'/'.join(parts[:depth + 1])} is a file, not a directory")
                child = rebuild(existing[2] if existing else None, depth + 1)
            if child is not None:
                kept.append((TREE_MODE, name, child))
            if not kept and depth > 0:
                return None
            return plan.tree(kept)

        result = rebuild(root, 0)
        assert result is not None  # depth 0 always yields a tree
        return result

    # Writing -----------------------------------------------------------------------------------

    def store(self, plan: Plan) -> None:
        """Write the planned objects git lacks as loose objects: blobs, then trees, then commits.

        Written here rather than by `git hash-object` (three processes a change, most of a write's
        time): a loose object is only zlib("<type> <size>\\0<content>") under its id, which is
        what Plan computed. Each goes to a `tmp_obj_*` file beside its final name and is renamed
        into place, as git does, so a reader never sees half an object and `git gc` removes a
        temporary file a crash left behind.
        """
        ids = list(plan)
        missing = [oid for oid, info in zip(ids, self.git.object_info(ids), strict=True) if info is None]
        for kind in ("blob", "tree", "commit"):
            for oid in missing:
                if plan[oid][0] == kind:
                    self._write_loose(oid, kind, plan[oid][1])

    def _write_loose(self, oid: str, kind: str, data: bytes) -> None:
        directory = os.path.join(self.objects_dir, oid[:2])
        temporary = os.path.join(directory, f"tmp_obj_{secrets.token_hex(8)}")
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(temporary, flags, 0o444)  # read-only from the start, as git leaves objects
        except FileNotFoundError:
            os.makedirs(directory, exist_ok=True)
            fd = os.open(temporary, flags, 0o444)
        try:
            with os.fdopen(fd, "wb") as out:
                # Level 1: git's own default for loose objects (core.looseCompression).
                out.write(zlib.compress(b"%s %d\0" % (kind.encode(), len(data)) + data, 1))
            os.replace(temporary, os.path.join(directory, oid[2:]))
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
