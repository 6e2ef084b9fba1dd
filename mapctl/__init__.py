"""mapctl: the MapController ("for every matching X, keep some Ys") Metacontroller designed.

To come: per-input map hooks, tombstones for detached outputs, status aggregation on the parent.
"""
