"""YAML files as kpt's resource-merge sees them: documents with an identity, and files put back together.

A document's identity is kpt's merge key: its file path, the group of its apiVersion, its kind,
and the namespace and name it had upstream. kpt reads those two from the `# kpt-merge: ns/name`
comment it puts on `metadata:`, so that a local rename (a name prefix, a namespace) still matches
its upstream; without the comment they are the document's own. Here, without the comment, the
`internal.kpt.dev/upstream-identifier` annotation (`group|Kind|ns|name`) is read next, which kpt
1.0.0-beta.56 does not do (it recomputes the annotation from the comment); a package whose
comments a function dropped keeps its identities that way. An absent namespace and `default` are
the same namespace, as the annotation writes the first as the second. A document that is not a
mapping, or has no kind, apiVersion or name, is matched too (kpt wraps a top-level list as a
resource), with whatever identity it has. Documents with the same identity in one file are
matched in order (kpt refuses to update such a package).

`join` puts a file's pieces back together: pieces that were neighbours in one file are joined as
they were, a `---` line is added wherever two pieces meet for the first time, and a bare `---`
line is dropped from a file that now starts with what was not its first piece.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from krmyaml import textedit

__all__ = ["UPSTREAM_IDENTIFIER", "Document", "Identity", "Piece", "YamlFile", "join", "read_file"]

UPSTREAM_IDENTIFIER = "internal.kpt.dev/upstream-identifier"
_MERGE_COMMENT = re.compile(r"^metadata:[ \t]*#[ \t]*kpt-merge:[ \t]*(?P<ns>[^/\r\n]*)/(?P<name>[^\r\n]*?)[ \t\r]*$",
                            re.MULTILINE)
_BARE_START = re.compile(r"\A---[ \t]*\r?\n")
_STARTS_DOCUMENT = re.compile(r"\A(?:[ \t\r]*(?:#[^\n]*)?\n)*---(?:[ \t\r\n]|\Z)")

# path, group, kind, namespace, name, and which of the documents with those five in the file
Identity = tuple[str, str, str, str, str, int]


@dataclass(frozen=True, slots=True)
class Document:
    """One non-empty document of a file: `index` is its piece in `YamlFile.pieces`."""

    index: int
    data: Any
    identity: Identity


@dataclass(frozen=True, slots=True)
class YamlFile:
    """A YAML file cut into pieces (`textedit.split_documents`), and the documents in them."""

    path: str
    text: str
    pieces: tuple[str, ...]
    documents: tuple[Document, ...]


@dataclass(frozen=True, slots=True)
class Piece:
    """A piece of output text, and where it came from (`source`: any label, `index` in that source)."""

    text: str
    source: str
    index: int


def read_file(path: str, text: str) -> YamlFile:
    """The file's documents and their identities. Raises textedit.YamlTextError."""
    pieces = tuple(textedit.split_documents(text))
    documents = []
    seen: dict[tuple[str, str, str, str, str], int] = {}
    line = 1
    for index, piece in enumerate(pieces):
        for data in _load(piece, line):
            if data is None:
                continue
            key = (path, *_identity(piece, data))
            seen[key] = seen.get(key, -1) + 1
            documents.append(Document(index, data, (*key, seen[key])))
        line += piece.count("\n")
    return YamlFile(path, text, pieces, tuple(documents))


def _load(piece: str, line: int) -> list[Any]:
    try:
        return textedit.load_fast(piece, first_line=line)
    except textedit.YamlTextError:
        raise
    except (ValueError, LookupError, TypeError) as err:  # PyYAML's constructors on a bad `!!bool x`, `!!float x`
        raise textedit.YamlTextError(f"yaml: document at line {line}: cannot construct a value: {err}") from err


def _identity(piece: str, data: Any) -> tuple[str, str, str, str]:
    if not isinstance(data, Mapping):
        return ("", "", "", "")
    api_version = _text(data.get("apiVersion"))
    group = api_version.split("/", 1)[0] if "/" in api_version else ""
    metadata = data.get("metadata")
    if not isinstance(metadata, Mapping):
        metadata = {}
    namespace, name = _text(metadata.get("namespace")), _text(metadata.get("name"))
    annotations = metadata.get("annotations")
    identifier = annotations.get(UPSTREAM_IDENTIFIER) if isinstance(annotations, Mapping) else None
    comment = _MERGE_COMMENT.search(piece)
    if comment:
        namespace, name = comment["ns"], comment["name"]
    elif isinstance(identifier, str) and identifier.count("|") == 3:
        namespace, name = identifier.split("|")[2:]
    return (group, _text(data.get("kind")), "" if namespace == "default" else namespace, name)


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def join(pieces: Iterable[Piece]) -> str:
    """The pieces as one file text (see the module docstring)."""
    text = ""
    previous: Piece | None = None
    for piece in pieces:
        if previous is None and piece.index > 0:
            text += _BARE_START.sub("", piece.text, count=1)  # a file need not start with `---`
        elif previous is not None and (previous.source, previous.index + 1) != (piece.source, piece.index):
            if text and not text.endswith("\n"):
                text += "\n"
            text += piece.text if _STARTS_DOCUMENT.match(piece.text) else "---\n" + piece.text
        else:
            text += piece.text
        previous = piece
    return text
