# socialrl: `make run` sets everything up and runs the main job; `make test` sets up and runs the tests.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check -q
# torch first, pinned to the CPU build on this disk, so that no later requirement pulls another build.
TORCH_PIN := torch==2.13.0

.PHONY: setup run test test-fast lint format bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip
	$(PIP) install $(TORCH_PIN)
	$(PIP) install -e '.[ml,orchestration,dev]'
	touch $@

setup: $(VENV)/.installed

run: setup
	$(PY) -m pipelines.run_tournament

test: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) -m pytest -q

test-fast: setup
	$(PY) -m pytest -q -m "not slow"

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: setup
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

$(VENV)/.bench-installed: $(VENV)/.installed
	$(PIP) install -e '.[ml,orchestration,dev,bench]'
	touch $@

bench: $(VENV)/.bench-installed
	$(PY) -m benchmarks.bench_episodes
	$(PY) -m benchmarks.bench_sugarscape

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
