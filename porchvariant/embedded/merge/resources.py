"""Upgrading a package: kpt's `resource-merge` strategy as a pure function over `{path: text}`.

`merge_packages(original, upstream, local)` takes the package at the old upstream revision, at the
new one, and the local (downstream) package, and gives the upgraded local package, as Porch's
`upgrade` task and `kpt pkg update` (kpt 1.0.0-beta.56) do it. Differential tests run the real kpt
on the cases in testdata/porchvariant/upgrade/.

What it does, file by file:

* YAML files (`*.yaml`, `*.yml`): every document is matched across the three versions by kpt's
  identity, its path plus group, kind, namespace and name (`documents.py`: the `kpt-merge`
  comment and upstream-identifier annotation are honoured). A resource only local has is kept;
  one only upstream added is added (appended to local's file of that name, or in a new file with
  upstream's text); one local deleted stays deleted, even if upstream changed it; one upstream
  deleted is deleted unless local changed its data. The rest is merged field by field
  (`three_way.py`): a field changed on one side takes that side's value, and where both changed,
  upstream wins, except that maps merge by key and associative lists (containers by name, ports
  by containerPort and protocol, env by name, ...: `schema.py`) by element. A file left with
  no resources is deleted.
* Kptfiles: `metadata.annotations`, `metadata.labels`, `info`, `pipeline` and `inventory` merge
  3-way, pipeline functions matched by name or else by image (`kptfile.py`); the rest is
  local's. `upstream` and `upstreamLock` are NOT updated: the caller sets them to the new upstream.
* Every other file: kept if local added or changed it; otherwise upstream's version, or deleted
  if upstream deleted it. As in kpt, a file local deleted comes back if upstream still has it,
  and a path with `.git` in it (`.gitignore`) is left as local has it.

Text: a file the merge does not change comes back byte for byte; in a changed file only the
documents whose data changed are rewritten, keeping comments, key order, quoting and indentation
(`krmyaml.textedit`, `apply.py`). New keys go before the key that follows them upstream.

Deliberate differences from kpt 1.0.0-beta.56 (all but the first two change data):

* kpt rewrites every file it reads in its own format and adds `# kpt-merge: ns/name` comments and
  `internal.kpt.dev/upstream-identifier` annotations to all resources, and writes the Kptfile
  anew (dropping comments and fields it does not know). None of that happens here.
* kpt appends new keys sorted by name, and sorts a file's documents by their index upstream;
  here new documents follow local's.
* Where a map was deleted on one side and not changed on the other, kpt leaves an empty `{}`
  behind (and a deleted list element as `{name: x, emptyDir: {}}`); here it stays deleted. Where
  local deleted a map that upstream changed, kpt brings back only the changed fields; here
  upstream's whole value. When upstream reordered an associative list local did not touch, kpt
  keeps local's order; here upstream's.
* kpt fails (`wrong node kind`) when a field's type changed between versions; here upstream wins.
* A port without a protocol is TCP, as Kubernetes defaults it; kpt matches it with any port of
  that number, and may lose it.
* kpt beta.56 deletes fields that are null on either side; here null is a value (later kpt
  versions agree).
* "Locally changed" (for a resource upstream deleted) compares data; kpt compares text, so for it
  a comment counts.
* kpt refuses a package with two documents of the same identity in one file; here they are
  matched in order. Subpackages are merged file by file like the rest (kpt merges each on its own,
  and deletes or keeps a subpackage upstream deleted as a whole); a Kptfile upstream deleted is
  kept as local has it.
"""

from __future__ import annotations

import fnmatch
import posixpath
from collections.abc import Mapping
from typing import Any

import krmyaml
import krmyaml.schema
from krmyaml import textedit
from porchvariant.embedded.merge.apply import apply
from porchvariant.embedded.merge.documents import UPSTREAM_IDENTIFIER, Document, Piece, YamlFile, join, read_file
from porchvariant.embedded.merge.kptfile import merge_kptfile
from porchvariant.embedded.merge.schema import ListKeys, inferred_list_keys, kubernetes_list_keys
from porchvariant.embedded.merge.three_way import MISSING, merge, same
from porchvariant.errors import MutationError

__all__ = ["merge_packages"]

KPTFILE = "Kptfile"
YAML_PATTERNS = ("*.yaml", "*.yml")  # kyaml's kio.DefaultMatch: the files kpt reads resources from
SIDES = ("original", "upstream", "local")

Files = Mapping[str, str]


def merge_packages(original: Files, upstream: Files, local: Files) -> dict[str, str]:
    """The upgraded local package, as `{relative path: text}` (see the module docstring).

    `original` is the package at the revision local was made from, `upstream` at the one to
    upgrade to. The Kptfile's `upstream` and `upstreamLock` are left as local has them: the caller
    points them at the new upstream revision. Raises MutationError (one line, naming the file)
    when a YAML file or a Kptfile of any of the three is not valid YAML, or a Kptfile is not one
    mapping. Pure: no I/O, and the arguments are not changed.
    """
    try:
        merged = {
            **_merge_other_files(original, upstream, local),
            **_merge_kptfiles(original, upstream, local),
            **_merge_yaml_files(original, upstream, local),
        }
    except RecursionError as err:  # a document nested deeper than Python's stack
        raise MutationError("cannot upgrade: a YAML document is nested too deeply") from err
    return {path: text for path, text in sorted(merged.items()) if text is not None}


def _class_of(path: str) -> str:
    name = posixpath.basename(path)
    if name == KPTFILE:
        return "kptfile"
    return "yaml" if any(fnmatch.fnmatchcase(name, pattern) for pattern in YAML_PATTERNS) else "other"


def _only(files: Files, kind: str) -> dict[str, str]:
    return {path: text for path, text in files.items() if _class_of(path) == kind}


def _merge_other_files(original: Files, upstream: Files, local: Files) -> dict[str, str | None]:
    """kpt's ReplaceNonKRMFiles: local's additions and changes stay, everything else follows upstream.

    kpt leaves out every path with `.git` in it (`.gitignore`, `.github/CODEOWNERS`): local's stay.
    """
    before, after, mine = ({path: text for path, text in _only(files, "other").items() if ".git" not in path}
                           for files in (original, upstream, local))
    out: dict[str, str | None] = {path: text for path, text in _only(local, "other").items() if ".git" in path}
    for path, text in mine.items():
        changed_locally = path not in before or before[path] != text
        out[path] = text if changed_locally else after.get(path)
    for path, text in after.items():
        out.setdefault(path, text)
    return out


def _merge_kptfiles(original: Files, upstream: Files, local: Files) -> dict[str, str | None]:
    """Each Kptfile local has, merged if upstream has it too; one only upstream has is added."""
    before, after, mine = ({path: _read_kptfile(side, path, text) for path, text in _only(files, "kptfile").items()}
                           for side, files in zip(SIDES, (original, upstream, local), strict=True))
    out: dict[str, str | None] = {path: file.text for path, file in after.items() if path not in before}
    for path, file in mine.items():
        out[path] = file.text
        if path in after:  # a Kptfile upstream deleted is left alone: it is a subpackage's (see above)
            kptfile = file.documents[0]
            base = before[path].documents[0].data if path in before else {}
            merged = merge_kptfile(base, after[path].documents[0].data, kptfile.data)
            if not same(merged, kptfile.data):
                out[path] = "".join(_edited_pieces(file, [(kptfile, merged, inferred_list_keys)]))
    return out


def _read(side: str, path: str, text: str) -> YamlFile:
    try:
        return read_file(path, text)
    except textedit.YamlTextError as err:
        raise MutationError(_message(side, path, err)) from err


def _message(side: str, path: str, err: Exception) -> str:
    return f'cannot upgrade: {side} package: file "{path}": ' + " ".join(str(err).split())


def _read_kptfile(side: str, path: str, text: str) -> YamlFile:
    file = _read(side, path, text)
    if len(file.documents) != 1 or not isinstance(file.documents[0].data, Mapping):
        raise MutationError(_message(side, path, ValueError("expected exactly one object (the Kptfile)")))
    return file


def _merge_yaml_files(original: Files, upstream: Files, local: Files) -> dict[str, str | None]:
    before, after, mine = ({path: _read(side, path, text) for path, text in _only(files, "yaml").items()}
                           for side, files in zip(SIDES, (original, upstream, local), strict=True))
    by_identity = [{doc.identity: doc for file in files.values() for doc in file.documents}
                   for files in (before, after, mine)]
    added: dict[str, list[Document]] = {}
    for identity, doc in by_identity[1].items():
        if identity not in by_identity[0] and identity not in by_identity[2]:
            added.setdefault(identity[0], []).append(doc)
    out: dict[str, str | None] = {}
    for path, file in mine.items():
        new_pieces = [Piece(after[path].pieces[doc.index], "upstream", doc.index) for doc in added.get(path, [])]
        out[path] = _merged_file(file, by_identity[0], by_identity[1], new_pieces)
    for path, docs in added.items():
        if path not in mine:
            out[path] = _new_file(after[path], {doc.index for doc in docs})
    return out


def _merged_file(file: YamlFile, before: Mapping[Any, Document], after: Mapping[Any, Document],
                 added: list[Piece]) -> str | None:
    """Local's file with its documents merged, deleted or kept, and upstream's new ones at the end."""
    edits: list[tuple[Document, Any, ListKeys]] = []
    deleted: set[int] = set()
    for doc in file.documents:
        old, new = before.get(doc.identity), after.get(doc.identity)
        if old is not None and new is None:
            if same(_without_identifier(old.data), _without_identifier(doc.data)):
                deleted.add(doc.index)
        elif new is not None:
            list_keys = _list_keys(doc.data)
            merged = merge(old.data if old is not None else MISSING, new.data, doc.data, list_keys)
            if not same(merged, doc.data):
                edits.append((doc, merged, list_keys))
    if not edits and not deleted and not added:
        return file.text
    if len(deleted) == len(file.documents) and not added:
        return None
    pieces = _edited_pieces(file, edits)
    return join([*(Piece(text, "local", i) for i, text in enumerate(pieces) if i not in deleted), *added])


def _new_file(upstream_file: YamlFile, kept: set[int]) -> str:
    """Upstream's file, less the documents that are not to be added (pieces without one stay)."""
    dropped = {doc.index for doc in upstream_file.documents} - kept
    if not dropped:
        return upstream_file.text
    return join(Piece(piece, "upstream", i) for i, piece in enumerate(upstream_file.pieces) if i not in dropped)


def _list_keys(data: Any) -> ListKeys:
    if not isinstance(data, Mapping):
        return kubernetes_list_keys(None, None)
    return kubernetes_list_keys(data.get("apiVersion"), data.get("kind"))


def _without_identifier(data: Any) -> Any:
    """The data without kpt's upstream-identifier annotation (kpt adds it on every get)."""
    metadata = data.get("metadata") if isinstance(data, Mapping) else None
    if not isinstance(metadata, Mapping):
        return data
    annotations = metadata.get("annotations")
    if not isinstance(annotations, Mapping) or UPSTREAM_IDENTIFIER not in annotations:
        return data
    rest = {k: v for k, v in annotations.items() if k != UPSTREAM_IDENTIFIER}
    others = {k: v for k, v in metadata.items() if k != "annotations"}
    return {**data, "metadata": {**others, **({"annotations": rest} if rest else {})}}


class _NotApplicable(Exception):
    """The merged document's root is not the same kind of node as local's."""


def _reads_as(text: str, data: Any) -> bool:
    try:
        documents = [document for document in textedit.load_fast(text) if document is not None]
    except (ValueError, LookupError, TypeError):
        return False
    return len(documents) == 1 and same(documents[0], data)


def _edited_pieces(file: YamlFile, edits: list[tuple[Document, Any, ListKeys]]) -> list[str]:
    """The file's pieces, each (document, merged data, list keys) of `edits` written into its own."""
    style = textedit.detect_style(file.text)
    pieces = list(file.pieces)
    for doc, merged, list_keys in edits:

        def edit(data: Any, merged: Any = merged, list_keys: ListKeys = list_keys) -> None:
            if not apply(data, merged, list_keys):
                raise _NotApplicable

        try:
            text = textedit.edit_document(pieces[doc.index], edit, style=style)
        except _NotApplicable:
            head = "---\n" if pieces[doc.index].lstrip().startswith("---") else ""
            try:
                text = head + krmyaml.schema.dump(merged).removesuffix("...\n")
            except krmyaml.UnwritableValue:
                text = ""  # data PyYAML cannot write (an !!omap's pairs): refused just below
        except textedit.YamlTextError as err:
            raise MutationError(_message("local", file.path, err)) from err
        if not _reads_as(text, merged):
            # Only exotic tags get here (an `!!omap` reads as a list of pairs but round-trips as a map).
            raise MutationError(_message("local", file.path, ValueError(
                "the merged document cannot be written without changing its data")))
        pieces[doc.index] = text
    return pieces
