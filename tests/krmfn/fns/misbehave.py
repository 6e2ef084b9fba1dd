"""Example function that misbehaves on request, for testing the runner's failure paths.

`how` (a ConfigMap key) picks the failure: `crash` raises ZeroDivisionError after editing every
item, `exit` calls sys.exit(4), `unwritable` puts a set into an item, `refuse` raises KrmfnError.
Anything else (or no config) passes the input through.
"""

from __future__ import annotations

import sys

from pydantic import BaseModel

import krmfn


class Misbehave(BaseModel):
    how: str = ""


def misbehave(rl: krmfn.ResourceList) -> None:
    how = rl.config(Misbehave).how
    for item in rl.items:
        item.setdefault("metadata", {})["name"] = "edited"
    if how == "crash":
        print(1 / 0)
    elif how == "exit":
        sys.exit(4)
    elif how == "unwritable":
        rl.items[0]["spec"] = {"values": {1, 2}}
    elif how == "refuse":
        raise krmfn.KrmfnError("refusing on purpose", where="field spec.replicas")


if __name__ == "__main__":
    krmfn.run(misbehave)
