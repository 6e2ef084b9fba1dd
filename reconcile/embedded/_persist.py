"""Persistence to a directory: a snapshot plus a journal, the way etcd keeps a snapshot and a WAL.

`state.json` is a snapshot (the revision counter, the kinds registered in code, every object),
replaced atomically (written to a temporary file, fsynced, renamed). `journal.jsonl` has one
line per change since that snapshot, appended and flushed as each write happens, so a process
that dies loses nothing the OS has received. Opening the directory loads the snapshot and replays
the journal (a torn last line, from a crash mid-write, is ignored; changes already in the
snapshot are skipped), and the journal is folded into a new snapshot on open, on `close()`, and
whenever it grows past the size of the state it describes.

CRDs are objects, so the kinds they define come back with them. Watch history does not
survive a restart: a watch from a version before it gets Gone, as after an API server restart.
One process at a time may use a directory.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import IO, Any, NamedTuple

from reconcile.cluster import Kind, Obj, ResourceInfo
from reconcile.embedded._kinds import GroupKind
from reconcile.embedded._store import Change
from reconcile.errors import ServerError

SNAPSHOT = "state.json"
JOURNAL = "journal.jsonl"
FORMAT = 1
_MIN_COMPACTION = 10_000


class Saved(NamedTuple):
    revision: int
    kinds: list[ResourceInfo]
    objects: list[tuple[GroupKind, Obj]]


class Journal:
    """The directory's snapshot and journal; `record` is a store listener."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._file: IO[str] | None = None
        self._lines = 0
        self.snapshot_is_current = False  # after load(): the journal added nothing to the snapshot

    def load(self) -> Saved:
        """What the directory holds (empty for a new directory); ServerError, naming the file (and
        line), when a file is not what this module writes."""
        try:
            return self._load()
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise ServerError(f"{self.directory}: not a state directory porchkit can read "
                              f"({type(err).__name__}: {err})") from err

    def _load(self) -> Saved:
        revision, kinds, objects = 0, [], {}
        snapshot = self.directory / SNAPSHOT
        if snapshot.exists():
            data = _parse(snapshot.read_text(encoding="utf-8"), snapshot)
            if data.get("format") != FORMAT:
                raise ServerError(f"{snapshot}: unknown format {data.get('format')!r} (this porchkit writes {FORMAT})")
            revision = int(data["revision"])
            kinds = [_info(k) for k in data["kinds"]]
            for item in data["objects"]:
                objects[_slot(item["group"], item["kind"], item["object"])] = item["object"]
        snapshot_revision = revision
        journal = self.directory / JOURNAL
        lines = journal.read_text(encoding="utf-8").splitlines() if journal.exists() else []
        self.snapshot_is_current = snapshot.exists() and not lines
        if lines:
            for number, line in enumerate(lines, 1):
                try:
                    entry = json.loads(line)
                except ValueError:
                    if number == len(lines):
                        break  # torn by a crash in mid-write
                    raise ServerError(f"{journal}:{number}: not valid JSON") from None
                if not isinstance(entry, dict) or entry.get("t") not in ("kinds", "put", "del") or (
                        entry["t"] != "kinds" and not all(k in entry for k in ("r", "g", "k", "o"))):
                    raise ServerError(f"{journal}:{number}: not a journal entry")
                if entry["t"] == "kinds":
                    kinds = [_info(k) for k in entry["kinds"]]
                    continue
                if entry["r"] <= snapshot_revision:
                    continue  # already in the snapshot (a crash between rename and truncate)
                slot = _slot(entry["g"], entry["k"], entry["o"])
                if entry["t"] == "put":
                    objects[slot] = entry["o"]
                else:
                    objects.pop(slot, None)
                revision = max(revision, int(entry["r"]))
        return Saved(revision, kinds, [((g, k), obj) for (g, k, _, _), obj in objects.items()])

    def record(self, change: Change) -> None:
        """Append one change to the journal."""
        group, kind = change.group_kind
        if change.type == "DELETED":
            meta = change.object["metadata"]
            obj: Obj = {"metadata": {"namespace": meta.get("namespace") or "", "name": meta["name"]}}
            self._append({"r": change.revision, "t": "del", "g": group, "k": kind, "o": obj})
        else:
            self._append({"r": change.revision, "t": "put", "g": group, "k": kind, "o": change.object})

    def record_kinds(self, kinds: list[ResourceInfo]) -> None:
        self._append({"t": "kinds", "kinds": [_info_json(i) for i in kinds]})

    def due(self, objects: int) -> bool:
        """Whether the journal has grown enough to be folded into a new snapshot."""
        return self._lines > max(_MIN_COMPACTION, 2 * objects)

    def compact(self, revision: int, kinds: list[ResourceInfo], objects: list[tuple[GroupKind, Obj]]) -> None:
        """Write a new snapshot atomically, then start an empty journal."""
        data = {"format": FORMAT, "revision": revision, "kinds": [_info_json(i) for i in kinds],
                "objects": [{"group": g, "kind": k, "object": obj} for (g, k), obj in objects]}
        temporary = self.directory / (SNAPSHOT + ".tmp")
        with temporary.open("w", encoding="utf-8") as out:
            json.dump(data, out, separators=(",", ":"))
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, self.directory / SNAPSHOT)
        self._close_file()
        self._file = (self.directory / JOURNAL).open("w", encoding="utf-8")
        self._lines = 0

    def close(self) -> None:
        self._close_file()

    def _append(self, entry: dict[str, Any]) -> None:
        if self._file is None:
            self._file = (self.directory / JOURNAL).open("a", encoding="utf-8")
        self._file.write(json.dumps(entry, separators=(",", ":")) + "\n")
        self._file.flush()
        self._lines += 1

    def _close_file(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _slot(group: str, kind: str, obj: Obj) -> tuple[str, str, str, str]:
    meta = obj["metadata"]
    return (group, kind, meta.get("namespace") or "", meta["name"])


def _parse(text: str, path: Path) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except ValueError as err:
        raise ServerError(f"{path}: not valid JSON ({err})") from err
    if not isinstance(data, dict):
        raise ServerError(f"{path}: not a porchkit embedded-cluster snapshot")
    return data


def _info(data: dict[str, Any]) -> ResourceInfo:
    return ResourceInfo(Kind(data["apiVersion"], data["kind"]), data["plural"], bool(data["namespaced"]),
                        frozenset(data.get("subresources") or ()))


def _info_json(info: ResourceInfo) -> dict[str, Any]:
    return {"apiVersion": info.kind.api_version, "kind": info.kind.kind, "plural": info.plural,
            "namespaced": info.namespaced, "subresources": sorted(info.subresources)}
