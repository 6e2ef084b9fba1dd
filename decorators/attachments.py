"""Attachments: a DecoratorController's children, managed by reconcile.children in its words.

An attachment is owned by its target (a controller reference) and carries the annotation
`metacontroller.k8s.io/decorator-controller: <name>`, as Metacontroller marks them; everything
else (what is created, updated, deleted or recreated, the update strategies, the differences
from Metacontroller) is reconcile/children.py's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from decorators.spec import DECORATOR_ANNOTATION
from reconcile.children import (
    ApplyMode,
    Change,
    ChildKind,
    ChildrenError,
    Stamp,
    Terms,
    manage_children,
)
from reconcile.cluster import Cluster, Kind, Obj

AttachmentKind = ChildKind
AttachmentsError = ChildrenError
TERMS = Terms(noun="attachment", answer="attachments", rules="spec.attachments", owner="target",
              belongs="attached to this target")


def stamp(decorator: str) -> Stamp:
    """The mark of `decorator`'s attachments."""
    return Stamp(annotations={DECORATOR_ANNOTATION: decorator})


def manage_attachments(cluster: Cluster, target: Obj, kinds: Sequence[AttachmentKind],
                       observed: Mapping[Kind, Sequence[Obj]], desired: Sequence[Obj], *,
                       decorator: str, mode: ApplyMode = "3way", field_manager: str = "metacontroller") -> list[Change]:
    """Make the cluster hold `desired` as the attachments of `target` (reconcile.children.manage_children)."""
    return manage_children(cluster, target, kinds, observed, desired, stamp=stamp(decorator), terms=TERMS,
                           mode=mode, field_manager=field_manager)


__all__ = ["DECORATOR_ANNOTATION", "TERMS", "ApplyMode", "AttachmentKind", "AttachmentsError", "Change",
           "manage_attachments", "stamp"]
