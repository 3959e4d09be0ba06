"""Profiles: one setting picks the scale of every stage.

| profile | model | where | what it is for |
| --- | --- | --- | --- |
| `smoke` | tiny random Llama (SmolLM2 tokenizer) | CPU, minutes | tests and CI: the whole lineage end to end, numbers meaningless |
| `cpu` | SmolLM2-135M-Instruct (shipped GGUF) | CPU, about half an hour | a real but small run on a laptop: the Craigslist specialist (SFT warm-start, 2 PPO iterations); other domains on request |
| `paper` | Qwen3-4B-Instruct-2507, critic Qwen3-1.7B | GPUs with vLLM | the SocialRL paper's hyper-parameters (actor lr 2e-6, critic lr 1e-5, batch 144 / minibatch 36, grad-norm 5, <= 200 steps, critic warmed 30 steps) |

Selected by $SOCIALRL_PROFILE (default `cpu`) or by the Dagster settings resource.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace

from environments import SOCIALRL_ENV_IDS
from models.training.config import (
    ComputeSettings,
    DataParallelSettings,
    LoraSettings,
    PPOConfig,
    PPOHyper,
    SFTSettings,
)

PROFILE_NAMES = ("smoke", "cpu", "paper")


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

    def __post_init__(self) -> None:
        if self.tensor_parallel_size < 1 or self.data_parallel_size < 1:
            raise ValueError("tensor_parallel_size and data_parallel_size must be >= 1")


@dataclass(frozen=True)
class Profile:
    """Everything that changes with the scale of a run."""

    name: str
    """smoke, cpu or paper."""
    base_model: str
    """Model reference (models.serving.model_store.resolve_model)."""
    critic_model: str
    """The critic's backbone (the paper uses a smaller model than the actor)."""
    domains: tuple[str, ...] = SOCIALRL_ENV_IDS
    """Environments trained and evaluated."""
    sft_domains: tuple[str, ...] = SOCIALRL_ENV_IDS
    """Domains that get an SFT warm-start before PPO."""
    train_scenarios: int = 64
    """Generated training scenarios per domain."""
    heldout_scenarios: int = 32
    """Held-out scenarios per domain for evaluation (each played against every evaluation counterpart)."""
    scenario_source: str = "generated"
    """"generated", or "dataset": real scenarios where a domain has a dataset and the shared data is present
    (training and held-out partitions split by content, models/evaluation/scenarios.py), else generated."""
    teacher_episodes: int = 64
    """Teacher episodes per domain (split over the seats)."""
    trace_min_reward: float = 0.0
    """Teacher episodes below this reward are filtered out of the SFT data."""
    sft: SFTSettings = field(default_factory=SFTSettings)
    """Warm-start settings."""
    ppo: PPOConfig = field(default_factory=lambda: PPOConfig(env_id="craigslist-v0"))
    """PPO settings (env_id and run_name are replaced per domain)."""
    eval_counterparts: tuple[str, ...] = ("boulware", "conceder", "reciprocal")
    """Fixed counterparts of every evaluation."""
    max_new_tokens: int = 128
    """Most tokens per model reply in evaluation."""
    eval_temperature: float = 0.7
    """Sampling temperature of models under evaluation (seeded per episode, so paired policies share seeds)."""
    eval_concurrency: int = 32
    """Evaluation episodes in flight at once (their calls batch in the engine)."""
    engine: EngineSettings = field(default_factory=EngineSettings)
    """Engine start-up settings."""

    def __post_init__(self) -> None:
        if self.name not in PROFILE_NAMES:
            raise ValueError(f"profile name must be one of {PROFILE_NAMES}, got {self.name!r}")
        unknown = set(self.domains) - set(SOCIALRL_ENV_IDS) or set(self.sft_domains) - set(self.domains)
        if unknown:
            raise ValueError(f"unknown or untrained domains: {sorted(unknown)}")
        if self.scenario_source not in ("generated", "dataset"):
            raise ValueError(f"scenario_source must be 'generated' or 'dataset', got {self.scenario_source!r}")
        if self.train_scenarios < 1 or self.heldout_scenarios < 1 or self.teacher_episodes < 1:
            raise ValueError("scenario and episode counts must be >= 1")

    def ppo_for(self, env_id: str) -> PPOConfig:
        """The PPO config of one domain's specialist."""
        return replace(
            self.ppo,
            env_id=env_id,
            run_name=f"{env_id.removesuffix('-v0')}-specialist",
            scenario_source=self.scenario_source,
        )


SMOKE = Profile(
    name="smoke",
    base_model="tiny-random-llama",
    critic_model="tiny-random-llama",
    sft_domains=("craigslist-v0", "marketplace-v0"),
    train_scenarios=8,
    heldout_scenarios=4,
    teacher_episodes=4,
    sft=SFTSettings(
        learning_rate=1e-3, max_steps=2, grad_accumulation=2, max_length=1024, lora=LoraSettings(r=8, alpha=16)
    ),
    ppo=PPOConfig(
        env_id="craigslist-v0",
        iterations=2,
        episodes_per_iteration=4,
        max_new_tokens=16,
        concurrency=4,
        hyper=PPOHyper(actor_lr=1e-4, critic_lr=1e-4, minibatch_episodes=4, kl_coef=0.01, critic="shared"),
        lora=LoraSettings(r=8, alpha=16),
    ),
    max_new_tokens=16,
    eval_concurrency=16,
    engine=EngineSettings(max_model_len=2048, kv_cache_gib=1.0),
)

CPU = Profile(
    name="cpu",
    base_model="smollm2-135m-instruct",
    critic_model="smollm2-135m-instruct",
    # Sized for a 2-core machine, where training costs ~6 ms per token (SFT: ~15-25 s per step of 4
    # examples) and a Craigslist episode of the warm-started model runs all 20 turns: one domain, a short
    # warm-start, two PPO iterations of 4 episodes (the first warms the critic), 12 evaluation episodes
    # per policy. Other domains: `make run DOMAINS=...` or their partitions in the UI.
    domains=("craigslist-v0",),
    sft_domains=("craigslist-v0",),
    train_scenarios=64,
    heldout_scenarios=4,
    teacher_episodes=32,
    trace_min_reward=0.3,
    sft=SFTSettings(learning_rate=3e-4, max_steps=24, batch_size=4, max_length=1024, bf16=True),
    ppo=PPOConfig(
        env_id="craigslist-v0",
        iterations=2,
        episodes_per_iteration=4,
        max_new_tokens=64,
        concurrency=4,
        critic_warmup_iterations=1,
        temperature=0.7,
        bf16=True,
        hyper=PPOHyper(actor_lr=2e-5, critic_lr=5e-5, minibatch_episodes=2, kl_coef=0.01, micro_batch_tokens=4096),
    ),
    max_new_tokens=64,
    # Prompts longer than the context are shortened by the LLM agent (oldest exchange first).
    engine=EngineSettings(max_model_len=2048, kv_cache_gib=2.0),
)

PAPER = Profile(
    name="paper",
    base_model="Qwen/Qwen3-4B-Instruct-2507",
    critic_model="Qwen/Qwen3-1.7B",
    sft_domains=("craigslist-v0", "marketplace-v0"),
    train_scenarios=1000,
    heldout_scenarios=200,
    teacher_episodes=1000,
    trace_min_reward=0.5,
    sft=SFTSettings(
        learning_rate=1e-4, epochs=2.0, batch_size=8, max_length=4096, bf16=True, compute=ComputeSettings(device="cuda")
    ),
    ppo=PPOConfig(
        env_id="craigslist-v0",
        iterations=200,
        episodes_per_iteration=144,
        critic_warmup_iterations=30,
        max_new_tokens=512,
        concurrency=144,
        bf16=True,
        checkpoint_every=10,
        hyper=PPOHyper(actor_lr=2e-6, critic_lr=1e-5, minibatch_episodes=36, max_grad_norm=5.0),
        compute=ComputeSettings(device="cuda"),
        # Four learner ranks (this process + three Ray actors, one GPU each) on the Ray cluster this node
        # joined with `ray start` (docs/scale_out.md); rollout episodes stay in-process (the engine batches them).
        data_parallel=DataParallelSettings(workers=4, gpus_per_worker=1.0, cpus_per_worker=4.0, ray_address="auto"),
    ),
    max_new_tokens=512,
    # A 4B model in bf16 (8 GB) fits one GPU: no tensor parallelism; two replicas per server (an 8-GPU node
    # runs the engine on two GPUs and leaves the others to the learner ranks, docs/scale_out.md).
    engine=EngineSettings(
        max_model_len=16384, enforce_eager=False, max_lora_rank=64, tensor_parallel_size=1, data_parallel_size=2
    ),
)

PROFILES = {p.name: p for p in (SMOKE, CPU, PAPER)}


def get_profile(name: str | None = None) -> Profile:
    """A profile by name; default $SOCIALRL_PROFILE, else `cpu`."""
    name = name or os.environ.get("SOCIALRL_PROFILE", "cpu")
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown profile {name!r}; choose one of {', '.join(PROFILE_NAMES)}") from None
