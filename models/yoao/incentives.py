"""The YOAO incentive audit: before any seed is trained, does arguing move the untrained teammates more than
stating a vote? (The price domains' audit is models/socialrl/incentives.py.)

An optimiser, and a seed's SFT, can only show what the teammates respond to. The audit plays scripted seeds
(code, no model) that differ in one behaviour, in the seed's seat of k = 1 (placed as the profile places
seeds), among untrained teammates played by the tutors the untrained seats are trained to imitate (the
warm-up's mix, `warmup_tutor`: the same kinds, priors and reason rates), on the same held-out games (the
profile's held-out frames and opponents, `game_specs`, at least `min_games` per frame; when the profile plays
at least half as many games as it has opponents, as the cpu and paper profiles do, the first `games_per_arm`
are the propagation experiments' own games):

| arm | the seed's seat |
| --- | --- |
| `none` | a tutor too (k = 0) |
| `argue` | `PrincipledCooperator`, the seed's teacher: BLACK with reasons from the payoffs, the rounds to come, what the other team did and both sides' welfare |
| `vote_only` | the same cooperator muted (`MuteWrapper`): it votes BLACK but says only "I vote BLACK." in the frame's words (the mute arm) |
| `long` | `ScriptedSeed(BLACK, filler)`: three sentences that give no reason, as long as an argument, then "I vote BLACK." |
| `selfish` | `ScriptedSeed(RED, reasons)`: RED with every grounded reason it can truthfully give for it |

The measure is the YOAO runner's primary outcome, **untrained cooperation**: per game, the share of the
untrained players' counted votes that were BLACK (`GameRecord.untrained_cooperation`; at k = 0 all five seats,
otherwise the four beside the seed), its mean over games with a bootstrap interval; arms are compared by the
mean of per-game differences, paired by game (`paired_untrained_difference`, the runner's `vs k = 0`):

| comparison | target |
| --- | --- |
| `argue_minus_none`, `vote_only_minus_none`, `long_minus_none`, `selfish_minus_none` | (reported) |
| `argue_minus_vote_only` | arguing beats stating a vote: `ci_low > 0` |
| `long_minus_vote_only` | length without reasons does not beat a bare vote: not `ci_low > 0` |
| `none` (untrained cooperation at k = 0) | at most `max_none_cooperation` (0.4; the paper's untrained teammates: 24.8%) |

`prior_calibration` records how the persuadable tutors' priors were chosen: for each mean on a grid, the tutors'
cooperation among themselves in the warm-up games on the *training* frames (never the audit's games); the
mean closest to the paper's 24.8% is the one `PERSUADABLE_PRIORS` uses (docs/yoao.md, "A model of
persuasion"). `python -m benchmarks.bench_yoao_incentives` writes both to
benchmarks/results/yoao_incentives_<profile>.json; the `yoao_results` asset puts the audit's `as_json()` into
the YOAO result file as `yoao_incentives`. Code only: seconds.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agents.env_version import env_version
from agents.yoao.persuasion import Persuasion
from agents.yoao.red_black_strategies import MuteWrapper
from agents.yoao.red_black_teacher import PERSUADABLE_PRIORS, PrincipledCooperator, ScriptedSeed
from environments.core.runtime import Agent
from environments.yoao.red_black import BLACK, RED
from models.display import interval_text
from models.evaluation.stats import Estimate
from models.yoao.config import YoaoSettings
from models.yoao.games import (
    Arm,
    GameRecord,
    GameSpec,
    Maker,
    game_specs,
    paired_untrained_difference,
    play_arms,
    summarise_records,
    team_roles,
)
from models.yoao.seed.traces import format_warmup_traces, warmup_tutor

PAPER_UNTRAINED_COOPERATION = 0.248
"""The paper's untrained teammates' cooperation with no seed (24.8%, models/yoao/paper_claims.py)."""
ARMS = ("none", "argue", "vote_only", "long", "selfish")
"""The audit's arms (module docstring)."""
COMPARISONS: dict[str, tuple[str, str]] = {
    "argue_minus_none": ("argue", "none"),
    "vote_only_minus_none": ("vote_only", "none"),
    "long_minus_none": ("long", "none"),
    "selfish_minus_none": ("selfish", "none"),
    "argue_minus_vote_only": ("argue", "vote_only"),
    "long_minus_vote_only": ("long", "vote_only"),
}
"""Name -> (minuend arm, subtrahend arm), paired by game."""


@dataclass(frozen=True, kw_only=True)
class YoaoIncentiveSettings:
    """What the audit plays beside the profile's games."""

    min_games: int = 16
    """Paired games per arm and held-out frame at least (the profile's `games_per_arm` when that is larger)."""
    seed: int = 0
    """Seed of the game draw (0, as the propagation experiments)."""
    max_none_cooperation: float = 0.4
    """Most untrained cooperation allowed with no seed (the paper's untrained teammates: 24.8%)."""
    calibration_means: tuple[float, ...] = (0.25, 0.3, 0.35, 0.4, 0.45, 0.5)
    """Mean priors tried by `prior_calibration` (each with the spread below: three priors per mean)."""
    calibration_spread: float = 0.15
    """The priors of a mean m are m - spread, m, m + spread (one drawn per seat)."""
    calibration_games: int = 60
    """Warm-up games on the training frames per mean tried."""

    def __post_init__(self) -> None:
        if self.min_games < 2 or self.calibration_games < 1:
            raise ValueError(f"min_games must be >= 2 and calibration_games >= 1, got {self}")
        if not 0.0 <= self.max_none_cooperation <= 1.0:
            raise ValueError(f"max_none_cooperation must lie in [0, 1], got {self.max_none_cooperation}")
        spread = self.calibration_spread
        if not self.calibration_means or not all(
            m - spread >= 0.0 and m + spread <= 1.0 for m in self.calibration_means
        ):
            raise ValueError(
                f"calibration_means +- calibration_spread must stay in [0, 1], got {self.calibration_means} +- {spread}"
            )


@dataclass(frozen=True, kw_only=True)
class YoaoIncentiveAudit:
    """The audit's result (module docstring)."""

    env_version: str
    """`agents.env_version.env_version()` of the code audited (tutors and seeds included)."""
    frames: tuple[str, ...]
    """The held-out frames played."""
    games: int
    """Paired games per arm (over all frames)."""
    tutors: tuple[str, ...]
    """The tutor kinds in the untrained seats (the warm-up's mix)."""
    persuasion: Persuasion
    """The persuadable tutors' model (its defaults)."""
    untrained_cooperation: dict[str, Estimate]
    """Arm -> the untrained players' cooperation (mean over games, bootstrap interval)."""
    comparisons: dict[str, Estimate]
    """`COMPARISONS` name -> the paired difference of untrained cooperation."""
    settings: YoaoIncentiveSettings
    """What was played."""
    wall_s: float
    """Seconds the audit took."""

    def failures(self) -> list[str]:
        """What the audit's targets refuse, in words (empty: every target holds)."""
        problems = []
        none = self.untrained_cooperation["none"]
        if not none.mean <= self.settings.max_none_cooperation:
            problems.append(
                f"untrained cooperation with no seed is {none.mean:.3f}, above {self.settings.max_none_cooperation:g}"
            )
        argue = self.comparisons["argue_minus_vote_only"]
        if not argue.ci_low > 0:
            problems.append(f"arguing does not beat stating a vote ({argue.text('+.3f')})")
        long = self.comparisons["long_minus_vote_only"]
        if long.ci_low > 0:
            problems.append(f"long text without reasons beats a bare vote ({long.text('+.3f')})")
        return problems

    def as_json(self) -> dict[str, Any]:
        """The audit as the result files carry it (`yoao_incentives` in yoao_<profile>.json; the benchmark's
        file adds the calibration): every comparison at the top level, each {mean, ci_low, ci_high, games}."""
        return {
            "env_version": self.env_version,
            "frames": list(self.frames),
            "games": self.games,
            "tutors": list(self.tutors),
            "persuasion": dataclasses.asdict(self.persuasion),
            "untrained_cooperation": {arm: entry(e) for arm, e in self.untrained_cooperation.items()},
            **{name: entry(e) for name, e in self.comparisons.items()},
            "failures": self.failures(),
            "wall_s": round(self.wall_s, 1),
        }


def entry(estimate: Estimate) -> dict[str, Any]:
    """{mean, ci_low, ci_high, games} of an estimate (games: its n)."""
    d = estimate.as_dict()
    return {"mean": d["mean"], "ci_low": d["ci_low"], "ci_high": d["ci_high"], "games": d["n"]}


def seed_makers() -> dict[str, Maker]:
    """Arm -> the maker of its seed seat (module docstring); `none` has no seed."""
    return {
        "argue": lambda seat, s: PrincipledCooperator(s),
        "vote_only": lambda seat, s: MuteWrapper(PrincipledCooperator(s)),
        "long": lambda seat, s: ScriptedSeed(s, choice=BLACK, speech="filler"),
        "selfish": lambda seat, s: ScriptedSeed(s, choice=RED, speech="reasons"),
    }


def tutor_maker(settings: YoaoSettings) -> Maker:
    """The untrained seats' tutors: the warm-up's mix, kind and prior drawn from the seat's seed as in its data."""

    def make(seat: str, seed: int) -> Agent:
        return warmup_tutor(settings, seed, int(seat[1:]), seed, mirror=False)

    return make


def audit_arm(name: str, settings: YoaoSettings, untrained: Maker) -> tuple[Arm, dict[str, Maker]]:
    """The team-A composition of audit arm `name` (the seed placed as the profile places seeds; `none`: all
    untrained) and its makers, `untrained` playing the untrained seats."""
    if name not in ARMS:
        raise ValueError(f"unknown audit arm {name!r}; known: {', '.join(ARMS)}")
    if name == "none":
        return Arm(name, ("untrained",) * settings.team_size), {"untrained": untrained}
    seeded = team_roles(settings.team_size, 1, "seed", settings.seed_placement)
    return Arm(name, seeded), {"untrained": untrained, "seed": seed_makers()[name]}


def audit_games(settings: YoaoSettings, audit: YoaoIncentiveSettings | None = None) -> list[GameSpec]:
    """The audit's held-out games: `game_specs` of the profile's held-out frames and opponents, at least
    `min_games` (the profile's `games_per_arm` when that is larger), drawn with the audit's seed."""
    audit = audit or YoaoIncentiveSettings()
    n = max(audit.min_games, settings.games_per_arm)
    return game_specs(settings.heldout_frames, settings.opponents, n, audit.seed)


def run_yoao_incentives(settings: YoaoSettings, audit: YoaoIncentiveSettings | None = None) -> YoaoIncentiveAudit:
    """Play the audit's arms on the profile's held-out games with tutors as the untrained teammates (module
    docstring) and compare them, paired by game."""
    start = time.perf_counter()
    audit = audit or YoaoIncentiveSettings()
    games = audit_games(settings, audit)
    untrained = tutor_maker(settings)
    records: dict[str, list[GameRecord]] = {}
    arms: dict[str, Arm] = {}
    for name in ARMS:
        arm, makers = audit_arm(name, settings, untrained)
        (play,) = play_arms([arm], games, makers, settings, f"yoao-incentives:{name}")
        records[name], arms[name] = list(play.games), arm
    cooperation = {name: summarise_records(arms[name], records[name]).untrained_cooperation for name in ARMS}
    comparisons = {name: paired_untrained_difference(records[a], records[b]) for name, (a, b) in COMPARISONS.items()}
    return YoaoIncentiveAudit(
        env_version=env_version(),
        frames=tuple(settings.heldout_frames),
        games=len(games),
        tutors=tuple(settings.warmup_tutors),
        persuasion=Persuasion(),
        untrained_cooperation=cooperation,
        comparisons=comparisons,
        settings=audit,
        wall_s=time.perf_counter() - start,
    )


def prior_calibration(settings: YoaoSettings, audit: YoaoIncentiveSettings | None = None) -> dict[str, Any]:
    """How the persuadable tutors' priors were chosen (module docstring): mean prior -> the share of BLACK votes
    of the tutors among themselves in `calibration_games` warm-up games on the training frames, the mean
    closest to the paper's 24.8%, and the mean `PERSUADABLE_PRIORS` has."""
    audit = audit or YoaoIncentiveSettings()
    spread = audit.calibration_spread
    shares: dict[str, float] = {}
    for mean in audit.calibration_means:
        priors = (round(mean - spread, 4), mean, round(mean + spread, 4))
        chosen = dataclasses.replace(settings, warmup_games=audit.calibration_games, warmup_priors=priors)
        shares[f"{mean:g}"] = round(format_warmup_traces(chosen).black_share, 4)
    best = min(shares, key=lambda m: abs(shares[m] - PAPER_UNTRAINED_COOPERATION))
    return {
        "frames": list(settings.train_frames),
        "games": audit.calibration_games,
        "spread": spread,
        "target": PAPER_UNTRAINED_COOPERATION,
        "cooperation_by_mean_prior": shares,
        "closest_mean": float(best),
        "in_use_mean": round(sum(PERSUADABLE_PRIORS) / len(PERSUADABLE_PRIORS), 4),
    }


def audit_markdown(result: Mapping[str, Any]) -> str:
    """An audit's `as_json()` as markdown: the arms' untrained cooperation, the paired comparisons, the targets,
    and (from the benchmark's file) the prior calibration. docs/yoao.md shows it for the cpu profile
    (benchmarks/readme_results.py renders it there)."""

    def cell(e: Mapping[str, Any]) -> str:
        return interval_text(e["mean"], e.get("ci_low"), e.get("ci_high"), "+.2f")

    lines = ["| arm | untrained cooperation | games |", "| --- | --- | --- |"]
    for arm, e in result["untrained_cooperation"].items():
        lines.append(f"| {arm} | {interval_text(e['mean'], e.get('ci_low'), e.get('ci_high'), '.2f')} | {e['games']} |")
    lines += ["", "| paired comparison | difference | games |", "| --- | --- | --- |"]
    for name in COMPARISONS:
        lines.append(f"| {name} | {cell(result[name])} | {result[name]['games']} |")
    failures = result.get("failures") or []
    lines += ["", "Targets: " + ("all hold." if not failures else "; ".join(failures) + ".")]
    calibration = result.get("prior_calibration")
    if calibration:
        lines += [
            "",
            f"Prior calibration ({calibration['games']} warm-up games per mean on the training frames, priors mean "
            f"+- {calibration['spread']:g}; target {calibration['target']:g}):",
            "",
            "| mean prior | tutors' cooperation among themselves |",
            "| --- | --- |",
        ]
        for mean, share in calibration["cooperation_by_mean_prior"].items():
            lines.append(f"| {mean} | {share:.3f} |")
        lines += [
            "",
            f"Closest to the target: {calibration['closest_mean']:g}; in use (`PERSUADABLE_PRIORS`): "
            f"{calibration['in_use_mean']:g}.",
        ]
    return "\n".join(lines) + "\n"


def audit_sentence(result: Mapping[str, Any]) -> str:
    """An audit's `as_json()` in one sentence (the YOAO result file's rendering, `benchmark_markdown`)."""

    def diff(name: str) -> str:
        e = result[name]
        return interval_text(e["mean"], e.get("ci_low"), e.get("ci_high"), "+.2f")

    none = result["untrained_cooperation"]["none"]
    return (
        f"Incentive audit before training (scripted seeds among the tutors, {result['games']} paired games): "
        f"untrained cooperation with no seed {interval_text(none['mean'], none.get('ci_low'), none.get('ci_high'), '.2f')}; "
        f"argue - vote only {diff('argue_minus_vote_only')}, argue - none {diff('argue_minus_none')}, vote only - none "
        f"{diff('vote_only_minus_none')}, long - none {diff('long_minus_none')}."
    )
