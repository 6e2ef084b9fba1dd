"""Knowing, in a test, that controllers have finished reacting to a change, so that "nothing
happened" is asserted after the fact rather than after a guess at how long reacting takes.

`Heard(informer)` listens to an informer after the controllers' handlers: an informer hands one
change at a time to its handlers, in the order they were added, so once it has heard a change,
every controller has queued (or filtered out) its keys for it. `handled(heard, obj, *controllers)`
waits for that, then for the controllers' queues to be empty with nothing in hand or due soon
(reconcile.idle.busy).
"""

from __future__ import annotations

from reconcile.cluster import Obj
from reconcile.controller import Controller
from reconcile.idle import busy
from reconcile.informer import Informer
from tests.waiting import eventually

HORIZON = 1.0  # seconds: a key due later than this is not a reaction still under way


def version(obj: Obj) -> str:
    return str(obj["metadata"]["resourceVersion"])


class Heard:
    """The resourceVersions an informer has handed to its handlers since this one was added."""

    def __init__(self, informer: Informer) -> None:
        self.versions: set[str] = set()
        informer.add_handler(self._hear)

    def _hear(self, old: Obj | None, new: Obj | None) -> None:
        self.versions.update(version(obj) for obj in (old, new) if obj is not None)


def handled(heard: Heard, obj: Obj, *controllers: Controller) -> None:
    """Wait until `heard`'s informer has handed `obj` (as written) to every handler, and then
    until the `controllers` have nothing queued, in hand or due within HORIZON."""
    eventually(lambda: version(obj) in heard.versions, what=f"the informer to hand on {obj['metadata']['name']}")
    eventually(lambda: not any(busy(c.queue, HORIZON) for c in controllers), what="the controllers to be idle")
