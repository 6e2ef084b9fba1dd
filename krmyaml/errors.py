"""The one error krmyaml raises: `YamlError`, whose str() is the single line a person sees."""

from __future__ import annotations


class YamlError(ValueError):
    """YAML that cannot be read, or a manifest file or directory that cannot be: `where` names the
    file (and the line, when known), the message what is wrong."""

    def __init__(self, message: str, *, where: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.where = where

    def __str__(self) -> str:
        return f"{self.where}: {self.message}" if self.where else self.message
