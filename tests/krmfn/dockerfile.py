"""A small reader of the repository's Dockerfile, for tests that need no container runtime.

It understands what porchkit's Dockerfile uses and refuses the rest instead of guessing:
line continuations, comment lines, `ARG` (global defaults and per-stage redeclarations),
`FROM image [AS name]` with `${VAR}` substitution, `LABEL k="v" ...`, `USER`, `WORKDIR`,
`COPY [--from=stage] src... dest`, `RUN` (shell form) and `ENTRYPOINT`/`CMD` in JSON (exec) form.
What an image built from a stage would carry (its labels, user, entrypoint and cmd) follows the
stage's `FROM` chain inside the file, with Docker's rule that an `ENTRYPOINT` resets a `CMD`
inherited from an earlier stage or the base image.
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

_SUPPORTED = {"ARG", "FROM", "ENV", "LABEL", "USER", "WORKDIR", "COPY", "RUN", "ENTRYPOINT", "CMD"}
_VARIABLE = re.compile(r"\$\{(\w+)\}|\$(\w+)")


@dataclass
class Instruction:
    keyword: str
    text: str  # everything after the keyword, continuations joined


@dataclass
class Stage:
    name: str
    base: str  # the FROM reference after substitution: an image or an earlier stage's name
    instructions: list[Instruction] = field(default_factory=list)
    args: dict[str, str] = field(default_factory=dict)


@dataclass
class Copy:
    sources: list[str]
    dest: str  # absolute and normalised, in the image
    into_directory: bool  # dest is a directory the sources go into (dest/, or several sources)
    from_stage: str | None  # None: from the build context
    position: int  # its index among the stage's instructions

    def source_of(self, path: str, context: Path) -> str | None:
        """The source path (in the context, or in stage `from_stage`) that `path` in the image
        was copied from, or None. A directory source copies its contents, as Docker does."""
        for source in self.sources:
            is_dir = source.endswith("/") or (self.from_stage is None and (context / source).is_dir())
            if is_dir:
                if path == self.dest or path.startswith(self.dest.rstrip("/") + "/"):
                    return posixpath.join(source, posixpath.relpath(path, self.dest))
            elif path == (posixpath.join(self.dest, posixpath.basename(source)) if self.into_directory else self.dest):
                return source
        return None


@dataclass
class Run:
    workdir: str
    argv: list[str]
    position: int  # its RUN's index among the stage's instructions


@dataclass
class Image:
    """What `docker build --target STAGE` would put in the image's config."""

    labels: dict[str, str]
    user: str | None
    entrypoint: list[str] | None
    cmd: list[str] | None

    @property
    def argv(self) -> list[str]:
        return [*(self.entrypoint or []), *(self.cmd or [])]


class Dockerfile:
    def __init__(self, text: str, context: Path) -> None:
        self.context = context  # the build context, to tell a directory source from a file
        self.global_args: dict[str, str] = {}
        self.stages: list[Stage] = []
        for instruction in _instructions(text):
            if instruction.keyword not in _SUPPORTED:
                raise ValueError(f"Dockerfile: {instruction.keyword} is not understood by this reader")
            if instruction.keyword == "FROM":
                words = instruction.text.split()
                if len(words) != 3 or words[1].upper() != "AS":
                    raise ValueError(f"Dockerfile: expected FROM IMAGE AS NAME, got FROM {instruction.text}")
                self.stages.append(Stage(words[2], _substitute(words[0], self.global_args)))
            elif not self.stages:
                if instruction.keyword != "ARG":
                    raise ValueError(f"Dockerfile: {instruction.keyword} before the first FROM")
                name, _, default = instruction.text.partition("=")
                self.global_args[name.strip()] = default.strip()
            else:
                stage = self.stages[-1]
                if instruction.keyword == "ARG":
                    name, eq, default = instruction.text.partition("=")
                    stage.args[name.strip()] = default.strip() if eq else self.global_args.get(name.strip(), "")
                stage.instructions.append(instruction)

    @classmethod
    def read(cls, path: Path) -> Dockerfile:
        return cls(path.read_text(encoding="utf-8"), path.parent)

    def stage(self, name: str) -> Stage:
        for stage in self.stages:
            if stage.name == name:
                return stage
        raise KeyError(f"Dockerfile has no stage named {name!r} (stages: {[s.name for s in self.stages]})")

    def chain(self, name: str) -> list[Stage]:
        """The stage and the stages it is built FROM, the outermost first."""
        stages = [self.stage(name)]
        while any(s.name == stages[0].base for s in self.stages):
            stages.insert(0, self.stage(stages[0].base))
        return stages

    def image(self, name: str) -> Image:
        labels: dict[str, str] = {}
        user = entrypoint = cmd = None
        for stage in self.chain(name):
            cmd_set_here = False
            for instruction in stage.instructions:
                if instruction.keyword == "LABEL":
                    labels.update(_pairs(_substitute(instruction.text, stage.args)))
                elif instruction.keyword == "USER":
                    user = instruction.text.strip()
                elif instruction.keyword == "ENTRYPOINT":
                    entrypoint = _exec_form(instruction)
                    if not cmd_set_here:
                        cmd = []  # Docker drops a CMD the stage inherited
                elif instruction.keyword == "CMD":
                    cmd, cmd_set_here = _exec_form(instruction), True
        return Image(labels, user, entrypoint, cmd)

    def runs(self, name: str) -> list[Run]:
        """Every command of the stage's RUN instructions (split at `&&`), with its WORKDIR."""
        commands: list[Run] = []
        workdir = "/"
        for position, instruction in enumerate(self.stage(name).instructions):
            if instruction.keyword == "WORKDIR":
                workdir = posixpath.join(workdir, instruction.text.strip())
            if instruction.keyword != "RUN":
                continue
            if instruction.text.lstrip().startswith(("[", "--")) or "<<" in instruction.text:
                raise ValueError(f"Dockerfile: only plain shell-form RUN is understood, got RUN {instruction.text}")
            current: list[str] = []
            for word in [*shlex.split(instruction.text), "&&"]:
                if word != "&&":
                    current.append(word)
                elif current:
                    commands.append(Run(workdir, current, position))
                    current = []
        return commands

    def copies(self, name: str) -> list[Copy]:
        """The stage's COPY instructions, destinations made absolute against its WORKDIR."""
        workdir, found = "/", []
        for position, instruction in enumerate(self.stage(name).instructions):
            if instruction.keyword == "WORKDIR":
                workdir = posixpath.join(workdir, instruction.text.strip())
            elif instruction.keyword == "COPY":
                words = shlex.split(instruction.text)
                from_stage = None
                while words and words[0].startswith("--"):
                    option = words.pop(0)
                    if not option.startswith("--from="):
                        raise ValueError(f"Dockerfile: COPY {option} is not understood by this reader")
                    from_stage = option.removeprefix("--from=")
                *sources, dest = words
                into_directory = dest.endswith("/") or dest == "." or len(sources) > 1
                found.append(Copy(sources, posixpath.normpath(posixpath.join(workdir, dest)), into_directory,
                                  from_stage, position))
        return found

    def source_of(self, name: str, run: Run, path: str) -> tuple[str | None, str]:
        """(stage or None for the build context, source path) that `path`, as `run` of stage
        `name` sees it, was copied from: the last COPY before that RUN that wrote it."""
        path = posixpath.normpath(posixpath.join(run.workdir, path))
        for copy in reversed([c for c in self.copies(name) if c.position < run.position]):
            source = copy.source_of(path, self.context)
            if source is not None:
                return copy.from_stage, source
        raise KeyError(f"Dockerfile: nothing in stage {name!r} copies {path}")


def _instructions(text: str) -> list[Instruction]:
    if re.match(r"#\s*escape\s*=", text):
        raise ValueError("Dockerfile: the escape directive is not understood by this reader")
    found: list[Instruction] = []
    pending = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue  # Docker drops comment lines, inside a continuation too
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        logical, pending = pending + stripped, ""
        keyword, _, rest = logical.partition(" ")
        found.append(Instruction(keyword.upper(), rest.strip()))
    if pending:
        raise ValueError("Dockerfile: it ends inside a line continuation")
    return found


def _substitute(text: str, variables: dict[str, str]) -> str:
    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name not in variables:
            raise ValueError(f"Dockerfile: ${name} is not declared (ARG) where it is used")
        return variables[name]

    return _VARIABLE.sub(value, text)


def _pairs(text: str) -> dict[str, str]:
    pairs = {}
    for word in shlex.split(text):
        key, eq, value = word.partition("=")
        if not eq:
            raise ValueError(f"Dockerfile: LABEL {text}: expected key=value pairs")
        pairs[key] = value
    return pairs


def _exec_form(instruction: Instruction) -> list[str]:
    try:
        argv = json.loads(instruction.text)
    except json.JSONDecodeError:
        argv = None
    if not isinstance(argv, list) or not all(isinstance(word, str) for word in argv):
        raise ValueError(f"Dockerfile: {instruction.keyword} must be in exec form (a JSON list of strings), "
                         f"got {instruction.text}")
    return argv
