"""A tiny exec KRM function for render tests (run by kpt as `python annotate_fn.py ARGS`).

Arguments: `KEY=VALUE` sets that annotation on every item; `--add NAME` adds a ConfigMap NAME with
no path (kpt places it in configmap_NAME.yaml); `--drop NAME` removes the items named NAME;
`--fail` writes a message on stderr and exits 3; `--sleep N` sleeps N seconds first.
"""

import sys
import time

import yaml


def main(argv: list[str]) -> int:
    resource_list = yaml.safe_load(sys.stdin)
    items = resource_list["items"]
    args = iter(argv)
    for arg in args:
        if arg == "--fail":
            print("annotate_fn: refusing on purpose", file=sys.stderr)
            return 3
        if arg == "--sleep":
            time.sleep(float(next(args)))
        elif arg == "--add":
            items.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": next(args)}})
        elif arg == "--drop":
            name = next(args)
            items[:] = [item for item in items if item["metadata"]["name"] != name]
        else:
            key, _, value = arg.partition("=")
            for item in items:
                item["metadata"].setdefault("annotations", {})[key] = value
    resource_list["results"] = [{"message": f"annotated {len(items)} item(s)", "severity": "info"}]
    yaml.safe_dump(resource_list, sys.stdout, sort_keys=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
