"""krmfn: a KRM-function SDK, and the functions porchkit builds on it.

A function is a plain Python callable that edits a `ResourceList` (plain dicts in `items`,
`results` to report, a typed `config(...)`), run by `run(function)` under `kpt fn eval --exec`
or `kpt fn render --allow-exec`:

    import krmfn

    def set_team(rl: krmfn.ResourceList) -> None:
        for item in rl.items:
            if not krmfn.is_meta_resource(item):
                item.setdefault("metadata", {}).setdefault("labels", {})["team"] = "blue"

    if __name__ == "__main__":
        krmfn.run(set_team)

Layout: `resourcelist` reads and writes the ResourceList without YAML corruption (on
`krmyaml.roundtrip`, porchkit's one YAML layer; `yamlio` hands its load and dump to functions); `results`,
`config`, `selection` and `annotations` are the helpers a function uses; `runner` is the process
contract with kpt; `testing` holds golden-directory and real-kpt helpers for pytest (import it
explicitly); `cli` mounts porchkit's own functions under `porchkit fn`. See docs/krmfn.md.
"""

from krmfn.config import config_fields as config_fields
from krmfn.config import load_config as load_config
from krmfn.errors import ConfigError as ConfigError
from krmfn.errors import InputError as InputError
from krmfn.errors import KrmfnError as KrmfnError
from krmfn.errors import OutputError as OutputError
from krmfn.errors import YamlError as YamlError
from krmfn.resourcelist import ResourceList as ResourceList
from krmfn.resourcelist import read as read_resource_list
from krmfn.resourcelist import write as write_resource_list
from krmfn.results import Result as Result
from krmfn.results import error as error
from krmfn.results import info as info
from krmfn.results import warning as warning
from krmfn.runner import Outcome as Outcome
from krmfn.runner import process as process
from krmfn.runner import run as run
from krmfn.selection import Selector as Selector
from krmfn.selection import is_local_config as is_local_config
from krmfn.selection import is_meta_resource as is_meta_resource
from krmfn.selection import select as select

__all__ = [
    # the ResourceList (resourcelist.py)
    "ResourceList",
    "read_resource_list",
    "write_resource_list",
    # results (results.py)
    "Result",
    "error",
    "warning",
    "info",
    # typed functionConfig (config.py)
    "load_config",
    "config_fields",
    # selection (selection.py)
    "Selector",
    "select",
    "is_local_config",
    "is_meta_resource",
    # running (runner.py)
    "run",
    "process",
    "Outcome",
    # errors (errors.py)
    "KrmfnError",
    "InputError",
    "YamlError",
    "ConfigError",
    "OutputError",
]
