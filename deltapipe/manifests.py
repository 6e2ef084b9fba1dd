"""Reading and writing manifests for the command line (the engine itself never does I/O).

YAML is read the way Kubernetes tooling (go-yaml, YAML 1.2) reads it, not the YAML 1.1 way
PyYAML does by default: `yes`, `on`, `NO` stay strings, `0o17` and `0755` are ints, dates stay
strings. Both directions use libyaml through PyYAML's C classes. Errors name the file, and the
line for a syntax error.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

import yaml

from deltapipe.errors import DeltapipeError
from deltapipe.values import describe

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


class ManifestError(DeltapipeError):
    """A manifest file could not be read: missing, malformed YAML, or not a list of objects."""


# ---------------------------------------------------------------------------------------------
# YAML 1.2 core schema on libyaml

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
    """libyaml loader with the YAML 1.2 core schema (what go-yaml and kpt use)."""

    yaml_implicit_resolvers = _resolvers(yaml.CSafeLoader.yaml_implicit_resolvers)

    def construct_yaml_int(self, node: Any) -> int:
        text = str(self.construct_scalar(node)).replace("_", "")
        sign = -1 if text.startswith("-") else 1
        digits = text.lstrip("+-")
        if digits.startswith(("0o", "0x", "0b")):
            return sign * int(digits, 0)
        if len(digits) > 1 and digits.startswith("0"):
            return sign * int(digits, 8)  # go-yaml reads 0755 as octal
        return sign * int(digits)

    def construct_yaml_bool(self, node: Any) -> bool:
        return str(self.construct_scalar(node)).lower() == "true"


_add_core_schema(Loader)
Loader.add_constructor("tag:yaml.org,2002:int", Loader.construct_yaml_int)
Loader.add_constructor("tag:yaml.org,2002:bool", Loader.construct_yaml_bool)
# (dates stay text, as they do once Kubernetes tooling turns YAML into JSON)
Loader.add_constructor("tag:yaml.org,2002:timestamp", Loader.construct_yaml_str)  # type: ignore[type-var]


class Dumper(yaml.CSafeDumper):
    """libyaml dumper that quotes any string a YAML 1.1 *or* 1.2 reader could take for another type."""


_add_core_schema(Dumper)


def dump_all(objects: Iterable[Any], stream: IO[str]) -> None:
    yaml.dump_all(objects, stream, Dumper=Dumper, default_flow_style=False, sort_keys=False,
                  allow_unicode=True, width=4096)


def load_yaml(text: str, source: str) -> list[Any]:
    """All documents of a YAML stream (empty ones skipped); raises ManifestError naming the source."""
    try:
        return [doc for doc in yaml.load_all(text, Loader=Loader) if doc is not None]
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark
        where = f"{source}: line {mark.line + 1}, column {mark.column + 1}" if mark else source
        problem = err.problem or str(err)
        if "maximum nesting depth" in problem:  # libyaml's own limit (PyYAML >= 6.0.4), in our words
            problem = "nested too deeply"
        raise ManifestError(f"invalid YAML: {problem}", where=where) from None
    except yaml.YAMLError as err:
        raise ManifestError(f"invalid YAML: {err}", where=source) from None
    except RecursionError:
        raise ManifestError("invalid YAML: nested too deeply", where=source) from None


# ---------------------------------------------------------------------------------------------
# Files, directories and stdin


def read_objects(paths: Iterable[str | Path], stdin: IO[str] | None = None) -> list[dict[str, Any]]:
    """Every object in the given files, directories (recursively, *.yaml|*.yml|*.json) or `-`.

    `kind: List` documents are expanded into their items. Raises ManifestError naming the file
    and document for anything that is not an object.
    """
    objects: list[dict[str, Any]] = []
    for source, text in manifest_texts(paths, stdin or sys.stdin):
        for number, doc in enumerate(load_yaml(text, source), start=1):
            items = doc.get("items") if type(doc) is dict and doc.get("kind") == "List" else [doc]
            for item in items if type(items) is list else [items]:
                if type(item) is not dict:
                    raise ManifestError(f"document {number} must be a map (an object), got {describe(item)}",
                                        where=source)
                objects.append(item)
    return objects


def manifest_texts(paths: Iterable[str | Path], stdin: IO[str]) -> Iterator[tuple[str, str]]:
    """(source, text) of every file named, every manifest file under a directory (in name order),
    and stdin for `-`. Raises ManifestError naming the path that cannot be read."""
    for raw in paths:
        if str(raw) == "-":
            yield "<stdin>", stdin.read()
            continue
        path = Path(raw)
        if path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in MANIFEST_SUFFIXES)
        elif path.exists():
            files = [path]
        else:
            raise ManifestError("no such file or directory", where=str(path))
        for file in files:
            try:
                yield str(file), file.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                raise ManifestError("not UTF-8 text", where=str(file)) from None
            except OSError as err:
                raise ManifestError(err.strerror.lower() if err.strerror else str(err), where=str(file)) from None
