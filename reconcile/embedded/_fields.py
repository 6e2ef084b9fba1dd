"""Field sets and `metadata.managedFields`, in the API server's `FieldsV1` format.

A field set is a set of paths; a path is a tuple of FieldsV1 tokens: `f:name` for a map key,
`k:{"name":"web"}` for the item of a keyed list, `v:"x"` for a value of a set-like list. A set
holds the *members* of an object: every leaf (scalars, empty maps, atomic lists) and every item of
a keyed or set-like list. Encoded, `{"f:spec": {"f:containers": {"k:{\\"name\\":\\"web\\"}":
{".": {}, "f:image": {}}}}}`: `.` marks an item that is itself a member.

Which lists are keyed comes from the OpenAPI schema on a real server. Without schemas, the
embedded server decides per list, the same way everywhere (see `list_kind`):
`metadata.finalizers` is a set, `metadata.ownerReferences` is keyed by `uid`, a list named
`conditions` whose items all carry a `type` is keyed by `type`, and any list whose items are all
maps with distinct string `name`s (containers, env, ports with names, volumes) is keyed by
`name`. Every other list is atomic: one leaf, replaced whole.

Not members, ever (the server strips them): apiVersion, kind, and metadata's name, namespace,
uid, resourceVersion, generation, creationTimestamp, deletionTimestamp,
deletionGracePeriodSeconds, selfLink and managedFields.

`record_update` is the bookkeeping of a create, update or patch (operation `Update`): the
writer's entry gains the fields the write changed, and every other entry loses them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from reconcile.errors import BadRequest
from reconcile.objects import rfc3339

Path = tuple[str, ...]
FieldSet = set[Path]
ListKind = tuple[str, ...]  # the key fields of a keyed list; ATOMIC or SET otherwise

ATOMIC: ListKind = ()
SET: ListKind = ("",)
SERVER_META = frozenset({"name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
                         "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink", "managedFields"})
_FINALIZERS: Path = ("f:metadata", "f:finalizers")
_OWNER_REFERENCES: Path = ("f:metadata", "f:ownerReferences")


def list_kind(path: Path, *lists: list[Any]) -> ListKind:
    """How the list(s) at `path` merge: ATOMIC, SET, or the key fields of a keyed list."""
    if path == _FINALIZERS:
        return SET
    if path == _OWNER_REFERENCES:
        return ("uid",)
    if not any(lists) or not all(type(item) is dict for items in lists for item in items):
        return ATOMIC
    candidates = ("type", "name") if path and path[-1] == "f:conditions" else ("name",)
    for key in candidates:
        if all(_distinct(items, key) for items in lists):
            return (key,)
    return ATOMIC


def item_token(item: Any, kind: ListKind) -> str:
    """The FieldsV1 token of one list item: `k:{...}` for keyed lists, `v:...` for sets."""
    if kind == SET:
        return "v:" + json.dumps(item, separators=(",", ":"))
    return "k:" + json.dumps({k: item[k] for k in kind}, separators=(",", ":"), sort_keys=True)


def members(obj: Mapping[str, Any]) -> FieldSet:
    """Every member path of an object, server-owned fields left out."""
    out: FieldSet = set()
    _collect(stripped(obj), (), out)
    return out


def diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> tuple[FieldSet, FieldSet]:
    """(changed, removed): members of `new` that are new or hold another value than in `old`,
    and members of `old` that `new` no longer has."""
    changed: FieldSet = set()
    removed: FieldSet = set()
    _diff(stripped(old), stripped(new), (), changed, removed)
    return changed, removed


def stripped(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A shallow view of `obj` without the fields no manager ever owns."""
    out = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    meta = out.get("metadata")
    if isinstance(meta, dict):
        kept = {k: v for k, v in meta.items() if k not in SERVER_META}
        if kept:
            out["metadata"] = kept
        else:
            del out["metadata"]
    return out


def encode(fields: FieldSet) -> dict[str, Any]:
    """A field set as FieldsV1 JSON (children in sorted order, `.` first)."""
    tree: dict[str, Any] = {}
    for path in sorted(fields):  # a member sorts before its children, so its "." comes first
        node = tree
        for token in path:
            child = node.get(token)
            if child is None:
                child = node[token] = {}
            node = child
        node["."] = {}
    _drop_leaf_marks(tree)
    return tree


def decode(fields_v1: Any) -> FieldSet:
    """The field set of FieldsV1 JSON; BadRequest when it is not FieldsV1."""
    if not isinstance(fields_v1, Mapping):
        raise BadRequest("metadata.managedFields: fieldsV1 must be an object")
    out: FieldSet = set()
    _walk(fields_v1, (), out)
    return out


def path_text(path: Path) -> str:
    """A path as conflict messages print it: `.spec.containers[name="web"].image`."""
    parts = []
    for token in path:
        kind, _, rest = token.partition(":")
        if kind == "f":
            parts.append("." + rest)
        elif kind == "k":
            parts.append("[" + ",".join(f"{k}={json.dumps(v)}" for k, v in json.loads(rest).items()) + "]")
        elif kind == "v":
            parts.append(f"[={rest}]")
        else:
            parts.append(f"[{rest}]")
    return "".join(parts)


class Entry:
    """One `managedFields` entry; its field set is decoded only when looked at, and encoded
    again only when it changed."""

    __slots__ = ("_encoded", "_fields", "api_version", "manager", "operation", "subresource", "time")

    def __init__(self, manager: str, operation: str, api_version: str, subresource: str, time: str,
                 fields: FieldSet | None = None, *, encoded: Mapping[str, Any] | None = None) -> None:
        self.manager, self.operation, self.api_version = manager, operation, api_version
        self.subresource, self.time = subresource, time
        self._fields, self._encoded = fields, encoded

    @property
    def fields(self) -> FieldSet:
        if self._fields is None:
            self._fields = decode(self._encoded or {})
        return self._fields

    @fields.setter
    def fields(self, value: FieldSet) -> None:
        if self._fields is None or value != self._fields:
            self._fields, self._encoded = value, None

    def encoded(self) -> Mapping[str, Any]:
        if self._encoded is None:
            self._encoded = encode(self.fields)
        return self._encoded

    def owns_anything(self) -> bool:
        return bool(self._fields) if self._fields is not None else bool(self._encoded)

    def is_manager(self, manager: str, operation: str, api_version: str, subresource: str) -> bool:
        """Whether this entry is that manager's: appliers are one manager across apiVersions, as
        on the real server; an updater is a manager per apiVersion."""
        return (self.manager == manager and self.operation == operation and self.subresource == subresource
                and (operation == "Apply" or self.api_version == api_version))

    def label(self) -> str:
        """How conflict messages name the manager."""
        text = json.dumps(self.manager)
        if self.subresource:
            text += f" with subresource {json.dumps(self.subresource)}"
        if self.operation == "Update":
            text += f" using {self.api_version}" + (f" at {self.time}" if self.time else "")
        return text


def read_entries(raw: Any) -> list[Entry]:
    """The entries of a `managedFields` list; BadRequest when it is malformed."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise BadRequest("metadata.managedFields must be a list")
    entries = []
    for item in raw:
        if not isinstance(item, Mapping):
            raise BadRequest("metadata.managedFields: each entry must be an object")
        if not item.get("manager") and not item.get("fieldsV1"):
            continue  # `[{}]` is how a client resets managedFields
        encoded = item.get("fieldsV1") or {}
        if not isinstance(encoded, Mapping):
            raise BadRequest("metadata.managedFields: fieldsV1 must be an object")
        entries.append(Entry(str(item.get("manager") or ""), str(item.get("operation") or "Update"),
                             str(item.get("apiVersion") or ""), str(item.get("subresource") or ""),
                             str(item.get("time") or ""), encoded=encoded))
    return entries


def write_entries(entries: list[Entry]) -> list[dict[str, Any]]:
    """Entries as `managedFields`, in the server's order (Apply first, then by time and
    manager); entries that own nothing are dropped."""
    kept = sorted((e for e in entries if e.owns_anything()),
                  key=lambda e: (e.operation, e.time, e.manager, e.api_version, e.subresource))
    out = []
    for entry in kept:
        item: dict[str, Any] = {"manager": entry.manager, "operation": entry.operation,
                                "apiVersion": entry.api_version, "time": entry.time, "fieldsType": "FieldsV1",
                                "fieldsV1": entry.encoded()}
        if entry.subresource:
            item["subresource"] = entry.subresource
        out.append(item)
    return out


def record_update(entries: list[Entry], old: Mapping[str, Any] | None, new: Mapping[str, Any], *, manager: str,
                  api_version: str, subresource: str, now: float) -> list[dict[str, Any]]:
    """`managedFields` after `manager` wrote `new` over `old` (None for a create) with an
    Update operation: it owns what it changed, and nobody owns what it removed."""
    changed, removed = diff(old, new) if old is not None else (members(new), set())
    mine = next((e for e in entries if e.is_manager(manager, "Update", api_version, subresource)), None)
    if mine is None:
        mine = Entry(manager, "Update", api_version, subresource, "", set())
        entries = [*entries, mine]
    if changed or removed:
        for entry in entries:
            if entry is not mine:
                entry.fields = entry.fields - changed - removed
        if not changed <= mine.fields or removed & mine.fields:
            mine.fields = (mine.fields | changed) - removed
    mine.time = rfc3339(now)
    return write_entries(entries)


def _distinct(items: list[Any], key: str) -> bool:
    seen = set()
    for item in items:
        value = item.get(key)
        if not isinstance(value, str) or value in seen:
            return False
        seen.add(value)
    return True


def _collect(value: Any, path: Path, out: FieldSet) -> None:
    kind = type(value)
    if kind is dict:
        if not value:
            if path:
                out.add(path)
            return
        for key, item in value.items():
            _collect(item, (*path, "f:" + key), out)
    elif kind is list:
        how = list_kind(path, value)
        if how == ATOMIC:
            out.add(path)
        elif how == SET:
            out.update((*path, item_token(v, SET)) for v in value)
        else:
            for item in value:
                item_path = (*path, item_token(item, how))
                out.add(item_path)
                for key, field in item.items():
                    _collect(field, (*item_path, "f:" + key), out)
    else:
        out.add(path)


def _diff(old: Any, new: Any, path: Path, changed: FieldSet, removed: FieldSet) -> None:
    if type(old) is dict and type(new) is dict:
        if not old or not new:
            if old != new:
                _collect(old, path, removed)
                _collect(new, path, changed)
            return
        for key, value in new.items():
            child = (*path, "f:" + key)
            if key in old:
                if old[key] is not value:
                    _diff(old[key], value, child, changed, removed)
            else:
                _collect(value, child, changed)
        for key, value in old.items():
            if key not in new:
                _collect(value, (*path, "f:" + key), removed)
        return
    if type(old) is list and type(new) is list:
        how = list_kind(path, old, new)
        if how == ATOMIC:
            if old != new:
                changed.add(path)
            return
        before = {item_token(item, how): item for item in old}
        after = {item_token(item, how): item for item in new}
        for token, item in after.items():
            if token in before:
                if how != SET:
                    _diff(before[token], item, (*path, token), changed, removed)
            else:
                _collect_item(item, (*path, token), how, changed)
        for token, item in before.items():
            if token not in after:
                _collect_item(item, (*path, token), how, removed)
        return
    if type(old) is type(new) and old == new:
        return
    gone: FieldSet = set()
    _collect(old, path, gone)
    _collect(new, path, changed)
    removed.update(gone - changed)


def _collect_item(item: Any, path: Path, how: ListKind, out: FieldSet) -> None:
    out.add(path)
    if how != SET:
        for key, field in item.items():
            _collect(field, (*path, "f:" + key), out)


def _drop_leaf_marks(node: dict[str, Any]) -> None:
    """A member without children is written `{}`, not `{".": {}}`."""
    for key, child in node.items():
        if key != ".":
            if len(child) == 1 and "." in child:
                child.clear()
            else:
                _drop_leaf_marks(child)


def _walk(node: Mapping[str, Any], path: Path, out: FieldSet) -> None:
    for token, child in node.items():
        if token == ".":
            out.add(path)
            continue
        if not isinstance(child, Mapping):
            raise BadRequest(f"metadata.managedFields: invalid fieldsV1 at {path_text((*path, token))}")
        if child:
            _walk(child, (*path, token), out)
        else:
            out.add((*path, token))
