# porchkit: `make run` and `make test` set everything up on a fresh machine.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: setup run test bench lint clean e2e

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,lint]' --config-settings editable_mode=compat
	touch $(STAMP)

setup: $(STAMP)

# The quickstart (testdata/quickstart): blueprint and edge git repositories built in build/quickstart,
# then `porchkit variants reconcile` publishes a variant per edge repository, finds nothing to do
# the second time, and drafts upgrades when the set moves to the blueprint's next revision.
run: setup
	bash testdata/quickstart/run.sh $(VENV)/bin

test: setup
	$(PY) -m pytest -q

bench: setup
	@for b in bench/*_bench.py; do echo "== $$b"; $(PY) $$b || exit 1; done

# A real kube-apiserver and kube-controller-manager (1.20, built once into ~/.cache/porchkit-e2e;
# the first build takes 5 to 10 minutes) on loopback: the contract suite's kube backend and the
# tests under tests/e2e run against it.
e2e: setup
	bash tests/e2e/cluster.sh build
	bash tests/e2e/cluster.sh run -- $(PY) -m pytest -q tests/e2e tests/reconcile/contract

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy deltapipe krmfn porchkit porchvariant reconcile decorators mapctl

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis .mypy_cache .ruff_cache *.egg-info
