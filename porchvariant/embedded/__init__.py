"""porchvariant.embedded: porchkit's embedded Porch, serving `porch.kpt.dev/v1alpha1` from git.

* porch.py is the embedded Porch itself: `EmbeddedPorch` serves PackageRevision and
  PackageRevisionResources on an EmbeddedCluster from the git repositories of its Repository
  objects, under Porch's API rules. Behind it: which Repositories are served and how a revision
  is found (_porch_repos.py), the API objects built from git (_porch_objects.py), a new
  revision's first task (_porch_first_task.py over the task functions in _porch_tasks.py), and
  resourceVersions and watch history (_porch_events.py);
* git/ is the git layer (git/repository.py): packages and their revisions in one git repository,
  laid out exactly as Porch lays them out, so that Porch and `kpt pkg get` read what it writes
  and the other way round;
* merge/ is the upgrade task's 3-way merge, kpt's `resource-merge` strategy of `kpt pkg update`,
  over packages given as `{path: text}` (merge/resources.py);
* render/ renders a package's Kptfile pipeline (render/renderer.py): through `kpt fn render` when
  kpt is there, otherwise in-process with the functions the caller supplies (porchkit's own,
  wired by the face, since porchvariant may not import krmfn), and `PipelineRenderer` is the
  EmbeddedPorch renderer built on it.

porch.py and the _porch_*.py modules are the top layer; they use git/, merge/ and render/, which
do not use them.
"""
