"""Persistence to a directory: a snapshot plus a journal, the way etcd keeps a snapshot and a WAL.

`state.json` is a snapshot (the revision counter, the kinds registered in code, every object),
replaced atomically (written to a temporary file, fsynced, renamed, the directory fsynced).
`journal.jsonl` has one line per change since that snapshot, appended as each write happens;
`sync()` returns once the lines are on disk (fsync), and the cluster calls it before a write
returns, so nothing acknowledged is lost even if the machine goes down. Writers that wait for
the disk together share one fsync (group commit). Opening the directory loads the snapshot and
replays the journal (a torn last line, from a crash mid-write, is ignored; changes already in
the snapshot are skipped), and the journal is folded into a new snapshot on open, on `close()`,
and whenever it grows past the size of the state it describes.

CRDs are objects, so the kinds they define come back with them. Watch history does not
survive a restart: a watch from a version before it gets Gone, as after an API server restart.
One owner at a time: opening takes the directory's lock (_lock.py), and a directory another
process holds is refused with StateInUse.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import IO, Any, NamedTuple

from reconcile.cluster import Kind, Obj, ResourceInfo
from reconcile.embedded._kinds import GroupKind
from reconcile.embedded._lock import DirectoryLock
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


class StateLog:
    """The directory's snapshot and journal; `record` is a store listener.

    Threads: `record`, `record_kinds`, `compact` and `close` are called under the cluster's lock;
    `sync` is called without it (so writers can gather behind one fsync) and takes `_syncing`,
    which `compact` and `close` take too before they replace or close the file."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._lock = DirectoryLock.acquire(self.directory)
        self._file: IO[str] | None = None
        self._lines = 0  # since the snapshot
        self.written = 0  # lines appended since opening; `sync(written)` makes them durable
        self._synced = 0  # lines known to be on disk
        self._new_file = False  # the journal file was created: its directory entry needs an fsync
        self._syncing = threading.Lock()
        self._failed: OSError | None = None
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
        """Write a new snapshot durably, then start an empty journal. Everything written so far is
        on disk afterwards."""
        data = {"format": FORMAT, "revision": revision, "kinds": [_info_json(i) for i in kinds],
                "objects": [{"group": g, "kind": k, "object": obj} for (g, k), obj in objects]}
        temporary = self.directory / (SNAPSHOT + ".tmp")
        with temporary.open("w", encoding="utf-8") as out:
            json.dump(data, out, separators=(",", ":"))
            out.flush()
            os.fsync(out.fileno())
        with self._syncing:
            os.replace(temporary, self.directory / SNAPSHOT)
            # The rename must be on disk before the journal it replaces is emptied: else a crash
            # could leave the old snapshot beside an empty journal.
            _fsync_directory(self.directory)
            self._close_file()
            self._file = (self.directory / JOURNAL).open("w", encoding="utf-8")
            _fsync_directory(self.directory)  # the journal may be new
            self._lines, self._new_file, self._synced = 0, False, self.written

    def sync(self, through: int) -> None:
        """Return once the first `through` lines written are on disk. One fsync covers every line
        appended before it starts, so callers waiting together share it. ServerError if the disk
        failed (then and for every later write: after a failed fsync, what is on disk is unknown)."""
        with self._syncing:
            self.check()
            if self._synced >= through:
                return  # another caller's fsync covered these lines
            target, file = self.written, self._file  # lines are flushed before `written` counts them
            if file is None:
                return
            try:
                os.fsync(file.fileno())
                if self._new_file:
                    _fsync_directory(self.directory)
                    self._new_file = False
            except OSError as err:
                self._failed = err
                self.check()
            self._synced = max(self._synced, target)

    def check(self) -> None:
        """ServerError once writing to the disk has failed: no write can be made durable any more."""
        if self._failed is not None:
            raise ServerError(f"{self.directory / JOURNAL}: writes cannot be made durable: "
                              f"{self._failed.strerror or self._failed}")

    def close(self) -> None:
        """Make what was written durable, close the journal and let the directory go."""
        with self._syncing:
            try:
                if self._file is not None and self._synced < self.written and self._failed is None:
                    os.fsync(self._file.fileno())
                    self._synced = self.written
            finally:
                self._close_file()
                self._lock.release()

    def _append(self, entry: dict[str, Any]) -> None:
        if self._file is None:
            path = self.directory / JOURNAL
            self._new_file = not path.exists()
            self._file = path.open("a", encoding="utf-8")
        self._file.write(json.dumps(entry, separators=(",", ":")) + "\n")
        self._file.flush()
        self._lines += 1
        self.written += 1

    def _close_file(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _fsync_directory(directory: Path) -> None:
    """Make the directory's entries (a rename, a new file) durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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
