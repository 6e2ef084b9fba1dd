"""Properties of the mutations over generated packages and variants.

Packages are written as text by a small generator, in wide or compact sequence style, with
comments in many places. A comment marked KEEP describes something no mutation may remove; one
marked MAY-GO sits on something a mutation may remove (a variant's old pipeline entry, a context
key the variant removes, an injected field's entries).
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from krmyaml import textedit
from porchvariant.mutations import apply_mutations

FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])

PV_NAMES = ["pv", "team.alpha"]
FUNCTION_NAMES = ["", "labels", "set.ns", "conform"]
CONTEXT_KEYS = ["name", "region", "team", "zone"]
SOURCE_NAMES = ["prod", "dev"]
# values that need no quotes, need quotes, or look like other types
WORDS = st.sampled_from(["blue", "us-east1", "a b", "true", "8080", "", "x:y", "#hash", "0o17", "null"])


class Text:
    """Builds YAML text line by line, numbering the KEEP comments so each is unique."""

    def __init__(self, draw: Any, dash_offset: int) -> None:
        self.draw, self.dash = draw, dash_offset
        self.lines: list[str] = []
        self.kept = 0

    def comment(self, indent: int, *, may_go: bool = False, chance: bool | None = None) -> None:
        if chance if chance is not None else self.draw(st.booleans()):
            self.lines.append(" " * indent + ("# MAY-GO" if may_go else self._keep()))

    def eol(self, *, may_go: bool = False) -> str:
        return ("  # MAY-GO" if may_go else "  " + self._keep()) if self.draw(st.booleans()) else ""

    def _keep(self) -> str:
        self.kept += 1
        return f"# KEEP-{self.kept}"

    def add(self, line: str) -> None:
        self.lines.append(line)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def scalar(value: str) -> str:
    plain = value and value not in ("true", "8080", "null", "0o17") and not value.startswith("#") and ":" not in value
    return value if plain else '"' + value + '"'


def functions(draw: Any, out: Text, field: str, pv: str) -> None:
    entries = draw(st.lists(st.sampled_from(["plain", "ours", "other"]), max_size=4))
    if not entries:
        return
    out.comment(2, may_go=True)  # the list goes when nothing is left in it
    out.add(f"  {field}:")
    dash = " " * (2 + out.dash)
    for i, kind in enumerate(entries):
        ours = kind == "ours"
        out.comment(2 + out.dash, may_go=ours)
        if kind == "plain":
            out.add(f"{dash}- image: gcr.io/kpt-fn/fn-{i}:v1{out.eol()}")
        else:
            owner = pv if ours else "other"
            fn = draw(st.sampled_from(["labels", "conform", "x"]))
            out.add(f"{dash}- name: PackageVariant.{owner}.{fn}.{i}{out.eol(may_go=ours)}")
            out.add(f"{dash}  image: gcr.io/kpt-fn/{fn}:v1")


@st.composite
def kptfiles(draw: Any, pv: str, dash_offset: int) -> tuple[str, int]:
    out = Text(draw, dash_offset)
    out.comment(0)
    out.add("apiVersion: kpt.dev/v1")
    out.add("kind: Kptfile")
    out.add(f"metadata:{out.eol()}")
    out.add("  name: app")
    if draw(st.booleans()):
        out.add("info:")
        out.comment(2)
        out.add("  description: an app")
    if draw(st.booleans()):
        out.comment(0, may_go=True)  # the pipeline goes when no function is left in it
        out.add("pipeline:")
        functions(draw, out, "mutators", pv)
        functions(draw, out, "validators", pv)
        if out.lines[-1] == "pipeline:":
            out.lines[-1] = "pipeline: {}"
    if draw(st.booleans()):
        out.add("status:")
        out.add("  conditions:")
        for kind in draw(st.lists(st.sampled_from(["b", "a", "c"]), max_size=3, unique=True)):
            out.comment(2 + dash_offset)
            out.add(f"{' ' * (2 + dash_offset)}- type: {kind}")
            out.add(f"{' ' * (4 + dash_offset)}status: \"True\"")
    out.comment(0)
    return out.text(), out.kept


@st.composite
def contexts(draw: Any, removed: list[str]) -> tuple[str, int]:
    out = Text(draw, 2)
    out.add("apiVersion: v1")
    out.add("kind: ConfigMap")
    out.add("metadata:")
    out.add("  name: kptfile.kpt.dev")
    out.comment(0)
    out.add("data:")
    for key in draw(st.lists(st.sampled_from(CONTEXT_KEYS), unique=True, max_size=4)):
        out.comment(2, may_go=key in removed)
        out.add(f"  {key}: {scalar(draw(WORDS))}{out.eol(may_go=key in removed)}")
    if out.lines[-1] == "data:":
        out.lines[-1] = "data: {}"
    return out.text(), out.kept


@st.composite
def injection_files(draw: Any, index: int, dash_offset: int) -> tuple[str, int]:
    out = Text(draw, dash_offset)
    if draw(st.booleans()):
        out.add(f"--- {out.eol()}".rstrip())
        out.add("apiVersion: v1")
        out.add("kind:   Service  # untouched document")
        out.add(f"metadata: {{name: svc-{index}}}")
        out.add("---")
    out.add("apiVersion: v1")
    out.add("kind: ConfigMap")
    out.add("metadata:")
    out.add(f"  name: settings-{index}")
    out.add("  annotations:")
    out.add(f"    kpt.dev/config-injection: {draw(st.sampled_from(['required', 'optional']))}{out.eol()}")
    out.comment(0)
    out.add("data:")
    for key in draw(st.lists(st.sampled_from(["color", "size"]), unique=True, min_size=1)):
        out.comment(2, may_go=True)
        out.add(f"  {key}: {scalar(draw(WORDS))}")
    return out.text(), out.kept


@st.composite
def cases(draw: Any) -> tuple[dict, dict[str, str], list[dict], dict[str, int]]:
    pv_name = draw(st.sampled_from(PV_NAMES))
    removed = draw(st.lists(st.sampled_from(CONTEXT_KEYS), unique=True, max_size=2))
    pipeline = {field: [{"name": draw(st.sampled_from(FUNCTION_NAMES)), "image": f"img-{field}-{i}"}
                        for i in range(draw(st.integers(0, 2)))] for field in ("mutators", "validators")}
    spec: dict[str, Any] = {
        "packageContext": {"data": draw(st.dictionaries(st.sampled_from(CONTEXT_KEYS), WORDS, max_size=3)),
                           "removeKeys": removed},
        "pipeline": pipeline,
        "injectors": [{"name": name} for name in draw(st.lists(st.sampled_from(SOURCE_NAMES), unique=True))],
    }
    pv = {"metadata": {"name": pv_name, "namespace": "ns"}, "spec": spec}

    dash_offset = draw(st.sampled_from([0, 2]))
    kept: dict[str, int] = {}
    files: dict[str, str] = {}
    files["Kptfile"], kept["Kptfile"] = draw(kptfiles(pv_name, dash_offset))
    files["package-context.yaml"], kept["package-context.yaml"] = draw(contexts(removed))
    for i in range(draw(st.integers(0, 2))):
        files[f"cm-{i}.yaml"], kept[f"cm-{i}.yaml"] = draw(injection_files(i, dash_offset))
    files["deployment.yaml"] = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app # as written\n"
    if draw(st.booleans()):  # written on Windows
        files = {path: text.replace("\n", "\r\n") for path, text in files.items()}
    files["README.md"] = "# app\n"

    cluster = [{"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": draw(st.sampled_from(["ns", "other"]))},
                "data": draw(st.dictionaries(st.sampled_from(["color", "size", "shape"]), WORDS, min_size=1))}
               for name in SOURCE_NAMES]
    return pv, files, cluster, kept


@FAST
@given(cases())
def test_applying_the_mutations_again_changes_nothing(case: tuple) -> None:
    pv, files, cluster, _ = case
    first = apply_mutations(pv, files, cluster)
    second = apply_mutations(pv, first.resources, cluster)
    assert not second.changed
    assert all(second.resources[path] is first.resources[path] for path in first.resources)
    assert (second.conditions, second.readiness_gates) == (first.conditions, first.readiness_gates)


@FAST
@given(cases())
def test_a_file_whose_data_did_not_change_is_the_very_same_string(case: tuple) -> None:
    pv, files, cluster, _ = case
    result = apply_mutations(pv, files, cluster)
    assert result.resources.keys() == files.keys()
    for path, text in files.items():
        if path.endswith(".md"):
            assert result.resources[path] is text
            continue
        same = textedit.same_data(textedit.load_objects(text), textedit.load_objects(result.resources[path]))
        assert (result.resources[path] is text) is same, path
    assert result.changed is any(result.resources[path] is not files[path] for path in files)


@FAST
@given(cases())
def test_comments_on_what_stays_survive_every_mutation(case: tuple) -> None:
    pv, files, cluster, kept = case
    result = apply_mutations(pv, files, cluster)
    for path, count in kept.items():
        for number in range(1, count + 1):
            assert result.resources[path].replace("\r\n", "\n").count(f"# KEEP-{number}\n") == 1, (path, number)


@FAST
@given(cases())
def test_the_package_context_ends_up_as_set_then_removed(case: tuple) -> None:
    pv, files, cluster, _ = case
    result = apply_mutations(pv, files, cluster)
    [(_, before)] = textedit.load_objects(files["package-context.yaml"])
    [(_, after)] = textedit.load_objects(result.resources["package-context.yaml"])
    context = pv["spec"]["packageContext"]
    wanted = {**(before["data"] or {}), **context["data"]}
    for key in context["removeKeys"]:
        wanted.pop(key, None)
    if not any(textedit.load_objects(text)[-1][1]["metadata"]["name"] == "kptfile.kpt.dev"
               for path, text in files.items() if path.startswith("cm-")):
        assert textedit.same_data(after["data"] or {}, wanted)


@FAST
@given(cases())
def test_the_pipeline_holds_the_variant_functions_first_exactly_once(case: tuple) -> None:
    pv, files, cluster, _ = case
    result = apply_mutations(pv, files, cluster)
    [(_, kptfile)] = textedit.load_objects(result.resources["Kptfile"])
    name = pv["metadata"]["name"]
    for field, functions in pv["spec"]["pipeline"].items():
        entries = (kptfile.get("pipeline") or {}).get(field) or []
        expected = [f"PackageVariant.{name}.{fn['name']}.{i}" for i, fn in enumerate(functions)]
        assert [entry.get("name") for entry in entries[: len(expected)]] == expected
        assert not any(str(entry.get("name", "")).startswith(f"PackageVariant.{name}.")
                       for entry in entries[len(expected):])


@settings(max_examples=40, deadline=None)
@given(st.data(), st.sampled_from([0, 2]))
def test_adding_a_key_to_a_commented_document_changes_nothing_else(data: st.DataObject, dash_offset: int) -> None:
    text, _ = data.draw(kptfiles(data.draw(st.sampled_from(PV_NAMES)), dash_offset))
    lines = text.splitlines(keepends=True)
    tail = len(lines)
    while tail and (lines[tail - 1].startswith("#") or not lines[tail - 1].strip()):
        tail -= 1

    def add_key(doc: Any) -> None:
        textedit.set_key(doc, "zzz", "1")

    assert textedit.edit_document(text, add_key) == "".join(lines[:tail]) + 'zzz: "1"\n' + "".join(lines[tail:])


@FAST
@given(cases())
def test_every_line_keeps_the_line_ending_of_its_file(case: tuple) -> None:
    pv, files, cluster, _ = case
    result = apply_mutations(pv, files, cluster)
    for path, text in files.items():
        crlf = "\r\n" in text
        assert all(line.endswith("\r") == crlf for line in result.resources[path].split("\n")[:-1]), path
