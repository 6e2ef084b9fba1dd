"""kpt's annotations: read-only accessors, set_path, and restoring what a function dropped."""

from __future__ import annotations

from krmfn import annotations as a

ITEM = {
    "kind": "X",
    "metadata": {
        "name": "x",
        "annotations": {
            a.PATH: "x.yaml", a.LEGACY_PATH: "x.yaml", a.INDEX: "2", a.LEGACY_INDEX: "2",
            a.ID: "7", a.LEGACY_ID: "7", a.PACKAGE_PATH: "/pkg", a.UPSTREAM_IDENTIFIER: "|X|default|x",
            a.LOCAL_CONFIG: "true", "team": "blue",
        },
    },
}  # fmt: skip


def test_accessors_read_kpts_annotations() -> None:
    assert (a.path(ITEM), a.index(ITEM), a.package_path(ITEM), a.origin_id(ITEM)) == (
        "x.yaml", 2, "/pkg", "|X|default|x",
    )  # fmt: skip
    assert a.path({"kind": "X"}) is None and a.index({"metadata": {"annotations": {a.INDEX: "z"}}}) is None


def test_every_kpt_prefix_is_kpt_owned() -> None:
    assert all(a.is_kpt_owned(p + "x") for p in a.KPT_PREFIXES)
    assert not a.is_kpt_owned("example.com/x")


def test_set_path_writes_the_internal_and_the_legacy_key() -> None:
    obj: dict = {"kind": "X"}
    a.set_path(obj, "new/x.yaml", 1)
    assert obj["metadata"]["annotations"] == {
        a.PATH: "new/x.yaml", a.LEGACY_PATH: "new/x.yaml", a.INDEX: "1", a.LEGACY_INDEX: "1",
    }  # fmt: skip


def test_opaque_annotations_come_back_but_user_ones_stay_as_the_function_left_them() -> None:
    edited = {"kind": "X", "metadata": {"name": "x", "annotations": {a.ID: "99", a.LOCAL_CONFIG: "false"}}}
    restored = a.restore_kpt_annotations(edited, ITEM)["metadata"]["annotations"]
    assert restored[a.ID] == "7" and restored[a.LEGACY_ID] == "7" and restored[a.UPSTREAM_IDENTIFIER]
    assert restored[a.LOCAL_CONFIG] == "false" and "team" not in restored
    assert restored[a.PATH] == "x.yaml"  # all four path/index keys were gone: restored too


def test_a_moved_path_is_not_undone() -> None:
    moved = {"kind": "X", "metadata": {"annotations": {**ITEM["metadata"]["annotations"], a.PATH: "y.yaml"}}}
    assert a.restore_kpt_annotations(moved, ITEM) is moved
