#!/usr/bin/env bash
# The quickstart, as `make run` runs it: build the git repositories and manifests, create and
# publish one variant of blueprints/app per edge repository, run again (nothing changes), then
# move the set to revision 2 of the blueprint and leave the upgrade drafts for review.
#
#   testdata/quickstart/run.sh [VENV_BIN]    # VENV_BIN: the virtualenv's bin directory (default .venv/bin)
#
# Everything is written under build/quickstart, which is rebuilt from scratch on every run.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bin="$(cd "${1:-$root/.venv/bin}" && pwd)"
# The venv's porchkit for the commands below. (The app's Kptfile pipeline, `exec: porchkit fn
# deltapipe`, would find it without this: the embedded Porch puts it first on kpt's PATH.)
export PATH="$bin:$PATH"
cd "$root"

work=build/quickstart
manifests="$work/manifests"
state="$work/state"

echo "== build the blueprint and edge git repositories and the manifests into $work"
python testdata/quickstart/build.py "$work" --force

echo "== reconcile with --approve: one variant of blueprints/app revision 1 per edge repository, published"
porchkit variants reconcile -f "$manifests" --state "$state" --approve

echo "== reconcile again: every variant is up to date, so nothing changes"
porchkit variants reconcile -f "$manifests" --state "$state" --approve

echo "== move the set to blueprints/app revision 2 and reconcile without --approve: upgrade drafts"
cp testdata/quickstart/packagevariantset-v2.yaml "$manifests/packagevariantset.yaml"
porchkit variants reconcile -f "$manifests" --state "$state"
