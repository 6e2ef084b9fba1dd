"""The errors deltapipe raises on purpose.

Every one of them derives from `DeltapipeError`, whose `str()` is the single line a person sees:
where the problem is (file, object, stage or operator, when known) and what was expected. Any other
exception escaping deltapipe is a bug.
"""

from __future__ import annotations


class DeltapipeError(Exception):
    """Base of every error deltapipe raises on purpose; str() is one line for a person."""

    def __init__(self, message: str, *, where: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.where = where

    def at(self, where: str) -> DeltapipeError:
        """The same error, located further out (`stage 2 (@project)`, `file x.yaml`); returns self."""
        self.where = f"{where}: {self.where}" if self.where else where
        return self

    def __str__(self) -> str:
        return f"{self.where}: {self.message}" if self.where else self.message


class ExpressionError(DeltapipeError):
    """An expression is malformed, or failed while being evaluated (names the operator at fault)."""


class PathError(ExpressionError):
    """A JSONPath could not be parsed, or a value could not be written at it."""


class PipelineError(DeltapipeError):
    """A pipeline spec is invalid, or a stage failed on the objects it was given."""
