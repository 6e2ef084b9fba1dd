"""porchvariant.embedded: porchkit's embedded Porch, serving `porch.kpt.dev/v1alpha1` from git.

* porch.py is the embedded Porch itself: `EmbeddedPorch` serves PackageRevision and
  PackageRevisionResources on an EmbeddedCluster from the git repositories of its Repository
  objects (tasks in _porch_tasks.py, resourceVersions and watch history in _porch_events.py);
* gitrepo.py is the git layer: packages and their revisions in one git repository, laid out
  exactly as Porch lays them out, so that Porch and `kpt pkg get` read what it writes and the
  other way round (the git CLI underneath, in _git*.py);
* resource_merge.py is the upgrade task's 3-way merge, kpt's `resource-merge` strategy of
  `kpt pkg update`, over packages given as `{path: text}` (in _merge*.py);
* render.py renders a package's Kptfile pipeline: through `kpt fn render` when kpt is there,
  otherwise in-process with the functions the caller supplies (porchkit's own, wired by the face,
  since porchvariant may not import krmfn).
"""
