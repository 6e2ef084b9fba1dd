"""Defaulting and normalization of written objects: what kube-apiserver's decoding into typed
objects, defaulting functions and registry strategies do to a write, where controllers notice.

- Every kind: metadata is an ObjectMeta, whose collections are `omitempty`, so empty `labels`,
  `annotations`, `finalizers` and `ownerReferences` are not stored (a controller that writes
  `labels: {}` reads no `labels` back).
- ConfigMap and Secret: only the fields of their Go types survive decoding; anything else is
  dropped (the server's default `fieldValidation=Warn` drops unknown fields with a warning), and
  so are empty `data` and `binaryData` maps (`omitempty`).
- Secret: `stringData` is write-only. Its entries are base64-encoded into `data` (overriding a
  `data` entry of the same key) and the field is dropped, so a controller that writes
  `stringData` reads its values back from `data`. `type` defaults to `Opaque`.

Everything else a real server normalizes or defaults (the fields of other built-in kinds, a
Deployment's strategy and revisionHistoryLimit, a Service's clusterIP and port protocols, a
Pod's restartPolicy, CRD schemas' pruning and defaults, ...) is left as written; see
docs/embedded-cluster.md.
"""

from __future__ import annotations

import base64

from reconcile.cluster import Kind, Obj
from reconcile.embedded._kinds import GroupKind, group_kind

_OMITTED_WHEN_EMPTY = ("labels", "annotations", "finalizers", "ownerReferences")
_TYPED_FIELDS: dict[GroupKind, tuple[frozenset[str], tuple[str, ...]]] = {
    # the top-level fields of the Go type, and those of them omitted when empty
    ("", "ConfigMap"): (frozenset({"apiVersion", "kind", "metadata", "data", "binaryData", "immutable"}),
                        ("data", "binaryData")),
    ("", "Secret"): (frozenset({"apiVersion", "kind", "metadata", "data", "stringData", "type", "immutable"}),
                     ("data", "stringData")),
}
SECRET_GK = ("", "Secret")


class Defaults:
    """A reactor (see `_engine.Reactor`) that only admits, by defaulting and normalizing."""

    def admit(self, kind: Kind, old: Obj | None, new: Obj) -> None:
        meta = new["metadata"]
        for key in _OMITTED_WHEN_EMPTY:
            if key in meta and not meta[key]:
                del meta[key]
        gk = group_kind(kind)
        typed = _TYPED_FIELDS.get(gk)
        if typed is not None:
            fields, omitted = typed
            for key in [k for k in new if k not in fields or (k in omitted and not new[k])]:
                del new[key]
        if gk == SECRET_GK:
            _default_secret(new)

    def admit_delete(self, kind: Kind, obj: Obj) -> None:
        return None

    def written(self, gk: GroupKind, old: Obj | None, new: Obj) -> None:
        return None

    def removed(self, gk: GroupKind, obj: Obj) -> None:
        return None


def _default_secret(secret: Obj) -> None:
    plain = secret.pop("stringData", None)
    if isinstance(plain, dict) and plain:
        data = secret.get("data")
        encoded = {key: base64.b64encode(str(value).encode()).decode() for key, value in plain.items()}
        secret["data"] = {**(data if isinstance(data, dict) else {}), **encoded}
    if not secret.get("type"):
        secret["type"] = "Opaque"
