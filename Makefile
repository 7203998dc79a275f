# The commands the README names. Everything installs into ./.venv (demo) or tox envs (test).
PY ?= python3
VENV := .venv
PKGS := -e packages/arrayjit-tnode -e packages/arrayjit-ir -e packages/arrayjit-backends \
        -e packages/arrayjit-backend-c

.PHONY: demo test install dev lint format type bench clean

$(VENV)/bin/python:
	$(PY) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --upgrade pip

install: $(VENV)/bin/python
	$(VENV)/bin/python -m pip install -q $(PKGS)

# Runs on the best available backend: multicore_cc where a C compiler exists.
demo: install
	$(VENV)/bin/arrayjit demo

dev: $(VENV)/bin/python
	$(VENV)/bin/python -m pip install -q $(PKGS) -e packages/arrayjit-backend-opencl[pocl] \
	    -e packages/arrayjit-backend-cuda -e packages/arrayjit-distributed[mpich] -e conformance \
	    tox ruff mypy hatch numba mako

$(VENV)/bin/tox: $(VENV)/bin/python
	$(VENV)/bin/python -m pip install -q "tox>=4.20"

# One environment per core at a time (most run one thread); a failing environment's output is
# printed when it ends, with the summary of all of them.
test: $(VENV)/bin/tox
	$(VENV)/bin/tox run-parallel -m ci --parallel auto --parallel-no-spinner

lint: $(VENV)/bin/tox
	$(VENV)/bin/tox run -e lint

format: dev
	$(VENV)/bin/ruff format . && $(VENV)/bin/ruff check --fix .

type: $(VENV)/bin/tox
	$(VENV)/bin/tox run -e type

bench: $(VENV)/bin/tox
	$(VENV)/bin/tox run -e bench

clean:
	rm -rf .tox bench-results
