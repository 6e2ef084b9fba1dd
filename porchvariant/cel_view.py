"""What a PackageVariantSet's CEL templates may see of a cluster object, and which objects never.

A template's `target`, `upstream` and `repository` are *views*: name, namespace, labels and
annotations, never spec, status or managedFields (Porch shows the same four fields). Whatever a
template reads can end up in a PackageVariant's spec and from there in a package committed to git,
so two things are kept out:

* **Secrets.** A Secret cannot be a target at all: `is_secret_kind` is what validation refuses
  (`spec.targets[i].objectSelector.kind`), and rendering refuses it again for callers that skip
  validation. The PackageVariant controller uses it too, to never read Secrets for an injection
  point (injection copies a spec, which a Secret does not have).
* **Annotations that hold a copy of the object or a credential.** Tools that apply objects keep
  the last applied manifest in an annotation, Secret data included; a template copying it would
  put the Secret (or a password in a custom resource's spec) into git. `object_view` drops every
  annotation `is_hidden_annotation` names, so a template reading one gets CEL's
  `no such key` error, which `hidden_annotation_note` explains.

The list was made from the tools that write such annotations (their sources name them):

    kubectl.kubernetes.io/last-applied-configuration  kubectl apply (client-side), and the tools
                                                      that drive it: Argo CD, Pulumi, Spinnaker
    <anything>/last-applied-configuration             the same convention under another prefix:
                                                      Metacontroller, porchkit's decorators and maps
    banzaicloud.com/last-applied                      Banzai Cloud's k8s-objectmatcher (zipped)
    objectset.rio.cattle.io/applied                   Rancher's wrangler apply (gzipped, base64)
    kapp.k14s.io/original*                            Carvel kapp: the original manifest, and its
                                                      debug diffs (-diff, -diff-full)
    vcluster.loft.sh/token-*                          vcluster: service account tokens on pods
    openshift.io/token-secret.value                   OpenShift: a token on its dockercfg Secrets
    kubernetes.io/change-cause                        `kubectl --record`: a command line, literal
                                                      values (`--from-literal=password=...`) too

Checked and left visible, as they hold no copy: `deployment.kubernetes.io/*` (revision numbers
and replica counts), Helm's `meta.helm.sh/*` (release names: Helm keeps releases in Secrets, not
annotations), Argo CD's and Flux's tracking annotations (ids and checksums). kapp's
`-diff-md5` is only a checksum, but is hidden with the rest of its prefix.

Does not: decide which objects a target selects (render.py) or report problems (validation.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["HIDDEN_ANNOTATIONS", "hidden_annotation_note", "is_hidden_annotation", "is_secret_kind",
           "object_view", "secret_target_message"]

HIDDEN_ANNOTATIONS = frozenset({
    "kubectl.kubernetes.io/last-applied-configuration",
    "banzaicloud.com/last-applied",
    "objectset.rio.cattle.io/applied",
    "openshift.io/token-secret.value",
    "kubernetes.io/change-cause",
})
"""Annotation keys CEL never sees (besides the prefixes and the suffix below)."""
HIDDEN_ANNOTATION_PREFIXES = ("kapp.k14s.io/original", "vcluster.loft.sh/token-")
HIDDEN_ANNOTATION_SUFFIX = "/last-applied-configuration"

_NO_SUCH_KEY = "no such key: "


def is_hidden_annotation(key: str) -> bool:
    """Whether an annotation key is one that holds a copy of its object or a credential."""
    return (key in HIDDEN_ANNOTATIONS or key.endswith(HIDDEN_ANNOTATION_SUFFIX)
            or key.startswith(HIDDEN_ANNOTATION_PREFIXES))


def object_view(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What CEL sees of an object: name, namespace, labels and annotations, never spec, status or
    managedFields, and none of the annotations `is_hidden_annotation` names.

    Missing labels or annotations are an empty map, as cel-go shows a nil Go map. `obj` is not
    changed, and the maps in the view are its own only when nothing had to be left out."""
    metadata = obj.get("metadata") or {}
    annotations = metadata.get("annotations") or {}
    if any(is_hidden_annotation(key) for key in annotations):
        annotations = {key: value for key, value in annotations.items() if not is_hidden_annotation(key)}
    return {"name": metadata.get("name", ""), "namespace": metadata.get("namespace", ""),
            "labels": metadata.get("labels") or {}, "annotations": annotations}


def is_secret_kind(api_version: Any, kind: Any) -> bool:
    """Whether an objectSelector's apiVersion and kind name core Secrets (any version of the core
    group, which has no "/" in its apiVersion; the kind in any letter case)."""
    return (isinstance(api_version, str) and "/" not in api_version.strip("/")
            and isinstance(kind, str) and kind.lower() == "secret")


def secret_target_message(field: str) -> str:
    """The one line that refuses a Secret target, naming the field (`spec.targets[0].objectSelector.kind`)."""
    return (f"{field}: Secrets cannot be PackageVariantSet targets: a template could copy their data into "
            "a package in git")


def hidden_annotation_note(cel_message: str) -> str:
    """CEL's message, with the reason added when it is `no such key` for a hidden annotation."""
    key = cel_message[len(_NO_SUCH_KEY):] if cel_message.startswith(_NO_SUCH_KEY) else ""
    if key and is_hidden_annotation(key):
        return (f"{cel_message} (templates never see this annotation: it holds a copy of the object or a "
                "credential; see docs/variants.md)")
    return cel_message
