"""The KRM functions porchkit ships: name -> ("package.module:callable", one-line help).

Read by the command line (`porchkit fn NAME`, krmfn/cli.py) and by the in-process runner the
embedded Porch renders with (krmfn/inprocess.py). A module is imported only when its function
runs, so every function starts as fast as krmfn itself does (kpt starts a fresh process per run).
"""

from __future__ import annotations

FUNCTIONS: dict[str, tuple[str, str]] = {
    "deltapipe": ("krmfn.deltapipe_fn:deltapipe",
                  "run a Δ pipeline over the package: generate, reshape or patch its resources"),
}
