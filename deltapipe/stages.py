"""Pipeline stages: parsing a pipeline spec and the pure per-document work of each stage.

A spec is one op map or a list of them, each with exactly one key: `@join` (first only),
`@select`, `@project`, `@unwind`/`@demux`, `@gather`/`@mux`. Everything is validated and compiled
here, at construction; a bad spec raises PipelineError naming the stage.

Owns: what one stage does to one document (select, project, unwind), and the compiled parts the
stateful stages need (join predicate and its equality keys, gather key and value path). Does not
keep state: engine.py runs the stages incrementally.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from deltapipe.errors import DeltapipeError, PipelineError
from deltapipe.expression import NO_LOCAL, Compiler, Fn, write_steps
from deltapipe.jsonpath import JSONPath, compile_path
from deltapipe.values import copy_tree, describe

Doc = dict[str, Any]
STAGE_OPS = ("@join", "@select", "@project", "@unwind", "@demux", "@gather", "@mux")


class Stage:
    """One compiled stage; `index` is its 1-based position in the pipeline."""

    __slots__ = ("index", "op")

    def __init__(self, index: int, op: str) -> None:
        self.index, self.op = index, op

    @property
    def label(self) -> str:
        return f"stage {self.index} ({self.op})"


class Select(Stage):
    __slots__ = ("test",)

    def __init__(self, index: int, op: str, test: Fn) -> None:
        super().__init__(index, op)
        self.test = test

    def run(self, doc: Doc) -> list[Doc]:
        keep = self.test(doc, NO_LOCAL)
        if type(keep) is not bool:
            raise PipelineError(f"the condition must give true or false, got {describe(keep)}")
        return [doc] if keep else []


class Project(Stage):
    __slots__ = ("build",)

    def __init__(self, index: int, op: str, build: Fn) -> None:
        super().__init__(index, op)
        self.build = build

    def run(self, doc: Doc) -> list[Doc]:
        result = self.build(doc, NO_LOCAL)
        if type(result) is dict:
            return [result]
        if type(result) is list and all(type(step) is dict for step in result):
            merged: Any = None
            for step in result:
                merged = merge_steps(merged, step)
            return [merged if merged is not None else {}]
        raise PipelineError(f"the projection must give a map or a list of maps, got {describe(result)}")


class Unwind(Stage):
    __slots__ = ("path",)

    def __init__(self, index: int, op: str, path: JSONPath) -> None:
        super().__init__(index, op)
        self.path = path

    def run(self, doc: Doc) -> list[Doc]:
        items = self.path.get(doc)
        if items is None:
            return []
        if type(items) is not list:
            raise PipelineError(f"{self.path.text} must be a list to unwind, got {describe(items)}")
        meta = doc.get("metadata")
        name = meta.get("name") if type(meta) is dict else None
        out = []
        for i, item in enumerate(items):
            element = set_path(doc, self.path, item)
            if type(name) is str:
                write_steps(element, ("metadata", "name"), f"{name}-{i}", "metadata.name")
            out.append(element)
        return out


class Equality(NamedTuple):
    """A top-level `@eq` conjunct of a join predicate between two source kinds: an index key.

    `left` and `right` read their side from a compound document `{Kind: object, ...}`.
    """

    left_kind: str
    left: Callable[[dict[str, Doc]], Any]
    right_kind: str
    right: Callable[[dict[str, Doc]], Any]


class Join(Stage):
    __slots__ = ("predicate", "kinds", "equalities")

    def __init__(self, index: int, op: str, predicate: Fn, kinds: tuple[str, ...],
                 equalities: tuple[Equality, ...]) -> None:
        super().__init__(index, op)
        self.predicate, self.kinds, self.equalities = predicate, kinds, equalities


class Gather(Stage):
    __slots__ = ("key", "value_path")

    def __init__(self, index: int, op: str, key: Fn, value_path: JSONPath) -> None:
        super().__init__(index, op)
        self.key, self.value_path = key, value_path


def set_path(doc: Doc, path: JSONPath, value: Any) -> Doc:
    """A copy of doc with value written at path; structure shared with doc is never modified."""
    if path.steps:
        out = dict(doc)
        write_steps(out, path.steps, value, path.text)
        return out
    out = copy_tree(doc)
    path.set(out, value)
    return out


def merge_steps(acc: Any, step: Any) -> Any:
    """Δ-controller's MergeAny for `@project` lists: maps merge, lists concatenate, scalars replace."""
    if acc is None:
        return step
    if type(step) is dict:
        if type(acc) is not dict:
            return step
        out = dict(acc)
        for key, value in step.items():
            out[key] = merge_steps(out[key], value) if key in out else value
        return out
    if type(step) is list:
        return acc + step if type(acc) is list else step
    if step is None:
        raise PipelineError(f"could not merge null into {describe(acc)}")
    return step


# ---------------------------------------------------------------------------------------------
# Parsing


def parse(spec: Any, sources: Sequence[str] | None, compiler: Compiler) -> list[Stage]:
    """Validate and compile a pipeline spec; raises PipelineError naming the stage at fault."""
    ops = spec if type(spec) is list else [spec]
    if not ops:
        raise PipelineError("the pipeline is empty")
    stages: list[Stage] = []
    for index, op_map in enumerate(ops, start=1):
        op, arg = _single_op(index, op_map)
        try:
            stages.append(_compile_stage(index, op, arg, sources, compiler))
        except DeltapipeError as err:
            raise _as_pipeline_error(err, f"stage {index} ({op})") from err
    has_join = isinstance(stages[0], Join)
    if sources is not None and len(sources) > 1 and not has_join:
        raise PipelineError(f"a pipeline over {len(sources)} sources ({', '.join(sources)}) must start with @join")
    return stages


def _single_op(index: int, op_map: Any) -> tuple[str, Any]:
    if type(op_map) is not dict or len(op_map) != 1:
        raise PipelineError(f"stage {index}: expected a map with one operation ({', '.join(STAGE_OPS)}), "
                            f"got {describe(op_map)}")
    op, arg = next(iter(op_map.items()))
    if op not in STAGE_OPS:
        raise PipelineError(f"stage {index}: unknown pipeline operation {op!r} "
                            f"(expected one of {', '.join(STAGE_OPS)})")
    if op == "@join" and index != 1:
        raise PipelineError(f"stage {index}: @join is only allowed as the first stage")
    return op, arg


def _compile_stage(index: int, op: str, arg: Any, sources: Sequence[str] | None, c: Compiler) -> Stage:
    if op == "@join":
        if not sources:
            raise PipelineError("@join needs the list of source kinds")
        kinds = tuple(sources)
        return Join(index, op, c.compile(arg), kinds, tuple(_equalities(arg, kinds)))
    if op == "@select":
        return Select(index, op, c.compile(arg))
    if op == "@project":
        return Project(index, op, c.compile(arg))
    if op in ("@unwind", "@demux"):
        return Unwind(index, op, _writable_path(arg, "a JSONPath string such as $.spec.ports"))
    if type(arg) is not list or len(arg) != 2:
        raise PipelineError(f"expected [key expression, value path], got {describe(arg)}")
    return Gather(index, op, c.compile(arg[0]), _writable_path(arg[1], "the value path, a JSONPath string"))


def _writable_path(arg: Any, wanted: str) -> JSONPath:
    if type(arg) is not str or not arg.startswith("$") or arg.startswith("$$"):
        raise PipelineError(f"expected {wanted}, got {describe(arg)}")
    path = compile_path(arg)
    if path.steps == ():
        raise PipelineError(f"expected {wanted} below the root, got {arg!r}")
    return path


def _equalities(predicate: Any, kinds: tuple[str, ...]) -> list[Equality]:
    """The top-level `@eq` conjuncts that compare a path of one kind with a path of another."""
    conjuncts = [predicate]
    if type(predicate) is dict and len(predicate) == 1 and type(predicate.get("@and")) is list:
        conjuncts = predicate["@and"]
    found = []
    for conjunct in conjuncts:
        if type(conjunct) is not dict or len(conjunct) != 1 or "@eq" not in conjunct:
            continue
        sides = conjunct["@eq"]
        if type(sides) is not list or len(sides) != 2:
            continue
        left, right = (_kind_rooted(side, kinds) for side in sides)
        if left and right and left[0] != right[0]:
            found.append(Equality(left[0], left[1], right[0], right[1]))
    return found


def _kind_rooted(side: Any, kinds: tuple[str, ...]) -> tuple[str, Callable[[dict[str, Doc]], Any]] | None:
    if type(side) is not str or not side.startswith("$") or side.startswith("$$"):
        return None
    path = compile_path(side)
    if not path.steps or path.steps[0] not in kinds:
        return None
    return str(path.steps[0]), path.get


def _as_pipeline_error(err: DeltapipeError, where: str) -> PipelineError:
    out = err if isinstance(err, PipelineError) else PipelineError(err.message, where=err.where)
    return out.at(where)  # type: ignore[return-value]
