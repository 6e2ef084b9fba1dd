"""Manifests from files, directories and stdin: every document, and where it came from.

`manifest_texts(paths, stdin)` gives (source, text) for every file named, every manifest file
(`*.yaml`, `*.yml`, `*.json`) under a directory, recursively and in name order, and stdin for `-`.
`read_documents(paths, stdin)` reads them: every object with its `where` (`path`, or
`path (document N)` in a stream of several), `kind: List` documents expanded into their items.

Stdin is read as a file is: all its bytes at once, decoded in one piece, and parsed by the same
loader with the same limits; messages name it `<stdin>`.

Nothing is skipped silently. Each of these is one YamlError naming the path: a path that does not
exist, a file or directory that cannot be read, a dangling symbolic link or a loop of them inside
a directory, a closed stdin, text that is not UTF-8 (stdin included), invalid YAML (schema.py:
with its line), and a document that is not an object (a mapping with a `kind` string, an
`apiVersion` string if any, and `metadata`, if any, a mapping whose name, namespace and
generateName are strings).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from krmyaml.errors import YamlError
from krmyaml.schema import load_all

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
STDIN = "<stdin>"


@dataclass(frozen=True, slots=True)
class Document:
    """One object read from a manifest, and where: `path` or `path (document N)`."""

    obj: dict[str, Any]
    where: str


def read_documents(paths: Iterable[str | Path], stdin: IO[str] | None = None, *,
                   skip_names: Iterable[str] = ()) -> list[Document]:
    """Every object of the manifests (see the module doc); files named in `skip_names` (kustomize's
    own `kustomization.yaml`, say) are passed over in directories."""
    skipped = frozenset(skip_names)
    found: list[Document] = []
    for source, text in manifest_texts(paths, stdin or sys.stdin):
        if Path(source).name in skipped:
            continue
        documents = [doc for doc in load_all(text, source) if doc is not None]
        for number, doc in enumerate(documents, start=1):
            where = source if len(documents) == 1 else f"{source} (document {number})"
            items = doc.get("items") if isinstance(doc, dict) and doc.get("kind") == "List" else [doc]
            for item in items if isinstance(items, list) else [items]:
                if not isinstance(item, dict):
                    raise YamlError(f"expected an object (a mapping), got {_describe(item)}", where=where)
                if problem := _object_problem(item):
                    raise YamlError(problem, where=where)
                found.append(Document(item, where))
    return found


def manifest_texts(paths: Iterable[str | Path], stdin: IO[str] | None) -> Iterator[tuple[str, str]]:
    """(source, text) of every manifest (see the module doc); `stdin` is None when it is closed."""
    for raw in paths:
        if str(raw) == "-":
            yield STDIN, _read_stdin(stdin)
            continue
        path = Path(raw)
        if path.is_dir():
            files = _directory_files(path)
        elif path.exists():
            files = [path]
        elif path.is_symlink():
            raise YamlError("a symbolic link to nothing", where=str(path))
        else:
            raise YamlError("no such file or directory", where=str(path))
        for file in files:
            yield str(file), _read_text(file)


def _directory_files(root: Path) -> list[Path]:
    """The manifest files under `root` (links followed), sorted as paths; YamlError for a
    directory that cannot be listed, a dangling link, or a link back to a directory above it."""
    files: list[Path] = []

    def walk(directory: Path, above: frozenset[Path]) -> None:
        try:
            entries = list(os.scandir(directory))
        except OSError as err:
            raise YamlError(_reason(err), where=str(directory)) from None
        for entry in entries:
            path = Path(entry.path)
            if entry.is_dir():
                real = path.resolve()
                if real in above:
                    raise YamlError("a loop of symbolic links", where=str(path))
                walk(path, above | {real})
            elif entry.is_symlink() and not path.exists():
                raise YamlError("a symbolic link to nothing", where=str(path))
            elif path.suffix in MANIFEST_SUFFIXES and entry.is_file():
                files.append(path)

    walk(root, frozenset({root.resolve()}))
    return sorted(files)


def _read_text(file: Path) -> str:
    return _decoded(file.read_bytes, str(file))


def _read_stdin(stdin: IO[str] | None) -> str:
    # Python sets sys.stdin to None when the process starts with descriptor 0 closed.
    if stdin is None or stdin.closed:
        raise YamlError("closed, nothing to read", where=STDIN)
    raw = getattr(stdin, "buffer", None)
    return _decoded(raw.read if raw is not None else stdin.read, STDIN)


def _decoded(read: Callable[[], bytes | str], where: str) -> str:
    """What `read` returns, as text: bytes are decoded as UTF-8 in one piece, never line by line."""
    try:
        data = read()
        return data if isinstance(data, str) else data.decode("utf-8")
    except UnicodeDecodeError:
        raise YamlError("not UTF-8 text", where=where) from None
    except OSError as err:
        raise YamlError(_reason(err), where=where) from None


def _reason(err: OSError) -> str:
    return err.strerror.lower() if err.strerror else str(err)


def _object_problem(obj: dict[str, Any]) -> str:
    """What keeps `obj` from being a Kubernetes object, as the API server would say it, or ""."""
    if "kind" not in obj:
        return "kind is missing"
    for field in ("kind", "apiVersion"):  # (offline pipelines may leave apiVersion out)
        if field in obj and (not isinstance(obj[field], str) or not obj[field]):
            return f"{field} must be a non-empty string, not {_describe(obj[field])}"
    metadata = obj.get("metadata")
    if metadata is None:
        return ""
    if not isinstance(metadata, dict):
        return f"metadata must be a mapping, not {_describe(metadata)}"
    for field in ("name", "namespace", "generateName"):
        if field in metadata and not isinstance(metadata[field], str):
            return f"metadata.{field} must be a string, not {_describe(metadata[field])}"
    return ""


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    return {str: "a string", int: "a number", float: "a number", bool: "a boolean", list: "a list"}.get(
        type(value), type(value).__name__)
