"""YAML as Kubernetes tooling reads it (go-yaml v3: YAML 1.2 scalars), on libyaml, with limits.

`load_all(text, source)` gives every document of a stream; `dump_all` writes a stream. Scalars
resolve as go-yaml resolves them, not the YAML 1.1 way PyYAML does by default: `yes`, `on`, `NO`
stay strings; `0o17`, `0755` (octal), `0x1F`, `0b101` and `1_000` are ints; dates stay strings; a
local tag (`!foo`) is ignored and the value read as if untagged. The dumper quotes every string
that a YAML 1.1 *or* 1.2 reader could take for another type.

What go-yaml refuses is refused, and what would cost unbounded time or memory is bounded, each as
one YamlError naming the source and line:
* a mapping key given twice (`mapping key "x" already defined at line N`); merge keys (`<<`) may
  still be overridden, as in go-yaml;
* aliases that expand beyond ALIAS_BUDGET_PER_CHAR nodes per character of input (at least
  MIN_ALIAS_BUDGET): the "billion laughs" document is refused before anything is built, and an
  alias inside its own anchor is refused;
* nesting beyond libyaml's 1,000 levels (or Python's stack): `nested too deeply`;
* a decimal integer longer than Python converts (4,300 digits; no Kubernetes field holds one):
  `an integer of N digits is too large`;
* a text longer than MAX_TEXT_CHARS (256 Mi characters; the API server takes 3 MiB per object) or
  of more than MAX_DOCUMENTS documents: `larger than ...` / `more than ... documents`, before
  anything is built from it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import IO, Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from krmyaml.errors import UnwritableValue, YamlError

MIN_ALIAS_BUDGET = 100_000
ALIAS_BUDGET_PER_CHAR = 20
TOO_DEEP = "nested too deeply"
_OCTAL_DIGITS = frozenset("01234567")
MAX_TEXT_CHARS = 256 * 2**20
MAX_DOCUMENTS = 1_000_000
_MERGE_TAG = "tag:yaml.org,2002:merge"

_BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_NULL = re.compile(r"^(?:~|null|Null|NULL|)$")
_INT = re.compile(r"^(?:[-+]?[0-9][0-9_]*|[-+]?0o[0-7_]+|[-+]?0x[0-9a-fA-F_]+|[-+]?0b[01_]+)$")
_FLOAT = re.compile(r"^(?:[-+]?(?:\.[0-9]+|[0-9][0-9_]*(?:\.[0-9_]*)?)(?:[eE][-+]?[0-9]+)?"
                    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$")


def _resolvers(base: dict[Any, Any]) -> dict[Any, Any]:
    """The base class's resolvers without the YAML 1.1 scalar ones (kept: merge keys)."""
    replaced = {"tag:yaml.org,2002:bool", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float",
                "tag:yaml.org,2002:null", "tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:value"}
    return {first: [(tag, rx) for tag, rx in entries if tag not in replaced] for first, entries in base.items()}


def _add_core_schema(cls: Any) -> None:
    for tag, pattern, first in (("bool", _BOOL, "tTfF"), ("null", _NULL, ["~", "n", "N", ""]),
                                ("int", _INT, "-+0123456789"), ("float", _FLOAT, "-+.0123456789")):
        cls.add_implicit_resolver(f"tag:yaml.org,2002:{tag}", pattern, list(first))


class Loader(yaml.CSafeLoader):
    """libyaml with the YAML 1.2 core schema and the limits of the module doc."""

    yaml_implicit_resolvers = _resolvers(yaml.CSafeLoader.yaml_implicit_resolvers)

    def __init__(self, stream: str) -> None:
        try:
            super().__init__(stream)
        except UnicodeEncodeError as err:
            raise lone_surrogate(stream, err.start) from None
        self.alias_budget = max(MIN_ALIAS_BUDGET, ALIAS_BUDGET_PER_CHAR * len(stream))

    def construct_document(self, node: Node) -> Any:
        _check_expansion(node, self.alias_budget)
        return super().construct_document(node)

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, MappingNode):  # a tag can ask for one elsewhere (`!!map 0`); the base class refuses it
            _refuse_duplicate_keys(node)
        return super().construct_mapping(node, deep)

    def construct_go_int(self, node: ScalarNode) -> int | float:
        _require(node, _INT, "!!int")
        text = str(self.construct_scalar(node)).replace("_", "")
        sign = -1 if text.startswith("-") else 1
        digits = text.lstrip("+-")
        if digits.startswith(("0o", "0x", "0b")):
            return sign * int(digits, 0)
        if len(digits) > 1 and digits.startswith("0"):
            if set(digits) <= _OCTAL_DIGITS:
                return sign * int(digits, 8)  # go-yaml reads 0755 as octal...
            return sign * float(digits)  # ...and 08, which is no octal, as the float 8
        try:
            return sign * int(digits)
        except ValueError:  # over Python's limit on decimal digits (sys.get_int_max_str_digits)
            raise _problem(node, f"an integer of {len(digits)} digits is too large") from None

    def construct_yaml_bool(self, node: ScalarNode) -> bool:
        _require(node, _BOOL, "!!bool")
        return str(self.construct_scalar(node)).lower() == "true"

    def construct_yaml_float(self, node: ScalarNode) -> float:
        _require(node, _FLOAT, "!!float", also=_INT)
        return super().construct_yaml_float(node)

    def construct_untagged(self, suffix: str, node: Node) -> Any:
        """A value with a local tag (`!foo`), read as go-yaml reads it: as if it had none."""
        if isinstance(node, MappingNode):
            return self.construct_mapping(node, deep=True)
        if isinstance(node, SequenceNode):
            return self.construct_sequence(node, deep=True)
        return self.construct_scalar(node)  # type: ignore[arg-type]


_add_core_schema(Loader)
Loader.add_constructor("tag:yaml.org,2002:int", Loader.construct_go_int)
Loader.add_constructor("tag:yaml.org,2002:bool", Loader.construct_yaml_bool)
Loader.add_constructor("tag:yaml.org,2002:float", Loader.construct_yaml_float)
# (dates stay text, as they do once Kubernetes tooling turns YAML into JSON)
Loader.add_constructor("tag:yaml.org,2002:timestamp", Loader.construct_yaml_str)  # type: ignore[type-var]
Loader.add_multi_constructor("!", Loader.construct_untagged)


class Dumper(yaml.CSafeDumper):
    """libyaml dumper that quotes any string a YAML 1.1 *or* 1.2 reader could take for another type."""


_add_core_schema(Dumper)


def load_all(text: str, source: str = "") -> list[Any]:
    """Every document of a YAML stream, empty ones as None; YamlError naming `source` and the line."""
    check_size(text, source)
    try:
        return list(_documents(text, source))
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark
        line = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        where = ": ".join(part for part in (source, line) if part)
        problem = err.problem or str(err)
        if "maximum nesting depth" in problem:  # libyaml's own limit (PyYAML >= 6.0.4), in our words
            problem = TOO_DEEP
        raise YamlError(f"invalid YAML: {problem}", where=where) from None
    except yaml.YAMLError as err:
        raise YamlError(f"invalid YAML: {' '.join(str(err).split())}", where=source) from None
    except RecursionError:
        raise YamlError(f"invalid YAML: {TOO_DEEP}", where=source) from None


def dump_all(documents: Iterable[Any], stream: IO[str], *, explicit_start: bool = False) -> None:
    """Block-style YAML in the keys' own order, strings quoted where a YAML 1.1 or 1.2 reader would
    take them for something else, long lines never folded; `explicit_start` puts `---` before each."""
    yaml.dump_all(documents, stream, Dumper=Dumper, default_flow_style=False, sort_keys=False,
                  allow_unicode=True, width=4096, explicit_start=explicit_start)


def dump(value: Any) -> str:
    """One document, as `dump_all` writes it; UnwritableValue for a value it cannot represent."""
    try:
        return yaml.dump(value, Dumper=Dumper, default_flow_style=False, sort_keys=False, allow_unicode=True,
                         width=4096)
    except yaml.YAMLError as err:
        raise UnwritableValue(" ".join(str(err).split())) from None


def check_size(text: str, source: str = "") -> None:
    """YamlError if `text` is longer than MAX_TEXT_CHARS."""
    if len(text) > MAX_TEXT_CHARS:
        raise YamlError(f"{len(text) / 2**20:.0f} Mi characters of YAML is more than the {MAX_TEXT_CHARS // 2**20} Mi "
                        "porchkit reads at once", where=source)


def _documents(text: str, source: str) -> Iterator[Any]:
    loader = Loader(text)
    try:
        for count in range(1, MAX_DOCUMENTS + 2):
            if not loader.check_node():
                return
            if count > MAX_DOCUMENTS:
                raise YamlError(f"more than {MAX_DOCUMENTS:,} documents", where=source)
            yield loader.get_data()
    finally:
        loader.dispose()


def lone_surrogate(text: str, index: int) -> yaml.MarkedYAMLError:
    """The error for the lone surrogate at `text[index]`. It is no character, and libyaml, which
    reads UTF-8, cannot be handed one; it comes from bytes decoded with "surrogateescape", as
    Python decodes argv and, in the POSIX locale, stdin."""
    mark = yaml.Mark("<unicode string>", index, text.count("\n", 0, index), index - text.rfind("\n", 0, index) - 1,
                     None, 0)
    return yaml.MarkedYAMLError(problem=f"a lone surrogate (U+{ord(text[index]):04X}) is not a character",
                                problem_mark=mark)


def _require(node: ScalarNode, pattern: re.Pattern[str], tag: str, *, also: re.Pattern[str] | None = None) -> None:
    """go-yaml's refusal of an explicitly tagged value that is not one (`!!bool maybe`)."""
    text = str(node.value)
    if not pattern.match(text) and not (also and also.match(text)):
        raise _problem(node, f"cannot decode {text!r} as a {tag}")


def _problem(node: Node, text: str) -> yaml.MarkedYAMLError:
    return yaml.constructor.ConstructorError(None, None, text, node.start_mark)


def _refuse_duplicate_keys(node: MappingNode) -> None:
    """go-yaml's rule: two keys are the same when their text is (`1` and `01` are not)."""
    seen: dict[str, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == _MERGE_TAG or not isinstance(key_node, ScalarNode):
            continue  # merged keys may be overridden; a collection key fails in the constructor
        if key_node.value in seen:
            raise _problem(key_node, f'mapping key "{key_node.value}" already defined at line {seen[key_node.value]}')
        seen[key_node.value] = key_node.start_mark.line + 1


def _check_expansion(root: Node, budget: int) -> None:
    """Refuse a document whose aliases expand past `budget` nodes, or an alias inside its anchor.
    Each node is sized once (aliases share node objects), so this is linear in the text."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, children_sized = stack.pop()
        if id(node) in sizes:
            continue
        children = _children(node)
        if children_sized:
            open_nodes.discard(id(node))
            size = 1 + sum(sizes[id(child)] for child in children)
            if size > budget:
                raise _problem(root, "aliases expand to an unreasonably large document")
            sizes[id(node)] = size
            continue
        if id(node) in open_nodes:
            raise _problem(node, "an alias refers to a value that contains it")
        open_nodes.add(id(node))
        stack.append((node, True))
        for child in children:
            if id(child) in open_nodes:
                raise _problem(child, "an alias refers to a value that contains it")
            if id(child) not in sizes:
                stack.append((child, False))


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    return []
