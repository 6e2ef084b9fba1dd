"""mapctl: the MapController ("for every matching X, keep some Ys") Metacontroller designed.

Built so far, the pure parts (each module's docstring has the details):
* `spec` - parsing and validating a `porchkit.dev/v1alpha1` MapController;
* `keys` - the map key that tags each output with the input it came from;
* `selection` - which objects are a parent's inputs (its duck-typed `spec.selector`, its
  namespace, and the recursion guard against its own outputs);
* `protocol` - the map and tombstone hook requests and answers;
* `status` - the status aggregated on each parent.

To come: the controller itself (one queue key per input, outputs managed with the
DecoratorController's apply and update strategies, tombstones), `porchkit map reconcile`,
`porchkit manager --controllers map`, its CRD, the SnapshotSchedule and pipeline examples, and
bench/mapctl_bench.py.
"""
