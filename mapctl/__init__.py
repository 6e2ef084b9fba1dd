"""mapctl: the MapController ("for every matching X, keep some Ys") Metacontroller designed and never built.

The pure parts (each module's docstring has the details):
* `spec` - parsing and validating a `porchkit.dev/v1alpha1` MapController;
* `keys` - the map key that tags each output with the input it came from;
* `selection` - which objects are a parent's inputs (its duck-typed `spec.selector`, its
  namespace, and the recursion guard against its own outputs);
* `protocol` - the map and tombstone hook requests and answers;
* `status` - the status aggregated on each parent.

The controller:
* `context` - what a running MapController's passes share (resolved kinds, hooks, memory);
* `inputs` - the pass over one parent's one input (map or tombstone hook, then the outputs);
* `parents` - the pass over one parent (re-map on change, detached outputs, status);
* `instance` - one running MapController: its two reconcile controllers and their watches;
* `supervisor` - the controller of MapController objects (start, restart, stop);
* `manager`, `crds` - `porchkit manager --controllers map` and the CRD;
* `local`, `cli` - `porchkit map reconcile -f DIR`, a preview on the embedded cluster;
* `examples` - the SnapshotSchedule example's python hooks.

docs/mapctl.md is the user guide.
"""
