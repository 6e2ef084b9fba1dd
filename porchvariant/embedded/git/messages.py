"""Porch's commit messages, `kpt:` trailers and the raw git objects porchkit writes, pure.

Message bytes follow Porch (pkg/externalrepo/git/git.go, annotation.go):

    resource write   "<title>\\n" + "\\n\\nkpt:<json>\\n"     (so two blank lines before the trailer)
    approval         "Approving package revision P/N" + "\\n\\nkpt:<json>\\n"
    placeholder del. "Delete P"                              (no trailer, no final newline)
    branch creation  "Initial commit: Creating main branch"  (likewise)

The trailer JSON is what Go's encoding/json writes for Porch's gitAnnotation: compact, fields in
the order package, workspaceName, revision, task, empty strings left out, and `<`, `>`, `&`,
U+2028 and U+2029 escaped as \\u003c and so on. A task is the dict the API holds; its top-level
keys are put in the order of Porch's Task struct (type first); nested keys keep the caller's order.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

Task = dict[str, Any]

TITLES = {
    "init": "Creating new empty revision",
    "clone": "Creating new revision by cloning",
    "edit": "Creating new revision by copying previous revision",
    "upgrade": "Upgrading revision",
    "render": "Rendering package",
    "": "Intermediate commit",  # Porch's TaskTypeNone, also used when there is no task at all
}
APPROVAL_TITLE = "Approving package revision {package}/{revision}"
DELETE_TITLE = "Delete {package}"
INITIAL_COMMIT_MESSAGE = "Initial commit: Creating main branch"
README_NAME, README_TEXT = "README.md", "Created by porch"

# Porch's Task struct field order, old fields (patch, eval, update) and new (upgrade) merged.
_TASK_FIELD_ORDER = ("type", "init", "clone", "patch", "edit", "eval", "update", "upgrade")
_FIRST_TASK_TYPES = frozenset({"init", "clone", "edit", "upgrade"})
_GO_HTML_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


@dataclass(frozen=True, slots=True)
class Signature:
    """A commit author or committer."""

    name: str
    email: str


PORCH_SIGNATURE = Signature("Package Orchestration Service", "porch@kpt.dev")


def go_json(value: Any) -> str:
    """`value` as Go's json.Marshal writes it (for the str/int/bool/list/dict values of a task)."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    # These characters only ever occur inside JSON strings, so plain replacement is exact.
    for raw, escaped in _GO_HTML_ESCAPES.items():
        text = text.replace(raw, escaped)
    return text


def title(task: Mapping[str, Any] | None) -> str:
    kind = str(task.get("type", "")) if task is not None else ""
    return TITLES.get(kind, f"Intermediate commit: {kind}")


def trailer(package: str, workspace: str, revision: str, task: Mapping[str, Any] | None = None) -> str:
    fields: dict[str, Any] = {}
    for key, value in (("package", package), ("workspaceName", workspace), ("revision", revision)):
        if value:
            fields[key] = value
    if task is not None:
        ordered = {key: task[key] for key in _TASK_FIELD_ORDER if key in task}
        ordered.update((key, value) for key, value in task.items() if key not in ordered)
        fields["task"] = ordered
    return "kpt:" + go_json(fields)


def write_message(package: str, workspace: str, task: Mapping[str, Any] | None) -> str:
    """The message of a resource write on a draft (revision "0")."""
    return f"{title(task)}\n\n\n{trailer(package, workspace, '0', task)}\n"


def approval_message(package: str, workspace: str, revision: int) -> str:
    head = APPROVAL_TITLE.format(package=package, revision=revision)
    return f"{head}\n\n{trailer(package, workspace, str(revision))}\n"


def delete_message(package: str) -> str:
    return DELETE_TITLE.format(package=package)


def kpt_annotations(message: str) -> list[dict[str, Any]]:
    """Every `kpt:` trailer of a commit message that parses as a JSON object (Porch skips the rest)."""
    found = []
    for line in message.split("\n"):
        line = line.strip()
        if not line.startswith("kpt:"):
            continue
        try:
            value = json.loads(line[4:])
        except ValueError:
            continue
        if isinstance(value, dict):
            found.append(value)
    return found


def trailer_workspace(message: str, package: str) -> str:
    """The workspaceName the message's trailer records for `package`, or ""."""
    for note in kpt_annotations(message):
        if note.get("package") == package and note.get("workspaceName"):
            return str(note["workspaceName"])
    return ""


def tasks_from_history(messages: Iterable[str], package: str, workspace: str) -> list[Task]:
    """Porch's loadTasks (pkg/externalrepo/git/git.go, since v1.5.3, PR #252) over messages newest
    first: the revision's first task alone, or [] when its history records none.

    That is the oldest first task (init, clone, edit, upgrade) among the (package, workspace)
    trailers met down to the first clone or init; the tasks after it (render and the like, which
    Porch before v1.5.3 listed too) are left out.
    """
    return first_task(task_chain(messages, package, workspace))


def first_task(chain: Iterable[Task]) -> list[Task]:
    """The tasks Porch shows for a `task_chain`: its first first-task, alone ([] when none)."""
    return next(([task] for task in chain if is_first_task(task)), [])


def task_chain(messages: Iterable[str], package: str, workspace: str) -> list[Task]:
    """Every (package, workspace) task of the history, messages newest first, returned oldest first:
    what Porch's loadTasks gave before v1.5.3, and what `first_task` reduces to what it gives now.

    Stops at the first clone or init task met. A trailer without workspaceName whose revision
    equals `workspace` also matches (revisions written before Porch had workspaces).
    """
    tasks: list[Task] = []
    for message in messages:
        for note in kpt_annotations(message):
            if note.get("package") != package:
                continue
            ws = note.get("workspaceName", "")
            if ws != workspace and not (not ws and note.get("revision") == workspace):
                continue
            task = note.get("task")
            if isinstance(task, dict):
                tasks.append(task)
                if task.get("type") in ("clone", "init"):
                    return tasks[::-1]
    return tasks[::-1]


def is_first_task(task: Mapping[str, Any] | None) -> bool:
    return task is not None and task.get("type") in _FIRST_TASK_TYPES


# Raw objects -----------------------------------------------------------------------------------


def object_id(kind: str, data: bytes, algorithm: str = "sha1") -> str:
    """The id git gives an object of `kind` ("blob", "tree", "commit") with content `data`."""
    return hashlib.new(algorithm, b"%s %d\0%s" % (kind.encode(), len(data), data)).hexdigest()


def tree_object(entries: Iterable[tuple[str, str, str]]) -> bytes:
    """A tree from (mode, name, id) entries, mode as git writes it ("100644", "40000").

    Git orders entries by name bytes, a subtree's name compared as if it ended with "/".
    """
    def order(entry: tuple[str, str, str]) -> bytes:
        mode, name, _ = entry
        return name.encode("utf-8", "surrogateescape") + (b"/" if mode == "40000" else b"")

    return b"".join(
        f"{mode} {name}".encode("utf-8", "surrogateescape") + b"\0" + bytes.fromhex(oid)
        for mode, name, oid in sorted(entries, key=order)
    )


def parse_tree(data: bytes, hash_size: int) -> list[tuple[str, str, str]]:
    """(mode, name, id) entries of a raw tree object."""
    entries, at = [], 0
    while at < len(data):
        space = data.index(b" ", at)
        nul = data.index(b"\0", space)
        oid = data[nul + 1 : nul + 1 + hash_size].hex()
        entries.append((data[at:space].decode(), data[space + 1 : nul].decode("utf-8", "surrogateescape"), oid))
        at = nul + 1 + hash_size
    return entries


def _signature_line(role: str, who: Signature, when: int, offset_minutes: int) -> bytes:
    sign = "-" if offset_minutes < 0 else "+"
    hours, minutes = divmod(abs(offset_minutes), 60)
    return f"{role} {who.name} <{who.email}> {when} {sign}{hours:02d}{minutes:02d}\n".encode()


def commit_object(
    tree: str,
    parents: Iterable[str],
    author: Signature,
    committer: Signature,
    message: str,
    *,
    when: int,
    offset_minutes: int,
) -> bytes:
    """A raw commit object; the message is stored byte for byte (no newline added)."""
    head = f"tree {tree}\n".encode() + b"".join(f"parent {p}\n".encode() for p in parents)
    head += _signature_line("author", author, when, offset_minutes)
    head += _signature_line("committer", committer, when, offset_minutes)
    return head + b"\n" + message.encode()


def parse_commit(data: bytes) -> tuple[str, int, str]:
    """(author email, author time, message) of a raw commit object, as `git for-each-ref` gives
    %(authoremail) (without the brackets), %(authordate:unix) and %(contents)."""
    head, _, message = data.partition(b"\n\n")
    email, when = "", 0
    for line in head.split(b"\n"):
        if line.startswith(b"author "):
            ident = line[len(b"author "):].decode("utf-8", "surrogateescape")
            lt = ident.find("<")
            gt = ident.find(">", lt + 1)
            if lt >= 0 and gt >= 0:
                email = ident[lt + 1 : gt]
                stamp = ident[gt + 1 :].split()
                when = int(stamp[0]) if stamp and stamp[0].isdigit() else 0
            break
    return email, when, message.decode("utf-8", "surrogateescape")


def commit_parents(data: bytes) -> list[str]:
    """The parent ids of a raw commit object, in order."""
    head = data.partition(b"\n\n")[0]
    return [line[len(b"parent "):].decode() for line in head.split(b"\n") if line.startswith(b"parent ")]


def tag_target(data: bytes) -> tuple[str, str]:
    """(object id, object type) a raw annotated tag object points at."""
    target, kind = "", ""
    for line in data.partition(b"\n\n")[0].split(b"\n"):
        if line.startswith(b"object "):
            target = line[len(b"object "):].decode()
        elif line.startswith(b"type "):
            kind = line[len(b"type "):].decode()
    return target, kind


def clean_identity(text: str) -> str:
    """A name or email git will store: no angle brackets or line breaks (git strips them too)."""
    return "".join(ch for ch in text if ch not in "<>\n\r\0").strip()
