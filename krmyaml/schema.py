"""YAML streams as Kubernetes tooling reads them (go-yaml v3: YAML 1.2 scalars), and YAML written
so that every reader reads it back.

`load_all(text, source)` gives every document of a stream, read by krmyaml's one libyaml reader
(`_libyaml.py`: go-yaml's meaning, duplicate keys refused, aliases and depth bounded; `Loader` is
its PyYAML face). This module adds the bounds on a whole stream, each one YamlError naming the
source, before anything is built from it:
* a text longer than MAX_TEXT_CHARS (256 Mi characters; the API server takes 3 MiB per object):
  `larger than ...`;
* more than MAX_DOCUMENTS documents: `more than ... documents`.

`dump_all` and `dump` write; the dumper quotes every string that a YAML 1.1 *or* 1.2 reader could
take for another type.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import IO, Any

import yaml

from krmyaml._libyaml import TOO_DEEP, Loader, error_of
from krmyaml.errors import UnwritableValue, YamlError

__all__ = ["MAX_DOCUMENTS", "MAX_TEXT_CHARS", "TOO_DEEP", "Dumper", "Loader", "check_size", "dump", "dump_all",
           "load_all"]

MAX_TEXT_CHARS = 256 * 2**20
MAX_DOCUMENTS = 1_000_000

# What a YAML 1.2 reader takes for something else than a string: the dumper quotes these too.
_BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_NULL = re.compile(r"^(?:~|null|Null|NULL|)$")
_INT = re.compile(r"^(?:[-+]?[0-9][0-9_]*|[-+]?0o[0-7_]+|[-+]?0x[0-9a-fA-F_]+|[-+]?0b[01_]+)$")
_FLOAT = re.compile(r"^(?:[-+]?(?:\.[0-9]+|[0-9][0-9_]*(?:\.[0-9_]*)?)(?:[eE][-+]?[0-9]+)?"
                    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$")


class Dumper(yaml.CSafeDumper):
    """libyaml dumper that quotes any string a YAML 1.1 *or* 1.2 reader could take for another type."""


def _quote_yaml_12_scalars(dumper: type[yaml.CSafeDumper]) -> None:
    for tag, pattern, first in (("bool", _BOOL, "tTfF"), ("null", _NULL, ["~", "n", "N", ""]),
                                ("int", _INT, "-+0123456789"), ("float", _FLOAT, "-+.0123456789")):
        dumper.add_implicit_resolver(f"tag:yaml.org,2002:{tag}", pattern, list(first))


_quote_yaml_12_scalars(Dumper)


def load_all(text: str, source: str = "") -> list[Any]:
    """Every document of a YAML stream, empty ones as None; YamlError naming `source` and the line."""
    check_size(text, source)
    try:
        return list(_documents(text, source))
    except (yaml.YAMLError, RecursionError) as err:
        raise error_of(err, source, text) from None


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
