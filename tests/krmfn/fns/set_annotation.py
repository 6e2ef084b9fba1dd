"""Example function: set one annotation on every resource that is not a Kptfile or local config.

Config: a ConfigMap (`kpt fn eval DIR --exec "..." -- key=team value=blue`) or a SetAnnotation
resource with `key` and `value`. Reports one info result per resource it changed.
"""

from __future__ import annotations

from pydantic import BaseModel

import krmfn


class SetAnnotation(BaseModel):
    key: str
    value: str = "true"


def set_annotation(rl: krmfn.ResourceList) -> None:
    config = rl.config(SetAnnotation)
    for item in rl.items:
        if krmfn.is_meta_resource(item) or krmfn.is_local_config(item):
            continue
        annotations = item.setdefault("metadata", {}).setdefault("annotations", {})
        if annotations.get(config.key) != config.value:
            annotations[config.key] = config.value
            rl.results.append(krmfn.info(f"set {config.key}={config.value}", resource=item))


if __name__ == "__main__":
    krmfn.run(set_annotation)
