"""porchkit: the face of the suite.

The `porchkit` command line (porchkit.cli), which mounts each part's own `cli.py`, and later the
manager entry point that runs any set of controllers in one process. Nothing imports this package.
"""
