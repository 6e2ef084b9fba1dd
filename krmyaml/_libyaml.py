"""The one YAML reader on libyaml: libyaml's parser and composer, go-yaml v3's meaning, and bounds.

Every path that hands YAML to libyaml comes here: `schema.load_all` (manifests, streams of
documents), textedit's read-only `load_fast` (through `Loader`), and the round-trip reader for
what `_blockparse.py` does not read itself (flow collections, folded scalars, anchors and
aliases, merge keys, tags, whole documents that are not simple block style), which also asks for
the nodes (`compose`, `entries`, `elements`) and their source text (`construct` with a `Shape`).

PyYAML's composer (C-accelerated) builds the node graph; its YAML 1.1 resolver is switched off
(every untagged scalar gets a marker tag saying whether it was plain), and `_Builder` gives each
node the value go-yaml v3 decodes into an untyped Go value (`_scalars.resolve_plain`):

* `yes`, `on`, `NO` are strings; `0o17`, `0755`, `0x1F`, `0b101`, `1_000` are ints; an integer
  beyond 64 bits is a float, and a float that overflows stays a string, as Go's parsers decide;
  dates and `!!binary` stay strings; a local tag (`!foo`) is ignored;
* a collection is read by its kind whatever its tag: `!!omap`, `!!pairs`, `!!set` give the list
  or mapping written (go-yaml v3 knows none of them), and `!!map 0` is the string "0";
* an alias is expanded into a *copy* each time it is used, so editing one place never changes
  another (YAML anchors are a writing shorthand; Kubernetes objects have no shared parts); a
  Loader with `share_aliases` gives every use of an anchor the same object instead, as an editor
  of the text needs (textedit: removing a key from an anchored mapping removes it wherever the
  alias stands, as kpt's node editing does), charged to the alias budget as if expanded;
* merge keys (`<<: *base`, also `!!merge <<:`) are expanded as go-yaml does: keys written in the
  mapping win, then earlier merged mappings win over later ones. A subclass whose
  `yaml_implicit_resolvers` has no merge entry reads a plain `<<` as an ordinary key.

What go-yaml refuses is refused, and what would cost unbounded time or memory is bounded, each a
`yaml.MarkedYAMLError` inside (PyYAML's own callers catch those) and a one-line `YamlError` from
`compose`, `construct` and `error_of`:
* a mapping key given twice (`mapping key "x" already defined at line N`), a key that is a
  collection, a merge of something that is no mapping, an explicit tag the text does not fit
  (`!!int abc`);
* aliases that build more than ALIAS_BUDGET_PER_CHAR nodes per character of input (at least
  MIN_ALIAS_BUDGET): the "billion laughs" document is refused after a bounded amount of work,
  and an alias inside its own anchor at once;
* nesting beyond libyaml's 1,000 levels, or Python's stack: `nested too deeply`;
* a lone surrogate (from bytes decoded with "surrogateescape"), which is no character.

PyYAML is imported only when this module is, so a function whose input is all simple block
YAML never pays for importing it.
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from krmyaml._scalars import resolve_plain
from krmyaml._shape import Path, Shape
from krmyaml.errors import YamlError

TOO_DEEP = "nested too deeply"
MIN_ALIAS_BUDGET = 100_000
ALIAS_BUDGET_PER_CHAR = 20

_TAG = "tag:yaml.org,2002:"
_MERGE = _TAG + "merge"
_PLAIN = "krmyaml:plain"
_QUOTED = "krmyaml:quoted"
_STRING_TAGS = frozenset({_TAG + "str", _TAG + "binary", _TAG + "timestamp", "!"})
_TYPED = {_TAG + "int": int, _TAG + "float": float, _TAG + "bool": bool}


class Loader(yaml.CSafeLoader):
    """libyaml's composer with go-yaml's meaning and the bounds of the module doc; usable as a
    PyYAML Loader (`yaml.load_all(text, Loader=Loader)`) and by `compose` below."""

    # Only the merge key is resolved from the text; every other scalar's meaning comes later.
    yaml_implicit_resolvers = {"<": [(_MERGE, re.compile(r"^(?:<<)$"))]}
    share_aliases = False  # see the module doc

    def __init__(self, stream: str) -> None:
        try:
            super().__init__(stream)
        except UnicodeEncodeError as err:
            raise lone_surrogate(stream, err.start) from None
        self.alias_budget = max(MIN_ALIAS_BUDGET, ALIAS_BUDGET_PER_CHAR * len(stream))
        self._merges = any(tag == _MERGE for tag, _ in self.yaml_implicit_resolvers.get("<", ()))

    def resolve(self, kind: type[Node], value: Any, implicit: tuple[bool, bool]) -> str:
        if kind is ScalarNode:
            if not implicit[0]:
                return _QUOTED
            return _MERGE if value == "<<" and self._merges else _PLAIN
        return _TAG + ("seq" if kind is SequenceNode else "map")

    def construct_document(self, node: Node) -> Any:
        return build(node, budget=self.alias_budget, share=self.share_aliases)


def compose(text: str) -> Node | None:
    """The node graph of the single document in `text` (None if it holds none).

    Raises YamlError, with a line and column, for invalid YAML or more than one document.
    """
    try:
        return yaml.compose(text, Loader=Loader)
    except (yaml.YAMLError, RecursionError) as err:
        raise error_of(err, text=text) from None


def entries(node: Node) -> list[tuple[str | None, Node]]:
    """A mapping node's entries as (the key's text, or None for a key that is no scalar; the value's
    node); [] for any other node."""
    if not isinstance(node, MappingNode):
        return []
    return [(key.value if isinstance(key, ScalarNode) else None, value) for key, value in node.value]


def elements(node: Node) -> list[Node] | None:
    """A sequence node's element nodes; None for any other node."""
    return list(node.value) if isinstance(node, SequenceNode) else None


def construct(node: Node, text: str, shape: Shape | None = None, *, path: Path = ()) -> Any:
    """The value of `node` (composed from `text` by `compose`), built by go-yaml's rules.

    Fills `shape` from `text` when given (marks index into it); shape paths start with `path`.
    Raises YamlError for what the module doc refuses.
    """
    try:
        return build(node, budget=max(MIN_ALIAS_BUDGET, ALIAS_BUDGET_PER_CHAR * len(text)), text=text,
                     shape=shape, path=path)
    except (yaml.YAMLError, RecursionError) as err:
        raise error_of(err, text=text) from None


def build(node: Node, *, budget: int, text: str = "", shape: Shape | None = None, path: Path = (),
          share: bool = False) -> Any:
    """The value of `node`; yaml.MarkedYAMLError for what the module doc refuses."""
    try:
        return _Builder(budget, text, shape, share).value(node, path)
    except RecursionError:
        raise yaml.YAMLError(TOO_DEEP) from None


def error_of(err: BaseException, source: str = "", text: str = "") -> YamlError:
    """The one-line YamlError for an error of PyYAML, libyaml or this module reading `text`:
    `SOURCE: line N, column M: invalid YAML: PROBLEM` (each part there when known)."""
    if isinstance(err, RecursionError):
        return YamlError(f"invalid YAML: {TOO_DEEP}", where=source)
    if isinstance(err, yaml.reader.ReaderError) and text:
        # libyaml's reader counts UTF-8 bytes, and has no line or column to give
        before = text.encode("utf-8", "surrogatepass")[: err.position].decode("utf-8", "replace")
        line = f"line {before.count(chr(10)) + 1}, column {len(before) - before.rfind(chr(10))}"
        return YamlError(f"invalid YAML: character U+{err.character:04X}: {err.reason}",
                         where=": ".join(part for part in (source, line) if part))
    if isinstance(err, yaml.MarkedYAMLError):
        mark = err.problem_mark or err.context_mark
        line = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = err.problem or err.context or "invalid YAML"
        if "maximum nesting depth" in problem:  # libyaml's own limit (PyYAML >= 6.0.4), in our words
            problem = TOO_DEEP
        return YamlError(f"invalid YAML: {problem}", where=": ".join(part for part in (source, line) if part))
    return YamlError(f"invalid YAML: {' '.join(str(err).split())}", where=source)


def lone_surrogate(text: str, index: int) -> yaml.MarkedYAMLError:
    """The error for the lone surrogate at `text[index]`. It is no character, and libyaml, which
    reads UTF-8, cannot be handed one; it comes from bytes decoded with "surrogateescape", as
    Python decodes argv and, in the POSIX locale, stdin."""
    mark = yaml.Mark("<unicode string>", index, text.count("\n", 0, index), index - text.rfind("\n", 0, index) - 1,
                     None, 0)
    return yaml.MarkedYAMLError(problem=f"a lone surrogate (U+{ord(text[index]):04X}) is not a character",
                                problem_mark=mark)


class _Builder:
    """One document's values; one Python frame per level of nesting (merges aside)."""

    __slots__ = ("budget", "text", "shape", "building", "built")

    def __init__(self, budget: int, text: str, shape: Shape | None, share: bool = False) -> None:
        self.budget, self.text, self.shape = budget, text, shape
        self.building: set[int] = set()  # the collections being built: met again, an alias is inside its anchor
        # share: each collection built once, with the budget it took, charged again at every alias
        self.built: dict[int, tuple[Any, int]] | None = {} if share else None

    def value(self, node: Node, path: Path) -> Any:
        self.budget -= 1
        if self.budget < 0:
            raise _problem(node, "aliases expand to an unreasonably large document")
        if isinstance(node, ScalarNode):
            if self.shape is not None:
                self._record(node, path, flow=False)
            return _scalar(node)
        if id(node) in self.building:
            raise _problem(node, "an alias refers to a value that contains it")
        if self.built is not None:
            if id(node) in self.built:
                shared, cost = self.built[id(node)]
                self.budget -= cost
                if self.budget < 0:
                    raise _problem(node, "aliases expand to an unreasonably large document")
                return shared
            before = self.budget
        self.building.add(id(node))
        if self.shape is not None:
            self._record(node, path, flow=bool(getattr(node, "flow_style", False)))
        if isinstance(node, SequenceNode):
            result: Any = [self.value(child, (*path, index)) for index, child in enumerate(node.value)]
        else:
            assert isinstance(node, MappingNode)  # the composer makes no other kind
            result = self._mapping(node, path)
        self.building.discard(id(node))
        if self.built is not None:
            self.built[id(node)] = (result, before - self.budget)
        return result

    def _mapping(self, node: MappingNode, path: Path) -> dict[Any, Any]:
        result: dict[Any, Any] = {}
        merges: list[Node] = []
        lines: dict[str, int] = {}  # go-yaml refuses a key given twice (the same text), `<<` too
        for key_node, value_node in node.value:
            if not isinstance(key_node, ScalarNode):
                raise _problem(key_node, "a mapping key that is a collection")
            if key_node.value in lines:
                raise _problem(key_node, f'mapping key "{key_node.value}" already defined at line '
                                         f"{lines[key_node.value]}")
            lines[key_node.value] = key_node.start_mark.line + 1
            if key_node.tag == _MERGE and key_node.value == "<<":
                merges.append(value_node)
                continue
            key = _scalar(key_node)
            child = (*path, key)
            if self.shape is not None:
                raw = self._raw(key_node)
                if raw is not None:
                    self.shape.keys[child] = raw
            result[key] = self.value(value_node, child)
        if merges:
            self._merge(result, merges, path)
        return result

    def _merge(self, result: dict[Any, Any], merges: list[Node], path: Path) -> None:
        shape, self.shape = self.shape, None  # merged values have no source text of their own here
        try:
            for merge in merges:
                for source in merge.value if isinstance(merge, SequenceNode) else [merge]:
                    if not isinstance(source, MappingNode):
                        raise _problem(source, "map merge requires map or sequence of maps as the value")
                    for key, value in self.value(source, path).items():
                        result.setdefault(key, value)
        finally:
            self.shape = shape

    def _record(self, node: Node, path: Path, *, flow: bool) -> None:
        assert self.shape is not None
        if flow:
            self.shape.flow.add(path)
        if flow or isinstance(node, ScalarNode):
            raw = self._raw(node)
            if raw is not None:
                self.shape.raw[path] = raw

    def _raw(self, node: Node) -> str | None:
        """The node's source text if it is one line and carries no anchor, alias or tag."""
        start, end = node.start_mark, node.end_mark
        if start is None or end is None or start.line != end.line:
            return None
        raw = self.text[start.index : end.index]
        if not raw or raw[0] in "&*!" or (isinstance(node, ScalarNode) and node.style in ("|", ">")):
            return None
        return raw


def _scalar(node: ScalarNode) -> Any:
    tag, text = node.tag, node.value
    if tag == _PLAIN:
        return resolve_plain(text)
    if tag == _QUOTED or tag in _STRING_TAGS:
        return text
    if tag == _TAG + "null":
        if resolve_plain(text) is not None:
            raise _problem(node, f"cannot decode {text!r} as a !!null")
        return None
    wanted = _TYPED.get(tag)
    if wanted is None:
        return text  # an application tag (`!foo`), or a collection's (`!!map 0`): go-yaml keeps the text
    value = resolve_plain(text)
    if wanted is float and type(value) is int:
        return float(value)
    if type(value) is not wanted:
        raise _problem(node, f"cannot decode {text!r} as a !!{tag[len(_TAG):]}")
    return value


def _problem(node: Node, text: str) -> yaml.MarkedYAMLError:
    return yaml.constructor.ConstructorError(None, None, text, node.start_mark)
