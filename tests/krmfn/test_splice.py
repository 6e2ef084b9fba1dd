"""Edited items are spliced: unchanged entries keep their lines and comments, the rest is new."""

from __future__ import annotations

import copy
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from krmfn import read_resource_list, write_resource_list
from krmyaml import roundtrip as yamlio
from krmyaml._blockparse import Unsupported, parse_block
from krmyaml._emit import emit_block
from krmyaml._scalars import same_value
from krmyaml._shape import Shape
from krmyaml._splice import splice_block

HEADER = "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n"
DEPLOYMENT = """\
- # The web tier.
  apiVersion: apps/v1
  kind: Deployment
  metadata:
    name: web # the name
    annotations:
      internal.config.kubernetes.io/id: '4'
  spec:
    replicas: 3 # scaled by hand
    template:
      spec:
        containers:
        - name: app
          image: nginx:1.25 # kpt-set: ${image}
          args: [--port, "8080"]
        - name: sidecar # helper
          image: envoy
          env:
          - name: MODE
            value: "on"
"""


def test_an_edit_rewrites_only_what_changed() -> None:
    rl = read_resource_list(HEADER + DEPLOYMENT)
    spec = rl.items[0]["spec"]
    spec["replicas"] = 5
    spec["template"]["spec"]["containers"].insert(0, {"name": "init", "image": "busybox:1.36", "tty": "yes"})
    spec["template"]["spec"]["containers"][2]["env"][0]["value"] = "off"
    assert write_resource_list(rl) == HEADER + (
        "- # The web tier.\n"
        "  apiVersion: apps/v1\n"
        "  kind: Deployment\n"
        "  metadata:\n"
        "    name: web # the name\n"
        "    annotations:\n"
        "      internal.config.kubernetes.io/id: '4'\n"
        "  spec:\n"
        "    replicas: 5\n"
        "    template:\n"
        "      spec:\n"
        "        containers:\n"
        "        - name: init\n"
        "          image: busybox:1.36\n"
        "          tty: 'yes'\n"
        "        - name: app\n"
        "          image: nginx:1.25 # kpt-set: ${image}\n"
        '          args: [--port, "8080"]\n'
        "        - name: sidecar # helper\n"
        "          image: envoy\n"
        "          env:\n"
        "          - name: MODE\n"
        "            value: 'off'\n"
    )


def test_deleting_the_first_entry_of_a_list_item_moves_the_dash() -> None:
    rl = read_resource_list(HEADER + "- apiVersion: v1 # a\n  kind: A # k\n  metadata:\n    name: a\n")
    del rl.items[0]["apiVersion"]
    assert write_resource_list(rl) == HEADER + "- kind: A # k\n  metadata:\n    name: a\n"


def test_wide_and_odd_indentation_is_followed() -> None:
    text = HEADER[:-1] + "\n  -   kind: A\n      spec:\n          list:\n            - 1\n            - 2\n"
    rl = read_resource_list(text)
    rl.items[0]["spec"]["list"].append(3)
    rl.items[0]["spec"]["new"] = {"x": "y"}
    out = write_resource_list(rl)
    assert out == HEADER[:-1] + (
        "\n  -   kind: A\n      spec:\n          list:\n            - 1\n            - 2\n            - 3\n"
        "          new:\n            x: 'y'\n"
    )
    assert read_resource_list(out).items == rl.items


# Property: whatever the edit, the spliced text reads back as the edited value.

_scalar = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**63), st.floats(allow_nan=False), st.text(max_size=6),
    st.sampled_from(["yes", "0755", "1e3", "~", "a: b", "x\ny\n", "x\n\n", "#c", "- z"]),
)  # fmt: skip
_value = st.recursive(
    _scalar,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.text(max_size=5), st.just("name")), inner, max_size=4),
        st.fixed_dictionaries({"name": st.sampled_from(["a", "b"])}, optional={"x": inner, "y": inner}),
    ),
    max_leaves=16,
)
_document = st.dictionaries(st.text(min_size=1, max_size=5), _value, min_size=1, max_size=5)


def _containers(value: Any) -> list[Any]:
    found = [value] if isinstance(value, dict | list) else []
    children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
    for child in children:
        found += _containers(child)
    return found


@settings(max_examples=300, deadline=None)
@given(_document, st.sampled_from(["ours", "pyyaml"]), st.data())
def test_any_edit_reads_back_as_the_edited_value(document: dict[str, Any], style: str, data: st.DataObject) -> None:
    if style == "ours":
        text = "- " + "\n  ".join(emit_block(document)) + "\n"
    else:
        text = yaml.safe_dump([document], default_flow_style=False, allow_unicode=True, sort_keys=False)
    if not yamlio.line_parser_can_read(text):
        return
    lines, rows = yamlio.split_lines(text)
    shape = Shape()
    try:
        shape.value, _ = parse_block(lines, rows, 0, len(lines), shape)
    except Unsupported:
        return
    edited = copy.deepcopy(shape.value)
    for _ in range(data.draw(st.integers(1, 4))):
        target = data.draw(st.sampled_from(_containers(edited[0])))
        operation = data.draw(st.sampled_from(["set", "delete", "insert"]))
        if isinstance(target, dict):
            keys = list(target)
            if operation == "delete" and keys:
                del target[data.draw(st.sampled_from(keys))]
            else:
                key = data.draw(st.sampled_from(keys) if keys and operation == "set" else st.text(max_size=4))
                target[key] = data.draw(_value)
        elif operation == "delete" and target:
            del target[data.draw(st.integers(0, len(target) - 1))]
        elif operation == "set" and target:
            target[data.draw(st.integers(0, len(target) - 1))] = data.draw(_value)
        else:
            target.insert(data.draw(st.integers(0, len(target))), data.draw(_value))
    out = "\n".join(splice_block(edited, shape)) + "\n"
    assert same_value(yamlio.load(out), edited), out
