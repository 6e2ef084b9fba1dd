"""Δ-controller's Patcher semantics: how an output object is merged into an existing one.

Not RFC 7386: maps merge recursively and `null` deletes a key, scalars replace, and lists merge
*by index* (equal positions are merged recursively, extra patch elements are appended, surplus
original elements are kept); a type mismatch replaces. Arguments are never changed.
"""

from __future__ import annotations

from typing import Any


def merge_patch(original: Any, patch: Any) -> Any:
    """The original with the patch merged in, as a new value."""
    if type(patch) is dict:
        if type(original) is not dict:
            return {k: merge_patch(None, v) for k, v in patch.items() if v is not None}
        merged = dict(original)
        for key, value in patch.items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = merge_patch(original.get(key), value)
        return merged
    if type(patch) is list:
        if type(original) is not list:
            return [merge_patch(None, v) for v in patch]
        merged_list = [merge_patch(original[i], v) if i < len(original) else merge_patch(None, v)
                       for i, v in enumerate(patch)]
        return merged_list + original[len(patch):]
    return patch

