"""The `reconcile.Cluster` contract: one suite, run against every backend (see conftest.py)."""
