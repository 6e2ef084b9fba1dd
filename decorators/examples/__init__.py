"""decorators.examples: hooks for the worked DecoratorController examples, importable by python hooks.

* `service_per_pod` - a Service for each replica of a StatefulSet, so each pod has an address of
  its own (manifests in testdata/decorators/service-per-pod/).

The other examples have no code here: testdata/decorators/namespace-isolation/ is a pipeline
hook, and testdata/decorators/crd-roles/ a webhook whose server (`hook.py`) lives beside its
manifests. Nothing in decorators itself imports this package.
"""
