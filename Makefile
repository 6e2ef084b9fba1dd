# porchkit: `make run` and `make test` set everything up on a fresh machine.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: setup run test bench lint clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,lint]' --config-settings editable_mode=compat
	touch $(STAMP)

setup: $(STAMP)

run: setup
	$(VENV)/bin/porchkit pipeline eval -p testdata/deltapipe/endpoints/pipeline.yaml testdata/deltapipe/endpoints/objects.yaml

test: setup
	$(PY) -m pytest -q

bench: setup
	@for b in bench/*_bench.py; do echo "== $$b"; $(PY) $$b || exit 1; done

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy deltapipe krmfn porchkit reconcile

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis .mypy_cache .ruff_cache *.egg-info
