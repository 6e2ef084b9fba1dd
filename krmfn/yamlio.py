"""YAML for function authors: krmyaml's round-trip `load` and `dump` (go-yaml's meaning, values that
read back the same), raising krmfn's errors so that the runner reports them as a function's own."""

from __future__ import annotations

from typing import Any

from krmfn.errors import OutputError, YamlError
from krmyaml import roundtrip
from krmyaml.errors import UnwritableValue
from krmyaml.errors import YamlError as UnreadableYaml

__all__ = ["dump", "load"]


def load(text: str) -> Any:
    """The value of the single YAML document in `text` (None for an empty one); YamlError if invalid."""
    try:
        return roundtrip.load(text)
    except UnreadableYaml as err:
        raise YamlError(err.message, where=err.where) from None


def dump(value: Any) -> str:
    """`value` as block-style YAML; OutputError for a value YAML cannot carry."""
    try:
        return roundtrip.dump(value)
    except UnwritableValue as err:
        raise OutputError(err.message, where=err.where) from None
