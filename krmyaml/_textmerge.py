"""Carrying an edit that a serializer made back onto the text as it was written, line by line.

ruamel.yaml writes a whole document out in its own layout: it drops trailing whitespace and the
carriage returns of CRLF files, re-indents the sequences that do not follow the file's majority
style, closes up `key:   value`, re-flows multi-line scalars. None of that is part of an edit, and
all of it would show in the draft's diff. `carry_over` keeps it out: given the text as written,
the serializer's rendering of the unedited data (`before`) and of the edited data (`after`), it
gives `after` with every stretch of lines that the edit left alone (equal in `before` and `after`)
replaced by the lines of the original that the stretch renders. Comment lines the serializer
lost (ruamel drops some after a flow collection) are written back where they stood.

Promises: only whole lines move; the lines that the edit changed are `after`'s, ended like the
original's lines (CRLF or LF); a text that had no final newline still has none. It knows no YAML:
mixing original lines with re-indented ones can give text that means something else, so the
caller must check the result (textedit.edit_document compares its data with `after`'s).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from difflib import SequenceMatcher

__all__ = ["carry_over", "newline_of", "split_lines"]

_COMMENT_OR_BLANK = re.compile(r"^[ \t]*(?:#.*)?$")


def split_lines(text: str) -> list[str]:
    """The lines of `text`, each with its "\\n" (the last one may have none); only "\\n" ends a line."""
    lines = text.split("\n")
    out = [line + "\n" for line in lines[:-1]]
    if lines[-1]:
        out.append(lines[-1])
    return out


def newline_of(text: str) -> str:
    """The line ending most lines of `text` use: "\\r\\n" or "\\n"."""
    crlf = text.count("\r\n")
    return "\r\n" if crlf and crlf * 2 >= text.count("\n") else "\n"


@dataclass(slots=True)
class _Unit:
    """Lines `before[first:end]` render the original lines `original`."""

    first: int
    end: int
    original: list[str] = field(default_factory=list)


def carry_over(original: str, read: str, before: str, after: str) -> str:
    """`after`, with the lines it shares with `before` written as in `original` (see above).

    `read` is the text the serializer actually parsed: `original` with CRLF turned into LF and
    perhaps tabs into spaces, line for line the same as `original`. `before` and `after` use LF;
    with `before` empty, the result is `after` in the original's line endings.
    """
    newline = newline_of(original)
    after_lines = split_lines(after)
    final_newline = original.endswith("\n") or not original
    if not before:
        return _join([_ended(line, newline) for line in after_lines], newline, final_newline=final_newline)
    original_lines, read_lines = split_lines(original), split_lines(read)
    if len(original_lines) != len(read_lines):
        read_lines = original_lines
    before_lines = split_lines(before)
    units, orphans = _units(original_lines, [_key(line) for line in read_lines], before_lines)
    unit_of = {line: unit for unit in units for line in range(unit.first, unit.end)}

    out: list[str] = []
    for tag, b1, b2, a1, a2 in SequenceMatcher(None, before_lines, after_lines, autojunk=False).get_opcodes():
        if tag != "equal":
            for b in range(b1, b2):
                out.extend(orphans.pop(b, ()))
            out.extend(_ended(line, newline) for line in after_lines[a1:a2])
            continue
        for offset, b in enumerate(range(b1, b2)):
            out.extend(orphans.pop(b, ()))
            unit = unit_of.get(b)
            if unit is not None and b1 <= unit.first and unit.end <= b2:
                if b == unit.first:
                    out.extend(unit.original)
            else:
                out.append(_ended(after_lines[a1 + offset], newline))
    for b in sorted(orphans):
        out.extend(orphans[b])
    return _join(out, newline, final_newline=final_newline)


def _units(original: list[str], keys: list[str], before: list[str]) -> tuple[list[_Unit], dict[int, list[str]]]:
    """Pair the lines of `before` with the original lines they render, as small units as can be;
    and the comment lines the serializer dropped (ruamel loses some after a flow collection), by
    the line of `before` they stood before, to be written whatever the edit did around them."""
    units: list[_Unit] = []
    orphans: dict[int, list[str]] = {}
    pending: list[str] = []  # original lines with nothing rendered before them yet
    matcher = SequenceMatcher(None, keys, [_key(line) for line in before], autojunk=False)
    for tag, o1, o2, b1, b2 in matcher.get_opcodes():
        if tag == "equal" or (tag == "replace" and o2 - o1 == b2 - b1):
            # a line the serializer rewrote in place (`key:   v` as `key: v`) still renders that line
            units.extend(_Unit(b1 + k, b1 + k + 1, [original[o1 + k]]) for k in range(o2 - o1))
        elif tag == "replace":
            units.append(_Unit(b1, b2, original[o1:o2]))
        elif tag == "delete" and all(_COMMENT_OR_BLANK.match(line) for line in keys[o1:o2]):
            orphans.setdefault(b1, []).extend(original[o1:o2])
        elif tag == "delete":  # other lines the serializer dropped go with the unit before them
            if units:
                units[-1].original.extend(original[o1:o2])
            else:
                pending.extend(original[o1:o2])
        elif units:  # "insert": lines the serializer made up belong to the unit before them
            units[-1].end = b2
        else:
            units.append(_Unit(b1, b2, []))
        if pending and units:
            units[0].original[:0] = pending
            pending = []
    return units, orphans


def _key(line: str) -> str:
    return line.rstrip(" \t\r\n")


def _ended(line: str, newline: str) -> str:
    return line[:-1] + newline if line.endswith("\n") and not line.endswith("\r\n") and newline != "\n" else line


def _join(lines: list[str], newline: str, *, final_newline: bool) -> str:
    """The lines as one text: a line that lost its end by moving off the end of the text gets one."""
    for i in range(len(lines) - 1):
        if not lines[i].endswith("\n"):
            lines[i] += newline
    text = "".join(lines)
    if not final_newline and text.endswith("\n"):
        text = text[: -len(newline)] if text.endswith(newline) else text[:-1]
    return text
