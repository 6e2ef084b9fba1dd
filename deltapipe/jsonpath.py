"""JSONPath for the Δ expression language: the ojg `jp` dialect (v1.26.10), compiled and cached.

Owns: parsing a path (spec §3) into a tuple of small step objects, reading its first match (`get`)
and writing through it in place (`set`, ojg's setter rules). Promises: `compile_path` raises only
`PathError` and is cached; `get` never raises; `set` raises only `PathError`; nothing is copied.
Leaves to the expression compiler (expression.py): `$$` and the local subject, the `"$."` setter
key (a shallow merge), `@now`, and deciding whether a string is a path at all.

Hand-written, not jsonpath-ng: that parses another dialect (no `in`, other filter syntax), about
100 times slower, and has no first-match read. A simple path (names and non-negative indexes) is
read by a plain loop over `steps`; any other path is walked depth first, stopping at the first match.

Choices where ojg is silent or Go-specific:
- map values are visited in sorted key order (wildcards, filters, `..`); Go's order is random;
- slices follow Python (`[a:b]` excludes b, negative bounds count from the end, step 0 selects none);
- a bare filter operand (`[?(@.x)]`) tests existence, so a present null or false counts; a missing
  operand compares as null; `!=` negates `==`; `<` `<=` `>` `>=` hold only between two numbers or
  two strings; booleans are never numbers;
- in quoted names a backslash escapes the quote and itself; any other backslash is kept;
- `set` replaces a null found on the way as if it were missing; a name step on a list or an index
  step on a map fails, unless a wildcard, union, filter, slice or descent came before (then that
  position is skipped, as in Go); union names may add keys to an existing map but union indexes
  only overwrite; an index may pad a list with at most MAX_LIST_GROWTH nulls. On failure, maps and
  lists created by the earlier steps stay (as in Go).
"""

from __future__ import annotations

import functools
import operator
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

from deltapipe.errors import PathError

MAX_LIST_GROWTH = 65_536

_MISSING: Any = object()
_SPECIAL = frozenset(".[]()'\"*,=<>!&|?@$/~ \t\r\n")  # characters that end a dotted name
_NUMBER_START = frozenset("-0123456789")
_INT = re.compile(r"-?[0-9]{1,19}(?![0-9])")  # Go's int64, and far from Python's int digit limit
_NUMBER = re.compile(r"-?[0-9]{1,19}(\.[0-9]+)?([eE][+-]?[0-9]+)?(?![0-9])")
_QUOTED = {q: re.compile(rf"{q}((?:[^{q}\\]|\\.)*){q}", re.S) for q in "'\"/"}
_ESCAPE = re.compile(r"\\(.)", re.S)
_MAX_NESTING = 64  # (, !, [...] and filters in filters; keeps the parser within Python's stack

Pred = Callable[[Any, Any], Any]  # (current element, document root) -> value
Node = tuple[str, Any]  # a filter operand: ("path" | "bool", Pred) or ("literal" | "regex", constant)


class _Child(NamedTuple):
    name: str
    text: str  # as written, for error messages

    def select(self, node: Any, root: Any) -> Iterable[Any]:
        return (node[self.name],) if isinstance(node, dict) and self.name in node else ()


class _Index(NamedTuple):
    position: int
    text: str

    def select(self, node: Any, root: Any) -> Iterable[Any]:
        return (node[self.position],) if isinstance(node, list) and -len(node) <= self.position < len(node) else ()


class _Slice(NamedTuple):
    bounds: slice
    text: str

    def select(self, node: Any, root: Any) -> Iterable[Any]:
        return node[self.bounds] if isinstance(node, list) and self.bounds.step != 0 else ()


class _Union(NamedTuple):
    members: tuple[_Child | _Index, ...]
    text: str

    def select(self, node: Any, root: Any) -> Iterable[Any]:
        return [child for member in self.members for child in member.select(node, root)]


class _Wildcard(NamedTuple):
    text: str

    def select(self, node: Any, root: Any) -> Iterable[Any]:
        return _children(node)


class _Descent(NamedTuple):
    text: str

    def select(self, node: Any, root: Any) -> Iterator[Any]:
        """Every map and list under node, node first: depth first, pre-order, document order."""
        stack = [node]
        while stack:
            item = stack.pop()
            if isinstance(item, dict | list):
                yield item
                stack.extend(reversed(_children(item)))


class _Filter(NamedTuple):
    pred: Pred
    text: str

    def select(self, node: Any, root: Any) -> Iterable[Any]:
        return (child for child in _children(node) if self.pred(child, root))  # lazy, for first-match


_Step = _Child | _Index | _Slice | _Union | _Wildcard | _Descent | _Filter
_UNWRITABLE_ENDS = {_Slice: "slice", _Descent: "descent", _Filter: "filter"}


def _children(node: Any) -> list[Any]:
    if isinstance(node, list):
        return node
    if not isinstance(node, dict):
        return []
    try:
        return [node[key] for key in sorted(node)]
    except TypeError:  # keys that do not sort (never in JSON): keep the map's own order
        return list(node.values())


def _simple_steps(frags: tuple[_Step, ...]) -> tuple[str | int, ...] | None:
    """The names and indexes of a path made only of names and non-negative indexes, else None."""
    steps: list[str | int] = []
    for frag in frags:
        if isinstance(frag, _Child):
            steps.append(frag.name)
        elif isinstance(frag, _Index) and frag.position >= 0:
            steps.append(frag.position)
        else:
            return None
    return tuple(steps)


def _first(frags: tuple[_Step, ...], i: int, node: Any, root: Any) -> Any:
    """The first match of frags[i:] under node, depth first, or _MISSING."""
    if i == len(frags):
        return node
    for child in frags[i].select(node, root):
        if (found := _first(frags, i + 1, child, root)) is not _MISSING:
            return found
    return _MISSING


_KINDS = {type(None): "null", bool: "boolean", int: "number", float: "number", str: "string", list: "list", dict: "map"}


def _kind(value: Any) -> str:
    """The JSON kind of value, for comparisons and messages; a boolean is not a number."""
    kind = _KINDS.get(type(value))
    if kind is None:  # a subclass, such as a YAML library's map; bool comes before int in _KINDS
        kind = next((name for cls, name in _KINDS.items() if isinstance(value, cls)), "other")
    return kind


def _equal(a: Any, b: Any) -> bool:
    return _kind(a) == _kind(b) and a == b


def _ordered(compare: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool]:
    def ordered(a: Any, b: Any) -> bool:
        kind = _kind(a)
        return kind in ("number", "string") and kind == _kind(b) and compare(a, b)

    return ordered


_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "==": _equal,
    "!=": lambda a, b: not _equal(a, b),
    "<": _ordered(operator.lt),
    "<=": _ordered(operator.le),
    ">": _ordered(operator.gt),
    ">=": _ordered(operator.ge),
    "in": lambda a, b: isinstance(b, list) and any(_equal(a, item) for item in b),
}


class JSONPath:
    """A compiled path; build it with compile_path(). Shared through the cache: treat it as read-only."""

    __slots__ = ("_frags", "_names_only", "steps", "text")

    def __init__(self, text: str, frags: tuple[_Step, ...]) -> None:
        self.text = text
        self._frags = frags
        self.steps = _simple_steps(frags)
        self._names_only = self.steps is not None and all(isinstance(f, _Child) for f in frags)

    def __repr__(self) -> str:
        return f"JSONPath({self.text!r})"

    def get(self, doc: Any) -> Any:
        """The first match in doc, or None when nothing matches. Never raises, never copies."""
        steps = self.steps
        if steps is None:
            found = _first(self._frags, 0, doc, doc)
            return None if found is _MISSING else found
        if self._names_only:  # the hot path, `$.metadata.labels.app`
            try:
                for step in steps:
                    doc = doc[step]
            except (KeyError, TypeError):  # a missing key, or a list, string or scalar on the way
                return None
            return doc
        for step in steps:
            if isinstance(step, str):
                if not isinstance(doc, dict) or step not in doc:
                    return None
            elif not isinstance(doc, list) or step >= len(doc):  # and never index into a string
                return None
            doc = doc[step]
        return doc

    def set(self, doc: Any, value: Any) -> None:
        """Store value (itself, not a copy) at every position the path names in doc, creating the
        maps and lists that definite steps lead through. Raises PathError when it cannot."""
        if not isinstance(doc, dict | list):
            raise self._cannot(f"the document is a {_kind(doc)}, not a map or list")
        if not self._frags:
            raise self._cannot("the root itself cannot be replaced")
        if end := _UNWRITABLE_ENDS.get(type(self._frags[-1])):
            raise self._cannot(f"a path ending in a {end} cannot be written")
        self._set(0, doc, doc, value, True)

    def _set(self, i: int, node: Any, root: Any, value: Any, strict: bool) -> None:
        """Write below node from step i on. strict: only definite steps (names, indexes) so far."""
        frag, last = self._frags[i], i == len(self._frags) - 1
        if isinstance(frag, _Child | _Index):
            key = self._key(i, frag, node, strict)
            if key is None:
                return
            if last:
                node[key] = value
                return
            child = node[key] if isinstance(key, int) else node.get(key)
            if child is None:
                child = node[key] = self._create(i)
            elif not isinstance(child, dict | list):
                raise self._cannot(f"cannot write through the {_kind(child)} at {self._at(i + 1)}")
            self._set(i + 1, child, root, value, strict)
        elif last:  # a wildcard or a union
            for key in self._existing(frag, node):
                node[key] = value
        else:  # fan out over the maps and lists that exist, collected first as writing may add keys
            for child in [c for c in frag.select(node, root) if isinstance(c, dict | list)]:
                self._set(i + 1, child, root, value, False)

    @staticmethod
    def _existing(frag: _Step, node: Any) -> list[str | int]:
        """The keys a final wildcard or union writes: existing ones, plus union names in a map."""
        if isinstance(frag, _Wildcard):
            return list(node) if isinstance(node, dict) else list(range(len(node)))
        keys: list[str | int] = []
        for member in frag.members if isinstance(frag, _Union) else ():
            if isinstance(member, _Child) and isinstance(node, dict):
                keys.append(member.name)
            elif isinstance(member, _Index) and isinstance(node, list) and -len(node) <= member.position < len(node):
                keys.append(member.position)
        return keys

    def _key(self, i: int, frag: _Child | _Index, node: Any, strict: bool) -> str | int | None:
        """The key frag names in node (padding a list up to an index), or None to skip node."""
        if isinstance(frag, _Child) and isinstance(node, dict):
            return frag.name
        if isinstance(frag, _Index) and isinstance(node, list):
            index, size = frag.position, len(node)
            if index < -size:
                raise self._cannot(f"cannot deduce where {frag.text} is in the {size}-element list at {self._at(i)}")
            if index - size >= MAX_LIST_GROWTH:
                raise self._cannot(f"{frag.text} would pad the list at {self._at(i)} with too many nulls")
            node.extend([None] * (index + 1 - size))
            return index if index >= 0 else index + size
        if strict:
            want = "map" if isinstance(frag, _Child) else "list"
            raise self._cannot(f"{self._at(i)} is a {_kind(node)}, not a {want}")
        return None

    def _create(self, i: int) -> dict[str, Any] | list[Any]:
        """The empty container to put at the end of step i, as the step after it requires."""
        after = self._frags[i + 1]
        if isinstance(after, _Child):
            return {}
        if isinstance(after, _Index) and after.position >= 0:
            return []
        what = "the length of a new list" if isinstance(after, _Index) else "what to create"
        raise self._cannot(f"cannot deduce {what} at {self._at(i + 1)} for {after.text}")

    def _at(self, n: int) -> str:
        return "$" + "".join(f.text for f in self._frags[:n])

    def _cannot(self, why: str) -> PathError:
        return PathError(f'cannot set "{self.text}": {why}')


@functools.lru_cache(maxsize=4096)
def compile_path(text: str) -> JSONPath:
    """The compiled path for text, which starts with `$` (`"$."` is the root, like `"$"`). Cached:
    the same text gives the same object. Raises PathError naming the text and what is wrong."""
    if not isinstance(text, str):
        raise PathError(f"a JSONPath must be a string, not {type(text).__name__}")
    return JSONPath(text, _Parser(text).path())


class _Parser:
    """Recursive descent over one path string; every failure is a PathError naming the text.

    path := '$' step*;  step := '.' name | '.*' | '..' (name | '*' | bracket) | bracket
    bracket := '[' ('*' | member (',' member)* | int? ':' int? (':' int?)? | '?' filter) ']'
    filter := or;  or := and ('||' and)*;  and := not ('&&' not)*;  not := '!' not | comparison
    comparison := operand (('==' | '!=' | '<' | '<=' | '>' | '>=' | '=~' | 'in') operand)?
    operand := '(' or ')' | ('@' | '$') step* | string | number | true | false | null | list | /regex/
    """

    def __init__(self, text: str) -> None:
        self.text, self.pos, self.depth = text, 0, 0

    def path(self) -> tuple[_Step, ...]:
        if not self.text.startswith("$"):
            raise self.fail("a path must start with '$'")
        if self.text == "$.":
            return ()
        self.pos = 1
        frags = self.steps()
        if self.pos < len(self.text):
            raise self.stuck("")
        return frags

    def steps(self) -> tuple[_Step, ...]:
        frags: list[_Step] = []
        while True:
            start = self.pos
            if self.peek() == "[":
                frags.append(self.bracket())
            elif self.peek() != ".":
                return tuple(frags)
            elif self.peek(1) == ".":
                self.pos += 2
                frags.append(_Descent(".."))
                if self.peek() != "[":
                    frags.append(self.dotted(self.pos, "'..'"))
            else:
                self.pos += 1
                frags.append(self.dotted(start, "'.'"))

    def dotted(self, start: int, after: str) -> _Child | _Wildcard:
        if self.peek() == "*":
            self.pos += 1
            return _Wildcard(self.text[start : self.pos])
        name_start = self.pos
        while self.pos < len(self.text) and self.text[self.pos] not in _SPECIAL:
            self.pos += 1
        if self.pos == name_start:  # `$.a.`, `$..`, `$.[`
            raise self.stuck(f"missing name after {after}")
        return _Child(self.text[name_start : self.pos], self.text[start : self.pos])

    def bracket(self) -> _Step:
        start = self.pos
        self.pos += 1
        self.skip()
        if self.peek() == "*":
            self.pos += 1
            self.close()
            return _Wildcard(self.text[start : self.pos])
        if self.peek() == "?":
            self.pos += 1
            pred = self.truth(self.nested(self.disjunction))
            self.close()
            return _Filter(pred, self.text[start : self.pos])
        if self.peek() == ":":
            return self.slice(start, None)
        first = self.member()
        self.skip()
        if self.peek() == ":" and isinstance(first, _Index):
            return self.slice(start, first.position)
        members = [first]
        while self.peek() == ",":
            self.pos += 1
            self.skip()
            members.append(self.member())
            self.skip()
        self.close()
        text = self.text[start : self.pos]
        return _Union(tuple(members), text) if len(members) > 1 else first._replace(text=text)

    def slice(self, start: int, first: int | None) -> _Slice:
        bounds = [first]
        while self.peek() == ":" and len(bounds) < 3:
            self.pos += 1
            self.skip()
            bounds.append(self.integer() if self.peek() in _NUMBER_START else None)
            self.skip()
        self.close()
        bounds += [None] * (3 - len(bounds))
        return _Slice(slice(*bounds), self.text[start : self.pos])

    def member(self) -> _Child | _Index:
        if self.peek() in ("'", '"'):
            return _Child(self.quoted(self.peek() + "\\"), "")
        if self.peek() in _NUMBER_START:
            return _Index(self.integer(), "")
        raise self.stuck("unterminated bracket")

    def close(self) -> None:
        self.skip()
        if self.peek() != "]":
            raise self.stuck("unterminated bracket")
        self.pos += 1

    def integer(self) -> int:
        match = _INT.match(self.text, self.pos)
        if match is None:
            raise self.fail(f"expected a number at offset {self.pos}")
        self.pos = match.end()
        return int(match[0])

    def quoted(self, unescape: str) -> str:
        """The body of a '…', "…" or /…/ at pos, with backslash escapes of unescape resolved."""
        match = _QUOTED[self.peek()].match(self.text, self.pos)
        if match is None:
            raise self.fail("unterminated " + ("regex" if self.peek() == "/" else "string"))
        self.pos = match.end()
        return _ESCAPE.sub(lambda m: m[1] if m[1] in unescape else m[0], match[1])

    def disjunction(self) -> Node:
        return self.chain("||", self.conjunction, any)

    def conjunction(self) -> Node:
        return self.chain("&&", self.negation, all)

    def chain(self, token: str, parse: Callable[[], Node], combine: Callable[[Iterator[Any]], bool]) -> Node:
        """`a token b token …`, one node when there is no token."""
        nodes = [parse()]
        self.skip()
        while self.text.startswith(token, self.pos):
            self.pos += 2
            nodes.append(parse())
            self.skip()
        if len(nodes) == 1:
            return nodes[0]
        preds = [self.truth(node) for node in nodes]
        return ("bool", lambda cur, root: combine(pred(cur, root) for pred in preds))

    def negation(self) -> Node:
        self.skip()
        if self.peek() == "!" and self.peek(1) != "=":
            self.pos += 1
            pred = self.truth(self.nested(self.negation))
            return ("bool", lambda cur, root: not pred(cur, root))
        left = self.operand()
        self.skip()
        for op in ("==", "!=", "<=", ">=", "=~", "<", ">", "in"):
            if self.text.startswith(op, self.pos) and (op != "in" or (self.peek(2) or "$") in _SPECIAL):
                self.pos += len(op)
                return ("bool", self.compare(op, self.value(left), self.operand()))
        return left

    def compare(self, op: str, lhs: Pred, right: Node) -> Pred:
        if op == "=~":
            if right[0] == "literal" and isinstance(right[1], str):
                right = ("regex", self.regex(right[1]))
            if right[0] != "regex":
                raise self.fail("=~ needs a /regex/ or a quoted pattern on its right")
            search = right[1].search
            return lambda cur, root: isinstance(s := lhs(cur, root), str) and search(s) is not None
        rhs, compare = self.value(right), _COMPARE[op]
        return lambda cur, root: compare(lhs(cur, root), rhs(cur, root))

    def operand(self) -> Node:
        self.skip()
        first, start = self.peek(), self.pos
        if first == "(":
            self.pos += 1
            node = self.nested(self.disjunction)
            self.skip()
            if self.peek() != ")":
                raise self.stuck("unterminated parenthesis")
            self.pos += 1
            return node
        if first in ("@", "$"):
            self.pos += 1
            frags, relative = self.nested(self.steps), first == "@"
            return (
                "path",
                lambda cur, root: _first(frags, 0, cur if relative else root, root),
            )
        if first in ("'", '"'):
            return ("literal", self.quoted(first + "\\"))
        if first == "[":
            return ("literal", self.nested(self.list_literal))
        if first == "/":
            return ("regex", self.regex(self.quoted("/")))
        if first in _NUMBER_START and (match := _NUMBER.match(self.text, start)):
            self.pos = match.end()
            is_float = match[1] or match[2]
            return ("literal", float(match[0]) if is_float else int(match[0]))
        for word, constant in (("true", True), ("false", False), ("null", None)):
            if self.text.startswith(word, start) and (self.peek(len(word)) or "$") in _SPECIAL:
                self.pos += len(word)
                return ("literal", constant)
        raise self.fail(f"expected a value at offset {start}" if first else "unterminated filter")

    def list_literal(self) -> list[Any]:
        self.pos += 1
        items: list[Any] = []
        self.skip()
        while self.peek() != "]":
            if items and self.peek() != ",":
                raise self.stuck("unterminated list")
            self.pos += 1 if items else 0
            kind, item = self.operand()
            if kind != "literal":
                raise self.fail("a list in a filter may hold only strings, numbers, true, false and null")
            items.append(item)
            self.skip()
        self.pos += 1
        return items

    def regex(self, source: str) -> re.Pattern[str]:
        try:
            return re.compile(source)
        except (re.error, OverflowError, RecursionError, ValueError) as err:
            raise self.fail(f"invalid regex /{source}/: {err}") from err

    def truth(self, node: Node) -> Pred:
        """node as a condition: a path holds when it matches, a literal only when it is true."""
        kind, content = node
        if kind == "path":
            return lambda cur, root: content(cur, root) is not _MISSING
        if kind == "literal":
            return lambda cur, root: content is True
        return self.value(node)

    def value(self, node: Node) -> Pred:
        """node as a value: a path gives its first match (None when there is none)."""
        kind, content = node
        if kind == "path":
            return lambda cur, root: None if (found := content(cur, root)) is _MISSING else found
        if kind == "literal":
            return lambda cur, root: content
        if kind == "regex":
            raise self.fail("a /regex/ can only follow =~")
        return content  # a "bool" node is a predicate already

    def nested(self, parse: Callable[[], Any]) -> Any:
        self.depth += 1
        if self.depth > _MAX_NESTING:
            raise self.fail("nested too deeply")
        try:
            return parse()
        finally:
            self.depth -= 1

    def skip(self) -> None:
        while self.peek() in (" ", "\t"):
            self.pos += 1

    def peek(self, ahead: int = 0) -> str:
        at = self.pos + ahead
        return self.text[at] if at < len(self.text) else ""

    def stuck(self, at_end: str) -> PathError:
        """at_end when the text ran out, else an error about the character at pos."""
        char = self.peek()
        if not char:
            return self.fail(at_end or "unexpected end")
        hint = " (function calls are not supported)" if char == "(" else ""
        return self.fail(f"unexpected {char!r} at offset {self.pos}{hint}")

    def fail(self, what: str) -> PathError:
        return PathError(f'invalid JSONPath "{self.text}": {what}')
