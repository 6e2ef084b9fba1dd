"""The status a MapController writes on each parent, aggregated from what it observed.

Map hooks see one input at a time and return no status, so the controller aggregates (as the
proposal asks). The shape, with keys sorted at every level so that an unchanged status is written
byte for byte the same:

    status:
      inputs:
        persistentvolumeclaims: {total: 20}      # matching inputs, per input resource
      observedGeneration: 3                      # the parent's metadata.generation
      outputs:
        volumesnapshots:                         # outputs this parent owns, across all map keys
          Ready: 97                              # outputs whose condition Ready has status "True"
          total: 100

Resources are named by their plural as written in the MapController spec. Every condition type
seen on any output of a resource gets an entry, 0 when none of them is "True"; an output counts
once per type even if it lists that type twice.

Differences: the proposal's example writes `ready: 97`; here the condition type is kept as written
(`Ready`), since lower-casing could merge distinct types. A condition type spelled `total` is not
counted, so that it cannot overwrite the total.

Pure: no I/O; objects are only read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

_TOTAL = "total"


def aggregate(inputs: Mapping[str, int], outputs: Mapping[str, Sequence[Mapping[str, Any]]],
              generation: int | None) -> dict[str, Any]:
    """The parent's status from the number of inputs per input plural and the owned outputs per
    output plural; every plural given appears, even with a total of 0."""
    return {
        "inputs": {plural: {_TOTAL: inputs[plural]} for plural in sorted(inputs)},
        "observedGeneration": generation,
        "outputs": {plural: _output_counts(outputs[plural]) for plural in sorted(outputs)},
    }


def _output_counts(objs: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {_TOTAL: len(objs)}
    for obj in objs:
        true_types: set[str] = set()
        for condition in _conditions(obj):
            kind = condition.get("type")
            if not isinstance(kind, str) or not kind or kind == _TOTAL:
                continue
            counts.setdefault(kind, 0)
            if condition.get("status") == "True":
                true_types.add(kind)
        for kind in true_types:
            counts[kind] += 1
    return dict(sorted(counts.items()))


def _conditions(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    status = obj.get("status")
    found = status.get("conditions") if isinstance(status, Mapping) else None
    return [c for c in found if isinstance(c, Mapping)] if isinstance(found, list) else []
