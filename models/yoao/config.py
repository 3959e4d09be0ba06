"""YOAO settings (one typed sub-dataclass of the profile: `Profile.yoao`), in a module without torch.

| profile | model | Red-Black | experiments | Sugarscape | what it is for |
| --- | --- | --- | --- | --- | --- |
| `smoke` | tiny random Llama | teams of 3, 2 rounds | k in {0, 1, 3}, mute, persistence, prompting baseline, 2 games per arm and frame | 6x6, 5 agents, 3 ticks | the test suite: every asset end to end, numbers meaningless |
| `cpu` | SmolLM2-135M-Instruct | teams of 5, 5 rounds (the last x3) | k = 0, 1, 3, 5, 1 muted, 3 removed, the teacher and the prompted untrained model in the seed's seat, on one held-out frame (trade_war), 16 paired games per arm | left to the paper profile (the reason is in the result file) | `make yoao` on a 2-core machine, aimed at 75 min from a fresh clone; the measured run took longer (docs/yoao.md) |
| `paper` | Qwen3-14B (the paper's seed and teammates) | the paper's game | k = 0..5, mute with 1, 3, 5 seeds, persistence, prompting baseline, 100 games per arm and frame | 20x20 torus, 100 agents, 100 ticks | the paper's sizes (documented, not run here) |

Frames are validated by name when the settings are made: a frame that does not exist is an error naming it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from agents.yoao.red_black_strategies import PAPER_OPPONENTS
from agents.yoao.red_black_teacher import DEFAULT_TUTORS, PERSUADABLE, TUTOR_KINDS
from environments.yoao.red_black import DISCUSSION_ORDERS, list_frames, load_frame
from models.training.config import LoraSettings, SFTSettings

SEED_PLACEMENTS = ("first", "spread")
TRACE_TEAMMATES = ("tutors", "followers")
ADVOCATE_KINDS = ("argue", "vote_only", "long", "selfish")
"""The warm-up's scripted advocates (`YoaoSettings.warmup_advocates`; built by `models.yoao.seed.traces.advocate`)."""
"""Who may fill the seed-trace games' other team-A seats (`YoaoSettings.trace_teammates`)."""
ENGINE = "engine"
"""`Endpoint.base_url` value meaning: the run's own engine, through the rollout proxy."""


@dataclass(frozen=True)
class Endpoint:
    """An OpenAI-compatible model: a remote teacher candidate or the seed-data judge."""

    name: str
    """Label in tables and reports."""
    base_url: str
    """OpenAI base URL (http(s)://.../v1), or "engine" for the run's own engine (through the proxy)."""
    model: str
    """Model name to request."""
    api_key_env: str | None = None
    """Environment variable holding the bearer token (never the token itself)."""

    def __post_init__(self) -> None:
        if not self.name or not self.model:
            raise ValueError("an endpoint needs a name and a model")
        if self.base_url != ENGINE and not self.base_url.startswith(("http://", "https://")):
            raise ValueError(
                f"endpoint {self.name}: base_url must be an http(s) URL or 'engine', got {self.base_url!r}"
            )

    def url(self, engine_url: str) -> str:
        """The base URL to call, given the run's engine (proxy) URL."""
        return engine_url if self.base_url == ENGINE else self.base_url


@dataclass(frozen=True)
class SugarscapeSettings:
    """The zero-shot Sugarscape test (environments/yoao/sugarscape_core.py's world, LLM traders)."""

    width: int = 20
    """Grid columns (the paper: 20)."""
    height: int = 20
    """Grid rows (the paper: 20)."""
    n_agents: int = 100
    """Initial population (the paper: 100)."""
    max_ticks: int = 100
    """Ticks per world (the paper: 100)."""
    vision: tuple[int, int] = (1, 6)
    """Sight range drawn per agent (2 x high must stay below the grid side)."""
    sugar_endowment: tuple[int, int] = (5, 25)
    """Initial sugar drawn per agent."""
    spice_endowment: tuple[int, int] = (5, 25)
    """Initial spice drawn per agent."""
    max_age: tuple[int, int] = (60, 100)
    """Age of death by old age drawn per agent."""
    seed_fractions: tuple[float, ...] = (0.0, 0.2, 0.5, 1.0)
    """Shares of seed agents compared (the rest are untrained)."""
    worlds: int = 1
    """Worlds per seed fraction (seeds 0.. worlds-1); intervals resample worlds when there are two or more."""
    max_new_tokens: int = 48
    """Most tokens per trader reply."""
    concurrency: int = 32
    """Encounters in flight at once (disjoint pairs of a tick)."""
    skip: str = ""
    """Why this profile does not run Sugarscape (the result file says so); empty: it runs."""

    def __post_init__(self) -> None:
        if not self.seed_fractions or any(not 0.0 <= f <= 1.0 for f in self.seed_fractions):
            raise ValueError(f"seed_fractions must be shares in [0, 1], got {self.seed_fractions}")
        if self.worlds < 1 or self.n_agents < 2 or self.max_ticks < 1:
            raise ValueError("worlds >= 1, n_agents >= 2 and max_ticks >= 1 are needed")


@dataclass(frozen=True)
class YoaoSettings:
    """Everything the YOAO group reads from the profile."""

    model: str | None = None
    """Base model of seeds and teammates (None: the profile's `base_model`); the engine must serve it."""
    train_frames: tuple[str, ...] = (
        "baseline",
        "pandemic_vaccines",
        "climate_cooperation",
        "agi_safety",
        "standards_coordination",
        "election_crisis",
    )
    """Frames of teacher selection, seed traces and the format warm-up (the training split only)."""
    heldout_frames: tuple[str, ...] = ("trade_war", "gpu_contention")
    """Frames of every experiment (the held-out split only); also the experiments' partitions."""
    opponents: tuple[str, ...] = PAPER_OPPONENTS
    """Scripted opponent teams, cycled over the games."""
    team_size: int = 5
    """Seats per team (the paper: 5)."""
    rounds: int = 10
    """Rounds per game (the paper: 10, with rounds 5, 8, 10 counting x3, x5, x10)."""
    discussion_order: str = "rotating"
    """The paper's sequential discussion: one teammate at a time, the order rotating every round."""
    max_invalid_retries: int = 2
    """Retries of an off-format answer before the seat abstains (votes) or stays silent (opinions)."""
    max_new_tokens: int = 64
    """Most tokens per LLM reply."""
    temperature: float = 0.7
    """Sampling temperature of every LLM player."""
    concurrency: int = 16
    """Games in flight at once (their calls batch in the engine)."""
    selection_games: int = 10
    """Games per teacher candidate in teacher selection (training frames x opponents, cycled)."""
    local_candidates: bool = True
    """Also try the engine's base model as a teacher, with and without the cooperative meta-prompt."""
    teacher_endpoints: tuple[Endpoint, ...] = ()
    """Remote OpenAI-compatible teacher candidates (a failing one is skipped with its reason)."""
    max_abstention_rate: float = 0.2
    """A teacher candidate whose votes end as abstentions more often than this is not eligible: a tie counts
    as BLACK, so abstaining would look like cooperation."""
    trace_games: int = 100
    """Seed-trace games (the paper: 10 opponents x 5 frames, 10,000 games)."""
    trace_teacher_seats: int = 1
    """Teacher seats per traced game; the other seats of the team are `trace_teammates`."""
    trace_teammates: str = "tutors"
    """Who fills team A's other seats in the seed-trace games: "tutors" (the warm-up's tutors, the teammates the
    seed's untrained players learned from: they lean selfish, so the data shows the teacher arguing against RED
    majorities) or "followers" (code followers that first state RED or BLACK, then follow the team's majority)."""
    judge: Endpoint | None = None
    """Optional LLM judge of the seed-data filter (None: the rule-based classifier alone)."""
    warmup_games: int = 40
    """Format-tutor games of the untrained teammates' format-only warm-up (with `warmup_mirror`, in pairs: a
    game and its mirror)."""
    warmup_tutors: tuple[str, ...] = DEFAULT_TUTORS
    """Tutor kinds of the warm-up data (agents/yoao/red_black_teacher.py), cycled over seats and games; the
    default: `persuadable` teammates who lean selfish and weigh grounded reasons
    (agents/yoao/persuasion.py); the vote-following mix is `VOTE_FOLLOWING_TUTORS`."""
    warmup_reason_rate: float = 0.5
    """Share of the warm-up tutors' statements that carry reasons (persuadable: one or two grounded reasons for
    the stated choice; vote-following kinds: one short reason, either colour alike)."""
    warmup_filler_rate: float = 0.25
    """Share of the persuadable tutors' statements that carry one or two long sentences without a reason, so
    that the data shows length alone moving nobody (the rest are bare votes; ignored by the vote-following kinds)."""
    warmup_priors: tuple[float, ...] = ()
    """The warm-up tutors' priors (P(BLACK) with nothing heard), one drawn per seat; empty: the kind's own
    (`PERSUADABLE_PRIORS`, or `TUTOR_PRIORS` for the vote-following kinds)."""
    warmup_mirror: bool = False
    """Play every warm-up game with its mirror (every prior draw's colour swapped), which balances the data's
    votes between colours by construction (for the vote-following kinds); not with persuadable tutors, whose selfish lean
    is the point and whose reasons are not symmetric."""
    warmup_advocate_share: float = 0.0
    """Share of the warm-up games with a scripted advocate in one team-A seat (not traced, so never trained on;
    its seat rotates over games), so the data shows the tutors answering a minority voice: with `warmup_advocates`
    cycled over those games. Without it, the tutors among themselves vote with their stated majority 96% of
    the time, and a player that follows the majority imitates the data about as well as one that weighs reasons."""
    warmup_advocates: tuple[str, ...] = ("argue", "vote_only", "long", "selfish")
    """Advocate kinds (`ADVOCATE_KINDS`, built by `models.yoao.seed.traces.advocate`): BLACK with grounded reasons, the same stating its
    vote only, BLACK with long sentences that give no reason, RED with grounded reasons; all from the tutors'
    own sentence pools (agents/yoao/persuasion.py), never the seed teacher's."""
    heldout_share: float = 0.1
    """Share of the warm-up games and of the seed conversations held out of SFT: their loss is the learning
    curve (`SFTSettings.checkpoint_every`) and their turns are replayed by `yoao_warmstart_imitation`."""
    imitation_conversations: int = 5
    """Held-out conversations per adapter whose every turn `yoao_warmstart_imitation` replays."""
    listener_games: int = 8
    """Paired audit games per arm and held-out frame whose untrained vote turns the listener probe asks the format
    warm-up (models/yoao/listening.py; in `yoao_warmstart_imitation`)."""
    seed_audit_games: int = 16
    """The incentive audit's games (its first this many) the trained seed plays in the seed's seat among the
    tutors, beside the audit's code arms (models/yoao/seed_audit.py; in `yoao_warmstart_imitation`)."""
    warmup_sft: SFTSettings = field(default_factory=SFTSettings)
    """SFT of the format warm-up adapter (from the base model)."""
    seed_sft: SFTSettings = field(default_factory=SFTSettings)
    """SFT of the seed adapter (continuing the warm-up adapter)."""
    seed_counts: tuple[int, ...] = (0, 1, 2, 3, 4, 5)
    """Seeds per team compared by `propagation_by_seed_count`."""
    seed_placement: str = "first"
    """Seats the k seeds take: "first" (A0..A{k-1}) or "spread" (evenly spaced over the team)."""
    games_per_arm: int = 10
    """Games per arm and held-out frame (opponents cycled; the same games for every arm: paired)."""
    mute_seed_counts: tuple[int, ...] = (1,)
    """Seed counts of the mute test."""
    persistence_seeds: int = 3
    """Seeds of the persistence test (the paper: three)."""
    persistence_rounds: int = 5
    """Rounds the seeds stay before untrained members take their seats."""
    baseline_seed_count: int = 1
    """Seats given to the teacher / the prompted base model in the prompting baseline."""
    prompting_baseline: bool = True
    """Play the prompting baseline (teacher and prompted base model in the seed's seats); off: the asset
    records that it was not requested."""
    batch_arms: bool = False
    """`propagation_by_seed_count` also plays the mute and persistence arms (and the prompting baseline's,
    when it has the teacher) in the same batch, so all their games' calls batch in the engine; the later
    experiments reuse them."""
    sugarscape: SugarscapeSettings = field(default_factory=SugarscapeSettings)
    """The zero-shot Sugarscape test."""
    kv_cache_gib: float | None = None
    """CPU KV cache of the YOAO engine in GiB (None: the profile's `engine.kv_cache_gib`). Every seat of every
    game in flight extends its own conversation, so a cache that holds them all lets each call reuse its
    previous prompt instead of recomputing it (evicted prefixes made the cpu run prefill-bound)."""

    max_model_len: int | None = None
    """Context length of the YOAO engine in tokens (None: the profile's `engine.max_model_len`). Every seat's
    call carries its whole game so far: a call past the context is refused, the seat's answer counts as
    invalid and, retried, it abstains or stays silent, in the last rounds, where the long games are."""

    def __post_init__(self) -> None:
        if self.kv_cache_gib is not None and self.kv_cache_gib <= 0:
            raise ValueError(f"kv_cache_gib must be > 0 or None, got {self.kv_cache_gib}")
        if self.max_model_len is not None and self.max_model_len < 64:
            raise ValueError(f"max_model_len must be >= 64 or None, got {self.max_model_len}")
        for name in (*self.train_frames, *self.heldout_frames):
            load_frame(name)  # a frame that does not exist raises FrameError naming it
        wrong = [f for f in self.train_frames if f not in list_frames("train")]
        wrong += [f for f in self.heldout_frames if f not in list_frames("heldout")]
        if wrong:
            raise ValueError(
                f"frames in the wrong split: {wrong} (train_frames must be training frames, heldout_frames held out)"
            )
        if not self.train_frames or not self.heldout_frames:
            raise ValueError("train_frames and heldout_frames must not be empty")
        from agents.yoao.red_black_strategies import STRATEGIES

        unknown = [o for o in self.opponents if o not in STRATEGIES]
        if unknown or not self.opponents:
            raise ValueError(f"unknown opponents {unknown}; known: {', '.join(sorted(STRATEGIES))}")
        if self.discussion_order not in DISCUSSION_ORDERS:
            raise ValueError(f"discussion_order must be one of {DISCUSSION_ORDERS}, got {self.discussion_order!r}")
        if self.seed_placement not in SEED_PLACEMENTS:
            raise ValueError(f"seed_placement must be one of {SEED_PLACEMENTS}, got {self.seed_placement!r}")
        counts = (*self.seed_counts, *self.mute_seed_counts, self.persistence_seeds, self.baseline_seed_count)
        if not self.seed_counts or any(not 0 <= k <= self.team_size for k in counts):
            raise ValueError(f"seed counts must lie in [0, team_size={self.team_size}], got {counts}")
        if 0 not in self.seed_counts:
            raise ValueError("seed_counts must include 0 (the untrained baseline every arm is compared with)")
        if not 1 <= self.persistence_rounds < self.rounds:
            raise ValueError(f"persistence_rounds must lie in [1, rounds), got {self.persistence_rounds}")
        positive = {
            "team_size": self.team_size,
            "rounds": self.rounds,
            "selection_games": self.selection_games,
            "trace_games": self.trace_games,
            "trace_teacher_seats": self.trace_teacher_seats,
            "warmup_games": self.warmup_games,
            "games_per_arm": self.games_per_arm,
            "concurrency": self.concurrency,
            "max_new_tokens": self.max_new_tokens,
        }
        bad = {k: v for k, v in positive.items() if v < 1}
        if bad:
            raise ValueError(f"must be >= 1: {bad}")
        if self.trace_teammates not in TRACE_TEAMMATES:
            raise ValueError(f"trace_teammates must be one of {TRACE_TEAMMATES}, got {self.trace_teammates!r}")
        if self.trace_teacher_seats > self.team_size:
            raise ValueError("trace_teacher_seats cannot exceed team_size")
        if not 0.0 <= self.max_abstention_rate <= 1.0:
            raise ValueError(f"max_abstention_rate must lie in [0, 1], got {self.max_abstention_rate}")
        unknown_tutors = [k for k in self.warmup_tutors if k not in TUTOR_KINDS]
        if unknown_tutors or not self.warmup_tutors:
            raise ValueError(f"unknown warm-up tutors {unknown_tutors}; known: {', '.join(TUTOR_KINDS)}")
        rates = (self.warmup_reason_rate, self.warmup_filler_rate)
        if not all(0.0 <= r <= 1.0 for r in rates) or sum(rates) > 1.0 or not 0.0 < self.heldout_share < 1.0:
            raise ValueError(
                "warmup_reason_rate and warmup_filler_rate must lie in [0, 1] with a sum <= 1, and heldout_share "
                "in (0, 1)"
            )
        if not all(0.0 <= p <= 1.0 for p in self.warmup_priors):
            raise ValueError(f"warmup_priors must be probabilities, got {self.warmup_priors}")
        if not 0.0 <= self.warmup_advocate_share <= 1.0 or not self.warmup_advocates:
            raise ValueError(
                f"warmup_advocate_share must lie in [0, 1] and warmup_advocates be non-empty, got "
                f"{self.warmup_advocate_share}, {self.warmup_advocates}"
            )
        unknown_advocates = [k for k in self.warmup_advocates if k not in ADVOCATE_KINDS]
        if unknown_advocates:
            raise ValueError(f"unknown warm-up advocates {unknown_advocates}; known: {', '.join(ADVOCATE_KINDS)}")
        if self.warmup_advocate_share and self.warmup_mirror:
            raise ValueError("warmup_mirror cannot mirror a game with an advocate (its choice is not drawn)")
        if self.warmup_mirror and PERSUADABLE in self.warmup_tutors:
            raise ValueError("warmup_mirror cannot mirror persuadable tutors (their reasons are not symmetric)")
        if self.imitation_conversations < 1:
            raise ValueError(f"imitation_conversations must be >= 1, got {self.imitation_conversations}")
        if min(self.listener_games, self.seed_audit_games) < 2:
            raise ValueError(f"listener and seed audit games must be >= 2 (paired), got {self.listener_games}, "
                             f"{self.seed_audit_games}")  # fmt: skip

    def engine_overrides(self) -> dict[str, float | int]:
        """The YOAO engine's fields beyond the profile's engine settings: `kv_cache_gib` and `max_model_len`
        where set."""
        wanted = {"kv_cache_gib": self.kv_cache_gib, "max_model_len": self.max_model_len}
        return {name: value for name, value in wanted.items() if value is not None}

    def resolved(self, base_model: str) -> YoaoSettings:
        """These settings with `model` set (None: the profile's `base_model`): what the seeds train on and the
        YOAO engine serves."""
        return self if self.model else replace(self, model=base_model)


SMOKE_YOAO_SFT = SFTSettings(
    learning_rate=1e-3,
    max_steps=2,
    batch_size=4,
    max_length=512,
    trained_positions_only=True,
    lora=LoraSettings(r=8, alpha=16),
)
"""The smoke warm-up's and seed's SFT: two steps, the LM head at the trained positions only, as the cpu profile
trains (TRL's fused head scores every position on the CPU)."""

SMOKE_YOAO = YoaoSettings(
    heldout_frames=("trade_war",),
    opponents=("always_defect", "tit_for_tat", "always_cooperate"),
    team_size=3,
    rounds=2,
    max_new_tokens=16,
    selection_games=2,
    trace_games=6,
    judge=Endpoint(
        "engine-judge", ENGINE, "base"
    ),  # exercises the judge path (the tiny model's answers are unreadable)
    warmup_games=6,
    warmup_sft=SMOKE_YOAO_SFT,
    seed_sft=SMOKE_YOAO_SFT,
    seed_counts=(0, 1, 3),
    games_per_arm=2,
    listener_games=2,
    seed_audit_games=2,
    persistence_seeds=1,
    persistence_rounds=1,
    sugarscape=SugarscapeSettings(
        width=6,
        height=6,
        n_agents=5,
        max_ticks=3,
        vision=(1, 2),
        max_age=(30, 40),
        max_new_tokens=16,
    ),
)
"""The test suite's sizes: every asset on the tiny model in a few minutes (numbers meaningless)."""

CPU_SUGARSCAPE_SKIP = (
    "left to the paper profile: zero-shot SmolLM2-135M traders never completed a trade in the last cpu run "
    "(about 75% invalid actions, 0 trades at every seed share, its longest step at 21.0 min; "
    "benchmarks/results/yoao_cpu_coinflip.json, docs/yoao.md), and a "
    "Sugarscape format warm-up (traces, SFT, worlds) does not fit the cpu run's 75 minutes beside 16 paired "
    "Red-Black games per arm"
)
"""Why the cpu profile does not run Sugarscape (written into the result file)."""

CPU_YOAO = YoaoSettings(
    # Sized for the propagation design of docs/yoao.md: the paper's team of 5 on one held-out frame (trade_war), 5-round
    # games (the last counts x3), 16 paired games per arm for k = 0, 1, 3, 5, 1 muted, 3 removed after round 2
    # and the prompting baseline (the code teacher and the prompted untrained model in the seed's seat): 128
    # games in one batch (`batch_arms`, 20 in flight); k = 2, 4 and Sugarscape are left to the paper profile.
    # The format warm-up and the seed are trained on whole conversations (1,024-token windows) with the held-out
    # loss every 6 steps, the LM head at the trained positions only (as stage 1's warm-start): the warm-up for 48
    # steps and the seed for 60 (at 24 and 36 their last six steps still gained 8% and 7%; the learning rate
    # decays linearly to 0, so more steps flatten the end of the curve; at 48 the warm-up's still gained 6%). The
    # games are prefill-bound: the 12 GiB KV cache holds the 100 conversations in flight to their last round, so each call recomputes only what is new since its
    # last (a run with it served 87% of prompt tokens from the prefix cache). The context is 4,096 tokens: at
    # 2,048, 4% of a run's calls were refused, all in rounds 3-5 and most beside seeds, whose turns are longest.
    heldout_frames=("trade_war",),
    rounds=5,
    persistence_rounds=2,
    max_new_tokens=64,
    concurrency=20,
    selection_games=4,
    local_candidates=False,
    trace_games=60,
    # 48 warm-up games, half with an advocate: with the same 48 SFT steps, the listener probe found this warm-up
    # no longer moved by long text without reasons (long - vote only in its votes +0.02 against +0.09 for 12
    # games without advocates) and moved by an argument about as much (benchmarks/results/yoao_listener_cpu.json).
    warmup_games=48,
    warmup_advocate_share=0.5,
    warmup_sft=SFTSettings(
        learning_rate=1e-3, max_steps=48, batch_size=1, grad_accumulation=4, max_length=1024, bf16=True,
        checkpoint_every=6, eval_windows=8, trained_positions_only=True,
    ),
    seed_sft=SFTSettings(
        learning_rate=1e-3, max_steps=60, batch_size=1, grad_accumulation=4, max_length=1024, bf16=True,
        checkpoint_every=6, eval_windows=8, trained_positions_only=True,
    ),
    kv_cache_gib=12.0,
    max_model_len=4096,
    seed_counts=(0, 1, 3, 5),
    listener_games=4,
    mute_seed_counts=(1,),
    persistence_seeds=3,
    games_per_arm=16,
    prompting_baseline=True,
    batch_arms=True,
    sugarscape=SugarscapeSettings(
        width=8,
        height=8,
        n_agents=10,
        max_ticks=8,
        vision=(1, 3),
        sugar_endowment=(2, 8),
        spice_endowment=(2, 8),
        max_new_tokens=48,
        skip=CPU_SUGARSCAPE_SKIP,
    ),
)  # fmt: skip
"""The cpu profile's sizes (SmolLM2-135M seeds among SmolLM2-135M teammates)."""

PAPER_YOAO = YoaoSettings(
    model="Qwen/Qwen3-14B",
    max_new_tokens=512,
    concurrency=128,
    selection_games=50,
    trace_games=10_000,
    warmup_games=500,
    listener_games=16,
    warmup_sft=SFTSettings(
        learning_rate=1e-4, epochs=1.0, batch_size=8, max_length=4096, bf16=True, checkpoint_every=50
    ),
    seed_sft=SFTSettings(
        learning_rate=1e-4,
        epochs=2.0,
        batch_size=8,
        max_length=4096,
        bf16=True,
        lora=LoraSettings(r=64, alpha=128),
        checkpoint_every=100,
    ),
    games_per_arm=100,
    mute_seed_counts=(1, 3, 5),
    sugarscape=SugarscapeSettings(worlds=5, max_new_tokens=256, concurrency=128),
)
"""The paper's sizes (Qwen3-14B + LoRA seed; 10,000 teacher games; 20x20 Sugarscape with 100 agents)."""
