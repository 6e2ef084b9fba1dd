"""The general YAML reader: libyaml's parser, with go-yaml's meaning for every scalar.

This is the path for everything `_blockparse.py` does not read itself: flow collections, folded
scalars, anchors and aliases, merge keys, tags, multi-line scalars, whole documents that are not
simple block style. PyYAML's composer (C-accelerated when libyaml is installed) builds the node
graph; its YAML 1.1 resolver is switched off (every untagged scalar gets a marker tag), and
`construct` gives each scalar the value go-yaml v3 would (`_scalars.resolve_plain`).

Differences from PyYAML's own constructor, all on purpose:
* an alias is expanded into a *copy* each time it is used, so editing one place never changes
  another (YAML anchors are a writing shorthand; Kubernetes objects have no shared parts);
* merge keys (`<<: *base`, also `!!merge <<:`) are expanded as go-yaml does: keys written in the
  mapping win, then earlier merged mappings win over later ones;
* timestamps and `!!binary` stay strings, as they do in an untyped Go value.

PyYAML is imported only when this module is, so a function whose input is all simple block
YAML never pays for importing it.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from krmyaml import schema
from krmyaml._scalars import resolve_plain
from krmyaml._shape import Path, Shape
from krmyaml.errors import YamlError

_PLAIN = "krmyaml:plain"
_QUOTED = "krmyaml:quoted"
_TAG = "tag:yaml.org,2002:"
_STRING_TAGS = frozenset({_TAG + "str", _TAG + "binary", _TAG + "timestamp", "!"})
_MERGE_TAGS = frozenset({_PLAIN, _TAG + "merge"})
_BaseLoader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_BaseLoader):
    """A composer whose resolver only says whether a scalar was plain: meaning comes later."""

    def __init__(self, stream: str) -> None:
        try:
            super().__init__(stream)
        except UnicodeEncodeError as err:
            raise schema.lone_surrogate(stream, err.start) from None

    def resolve(self, kind: type[Node], value: Any, implicit: tuple[bool, bool]) -> str:
        if kind is ScalarNode:
            return _PLAIN if implicit[0] else _QUOTED
        return _TAG + ("seq" if kind is SequenceNode else "map")


def compose(text: str) -> Node | None:
    """The node graph of the single document in `text` (None if it holds none).

    Raises YamlError, with a line and column, for invalid YAML or more than one document.
    """
    try:
        return yaml.compose(text, Loader=_Loader)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = err.problem or err.context or "invalid YAML"
        if "maximum nesting depth" in problem:  # libyaml's own limit (PyYAML >= 6.0.4), in our words
            raise YamlError("invalid YAML: nested too deeply") from err
        raise YamlError(f"invalid YAML: {problem}", where=where) from err
    except yaml.YAMLError as err:
        raise YamlError(f"invalid YAML: {' '.join(str(err).split())}") from err
    except RecursionError as err:
        raise YamlError("invalid YAML: nested too deeply") from err


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
    """The value of `node`, built by go-yaml's rules; fills `shape` from `text` when given.

    `text` must be the string the node was composed from (marks index into it); shape paths
    start with `path`. Raises
    YamlError for values go-yaml would refuse (a bad `!!int`, a merge of a non-mapping,
    a key that is a collection) and for alias expansions that grow out of all proportion.
    """
    builder = _Builder(text, shape, budget=max(100_000, 20 * len(text)))
    try:
        return builder.value(node, path)
    except RecursionError as err:
        raise YamlError("invalid YAML: nested too deeply") from err


class _Builder:
    def __init__(self, text: str, shape: Shape | None, budget: int) -> None:
        self.text, self.shape, self.budget = text, shape, budget

    def value(self, node: Node, path: Path) -> Any:
        self.budget -= 1
        if self.budget < 0:
            raise YamlError("invalid YAML: aliases expand to an unreasonably large document")
        if isinstance(node, ScalarNode):
            value = _scalar(node)
            self._record(node, path, flow=False)
            return value
        if isinstance(node, SequenceNode):
            self._record(node, path, flow=bool(node.flow_style))
            return [self.value(child, path + (index,)) for index, child in enumerate(node.value)]
        if isinstance(node, MappingNode):
            self._record(node, path, flow=bool(node.flow_style))
            return self._mapping(node, path)
        raise YamlError(f"invalid YAML: unexpected node {type(node).__name__}")  # pragma: no cover

    def _mapping(self, node: MappingNode, path: Path) -> dict[Any, Any]:
        result: dict[Any, Any] = {}
        merges: list[Node] = []
        lines: dict[str, int] = {}  # go-yaml refuses a key given twice (the same text)
        for key_node, value_node in node.value:
            if isinstance(key_node, ScalarNode) and key_node.value == "<<" and key_node.tag in _MERGE_TAGS:
                merges.append(value_node)
                continue
            if not isinstance(key_node, ScalarNode):
                raise YamlError("invalid YAML: a mapping key that is a collection", where=_where(key_node))
            if key_node.value in lines:
                raise YamlError(f'invalid YAML: mapping key "{key_node.value}" already defined at line '
                                f"{lines[key_node.value]}", where=_where(key_node))
            lines[key_node.value] = key_node.start_mark.line + 1
            key = _scalar(key_node)
            child = path + (key,)
            if self.shape is not None:
                raw = self._raw(key_node)
                if raw is not None:
                    self.shape.keys[child] = raw
            result[key] = self.value(value_node, child)
        shape, self.shape = self.shape, None  # merged values have no source text of their own here
        try:
            for merge in merges:
                sources = merge.value if isinstance(merge, SequenceNode) else [merge]
                for source in sources:
                    if not isinstance(source, MappingNode):
                        raise YamlError("invalid YAML: a merge key needs a mapping", where=_where(source))
                    for key, value in self._mapping(source, path).items():
                        result.setdefault(key, value)
        finally:
            self.shape = shape
        return result

    def _record(self, node: Node, path: Path, *, flow: bool) -> None:
        if self.shape is None:
            return
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
        return None
    if tag in (_TAG + "int", _TAG + "float", _TAG + "bool"):
        value = resolve_plain(text)
        kind = tag[len(_TAG) :]
        if kind == "float" and type(value) is int:
            return float(value)
        wanted = {"int": int, "float": float, "bool": bool}[kind]
        if type(value) is not wanted:
            raise YamlError(f"invalid YAML: cannot read {text!r} as !!{kind}", where=_where(node))
        return value
    return text  # an application tag (`!foo`): go-yaml keeps the text of an unknown scalar


def _where(node: Node) -> str:
    mark = node.start_mark
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
