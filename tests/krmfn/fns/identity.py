"""Example function that changes nothing: every item must come out as the text it came in as."""

from __future__ import annotations

import krmfn


def identity(rl: krmfn.ResourceList) -> None:
    """Pass every item through untouched."""


if __name__ == "__main__":
    krmfn.run(identity)
