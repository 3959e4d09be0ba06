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
from models.training.config import LoraSettings, PPOConfig, PPOHyper, SFTSettings

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
class ToMSettings:
    """The Theory-of-Mind study (models/socialrl/tom.py): four arms per domain on the same held-out episodes."""

    domains: tuple[str, ...] = SOCIALRL_ENV_IDS
    """Domains the study runs on (`tom_job` materialises these partitions)."""
    teacher_episodes: int = 32
    """Code-teacher episodes per domain whose traces train both students (ACT-only and full scaffold)."""
    heldout_scenarios: int = 8
    """Held-out scenarios per domain; every arm plays each against every counterpart in the same seat."""
    sft: SFTSettings | None = None
    """Settings of both students' LoRA SFT, the same for both so that only the trace format differs
    (None: the profile's warm-start settings, `Profile.sft`)."""
    sft_eval_conversations: int = 2
    """Held-out teacher conversations the SFT loss is measured on before and after training (kept small:
    the trainer evaluates them in full twice)."""
    max_new_tokens: int = 160
    """Most tokens per reply in every arm (the scaffold needs room for INFER and ANTICIPATE; the same
    budget for all four arms keeps them comparable)."""

    def __post_init__(self) -> None:
        unknown = set(self.domains) - set(SOCIALRL_ENV_IDS)
        if unknown or not self.domains:
            raise ValueError(f"ToM domains must be a non-empty subset of {SOCIALRL_ENV_IDS}, got {self.domains}")
        if self.teacher_episodes < 2 or self.heldout_scenarios < 2:
            raise ValueError("the ToM study needs >= 2 teacher episodes and >= 2 held-out scenarios")
        if self.sft_eval_conversations < 0 or self.max_new_tokens < 1:
            raise ValueError("sft_eval_conversations must be >= 0 and max_new_tokens >= 1")


@dataclass(frozen=True)
class RedTeamSettings:
    """The privacy red team (models/socialrl/behaviour.py): policies against adversarial extractors."""

    scenarios: int = 8
    """Whimsical-privacy scenarios per domain (SRBench marketplace and calendar; generated ones without the data)."""
    max_new_tokens: int = 128
    """Most tokens per reply of the policy under attack."""

    def __post_init__(self) -> None:
        if self.scenarios < 2 or self.max_new_tokens < 1:
            raise ValueError("the red team needs >= 2 scenarios per domain and max_new_tokens >= 1")


@dataclass(frozen=True)
class LeaderboardSettings:
    """The endpoint leaderboard (models/evaluation/leaderboard.py)."""

    heldout_scenarios: int = 8
    """Held-out scenarios per SocialRL domain (each played against every evaluation counterpart)."""
    red_black_opponents: tuple[str, ...] = ("always_defect", "tit_for_tat", "always_cooperate")
    """Scripted Red-Black opponent teams (agents/yoao/red_black_strategies.py) the model's team meets."""
    red_black_games: int = 2
    """Held-out-frame games per opponent."""
    red_black_team_size: int = 5
    """Seats per Red-Black team; the model takes every seat of its team."""
    max_new_tokens: int = 128
    """Most tokens per reply."""
    request_timeout_s: float = 120.0
    """Seconds one call may take before it is retried."""
    request_retries: int = 2
    """Retries of a call that failed in transport or with 408/429/5xx."""
    concurrency: int = 8
    """Episodes in flight at once per domain (the six domains and Red-Black run together)."""

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {self.concurrency}")
        if self.heldout_scenarios < 2 or self.red_black_games < 1 or self.red_black_team_size < 1:
            raise ValueError("leaderboard needs >= 2 held-out scenarios, >= 1 Red-Black game and team size >= 1")
        if self.request_timeout_s <= 0 or self.request_retries < 0 or self.max_new_tokens < 1:
            raise ValueError("request_timeout_s must be > 0, request_retries >= 0, max_new_tokens >= 1")


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
    tom: ToMSettings = field(default_factory=ToMSettings)
    """The Theory-of-Mind study."""
    red_team: RedTeamSettings = field(default_factory=RedTeamSettings)
    """The privacy red team."""
    leaderboard: LeaderboardSettings = field(default_factory=LeaderboardSettings)
    """The endpoint leaderboard."""

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
    tom=ToMSettings(
        teacher_episodes=4,
        heldout_scenarios=2,
        # Two students per domain: the smallest SFT that trains an adapter (numbers meaningless on this model).
        sft=SFTSettings(
            learning_rate=1e-3,
            max_steps=2,
            batch_size=1,
            grad_accumulation=1,
            max_length=512,
            eval_windows=0,
            lora=LoraSettings(r=8, alpha=16),
        ),
        sft_eval_conversations=0,
        max_new_tokens=24,
    ),
    red_team=RedTeamSettings(scenarios=2, max_new_tokens=16),
    leaderboard=LeaderboardSettings(
        heldout_scenarios=2,
        red_black_opponents=("always_defect",),
        red_black_games=1,
        red_black_team_size=2,
        max_new_tokens=16,
    ),
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
    # One domain in about an hour on 2 cores (docs/tom.md): two students with the warm-start's SFT settings
    # and four arms x 8 held-out scenarios x 3 counterparts = 96 evaluation episodes.
    tom=ToMSettings(
        domains=("craigslist-v0",),
        teacher_episodes=32,
        heldout_scenarios=8,
        # Packed SFT (models/training/sft.py): 24 steps of 4 x 2048 tokens, about 1.5 passes over the
        # scaffolded traces (~2,000 tokens per episode) and 2.5 over the ACT-only ones.
        sft=SFTSettings(
            learning_rate=3e-4, max_steps=24, batch_size=1, grad_accumulation=4, max_length=2048, bf16=True
        ),
        max_new_tokens=128,
    ),
    red_team=RedTeamSettings(scenarios=6, max_new_tokens=64),
    leaderboard=LeaderboardSettings(heldout_scenarios=4, red_black_games=1, red_black_team_size=5, max_new_tokens=64),
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
    tom=ToMSettings(
        teacher_episodes=1000,
        heldout_scenarios=200,
        sft_eval_conversations=32,
        max_new_tokens=512,
    ),
    red_team=RedTeamSettings(scenarios=25, max_new_tokens=512),
    leaderboard=LeaderboardSettings(
        heldout_scenarios=200,
        red_black_opponents=(
            "always_defect",
            "early_exploiter_no_recovery",
            "defect_critical",
            "critical_exploiter",
            "late_betrayer",
            "mid_exploiter",
            "early_exploiter",
            "tit_for_tat",
            "mostly_cooperate",
            "always_cooperate",
        ),
        red_black_games=4,
        max_new_tokens=512,
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
