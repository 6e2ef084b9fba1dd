"""Example validator: every resource except Kptfiles and local config must carry a label.

Config: `-- label=team` (a ConfigMap) or a RequireLabel resource. One error result per resource
without the label, so the function fails and kpt leaves the package untouched.
"""

from __future__ import annotations

from pydantic import BaseModel

import krmfn


class RequireLabel(BaseModel):
    label: str


def require_label(rl: krmfn.ResourceList) -> None:
    config = rl.config(RequireLabel)
    for item in rl.items:
        if krmfn.is_meta_resource(item) or krmfn.is_local_config(item):
            continue
        if config.label not in (item.get("metadata", {}).get("labels") or {}):
            rl.results.append(krmfn.error(f"missing label {config.label}", resource=item, field="metadata.labels"))


if __name__ == "__main__":
    krmfn.run(require_label)
