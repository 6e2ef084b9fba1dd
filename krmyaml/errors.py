"""The errors krmyaml raises; str() of each is the single line a person sees.

    YamlError         text that cannot be read as YAML, or a manifest file or directory that cannot be
    UnwritableValue   a value YAML cannot carry (a set, an arbitrary object, a key that is a list)
"""

from __future__ import annotations


class _Located(ValueError):
    """A message and where it applies (`where`: a file, a line, a path in a value)."""

    def __init__(self, message: str, *, where: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.where = where

    def __str__(self) -> str:
        return f"{self.where}: {self.message}" if self.where else self.message


class YamlError(_Located):
    """YAML that cannot be read, or a manifest file or directory that cannot be: `where` names the
    file (and the line, when known), the message what is wrong."""


class UnwritableValue(_Located):
    """A value YAML cannot carry; `where` is its path in the value written (`.spec.ports[0]`)."""
