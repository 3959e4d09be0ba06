"""The YOAO propagation experiments on one held-out frame (the experiments' partition), as plain functions.

| experiment | arms (team A; team B is a scripted opponent team) | compared on |
| --- | --- | --- |
| `propagation_by_seed_count` | k = 0..5 seeds among untrained teammates | untrained cooperation (the primary outcome), team cooperation, decided cooperation, welfare, influence of the first seed; k vs 0 paired |
| `propagation_mute` | k muted seeds (they vote, but only say "I vote BLACK." in the frame's words) | muted k vs unmuted k and vs k = 0, paired |
| `propagation_persistence` | `persistence_seeds` seeds for the first `persistence_rounds` rounds, then untrained members in their seats | cooperation in the rounds after the removal, vs the same seeds kept all game and vs k = 0, paired |
| `propagation_prompting_baseline` | the teacher, or the untrained model with the cooperative meta-prompt, in the seed's place (when `prompting_baseline`) | cooperation vs the SFT seed and vs k = 0, paired |

Every comparison is made twice, on team cooperation (`comparisons`) and on the untrained players' cooperation
(`untrained_comparisons`). With `batch_arms`, `propagation_by_seed_count` also plays the other experiments'
arms (`later_arms`) in its batch, so all the games' calls batch in the engine, and those experiments reuse
them (their games are stored under their own experiment's name).

`ExperimentSetup.players` replaces the LLM players (role -> maker), e.g. by code agents in tests. Every arm plays the same games (`games.game_specs`: `games_per_arm` per frame, opponents cycled), so arms are
compared by paired differences over games. Arms an experiment needs that `propagation_by_seed_count` already
played (k = 0, an unmuted k) are taken from its result, not replayed. Every game goes to the `yoao_games`
table and the episode tables when a store is given.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agents.llm_agent import LLMAgent
from agents.yoao.llm_players import SwapAgent, red_black_config
from agents.yoao.red_black_strategies import MuteWrapper
from environments.core.runtime import Agent
from environments.yoao.red_black import load_frame
from models.display import fixed
from models.evaluation.stats import Estimate, mean_estimate
from models.records import rows_for
from models.storage import TableStore
from models.yoao.config import YoaoSettings
from models.yoao.games import (
    Arm,
    ArmPlay,
    ArmSummary,
    GameRecord,
    Maker,
    game_specs,
    paired_cooperation_difference,
    paired_untrained_difference,
    play_arms,
    summarise,
    summarise_records,
    team_roles,
)
from models.yoao.seed import TeacherChoice

PROMPTING_BASELINE_OFF = "not requested (yoao.prompting_baseline is off in this profile; the paper profile plays it)"


@dataclass(frozen=True)
class PlayerModels:
    """Where the LLM players are served: model names behind one OpenAI endpoint (the proxy)."""

    base_url: str
    untrained: str
    """The untrained teammates' model: the base model with the format-only warm-up adapter."""
    seed: str
    """The seed adapter."""
    teacher: TeacherChoice | None = None
    """The selected teacher (the prompting baseline)."""
    engine_url: str = ""
    """What "engine" means in a teacher's endpoint (default: `base_url`)."""
    api_key: str | None = field(default=None, repr=False)
    """The token of `base_url` and `engine_url` (the rollout proxy's per-run token); None = none."""


def llm_maker(
    base_url: str, model: str, settings: YoaoSettings, *, api_key: str | None = None, cooperative: bool = False
) -> Maker:
    """(seat, seed) -> an LLM Red-Black player served as `model` at `base_url` with the game's sampling (the
    seat's seed, `settings`' temperature and token limit); `cooperative` appends the meta-prompt."""

    def make(seat: str, seed: int) -> Agent:
        config = red_black_config(
            base_url,
            model,
            seed=seed,
            cooperative_prompt=cooperative,
            max_tokens=settings.max_new_tokens,
            temperature=settings.temperature,
            name=f"{model}{'+meta-prompt' if cooperative else ''}",
            api_key=api_key,
        )
        return LLMAgent(config)

    return make


def makers(models: PlayerModels, settings: YoaoSettings) -> dict[str, Maker]:
    """Role -> (seat, seed) -> agent, for every role of models/yoao/games.py."""

    def llm(model: str, cooperative: bool = False) -> Maker:
        return llm_maker(models.base_url, model, settings, api_key=models.api_key, cooperative=cooperative)

    untrained, seed = llm(models.untrained), llm(models.seed)
    out: dict[str, Maker] = {
        "untrained": untrained,
        "seed": seed,
        "muted": lambda seat, s: MuteWrapper(seed(seat, s)),
        "prompted": llm(models.untrained, cooperative=True),
        "swap": lambda seat, s: SwapAgent(seed(seat, s), untrained(seat, s + 1), settings.persistence_rounds),
    }
    if models.teacher is not None:
        out["teacher"] = models.teacher.maker(models.engine_url or models.base_url, settings, models.api_key)
    return out


@dataclass(frozen=True, kw_only=True)
class ExperimentResult:
    """One experiment on one held-out frame."""

    experiment: str
    frame: str
    profile: str
    seed_version: int | None
    """The seed adapter's registry version (results of other versions are not pooled with these)."""
    arms: tuple[ArmSummary, ...]
    games: tuple[GameRecord, ...]
    """Every game of every arm played here or reused from `propagation_by_seed_count` (by `arm`)."""
    comparisons: dict[str, Estimate]
    """Paired differences in cooperation (first arm minus second), e.g. "k=1 vs k=0"."""
    window: dict[str, Estimate]
    """Cooperation over the rounds after the seeds' removal (persistence only; else empty)."""
    llm_calls: int
    """LLM calls of the games played here."""
    wall_s: float
    removal_round: int | None = None
    """Persistence: the last round with the seeds (the window is the rounds after it)."""
    untrained_comparisons: dict[str, Estimate] = field(default_factory=dict)
    """Paired differences in the untrained players' cooperative-vote rate (the primary outcome), named as
    `comparisons` (over the rounds after the removal for an arm whose seeds leave)."""
    ahead: tuple[GameRecord, ...] = ()
    """Games of later experiments' arms played in this experiment's batch (`YoaoSettings.batch_arms`)."""
    ahead_arms: tuple[Arm, ...] = ()
    skipped: str = ""
    """Why the experiment was not played (empty: it was)."""

    @property
    def calls_per_s(self) -> float:
        return self.llm_calls / self.wall_s if self.wall_s else math.nan

    def arm(self, name: str) -> ArmSummary:
        for arm in self.arms:
            if arm.arm == name:
                return arm
        raise KeyError(f"{self.experiment}: no arm {name!r}; arms: {[a.arm for a in self.arms]}")

    def records(self, arm: str) -> list[GameRecord]:
        return [g for g in self.games if g.arm == arm]

    def table_markdown(self) -> str:
        if self.skipped:
            return f"not played: {self.skipped}"
        lines = [
            "| arm | games | untrained cooperation [95% CI] | team cooperation [95% CI] | decided coop. | welfare | "
            "influence | ties | abstain (untrained / seed) | invalid votes |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for a in self.arms:
            c, u = a.cooperation, a.untrained_cooperation
            lines.append(
                f"| {a.arm} | {a.games} | {u.text('.2f')} | "
                f"{c.text('.2f')} | {_f(a.decided_cooperation.mean)} | "
                f"{_f(a.welfare.mean)} | {_f(a.influence.mean)} | {_f(a.tie_rate)} | "
                f"{_f(a.untrained_abstention_rate)} / {_f(a.seed_abstention_rate)} | {_f(a.invalid_vote_rate)} |"
            )
        for name, e in self.untrained_comparisons.items():
            lines.append(f"\nuntrained, {name}: {e.text('.2f')} (n={e.n} paired games)")
        for name, e in self.comparisons.items():
            lines.append(f"\nteam, {name}: {e.text('.2f')} (n={e.n} paired games)")
        for name, e in self.window.items():
            lines.append(f"\nafter removal, {name}: {e.text('.2f')} (n={e.n})")
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        return {
            "experiment": self.experiment,
            "frame": self.frame,
            "profile": self.profile,
            "seed_version": self.seed_version,
            "arms": {a.arm: a.as_dict() for a in self.arms},
            "comparisons": {k: v.as_dict() for k, v in self.comparisons.items()},
            "window": {k: v.as_dict() for k, v in self.window.items()},
            "untrained_comparisons": {k: v.as_dict() for k, v in self.untrained_comparisons.items()},
            "skipped": self.skipped,
            "llm_calls": self.llm_calls,
            "wall_s": round(self.wall_s, 1),
            "calls_per_s": None if math.isnan(self.calls_per_s) else round(self.calls_per_s, 2),
        }


def _f(value: float | None) -> str:
    return fixed(value, ".2f")


def seed_arm(settings: YoaoSettings, k: int, role: str = "seed") -> Arm:
    """k seats in `role` (placed by `settings.seed_placement`) among untrained teammates; `swap` seats' seeds
    leave after `settings.persistence_rounds`."""
    suffix = {"seed": "", "muted": " muted", "swap": " removed", "teacher": " teacher", "prompted": " prompted"}[role]
    removal = settings.persistence_rounds if role == "swap" else None
    return Arm(f"k={k}{suffix}", team_roles(settings.team_size, k, role, settings.seed_placement), removal)


def _store(store: TableStore | None, plays: Sequence[ArmPlay], run_id: str, experiment: str) -> None:
    if store is None:
        return
    store.append("yoao_games", [g.row(run_id, experiment) for p in plays for g in p.games])
    store.append_all(rows_for([e for p in plays for e in p.episodes], run_id))


@dataclass(frozen=True, kw_only=True)
class ExperimentSetup:
    """What every propagation experiment on one held-out frame is given."""

    frame: str
    """The held-out frame (the experiments' partition); a training frame or an unknown one is an error."""
    settings: YoaoSettings
    """The profile's YOAO settings (arms, games per arm, rounds, opponents)."""
    models: PlayerModels
    """Where the LLM players are served."""
    profile: str = ""
    """Profile name, recorded with the result."""
    seed_version: int | None = None
    """Registered version of the seed adapter, recorded with the result."""
    store: TableStore | None = None
    """Where games and episodes are appended (`yoao_games`, the episode tables); None: not stored."""
    run_id: str = "yoao"
    """Run id of the stored rows and of the episode ids."""
    seed: int = 0
    """Seed of the game draw (the same games for every arm)."""
    players: Mapping[str, Maker] | None = None
    """Role -> maker replacing the LLM players (code agents in tests); None: the served models."""

    def __post_init__(self) -> None:
        if load_frame(self.frame).split != "heldout":  # a frame that does not exist raises FrameError naming it
            raise ValueError(f"frame {self.frame!r} is a training frame; experiments use held-out frames only")


def _experiment(
    experiment: str,
    setup: ExperimentSetup,
    arms: Sequence[Arm],
    comparisons: Mapping[str, tuple[str, str]],
    reference: ExperimentResult | None = None,
    reusable: Sequence[str] = (),
    removal_round: int | None = None,
    ahead: Mapping[str, Sequence[Arm]] | None = None,
) -> ExperimentResult:
    """Play `arms` (those in `reusable` that `reference` already played are taken from it), store the games,
    summarise each arm and the paired `comparisons` (name -> (arm, arm)) of team cooperation and of the
    untrained players' cooperation; with `removal_round`, cooperation is also summarised on the rounds after
    it. `ahead` (experiment -> arms) are later experiments' arms played in the same batch and kept aside."""
    start = time.perf_counter()
    reused = _reuse(reference, reusable)
    games = game_specs([setup.frame], setup.settings.opponents, setup.settings.games_per_arm, setup.seed)
    owner = {a.name: name for name, later in (ahead or {}).items() for a in later}
    extra = [a for later in (ahead or {}).values() for a in later if a.name not in {b.name for b in arms}]
    extra = list({a.name: a for a in extra}.values())
    to_play = [a for a in arms if a.name not in reused] + extra
    chosen = setup.players if setup.players is not None else makers(setup.models, setup.settings)
    plays = play_arms(to_play, games, chosen, setup.settings, f"{experiment}:{setup.run_id}") if to_play else []
    for later in {owner.get(p.arm.name, experiment) for p in plays}:
        _store(setup.store, [p for p in plays if owner.get(p.arm.name, experiment) == later], setup.run_id, later)
    records = {name: list(r) for name, r in reused.items()}
    records.update({p.arm.name: list(p.games) for p in plays})
    wall_s = time.perf_counter() - start

    played = {p.arm.name: p for p in plays}
    summaries = tuple(
        summarise(played[a.name]) if a.name in played else summarise_records(a, records[a.name]) for a in arms
    )
    window = None if removal_round is None else range(removal_round + 1, settings_rounds(records) + 1)
    diffs = {
        name: paired_cooperation_difference(records[a], records[b], window) for name, (a, b) in comparisons.items()
    }
    untrained = {
        name: paired_untrained_difference(records[a], records[b], window) for name, (a, b) in comparisons.items()
    }
    windows = {}
    if window is not None:
        for a in arms:
            recs = records[a.name]
            windows[a.name] = mean_estimate(
                [r.cooperation_in(window) for r in recs], [r.game_key for r in recs], (0, 1)
            )
    return ExperimentResult(
        experiment=experiment,
        frame=setup.frame,
        profile=setup.profile,
        seed_version=setup.seed_version,
        arms=summaries,
        games=tuple(g for a in arms for g in records[a.name]),
        comparisons=diffs,
        window=windows,
        llm_calls=sum(p.llm_calls for p in plays),
        wall_s=wall_s,
        removal_round=removal_round,
        untrained_comparisons=untrained,
        ahead=tuple(g for a in extra for g in records[a.name]),
        ahead_arms=tuple(extra),
    )


def settings_rounds(records: Mapping[str, Sequence[GameRecord]]) -> int:
    """Rounds per game (from any record)."""
    return next((len(g.team_choices) for recs in records.values() for g in recs), 0)


def propagation_by_seed_count(setup: ExperimentSetup) -> ExperimentResult:
    """k = 0..5 seeds among untrained teammates on one held-out frame (module docstring); with
    `batch_arms`, the later experiments' arms are played in the same batch (`later_arms`)."""
    arms = [seed_arm(setup.settings, k) for k in setup.settings.seed_counts]
    comparisons = {f"k={k} vs k=0": (f"k={k}", "k=0") for k in setup.settings.seed_counts if k}
    ahead = later_arms(setup) if setup.settings.batch_arms else None
    return _experiment("propagation_by_seed_count", setup, arms, comparisons, ahead=ahead)


def later_arms(setup: ExperimentSetup) -> dict[str, list[Arm]]:
    """The arms of the mute and persistence experiments, and of the prompting baseline when it is requested and
    its teacher is at hand (experiment -> arms)."""
    s = setup.settings
    out = {
        "propagation_mute": [a for k in s.mute_seed_counts for a in (seed_arm(s, k), seed_arm(s, k, "muted"))],
        "propagation_persistence": [seed_arm(s, s.persistence_seeds), seed_arm(s, s.persistence_seeds, "swap")],
    }
    if s.prompting_baseline and _has_teacher(setup):
        k = s.baseline_seed_count
        out["propagation_prompting_baseline"] = [seed_arm(s, k), seed_arm(s, k, "teacher"), seed_arm(s, k, "prompted")]
    return out


def _has_teacher(setup: ExperimentSetup) -> bool:
    """Whether the teacher can take a seat: selected and served, or among the players that replace the models."""
    return setup.models.teacher is not None or (setup.players is not None and "teacher" in setup.players)


def _reuse(reference: ExperimentResult | None, names: Sequence[str]) -> dict[str, list[GameRecord]]:
    """Arms of `reference` (the same frame's `propagation_by_seed_count`) that need not be replayed: its own
    arms and those it played ahead."""
    if reference is None:
        return {}
    have = {a.arm for a in reference.arms}
    ahead = {a.name for a in reference.ahead_arms}
    out = {name: reference.records(name) for name in names if name in have}
    out.update({name: [g for g in reference.ahead if g.arm == name] for name in names if name in ahead})
    return out


def propagation_mute(setup: ExperimentSetup, reference: ExperimentResult | None = None) -> ExperimentResult:
    """Muted seeds vs the same number of unmuted seeds and vs none (module docstring)."""
    arms = [seed_arm(setup.settings, 0)]
    comparisons = {}
    for k in setup.settings.mute_seed_counts:
        arms += [seed_arm(setup.settings, k), seed_arm(setup.settings, k, "muted")]
        comparisons[f"k={k} muted vs k={k}"] = (f"k={k} muted", f"k={k}")
        comparisons[f"k={k} muted vs k=0"] = (f"k={k} muted", "k=0")
    arms = list({a.name: a for a in arms}.values())
    return _experiment("propagation_mute", setup, arms, comparisons, reference, [a.name for a in arms])


def propagation_persistence(setup: ExperimentSetup, reference: ExperimentResult | None = None) -> ExperimentResult:
    """Seeds removed after `persistence_rounds` rounds vs kept all game vs never there, on the later rounds."""
    k = setup.settings.persistence_seeds
    arms = [seed_arm(setup.settings, 0), seed_arm(setup.settings, k), seed_arm(setup.settings, k, "swap")]
    comparisons = {"removed vs never": (arms[2].name, "k=0"), "removed vs kept": (arms[2].name, arms[1].name)}
    return _experiment(
        "propagation_persistence", setup, arms, comparisons, reference, [a.name for a in arms],
        setup.settings.persistence_rounds,
    )  # fmt: skip


def not_played(experiment: str, setup: ExperimentSetup, reason: str) -> ExperimentResult:
    """An experiment the profile does not request: no games, the reason recorded."""
    return ExperimentResult(
        experiment=experiment,
        frame=setup.frame,
        profile=setup.profile,
        seed_version=setup.seed_version,
        arms=(),
        games=(),
        comparisons={},
        window={},
        llm_calls=0,
        wall_s=0.0,
        skipped=reason,
    )


def propagation_prompting_baseline(
    setup: ExperimentSetup, reference: ExperimentResult | None = None
) -> ExperimentResult:
    """The teacher and the prompted untrained model in the seeds' seats, vs the SFT seed and vs k = 0 (when the
    profile requests it: `YoaoSettings.prompting_baseline`)."""
    if not setup.settings.prompting_baseline:
        return not_played("propagation_prompting_baseline", setup, PROMPTING_BASELINE_OFF)
    if not _has_teacher(setup):
        raise ValueError("the prompting baseline needs the selected teacher (PlayerModels.teacher)")
    k = setup.settings.baseline_seed_count
    arms = [
        seed_arm(setup.settings, 0),
        seed_arm(setup.settings, k),
        seed_arm(setup.settings, k, "teacher"),
        seed_arm(setup.settings, k, "prompted"),
    ]
    comparisons = {
        "seed vs teacher": (arms[1].name, arms[2].name),
        "seed vs prompted": (arms[1].name, arms[3].name),
        "teacher vs k=0": (arms[2].name, "k=0"),
        "prompted vs k=0": (arms[3].name, "k=0"),
    }
    return _experiment("propagation_prompting_baseline", setup, arms, comparisons, reference, [a.name for a in arms])
