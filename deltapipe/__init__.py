"""deltapipe: the Δ pipeline, an expression language and an incremental pipeline engine.

    deltapipe.evaluate({"@concat": ["$.metadata.name", "-svc"]}, obj)     # one expression
    deltapipe.Pipeline(spec, sources=[...], target={...}).apply(deltas)   # deltas in, deltas out

Pure computation: no I/O, no Kubernetes client. Reference: docs/deltapipe.md.
"""

from deltapipe.errors import DeltapipeError, ExpressionError, PathError, PipelineError
from deltapipe.expression import Expression, compile_expression, evaluate
from deltapipe.pipeline import Pipeline

__all__ = [
    "DeltapipeError",
    "Expression",
    "ExpressionError",
    "PathError",
    "Pipeline",
    "PipelineError",
    "compile_expression",
    "evaluate",
]
