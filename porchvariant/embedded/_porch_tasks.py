"""The first tasks of a new PackageRevision (init, clone, edit, upgrade) as functions over files.

Owns: what a task makes of its sources, `{path: text}` in and out: the Kptfile bookkeeping of a
clone or upgrade (`upstream` / `upstreamLock`, spec d.5) edited in the Kptfile's text so its
comments survive (`Clones` does it once per upstream for a fan-out), and the package context a
clone into a deployment Repository gets. Reading a package straight from a git URL (clone from
git) is here too, for local repositories only. Leaves to _porch_first_task.py: finding the
PackageRevisions a task names and every API rule about them (placeholder, published).
"""

from __future__ import annotations

import os
import posixpath
import subprocess
from collections.abc import Mapping
from typing import Any, NamedTuple
from urllib.parse import unquote, urlparse

from krmyaml import textedit
from porchvariant.embedded.merge import resources as resource_merge
from porchvariant.errors import PorchVariantError

KPTFILE = "Kptfile"
PACKAGE_CONTEXT = "package-context.yaml"
CONTEXT_NAME = "kptfile.kpt.dev"
_YAML_SUFFIXES = (".yaml", ".yml")
_UPSTREAM_BEFORE = ("upstreamLock", "info", "pipeline", "inventory", "status")
_LOCK_BEFORE = ("info", "pipeline", "inventory", "status")


class TaskError(PorchVariantError):
    """A task that cannot run; its message is the API error's."""


class Upstream(NamedTuple):
    """Where a clone comes from, as the Kptfile records it."""

    repo: str
    directory: str
    ref: str
    commit: str


def kptfile_data(files: Mapping[str, str]) -> dict[str, Any]:
    """The Kptfile's data, {} when it is missing or unreadable."""
    text = files.get(KPTFILE)
    if text is None:
        return {}
    try:
        objects = textedit.load_objects(text)
    except textedit.YamlTextError:
        return {}
    return objects[0][1] if objects else {}


def init_package(name: str, task: Mapping[str, Any]) -> dict[str, str]:
    """The init task: a minimal Kptfile (description, keywords, site when given)."""
    init = task.get("init") or {}
    lines = ["apiVersion: kpt.dev/v1", "kind: Kptfile", "metadata:", f"  name: {_scalar(name)}",
             "  annotations:", '    config.kubernetes.io/local-config: "true"']
    info = [f"  {key}: {_scalar(str(init[key]))}" for key in ("site", "description") if init.get(key)]
    if init.get("keywords"):
        info.append("  keywords:")
        info += [f"  - {_scalar(str(word))}" for word in init["keywords"]]
    if info:
        lines += ["info:", *info]
    return {KPTFILE: "\n".join(lines) + "\n"}


def cloned(files: Mapping[str, str], upstream: Upstream, *, name: str | None = None) -> dict[str, str]:
    """`files` with the Kptfile's upstream/upstreamLock pointing at `upstream` (and metadata.name
    set to `name` when given), as Porch's clone and upgrade write them."""
    if KPTFILE not in files:
        raise TaskError("upstream package has no Kptfile")
    git = {"repo": upstream.repo, "directory": upstream.directory, "ref": upstream.ref}

    def edit(data: Any) -> None:
        if name is not None:
            textedit.set_key(data["metadata"], "name", name)
        textedit.set_key(data, "upstream", {"type": "git", "git": git}, before=_UPSTREAM_BEFORE)
        textedit.set_key(data, "upstreamLock", {"type": "git", "git": {**git, "commit": upstream.commit}},
                         before=_LOCK_BEFORE)

    try:
        kptfile = textedit.edit_file_document(files[KPTFILE], 0, edit)
    except (textedit.YamlTextError, KeyError, TypeError) as err:
        raise TaskError(f"cannot update the Kptfile: {err}") from err
    return {**files, KPTFILE: kptfile}


class Clones:
    """`cloned` for a fan-out, which clones one upstream revision into many packages: the comment-
    keeping edit that points the Kptfile at the upstream (most of a clone's time) is done once per
    upstream Kptfile and remembered, and only metadata.name is set per clone, by rewriting that
    one scalar's characters in the text (checked by reading the result back; when that is not
    exact, the whole edit is made the slow way)."""

    def __init__(self, limit: int = 256) -> None:
        self._pointed: dict[tuple[str, Upstream], str] = {}
        self._limit = limit

    def cloned(self, files: Mapping[str, str], upstream: Upstream, *, name: str) -> dict[str, str]:
        """What `cloned(files, upstream, name=name)` gives; TaskError likewise."""
        if KPTFILE not in files:
            raise TaskError("upstream package has no Kptfile")
        key = (files[KPTFILE], upstream)
        pointed = self._pointed.get(key)
        if pointed is None:
            pointed = cloned(files, upstream)[KPTFILE]
            if len(self._pointed) >= self._limit:
                self._pointed.clear()
            self._pointed[key] = pointed
        renamed = _renamed(pointed, name)
        if renamed is None:
            return cloned(files, upstream, name=name)
        return {**files, KPTFILE: renamed}


def _renamed(text: str, name: str) -> str | None:
    """`text` with its first document's metadata.name set to `name`, only that scalar's characters
    rewritten; None unless that reads back as exactly the data wanted."""
    documents = textedit.split_documents(text)
    first = documents[0]
    try:
        data = next((d for d in textedit.load_fast(first) if d is not None), None)
    except textedit.YamlTextError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("metadata"), dict):
        return None
    if data["metadata"].get("name") == name:
        return text
    span = textedit.scalar_span(first, ("metadata", "name"))
    if span is None:
        return None
    edited = first[: span[0]] + _scalar(name) + first[span[1] :]
    wanted = {**data, "metadata": {**data["metadata"], "name": name}}
    try:
        exact = [d for d in textedit.load_fast(edited) if d is not None] == [wanted]
    except textedit.YamlTextError:
        return None
    return edited + "".join(documents[1:]) if exact else None


def with_package_context(files: Mapping[str, str], package_path: str) -> dict[str, str]:
    """The package context a clone into a deployment Repository gets (Porch's clone runs kpt's
    package-context generator): every `kptfile.kpt.dev` ConfigMap in the package is dropped (a
    file left with no document goes too), and one is written in package-context.yaml beside every
    Kptfile, data.name being that Kptfile's metadata.name and data.package-path `package_path`
    (Porch's spec.packageName)."""
    out = dict(files)
    for path, text in files.items():
        if CONTEXT_NAME not in text or not path.endswith(_YAML_SUFFIXES) or posixpath.basename(path) == KPTFILE:
            continue
        documents = textedit.split_documents(text)
        kept = [document for document in documents if not _is_package_context(document)]
        if len(kept) == len(documents):
            continue
        if any(_has_data(document) for document in kept):
            out[path] = "".join(kept)
        else:
            del out[path]
    for path in sorted(p for p in files if posixpath.basename(p) == KPTFILE):
        directory = posixpath.dirname(path)
        metadata = kptfile_data({KPTFILE: files[path]}).get("metadata")
        name = (metadata.get("name") if isinstance(metadata, dict) else None) or posixpath.basename(directory)
        data = [f"  name: {_scalar(str(name))}"]
        if package_path:
            data.append(f"  package-path: {_scalar(package_path)}")
        text = "\n".join(["apiVersion: v1", "kind: ConfigMap", "metadata:", f"  name: {CONTEXT_NAME}",
                          "  annotations:", '    config.kubernetes.io/local-config: "true"', "data:", *data]) + "\n"
        out[posixpath.join(directory, PACKAGE_CONTEXT)] = text
    return out


def _is_package_context(document: str) -> bool:
    try:
        found = textedit.load_fast(document)
    except textedit.YamlTextError:
        return False  # not YAML: not the generator's to drop
    return any(isinstance(data, dict) and data.get("apiVersion") == "v1" and data.get("kind") == "ConfigMap"
               and isinstance(data.get("metadata"), dict) and data["metadata"].get("name") == CONTEXT_NAME
               for data in found)


def _has_data(document: str) -> bool:
    try:
        return any(data is not None for data in textedit.load_fast(document))
    except textedit.YamlTextError:
        return True


def upgraded(original: Mapping[str, str], new_upstream: Mapping[str, str], local: Mapping[str, str],
             upstream: Upstream) -> dict[str, str]:
    """The upgrade task (resource-merge): the 3-way merge, then the Kptfile pointed at the new upstream."""
    try:
        merged = resource_merge.merge_packages(original, new_upstream, local)
    except ValueError as err:
        raise TaskError(f"failed to merge the upgrade: {err}") from err
    return cloned(merged, upstream)


def repo_url(repo: str) -> str:
    """The upstream repo as Porch records it: ".git" appended when missing."""
    return repo if repo.endswith(".git") else repo + ".git"


def local_path(repo: str) -> str | None:
    """The filesystem path of a local repository (a path or file:// URL), None for a remote one."""
    if repo.startswith("file://"):
        return unquote(urlparse(repo).path)
    if "://" in repo or (":" in repo.split("/", 1)[0] and not os.path.isabs(repo)):
        return None  # https://, ssh://, scp-like host:path
    return repo


def read_git_package(repo: str, ref: str, directory: str) -> tuple[dict[str, str], str]:
    """The UTF-8 files of `directory` at `ref` in a local repository, and the commit; TaskError otherwise."""
    path = local_path(repo)
    if path is None:
        raise TaskError(f"cannot clone from {repo}: the embedded Porch reads only local repositories")
    commit = ""
    for candidate in (ref, f"refs/tags/{ref}", f"refs/heads/{ref}"):
        found = _git(path, "rev-parse", "--verify", "--quiet", f"{candidate}^{{commit}}", check=False)
        if found:
            commit = found.decode().strip()
            break
    if not commit:
        raise TaskError(f"cannot clone from {repo}: ref {ref!r} not found")
    directory = directory.strip("/")
    prefix = directory + "/" if directory else ""
    listing = _git(path, "ls-tree", "-r", "-z", commit, *(["--", directory] if directory else []))
    files: dict[str, str] = {}
    for entry in (listing or b"").split(b"\0"):
        if not entry:
            continue
        meta, _, name = entry.partition(b"\t")
        mode, kind, oid = meta.decode().split()
        if kind != "blob" or mode not in ("100644", "100755"):
            continue
        data = _git(path, "cat-file", "blob", oid) or b""
        try:
            files[name.decode()[len(prefix):]] = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
    if KPTFILE not in files:
        raise TaskError(f"cannot clone from {repo}: no Kptfile in {directory or '/'} at {ref}")
    return files, commit


def _git(path: str, *args: str, check: bool = True) -> bytes | None:
    run = subprocess.run(["git", "-C", path, *args], capture_output=True)
    if run.returncode != 0:
        if check:
            raise TaskError(f"git {args[0]} failed in {path}: {run.stderr.decode(errors='replace').strip()}")
        return None
    return run.stdout


def _scalar(text: str) -> str:
    """`text` as a YAML scalar: plain when it reads back as that string, else double-quoted."""
    try:
        plain = textedit.load_fast(f"k: {text}\n")
    except textedit.YamlTextError:
        plain = None
    if plain == [{"k": text}]:
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
