"""Profiles: one setting picks the scale of every stage.

| profile | model | where | what it is for |
| --- | --- | --- | --- |
| `smoke` | tiny random Llama (SmolLM2 tokenizer) | CPU, minutes | tests and CI: the whole lineage end to end, numbers meaningless |
| `cpu` | SmolLM2-135M-Instruct (shipped GGUF) | CPU, about half an hour | a real but small run on a laptop: the Craigslist specialist (SFT warm-start, 2 PPO iterations); other domains on request |
| `paper` | Qwen3-4B-Instruct-2507, critic Qwen3-1.7B | GPUs with vLLM | the SocialRL paper's hyper-parameters (actor lr 2e-6, critic lr 1e-5, batch 144 / minibatch 36, grad-norm 5, <= 200 steps, critic warmed 30 steps) |

The YOAO group's sizes are the `yoao` sub-settings (models/yoao/config.py, one table per profile there).

Selected by $SOCIALRL_PROFILE (default `cpu`) or by the Dagster settings resource.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace

from environments import SOCIALRL_ENV_IDS
from models.training.config import LoraSettings, PPOConfig, PPOHyper, SFTSettings
from models.yoao.config import CPU_YOAO, PAPER_YOAO, SMOKE_YOAO, YoaoSettings

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
    """Held-out scenarios per domain for evaluation."""
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
    engine: EngineSettings = field(default_factory=EngineSettings)
    """Engine start-up settings."""
    yoao: YoaoSettings = field(default_factory=YoaoSettings)
    """The YOAO group's settings (models/yoao/config.py documents each profile's sizes)."""

    def __post_init__(self) -> None:
        if self.name not in PROFILE_NAMES:
            raise ValueError(f"profile name must be one of {PROFILE_NAMES}, got {self.name!r}")
        unknown = set(self.domains) - set(SOCIALRL_ENV_IDS) or set(self.sft_domains) - set(self.domains)
        if unknown:
            raise ValueError(f"unknown or untrained domains: {sorted(unknown)}")
        if self.train_scenarios < 1 or self.heldout_scenarios < 1 or self.teacher_episodes < 1:
            raise ValueError("scenario and episode counts must be >= 1")

    def ppo_for(self, env_id: str) -> PPOConfig:
        """The PPO config of one domain's specialist."""
        return replace(self.ppo, env_id=env_id, run_name=f"{env_id.removesuffix('-v0')}-specialist")


SMOKE = Profile(
    name="smoke",
    base_model="tiny-random-llama",
    critic_model="tiny-random-llama",
    sft_domains=("craigslist-v0", "marketplace-v0"),
    train_scenarios=8,
    heldout_scenarios=4,
    teacher_episodes=4,
    sft=SFTSettings(learning_rate=1e-3, max_steps=2, batch_size=4, max_length=1024, lora=LoraSettings(r=8, alpha=16)),
    ppo=PPOConfig(
        env_id="craigslist-v0",
        iterations=2,
        episodes_per_iteration=4,
        max_new_tokens=16,
        concurrency=4,
        hyper=PPOHyper(actor_lr=1e-4, critic_lr=1e-4, minibatch_episodes=4),
        lora=LoraSettings(r=8, alpha=16),
    ),
    max_new_tokens=16,
    engine=EngineSettings(max_model_len=2048, kv_cache_gib=1.0),
    yoao=SMOKE_YOAO,
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
    yoao=CPU_YOAO,
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
    sft=SFTSettings(learning_rate=1e-4, epochs=2.0, batch_size=8, max_length=4096, bf16=True),
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
    ),
    max_new_tokens=512,
    engine=EngineSettings(max_model_len=16384, enforce_eager=False, max_lora_rank=64),
    yoao=PAPER_YOAO,
)

PROFILES = {p.name: p for p in (SMOKE, CPU, PAPER)}


def get_profile(name: str | None = None) -> Profile:
    """A profile by name; default $SOCIALRL_PROFILE, else `cpu`."""
    name = name or os.environ.get("SOCIALRL_PROFILE", "cpu")
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown profile {name!r}; choose one of {', '.join(PROFILE_NAMES)}") from None
