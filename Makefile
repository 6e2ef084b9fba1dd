# porchkit: `make run` and `make test` set everything up on a fresh machine.
#
# Installs come only from the committed lock (lock/*.txt: every package pinned, with hashes), so
# the result never depends on what the registry serves that day. `make lock` refreshes the lock
# from pyproject.toml's ranges; `make test-latest` tries the newest versions those ranges allow.
PYTHON     ?= python3
VENV       ?= .venv
PY         := $(VENV)/bin/python
STAMP      := $(VENV)/.installed
UV_HOME    := $(VENV)/.uv
UV         := $(UV_HOME)/bin/uv
LATEST     ?= .venv-latest

.PHONY: setup run test test-latest bench bench-realserver lint lock lock-upgrade lock-check clean e2e gitservers

# uv, itself pinned with hashes, in a small venv of its own (uv pip sync keeps $(VENV) to the lock).
define install-uv
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@test -x $(UV_HOME)/bin/pip || $(PYTHON) -m venv $(UV_HOME)
	@$(UV_HOME)/bin/pip --isolated install --quiet --disable-pip-version-check --require-hashes -r lock/uv.txt
	@touch $(UV)
endef

$(UV): lock/uv.txt
	$(install-uv)

$(STAMP): lock/dev.txt lock/uv.txt pyproject.toml
	@echo "porchkit: installing the locked packages (lock/) into $(VENV); the first time takes a minute"
	$(install-uv)
	@$(UV) pip sync --quiet --python $(PY) --require-hashes lock/dev.txt
	@$(UV) pip install --quiet --python $(PY) --no-deps --no-build-isolation \
	    --config-settings editable_mode=compat -e .
	@touch $(STAMP)

setup: $(STAMP)

# The quickstart (testdata/quickstart): blueprint and edge git repositories built in build/quickstart,
# then `porchkit variants reconcile` publishes a variant per edge repository, finds nothing to do
# the second time, and drafts upgrades when the set moves to the blueprint's next revision.
run: setup
	bash testdata/quickstart/run.sh $(VENV)/bin

test: setup lock-check gitservers
	$(PY) -m pytest -q

# Real git servers for the `gitserver` tests (apache2 with git http-backend, on loopback): installed
# from Debian's packages when missing and this is root; otherwise those tests skip, saying why.
gitservers:
	@bash tests/gitservers/install.sh || echo "porchkit: the gitserver tests will skip"

# The newest versions pyproject.toml's ranges allow, in a venv of their own, then every test: drift
# in a dependency is found on purpose here, not by a fresh clone on some later day.
test-latest: $(UV)
	@echo "porchkit: installing the newest versions pyproject.toml allows into $(LATEST)"
	@test -x $(LATEST)/bin/python || $(UV) venv --quiet --python $(PYTHON) $(LATEST)
	@$(UV) pip install --quiet --python $(LATEST)/bin/python --upgrade -e '.[test]'
	@bash lock/lock.sh drift $(UV) $(LATEST)/bin/python
	PORCHKIT_UV=$(abspath $(UV)) $(LATEST)/bin/python -m pytest -q

bench: setup
	@for b in bench/*_bench.py; do echo "== $$b"; $(PY) $$b || exit 1; done

# A real kube-apiserver and kube-controller-manager (1.20, built once into ~/.cache/porchkit-e2e;
# the first build takes 5 to 10 minutes) on loopback: the contract suite's kube backend and the
# tests under tests/e2e run against it.
e2e: setup
	bash tests/e2e/cluster.sh build
	bash tests/e2e/cluster.sh run -- $(PY) -m pytest -q tests/e2e tests/reconcile/contract

# bench/realserver_bench.py against the same loopback API server: the server's own create rate, then the
# decorators' convergence as a share of it, sync-hook calls and writes per target.
bench-realserver: setup
	bash tests/e2e/cluster.sh build
	bash tests/e2e/cluster.sh run -- $(PY) bench/realserver_bench.py

lint: setup lock-check
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy krmyaml deltapipe krmfn porchkit porchvariant reconcile decorators mapctl
	$(VENV)/bin/deptry .
	$(VENV)/bin/lint-imports --no-cache

# Every lock file (lock/*.txt) from pyproject.toml and lock/*.in (see lock/README.md).
lock: $(UV)
	bash lock/lock.sh compile $(UV)

lock-upgrade: $(UV)
	bash lock/lock.sh upgrade $(UV)

# Fails when pyproject.toml asks for something the lock does not satisfy (run `make lock`).
lock-check: $(UV)
	@bash lock/lock.sh check $(UV)

clean:
	rm -rf $(VENV) $(LATEST) .pytest_cache .hypothesis .mypy_cache .ruff_cache *.egg-info
