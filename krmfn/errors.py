"""The errors krmfn raises on purpose.

    KrmfnError            base; str() is the one line a person sees
    ├── InputError        stdin is not a ResourceList we can read (exit 2, nothing written)
    │   └── YamlError     ... because its YAML is invalid
    ├── ConfigError       the functionConfig is missing, of the wrong kind, or fails validation
    └── OutputError       the function left a value YAML cannot carry (a set, an object, ...)

A function may raise `KrmfnError` (or a subclass) itself: the runner turns it into an error
result, writes the input items back unchanged, and exits 1. Any other exception escaping a
function is a bug, reported the same way but with its traceback after the first line.
"""

from __future__ import annotations


class KrmfnError(Exception):
    """Base of every error krmfn raises on purpose; str() is one line for a person."""

    def __init__(self, message: str, *, where: str = "") -> None:
        super().__init__(message)
        self.message = " ".join(message.split())
        self.where = where

    def at(self, where: str) -> KrmfnError:
        """The same error, located further out (`stdin`, `items[3]`); returns self."""
        self.where = f"{where}: {self.where}" if self.where else where
        return self

    def __str__(self) -> str:
        return f"{self.where}: {self.message}" if self.where else self.message


class InputError(KrmfnError):
    """The input is not a ResourceList that can be read: empty, not YAML, wrong shape."""


class YamlError(InputError):
    """Text that is not valid YAML."""


class ConfigError(KrmfnError):
    """The functionConfig is missing when required, of an unsupported kind, or invalid."""


class OutputError(KrmfnError):
    """The function's output holds a value that cannot be written as YAML."""
