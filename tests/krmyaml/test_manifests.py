"""krmyaml.manifests: files, directories and stdin, with nothing skipped silently."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from krmyaml import YamlError, manifest_texts, read_documents

CM = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s}\n"



def stdin_of(data: bytes) -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")


def test_a_directory_is_read_recursively_in_path_order_and_a_stream_names_each_document(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "one.yaml").write_text(CM % "one")
    (tmp_path / "a.yaml").write_text(CM % "a1" + "---\n" + CM % "a2")
    (tmp_path / "notes.txt").write_text("not a manifest")
    found = read_documents([tmp_path])
    assert [(d.obj["metadata"]["name"], d.where) for d in found] == [
        ("a1", f"{tmp_path}/a.yaml (document 1)"), ("a2", f"{tmp_path}/a.yaml (document 2)"),
        ("one", f"{tmp_path}/b/one.yaml")]


def test_a_list_is_expanded_and_skip_names_are_passed_over(tmp_path: Path) -> None:
    (tmp_path / "list.yaml").write_text("kind: List\nitems:\n- {kind: A}\n- {kind: B}\n")
    (tmp_path / "kustomization.yaml").write_text("resources: [list.yaml]\n")
    found = read_documents([tmp_path], skip_names=["kustomization.yaml"])
    assert [d.obj["kind"] for d in found] == ["A", "B"]


def test_stdin_that_is_not_utf8_is_one_error() -> None:
    with pytest.raises(YamlError) as refused:
        read_documents(["-"], stdin_of(b"\xff\xfe\x00binary"))
    assert str(refused.value) == "<stdin>: not UTF-8 text"


BOMB = "\n".join(["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]",
                  *(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10))]) + "\n"
SAME_BYTES = {  # name -> (bytes read once from a file and once on stdin, what the error says or "")
    "stream": ((CM % "a" + "---\n" + CM % "b" + "---\nkind: List\nitems: [{kind: A}]\n").encode(), ""),
    "CRLF, not ASCII": ("kind: ConfigMap\r\nmetadata: {name: café}\r\n".encode(), ""),
    "not UTF-8": (b"kind: ConfigMap\nmetadata: {name: \xff}\n", "not UTF-8 text"),
    "invalid YAML": (b"kind: ConfigMap\nmetadata: {name: [a\n", "line 3, column 1: invalid YAML"),
    "duplicate key": (b"kind: ConfigMap\nmetadata:\n  name: a\n  name: b\n", 'key "name" already defined'),
    "alias bomb": (BOMB.encode(), "aliases expand to an unreasonably large document"),
    "too deep": (b"kind: A\nx: " + b"[" * 1200 + b"]" * 1200 + b"\n", "nested too deeply"),
    "not an object": (b"kind: A\n---\n[1, 2]\n", "(document 2): expected an object"),
}


@pytest.mark.parametrize(("data", "words"), SAME_BYTES.values(), ids=SAME_BYTES.keys())
def test_stdin_gives_what_the_same_bytes_in_a_file_give(tmp_path: Path, data: bytes, words: str) -> None:
    file = tmp_path / "m.yaml"
    file.write_bytes(data)

    def outcome(path: str, stdin: io.TextIOWrapper) -> list[tuple[object, str]] | str:
        """The objects and where each was read, or the error; the file's path written as `<stdin>`."""
        try:
            return [(d.obj, d.where.replace(str(file), "<stdin>")) for d in read_documents([path], stdin)]
        except YamlError as err:
            return str(err).replace(str(file), "<stdin>")

    on_stdin = outcome("-", stdin_of(data))
    assert on_stdin == outcome(str(file), stdin_of(b""))
    if words:
        assert isinstance(on_stdin, str) and on_stdin.startswith("<stdin>") and words in on_stdin, on_stdin
    else:
        assert isinstance(on_stdin, list) and on_stdin


def test_stdin_is_utf8_whatever_encoding_its_text_stream_claims() -> None:
    stdin = io.TextIOWrapper(io.BytesIO("kind: A\nmetadata: {name: café}\n".encode()), encoding="ascii")
    assert [d.obj["metadata"]["name"] for d in read_documents(["-"], stdin)] == ["café"]


def test_a_closed_stdin_is_one_error() -> None:
    closed = stdin_of(b"kind: A\n")
    closed.close()
    with pytest.raises(YamlError) as refused:
        list(manifest_texts(["-"], closed))
    assert str(refused.value) == "<stdin>: closed, nothing to read"
    with pytest.raises(YamlError, match="^<stdin>: closed, nothing to read$"):
        list(manifest_texts(["-"], None))


def test_a_file_that_is_not_utf8_is_one_error(tmp_path: Path) -> None:
    (tmp_path / "x.yaml").write_bytes(b"a: \xff\n")
    with pytest.raises(YamlError, match=r"x\.yaml: not UTF-8 text"):
        read_documents([tmp_path])


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a directory whatever its mode")
def test_an_unreadable_directory_is_an_error_not_skipped(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "x.yaml").write_text(CM % "x")
    locked.chmod(0)
    try:
        with pytest.raises(YamlError, match="permission denied"):
            read_documents([tmp_path])
    finally:
        locked.chmod(0o755)


def test_a_dangling_link_in_a_directory_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "gone.yaml").symlink_to(tmp_path / "nowhere.yaml")
    with pytest.raises(YamlError) as refused:
        read_documents([tmp_path])
    assert str(refused.value) == f"{tmp_path}/gone.yaml: a symbolic link to nothing"


def test_a_dangling_link_named_directly_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "gone.yaml").symlink_to(tmp_path / "nowhere.yaml")
    with pytest.raises(YamlError, match="a symbolic link to nothing"):
        list(manifest_texts([tmp_path / "gone.yaml"], io.StringIO()))


def test_a_loop_of_links_is_an_error_not_an_endless_walk(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "x.yaml").write_text(CM % "x")
    (tmp_path / "sub" / "back").symlink_to(tmp_path)
    with pytest.raises(YamlError) as refused:
        read_documents([tmp_path])
    assert str(refused.value) == f"{tmp_path}/sub/back: a loop of symbolic links"


def test_a_linked_directory_that_is_no_loop_is_read(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "x.yaml").write_text(CM % "x")
    (tmp_path / "view").symlink_to(tmp_path / "real")
    assert sorted(d.obj["metadata"]["name"] for d in read_documents([tmp_path])) == ["x", "x"]


def test_a_missing_path_and_a_document_that_is_not_an_object_are_one_error_each(tmp_path: Path) -> None:
    with pytest.raises(YamlError, match="no such file or directory"):
        read_documents([tmp_path / "missing.yaml"])
    (tmp_path / "s.yaml").write_text("just text\n")
    with pytest.raises(YamlError) as refused:
        read_documents([tmp_path / "s.yaml"])
    assert str(refused.value) == f"{tmp_path}/s.yaml: expected an object (a mapping), got a string"


@pytest.mark.parametrize(("text", "problem"), [
    ("apiVersion: v1\nmetadata: {name: a}\n", "kind is missing"),
    ("kind: 5\nmetadata: {name: a}\n", "kind must be a non-empty string, not a number"),
    ("kind: ConfigMap\napiVersion: 1\n", "apiVersion must be a non-empty string, not a number"),
    ("kind: ConfigMap\nmetadata: foo\n", "metadata must be a mapping, not a string"),
    ("kind: ConfigMap\nmetadata: {name: 5}\n", "metadata.name must be a string, not a number"),
    ("kind: ConfigMap\nmetadata: {name: a, namespace: [x]}\n", "metadata.namespace must be a string, not a list"),
])
def test_a_document_that_cannot_be_an_object_names_the_field(tmp_path: Path, text: str, problem: str) -> None:
    (tmp_path / "o.yaml").write_text("kind: Fine\n---\n" + text)
    with pytest.raises(YamlError) as refused:
        read_documents([tmp_path / "o.yaml"])
    assert str(refused.value) == f"{tmp_path}/o.yaml (document 2): {problem}"
