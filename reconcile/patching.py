"""JSON merge patch (RFC 7386) and JSON patch (RFC 6902) over plain JSON values.

`merge_patch(target, patch)`: maps merge recursively, `null` removes a key, anything else
(lists included) replaces. `json_patch(document, operations)`: the six operations `add`,
`remove`, `replace`, `move`, `copy` and `test`, addressed by JSON pointers (RFC 6901: `~1` is
`/`, `~0` is `~`, `-` is the end of an array), applied in order and all-or-nothing.

Errors are the API server's answers: a patch that is not a JSON-patch document at all (not a list
of objects) is `BadRequest` (400); an operation that cannot be applied (an unknown `op`, a
missing member, a path that does not exist, a `test` whose value differs) is `Invalid` (422),
which is what kube-apiserver returns when its JSON-patch library fails to apply a patch.

Pure: arguments are never changed, and results share no mutable part with them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconcile.cluster import PatchType
from reconcile.errors import BadRequest, Invalid, make_status

_OPS = ("add", "remove", "replace", "move", "copy", "test")
_SCALARS = frozenset({str, int, float, bool, type(None)})


def apply_patch(document: Any, patch: Any, patch_type: PatchType) -> Any:
    """`document` patched by a merge patch or a JSON patch; raises BadRequest or Invalid."""
    if patch_type == "merge":
        if not isinstance(patch, Mapping):
            raise BadRequest(f"a JSON merge patch to an object must itself be an object, not {_describe(patch)}")
        return merge_patch(document, patch)
    if patch_type == "json":
        return json_patch(document, patch)
    raise BadRequest(f"unsupported patch type {patch_type!r} (merge, json)")


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: the target with the patch merged in, as a new value."""
    if not isinstance(patch, Mapping):
        return clone(patch)
    merged = {k: clone(v) for k, v in target.items()} if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged


def json_patch(document: Any, operations: Any) -> Any:
    """RFC 6902: the document after every operation, in order; nothing changes when one fails."""
    if not isinstance(operations, list) or not all(isinstance(op, Mapping) for op in operations):
        raise BadRequest(f"a JSON patch must be a list of operation objects, not {_describe(operations)}")
    result = clone(document)
    for index, operation in enumerate(operations):
        result = _apply_one(result, operation, index)
    return result


def parse_pointer(pointer: str) -> list[str]:
    """The reference tokens of a JSON pointer ("" is the whole document); raises Invalid."""
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise _invalid(f"JSON pointer {pointer!r} must be empty or start with '/'")
    tokens = []
    for raw in pointer[1:].split("/"):
        if "~" in raw.replace("~0", "").replace("~1", ""):
            raise _invalid(f"JSON pointer {pointer!r} has an invalid escape ('~' must be followed by 0 or 1)")
        tokens.append(raw.replace("~1", "/").replace("~0", "~"))
    return tokens


def json_equal(a: Any, b: Any) -> bool:
    """Equality as JSON defines it: 1 == 1.0, but true is not 1 and key order does not matter."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def clone(value: Any) -> Any:
    """A deep copy of a JSON value (dicts, lists, scalars); much faster than copy.deepcopy."""
    kind = type(value)
    if kind is dict:
        return {k: v if type(v) in _SCALARS else clone(v) for k, v in value.items()}
    if kind is list:
        return [v if type(v) in _SCALARS else clone(v) for v in value]
    if kind in _SCALARS:
        return value
    if isinstance(value, Mapping):
        return {k: clone(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [clone(v) for v in value]
    return value


def _apply_one(doc: Any, operation: Mapping[str, Any], index: int) -> Any:
    op = operation.get("op")
    where = f"operation {index} ({op})"
    if op not in _OPS:
        raise _invalid(f"operation {index}: unknown op {op!r} (one of {', '.join(_OPS)})")
    path = _member(operation, "path", where)
    if op in ("add", "replace", "test") and "value" not in operation:
        raise _invalid(f"{where}: missing member 'value'")
    tokens = parse_pointer(path)
    if op == "add":
        return _add(doc, tokens, clone(operation["value"]), where)
    if op == "remove":
        return _remove(doc, tokens, where)[0]
    if op == "replace":
        return _replace(doc, tokens, clone(operation["value"]), where)
    if op == "test":
        if not json_equal(_get(doc, tokens, where), operation["value"]):
            raise _invalid(f"{where}: testing value {path} failed")
        return doc
    source = parse_pointer(_member(operation, "from", where))
    if op == "move":
        if tokens[:len(source)] == source and len(tokens) > len(source):
            raise _invalid(f"{where}: cannot move {operation['from']!r} into its own child {path!r}")
        doc, value = _remove(doc, source, where)
        return _add(doc, tokens, value, where)
    return _add(doc, tokens, clone(_get(doc, source, where)), where)


def _member(operation: Mapping[str, Any], name: str, where: str) -> str:
    value = operation.get(name)
    if not isinstance(value, str):
        raise _invalid(f"{where}: missing member {name!r}")
    return value


def _get(doc: Any, tokens: list[str], where: str) -> Any:
    value = doc
    for depth, token in enumerate(tokens):
        if isinstance(value, dict):
            if token not in value:
                raise _invalid(f"{where}: path {_pointer(tokens[:depth + 1])} does not exist")
            value = value[token]
        elif isinstance(value, list):
            value = value[_index(value, token, tokens[:depth + 1], where)]
        else:
            raise _invalid(f"{where}: path {_pointer(tokens[:depth + 1])} does not exist")
    return value


def _add(doc: Any, tokens: list[str], value: Any, where: str) -> Any:
    if not tokens:
        return value
    parent, last = _get(doc, tokens[:-1], where), tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        position = len(parent) if last == "-" else _index(parent, last, tokens, where, inclusive=True)
        parent.insert(position, value)
    else:
        raise _invalid(f"{where}: the parent of {_pointer(tokens)} is not an object or an array")
    return doc


def _replace(doc: Any, tokens: list[str], value: Any, where: str) -> Any:
    _get(doc, tokens, where)  # RFC 6902 4.3: the target location must exist
    if not tokens:
        return value
    parent, last = _get(doc, tokens[:-1], where), tokens[-1]
    parent[_index(parent, last, tokens, where) if isinstance(parent, list) else last] = value
    return doc


def _remove(doc: Any, tokens: list[str], where: str) -> tuple[Any, Any]:
    if not tokens:
        raise _invalid(f"{where}: cannot remove the whole document")
    parent, last = _get(doc, tokens[:-1], where), tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise _invalid(f"{where}: path {_pointer(tokens)} does not exist")
        return doc, parent.pop(last)
    if isinstance(parent, list):
        return doc, parent.pop(_index(parent, last, tokens, where))
    raise _invalid(f"{where}: path {_pointer(tokens)} does not exist")


def _index(items: list[Any], token: str, tokens: list[str], where: str, *, inclusive: bool = False) -> int:
    if not token.isdigit() or (len(token) > 1 and token.startswith("0")):
        raise _invalid(f"{where}: {token!r} in {_pointer(tokens)} is not an array index")
    index = int(token)
    if index > len(items) or (index == len(items) and not inclusive):
        raise _invalid(f"{where}: index {index} in {_pointer(tokens)} is out of bounds (length {len(items)})")
    return index


def _pointer(tokens: list[str]) -> str:
    return "".join("/" + t.replace("~", "~0").replace("/", "~1") for t in tokens)


def _invalid(detail: str) -> Invalid:
    message = f"the server rejected our request due to an error in our request: {detail}"
    status = make_status(422, "Invalid", message, {"causes": [{"reason": "FieldValueInvalid", "message": detail}]})
    return Invalid(message, status=status)


def _describe(value: Any) -> str:
    return "null" if value is None else type(value).__name__
