"""`porchkit pipeline ...`: run a Δ pipeline over manifests, offline.

    porchkit pipeline eval -p PIPELINE.yaml FILE|DIR|- ...    # output objects as a YAML stream
    porchkit pipeline eval -p PIPELINE.yaml -f FILE|DIR|- ... # the same: -f is every command's input flag
    porchkit pipeline eval --trace -p PIPELINE.yaml ...      # and, on stderr, every stage's output

The face's own command group: deltapipe computes and never reads or writes anything; krmyaml
reads the pipeline file and the manifests, and writes the output stream.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from deltapipe.errors import DeltapipeError
from deltapipe.spec import PipelineSpec
from krmyaml import YamlError, dump_all, load_all, manifest_texts, read_documents
from reconcile.errors import one_line

USER_ERRORS = (DeltapipeError, YamlError)


def add_commands(parser: argparse.ArgumentParser) -> None:
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    run = commands.add_parser("eval", help="evaluate a pipeline over manifests and print its output objects",
                              description="Evaluate a Δ pipeline over manifests and print the output objects.")
    run.add_argument("-p", "--pipeline", required=True, type=Path, help="the pipeline file (sources, pipeline, target)")
    run.add_argument("files", nargs="*", metavar="FILE", help="manifest files, directories, or - for stdin")
    run.add_argument("-f", "--filename", dest="more_files", action="append", default=[], metavar="PATH",
                     help="a manifest file, a directory (read recursively), or - for stdin; repeatable, "
                          "and the same as giving PATH as an argument")
    run.add_argument("--trace", action="store_true", help="also print what every stage produced (on stderr)")
    run.set_defaults(run=evaluate_files)


def load_spec(path: Path) -> PipelineSpec:
    if path.is_dir():
        raise YamlError("expected a pipeline file, not a directory", where=str(path))
    [(source, text)] = manifest_texts([path], sys.stdin)
    documents = [doc for doc in load_all(text, source) if doc is not None]
    if len(documents) != 1:
        raise DeltapipeError(f"expected one pipeline document, found {len(documents)}", where=str(path))
    try:
        return PipelineSpec.from_dict(documents[0])
    except DeltapipeError as err:
        raise err.at(str(path)) from None


def evaluate_files(args: argparse.Namespace) -> int:
    files = [*args.files, *args.more_files]
    if not files:
        raise DeltapipeError("no manifests to read: name files or directories with -f, or as arguments")
    spec = load_spec(args.pipeline)
    objects = [document.obj for document in read_documents(files)]
    try:
        return _evaluate(spec, objects, trace=args.trace)
    except DeltapipeError as err:
        raise err.at(str(args.pipeline)) from None


def _evaluate(spec: PipelineSpec, inputs: list[dict[str, Any]], *, trace: bool) -> int:
    pipeline = spec.build()
    routed = spec.route(inputs)
    if trace:
        steps = pipeline.trace(routed)
        for label, docs in steps[:-1]:
            print(one_line(f"# --- {label}: {len(docs)} document(s)"), file=sys.stderr)
            dump_all(docs, sys.stderr)
        objects = steps[-1][1]
    else:
        objects = pipeline.evaluate(routed)
    dump_all(objects, sys.stdout)
    return 0
