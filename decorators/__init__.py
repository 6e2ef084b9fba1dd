"""decorators: a Metacontroller-compatible DecoratorController on porchkit's runtime.

Manifests and hooks written for Metacontroller's DecoratorController work unchanged
(docs/decorators.md is the guide). The modules, from the outside in:

* `manager` - the factory `porchkit manager --controllers decorator` calls;
* `supervisor` - the controller of DecoratorController objects: one `instance` per object,
  rebuilt when its spec changes, its finalizers released when it is deleted;
* `instance` - one running DecoratorController: rules resolved by discovery, hooks built
  (reconcile.hooks), one reconcile controller per target kind and its watches;
* `sync` - one pass over one target: finalizer, observed attachments, hook, write-back,
  attachments; `related` - the customize hook's related objects;
* the pure parts: `spec` (parsing and validation), `selection` (which objects are targets),
  `protocol` (the hook request and response), `writeback` (labels, annotations, status),
  `attachments` (create, update by strategy, delete), `customize` (related-object rules);
* `local` and `cli` - `porchkit decorators reconcile -f DIR`, a preview on the embedded cluster;
  `crds` - the DecoratorController CRD (deploy/crds holds it written out).
"""
