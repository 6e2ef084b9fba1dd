"""mapctl.examples: hooks for the worked MapController examples, importable by python hooks.

* `snapshots` - the proposal's SnapshotSchedule: a VolumeSnapshot of every selected PVC each
  `snapshotInterval`, each kept for `snapshotTTL` (manifests in testdata/mapctl/snapshotschedule/).

The ConfigMap-per-Service example (testdata/mapctl/configmap-per-service/) is a pipeline hook
and has no code here. Nothing in mapctl itself imports this package.
"""
