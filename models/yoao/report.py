"""The YOAO group's results: arms pooled over the held-out frames, the result file and MLflow logging (the plots
are models/yoao/plots.py).

Pooling: an arm's games from every held-out frame are summarised together (`summarise_records`; intervals
resample games, every game its own cluster). Only results of the profile and of the current seed version are
pooled, so results left on disk by an earlier run or profile never mix in.

Arms are named in the result file by their seed count and kind: "0", "1", "1_muted", "3", "3_removed",
"1_teacher", "1_prompted" (those the profile plays). `benchmarks/results/yoao_<profile>.json` (written by
pipelines/run_yoao.py) has exactly these keys:

| key | value |
| --- | --- |
| `yoao_incentives` | the incentive audit before training (models/yoao/incentives.py, `YoaoIncentiveAudit.as_json`): scripted seeds among the tutors the untrained seats imitate, on held-out games: `untrained_cooperation` per arm (`none`, `argue`, `vote_only`, `long`, `selfish`) and the paired `argue_minus_none`, `vote_only_minus_none`, `long_minus_none`, `selfish_minus_none`, `argue_minus_vote_only`, `long_minus_vote_only`, each {mean, ci_low, ci_high, games}, with `failures`; {} when not run |
| `untrained_cooperation` | arm -> {mean, ci_low, ci_high, games}: **the primary outcome**, the untrained players' cooperative-vote rate (BLACK / counted votes of the seats an untrained model plays; for "3_removed", the rounds after the seeds left) |
| `untrained_cooperation_paired` | arm (all but "0") -> {mean, ci_low, ci_high, games}: its paired difference against k = 0 over the same games (and rounds) |
| `untrained_cooperation_between_arms` | the primary outcome of an arm against the plain arm of the same seed count, paired over the games both played (whole games): "<k>_muted_minus_<k>" (the mute test), "<k>_minus_<k>_prompted" and "<k>_minus_<k>_teacher" (the prompting baseline), each {mean, ci_low, ci_high, games} (`between_arm_differences`) |
| `persuadability_k0` | {mean, ci_low, ci_high, games, votes}: at k = 0, the share of untrained votes equal to the strict majority the other teammates stated that round |
| `follows_seed` | arm -> {mean, ci_low, ci_high, games, votes}: untrained votes equal to the seeds' stated choice (at k = 0: seat A0's, the placebo) |
| `seed_statements` | arm with seats in the seed's place -> {statements, stated_black, stated_red, stated_none, votes, black_votes}: the choice each of their statements states (as the game read it) beside their counted votes, in the rounds they held the seed's place (models/yoao/statements.py) |
| `abstention` | arm -> the untrained players' abstention rate (votes that ended as abstentions per vote turn) |
| `team` | arm -> the outcomes beside the primary one: team cooperation, decided cooperation, welfare, abstention of the seed seats, tie rate, and the **vote-arithmetic null**: the team cooperation the arm's seed votes give when added to k = 0's untrained votes of the same game (`null`), with the paired difference observed minus null (`observed_minus_null`) |
| `cooperation_by_seed_count`, `mute`, `persistence`, `prompting_baseline` | per experiment, arm ("k=1 muted", ...) -> {mean, ci_low, ci_high, games}: team cooperation (persistence: in the rounds after the removal) |
| `warmstarts` | the format warm-up and the seed replayed on held-out turns (models/yoao/imitation.py): valid-vote rate, vote follows its teacher, held-out loss curve, plateau; `listener_probe`: the format warm-up asked the incentive audit's vote turns (models/yoao/listening.py), its paired comparisons beside the tutors'; `seed_audit`: the trained seed in the audit's seed seat among the tutors (models/yoao/seed_audit.py), paired with the teacher, its muted self and no seed |
| `sugarscape` | seed share -> {trades, trade_rate, survival, invalid_rate, mean_lifespan, leaning_shift_seed, leaning_shift_untrained}, or {"skipped": reason} when the profile leaves Sugarscape out |
| `wall_s` | asset -> seconds (summed over partitions) |

`make yoao` writes these keys after the provenance of models/provenance.py (`PROVENANCE_KEYS`).

The full report (`<data>/reports/yoao-<profile>.json`) adds every arm's summary (influence, invalid-vote
rates, ...), the paired differences of every experiment, the teacher selection table, the seed data counts,
call counts and calls per second.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents.env_version import env_version
from models.display import entry_text, fixed
from models.evaluation.stats import Estimate, mean_estimate
from models.yoao.experiments import ExperimentResult
from models.yoao.games import (
    SEED_LIKE,
    Arm,
    ArmSummary,
    GameRecord,
    after_removal,
    paired_untrained_difference,
    summarise_records,
    vote_arithmetic,
)
from models.yoao.imitation import METRICS as IMITATION_METRICS
from models.yoao.incentives import audit_sentence
from models.yoao.listening import listener_sentence
from models.yoao.seed_audit import seed_audit_sentence
from models.yoao.statements import SeedStatements, seed_statements
from models.yoao.sugarscape import SugarscapeResult

BENCHMARK_KEYS = (
    "env_version", "yoao_incentives", "untrained_cooperation", "untrained_cooperation_paired",
    "untrained_cooperation_between_arms", "persuadability_k0", "follows_seed", "seed_statements", "abstention", "team",
    "cooperation_by_seed_count", "mute", "persistence", "prompting_baseline", "warmstarts", "sugarscape", "wall_s",
)  # fmt: skip
BASELINE_ARM = "k=0"
SUGARSCAPE_KEYS = (
    "trades",
    "trade_rate",
    "survival",
    "invalid_rate",
    "mean_lifespan",
    "leaning_shift_seed",
    "leaning_shift_untrained",
)
"""Per seed share in the result file (models/yoao/sugarscape.py defines them)."""


def current(
    results: Mapping[str, ExperimentResult], profile: str, seed_version: int | None, frames: Sequence[str]
) -> list[ExperimentResult]:
    """The partitions' results of this profile, seed version and set of frames (in frame order)."""
    chosen = []
    for frame in frames:
        result = results.get(frame)
        if result is not None and result.profile == profile and result.seed_version == seed_version:
            chosen.append(result)
    return chosen


def pooled_arms(results: Sequence[ExperimentResult]) -> list[ArmSummary]:
    """Every arm of an experiment summarised over the games of all the given frames (arm order kept)."""
    order: dict[str, tuple[str, ...]] = {}
    games: dict[str, list[GameRecord]] = {}
    for result in results:
        for arm in result.arms:
            order.setdefault(arm.arm, arm.roles)
        for game in result.games:
            games.setdefault(game.arm, []).append(game)

    def arm(name: str, roles: tuple[str, ...]) -> Arm:
        removal = next((g.removal_round for g in games.get(name, [])), None)
        return Arm(name, roles, removal)

    return [summarise_records(arm(name, roles), games.get(name, [])) for name, roles in order.items()]


def _entry(estimate: Estimate, games: int) -> dict[str, Any]:
    d = estimate.as_dict()
    return {"mean": d["mean"], "ci_low": d["ci_low"], "ci_high": d["ci_high"], "games": games}


def arm_key(name: str) -> str:
    """The result file's name of an arm: "k=1 muted" -> "1_muted", "k=0" -> "0"."""
    return name.removeprefix("k=").replace(" ", "_")


def all_arm_records(results: Sequence[ExperimentResult]) -> dict[str, tuple[Arm, list[GameRecord]]]:
    """Every arm any of the results played (their own and those played ahead), with its games, each game once."""
    arms: dict[str, tuple[Arm, list[GameRecord]]] = {}
    seen: set[str] = set()
    for result in results:
        for game in (*result.games, *result.ahead):
            if game.episode_id in seen:
                continue
            seen.add(game.episode_id)
            arm = Arm(game.arm, game.roles, game.removal_round)
            arms.setdefault(game.arm, (arm, []))[1].append(game)
    return arms


@dataclass(frozen=True)
class ArmOutcomes:
    """One arm pooled over frames: the primary outcome, its pairing with k = 0 and what is reported beside it."""

    arm: str
    summary: ArmSummary
    untrained_vs_k0: Estimate | None
    """Paired difference of the untrained players' cooperation against k = 0 (None for k = 0)."""
    null: Estimate | None
    """The vote-arithmetic null (None for an arm without seed-like seats or without k = 0 games)."""
    observed_minus_null: Estimate | None

    def team(self) -> dict[str, Any]:
        s = self.summary
        return {
            "team_cooperation": _entry(s.cooperation, s.games),
            "decided_cooperation": _entry(s.decided_cooperation, s.games),
            "welfare": _entry(s.welfare, s.games),
            "seed_abstention": _num(s.seed_abstention_rate),
            "tie_rate": _num(s.tie_rate),
            "vote_arithmetic_null": _entry(self.null, self.null.clusters) if self.null else None,
            "observed_minus_null": _entry(self.observed_minus_null, self.observed_minus_null.n)
            if self.observed_minus_null
            else None,
        }


def _num(value: float) -> float | None:
    return None if math.isnan(value) else round(value, 4)


def arm_outcomes(results: Sequence[ExperimentResult]) -> list[ArmOutcomes]:
    """Every arm of the results, pooled (k = 0 first), each paired with k = 0 game by game."""
    arms = all_arm_records(results)
    baseline = arms.get(BASELINE_ARM, (None, []))[1]
    out = []
    for name, (arm, records) in sorted(arms.items(), key=lambda kv: (kv[0] != BASELINE_ARM, _order(kv[0]))):
        summary = summarise_records(arm, records)
        window = after_removal(arm, max(len(r.team_choices) for r in records))
        paired = null = minus = None
        if name != BASELINE_ARM and baseline:
            paired = paired_untrained_difference(records, baseline, window)
            if any(role in SEED_LIKE for role in arm.roles):
                null, minus = vote_arithmetic(records, baseline, window)
        out.append(ArmOutcomes(name, summary, paired, null, minus))
    return out


BETWEEN_ARMS = {
    "muted": "{k}_muted_minus_{k}",
    "prompted": "{k}_minus_{k}_prompted",
    "teacher": "{k}_minus_{k}_teacher",
}
"""Kind of seed-seat arm -> its result-file key against the plain arm of the same seed count (muted first: the mute
test asks whether muting lowers cooperation; the seed first against what stands in its seat)."""


def between_arm_differences(results: Sequence[ExperimentResult]) -> dict[str, Estimate]:
    """The untrained players' cooperation of each muted, prompted and teacher arm against the plain arm of the same
    seed count, paired over the games both played (whole games; `BETWEEN_ARMS` names them). Arms of one
    experiment play the same games, so the pairs are complete within a frame; an arm pair with no game in
    common is left out."""
    arms = all_arm_records(results)
    out: dict[str, Estimate] = {}
    for name, (_, records) in sorted(arms.items(), key=lambda kv: _order(kv[0])):
        k, _, kind = name.removeprefix("k=").partition(" ")
        plain = arms.get(f"k={k}")
        if kind not in BETWEEN_ARMS or plain is None:
            continue
        common = {r.game_key for r in records} & {r.game_key for r in plain[1]}
        if not common:
            continue
        arm, unseeded = [r for r in records if r.game_key in common], [r for r in plain[1] if r.game_key in common]
        first, second = (arm, unseeded) if kind == "muted" else (unseeded, arm)
        out[BETWEEN_ARMS[kind].format(k=k)] = paired_untrained_difference(first, second)
    return out


def _order(name: str) -> tuple[int, str]:
    k = name.removeprefix("k=").split(" ")[0]
    return (int(k) if k.isdigit() else 99, name)


@dataclass(frozen=True)
class YoaoResults:
    """What the group found (pooled over the held-out frames)."""

    profile: str
    frames: tuple[str, ...]
    seed_version: int | None
    by_seed_count: tuple[ArmSummary, ...]
    mute: tuple[ArmSummary, ...]
    persistence: tuple[ArmSummary, ...]
    persistence_window: dict[str, Estimate]
    baseline: tuple[ArmSummary, ...]
    sugarscape: dict[str, dict[str, Any]]
    wall_s: dict[str, float]
    extra: dict[str, Any] = field(default_factory=dict)
    """Teacher selection, seed-data counts, comparisons, call rates (the full report only)."""
    outcomes: tuple[ArmOutcomes, ...] = ()
    """Every arm pooled, with the primary outcome paired against k = 0 (`arm_outcomes`)."""
    between_arms: dict[str, Estimate] = field(default_factory=dict)
    """The primary outcome of the muted, prompted and teacher arms against the same seed count unmuted, paired
    (`between_arm_differences`)."""
    sugarscape_skipped: str = ""
    """Why the profile left Sugarscape out (empty: it ran)."""
    warmstarts: dict[str, Any] = field(default_factory=dict)
    """The warm-starts' imitation measures (`WarmstartImitation.as_dict`)."""
    incentives: dict[str, Any] = field(default_factory=dict)
    """The incentive audit before training (`YoaoIncentiveAudit.as_json`; empty when not run)."""
    statements: dict[str, SeedStatements] = field(default_factory=dict)
    """Arm -> what the seats in the seed's place stated and voted (`seed_statements`)."""

    def outcome(self, arm: str) -> ArmOutcomes:
        for o in self.outcomes:
            if o.arm == arm:
                return o
        raise KeyError(f"no arm {arm!r}; arms: {[o.arm for o in self.outcomes]}")

    def benchmark(self) -> dict[str, Any]:
        """The result file's content (exactly BENCHMARK_KEYS)."""
        k0 = next((o.summary for o in self.outcomes if o.arm == BASELINE_ARM), None)
        persuadability = (
            {**_entry(k0.follows_majority, k0.follows_majority.clusters), "votes": k0.follows_majority.n}
            if k0
            else None
        )
        return {
            "env_version": env_version(),
            "yoao_incentives": self.incentives,
            "untrained_cooperation": {
                arm_key(o.arm): _entry(o.summary.untrained_cooperation, o.summary.games) for o in self.outcomes
            },
            "untrained_cooperation_paired": {
                arm_key(o.arm): _entry(o.untrained_vs_k0, o.untrained_vs_k0.n)
                for o in self.outcomes
                if o.untrained_vs_k0 is not None
            },
            "untrained_cooperation_between_arms": {
                name: _entry(estimate, estimate.n) for name, estimate in self.between_arms.items()
            },
            "persuadability_k0": persuadability,
            "follows_seed": {
                arm_key(o.arm): {
                    **_entry(o.summary.follows_seed, o.summary.follows_seed.clusters),
                    "votes": o.summary.follows_seed.n,
                }
                for o in self.outcomes
            },
            "seed_statements": {arm_key(arm): counts.as_json() for arm, counts in self.statements.items()},
            "abstention": {arm_key(o.arm): _num(o.summary.untrained_abstention_rate) for o in self.outcomes},
            "team": {arm_key(o.arm): o.team() for o in self.outcomes},
            "cooperation_by_seed_count": {
                a.arm.removeprefix("k="): _entry(a.cooperation, a.games) for a in self.by_seed_count
            },
            "mute": {a.arm: _entry(a.cooperation, a.games) for a in self.mute},
            "persistence": {
                a.arm: _entry(self.persistence_window.get(a.arm, a.cooperation), a.games) for a in self.persistence
            },
            "prompting_baseline": {a.arm: _entry(a.cooperation, a.games) for a in self.baseline},
            "warmstarts": self.warmstarts,
            "sugarscape": {"skipped": self.sugarscape_skipped}
            if self.sugarscape_skipped
            else {share: {k: v[k] for k in SUGARSCAPE_KEYS} for share, v in self.sugarscape.items()},
            "wall_s": {k: round(v, 1) for k, v in self.wall_s.items()},
        }

    def full(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "frames": list(self.frames),
            "seed_version": self.seed_version,
            "benchmark": self.benchmark(),
            "arms": {
                "propagation_by_seed_count": [a.as_dict() for a in self.by_seed_count],
                "propagation_mute": [a.as_dict() for a in self.mute],
                "propagation_persistence": [a.as_dict() for a in self.persistence],
                "propagation_prompting_baseline": [a.as_dict() for a in self.baseline],
            },
            "sugarscape": self.sugarscape,
            **self.extra,
        }

    def markdown(self) -> str:
        lines = [f"YOAO results ({self.profile}, frames {', '.join(self.frames)}, seed v{self.seed_version})", ""]
        if self.extra.get("frames_not_run"):
            lines[1:1] = [f"Not run yet (not pooled): {', '.join(self.extra['frames_not_run'])}"]
        lines += ["the untrained players (primary outcome) and the team:", "", outcomes_table(self.outcomes), ""]
        for title, arms in (
            ("propagation by seed count", self.by_seed_count),
            ("mute", self.mute),
            ("persistence (whole game)", self.persistence),
            ("prompting baseline", self.baseline),
        ):
            lines += [f"{title}:", "", arms_table(arms), ""]
        if self.persistence_window:
            lines.append(
                "persistence, cooperation after the removal: "
                + ", ".join(f"{k} {e.text('.2f')}" for k, e in self.persistence_window.items())
            )
        lines += ["", "sugarscape:", "", json.dumps(self.benchmark()["sugarscape"], indent=1)]
        return "\n".join(lines)


def _cell(e: Estimate | None) -> str:
    return "-" if e is None else e.text(".2f")


def outcomes_table(outcomes: Sequence[ArmOutcomes]) -> str:
    """The primary outcome per arm, paired with k = 0, beside the team's outcomes and the vote-arithmetic null."""
    lines = [
        "| arm | games | untrained cooperation | vs k=0 (paired) | follows seed | follows majority | abstain "
        "untrained | team cooperation | vote-arithmetic null | team - null | decided | welfare |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for o in outcomes:
        s = o.summary
        lines.append(
            f"| {o.arm} | {s.games} | {_cell(s.untrained_cooperation)} | {_cell(o.untrained_vs_k0)} | "
            f"{_f(s.follows_seed.mean)} | {_f(s.follows_majority.mean)} | {_f(s.untrained_abstention_rate)} | "
            f"{_cell(s.cooperation)} | {_cell(o.null)} | {_cell(o.observed_minus_null)} | "
            f"{_f(s.decided_cooperation.mean)} | {_f(s.welfare.mean)} |"
        )
    return "\n".join(lines)


def _f(value: float | None) -> str:
    return fixed(value, ".2f")


def arms_table(arms: Sequence[ArmSummary]) -> str:
    lines = [
        "| arm | games | cooperation [95% CI] | decided | welfare | influence | ties | abstain untrained / seed | invalid votes | calls |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for a in arms:
        c = a.cooperation
        lines.append(
            f"| {a.arm} | {a.games} | {c.text('.2f')} | {_f(a.decided_cooperation.mean)} | "
            f"{_f(a.welfare.mean)} | {_f(a.influence.mean)} | {_f(a.tie_rate)} | {_f(a.untrained_abstention_rate)} / "
            f"{_f(a.seed_abstention_rate)} | {_f(a.invalid_vote_rate)} | {a.llm_calls} |"
        )
    return "\n".join(lines)


def build_results(
    profile: str,
    frames: Sequence[str],
    seed_version: int | None,
    by_seed_count: Mapping[str, ExperimentResult],
    mute: Mapping[str, ExperimentResult],
    persistence: Mapping[str, ExperimentResult],
    baseline: Mapping[str, ExperimentResult],
    sugarscape: SugarscapeResult | None,
    wall_s: Mapping[str, float],
    extra: Mapping[str, Any] | None = None,
    warmstarts: Mapping[str, Any] | None = None,
    incentives: Mapping[str, Any] | None = None,
) -> YoaoResults:
    """Pool the partitions' results (module docstring) and assemble the report."""

    def pick(results: Mapping[str, ExperimentResult]) -> list[ExperimentResult]:
        return current(results, profile, seed_version, frames)

    persistence_results = pick(persistence)
    comparisons = {
        name: {f"{r.frame}: {k}": v.as_dict() for r in pick(results) for k, v in r.comparisons.items()}
        for name, results in (
            ("propagation_by_seed_count", by_seed_count),
            ("propagation_mute", mute),
            ("propagation_persistence", persistence),
            ("propagation_prompting_baseline", baseline),
        )
    }
    calls = {
        name: {
            r.frame: {"llm_calls": r.llm_calls, "wall_s": round(r.wall_s, 1), "calls_per_s": r.as_dict()["calls_per_s"]}
            for r in pick(results)
        }
        for name, results in (
            ("propagation_by_seed_count", by_seed_count),
            ("propagation_mute", mute),
            ("propagation_persistence", persistence),
            ("propagation_prompting_baseline", baseline),
        )
    }
    # The frames actually pooled: a frame of the profile whose experiments have not run yet is named, not
    # claimed.
    pooled = tuple(r.frame for r in pick(by_seed_count))
    played = [r for rs in (by_seed_count, mute, persistence, baseline) for r in pick(rs)]
    missing = [f for f in frames if f not in pooled]
    return YoaoResults(
        profile=profile,
        frames=pooled,
        seed_version=seed_version,
        by_seed_count=tuple(pooled_arms(pick(by_seed_count))),
        mute=tuple(pooled_arms(pick(mute))),
        persistence=tuple(pooled_arms(persistence_results)),
        persistence_window=pooled_persistence_window(persistence_results),
        baseline=tuple(pooled_arms(pick(baseline))),
        sugarscape={f"{f.fraction:g}": f.as_dict() for f in sugarscape.fractions} if sugarscape else {},
        wall_s=dict(wall_s),
        extra={"comparisons": comparisons, "calls": calls, "frames_not_run": missing, **(extra or {})},
        outcomes=tuple(arm_outcomes(played)),
        between_arms=between_arm_differences(played),
        statements={
            name: counts
            for name, (_, records) in sorted(all_arm_records(played).items(), key=lambda kv: _order(kv[0]))
            if (counts := seed_statements(records)) is not None
        },
        sugarscape_skipped=sugarscape.skipped if sugarscape else "",
        warmstarts=dict(warmstarts or {}),
        incentives=dict(incentives or {}),
    )


def pooled_persistence_window(results: Sequence[ExperimentResult]) -> dict[str, Estimate]:
    """Cooperation after the removal per arm, pooled over frames (the window is each result's own)."""
    games: dict[str, list[tuple[float, str]]] = {}
    for result in results:
        after = removal_window(result)
        for game in result.games:
            games.setdefault(game.arm, []).append((game.cooperation_in(after), game.game_key))
    return {
        arm: mean_estimate([v for v, _ in pairs], [k for _, k in pairs], (0.0, 1.0)) for arm, pairs in games.items()
    }


def removal_window(result: ExperimentResult) -> range:
    """The rounds after the seeds' removal of a persistence result."""
    if result.removal_round is None:
        raise ValueError(f"{result.experiment} on {result.frame} has no removal round")
    rounds = len(result.games[0].team_choices) if result.games else 0
    return range(result.removal_round + 1, rounds + 1)


def write_json(path: Path, content: Mapping[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(content, indent=1, default=str) + "\n")
    return path


def log_run(
    tracker: Any, name: str, params: Mapping[str, Any], metrics: Mapping[str, float], files: Mapping[str, bytes | str]
) -> str:
    """One MLflow run with parameters, finite metrics and files (plots under plots/, the rest under report/)."""
    with tracker.start_run(name, params=params) as run:
        # MLflow metric names allow alphanumerics, _ - . space : / only ("k=1.cooperation" -> "k_1.cooperation").
        finite = {
            re.sub(r"[^\w\-. :/]", "_", k): float(v)
            for k, v in metrics.items()
            if v is not None and math.isfinite(float(v))
        }
        if finite:
            run.log_metrics(0, finite)
        for filename, content in files.items():
            run.log_file(filename, content, "plots" if filename.endswith(".png") else "report")
        return run.run_id


def benchmark_markdown(result: Mapping[str, Any]) -> str:
    """A result file (`YoaoResults.benchmark()`, benchmarks/results/yoao_<profile>.json) as markdown: the
    untrained players' cooperation per arm with its pairing against k = 0 and the seeds' pull beside the team's
    outcomes and the vote-arithmetic null, the muted, prompted and teacher arms paired with their plain arm,
    persuadability at k = 0, the warm-starts' imitation, Sugarscape and the wall time. docs/yoao.md shows it
    (benchmarks/readme_results.py renders it there; never typed)."""
    untrained, paired = result["untrained_cooperation"], result.get("untrained_cooperation_paired", {})
    follows, abstention, team = result.get("follows_seed", {}), result.get("abstention", {}), result.get("team", {})
    lines = [
        "| arm | games | untrained cooperation | vs k = 0 (paired) | follows seed | untrained abstention | "
        "team cooperation | decided | vote-arithmetic null | team - null |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for arm, entry in untrained.items():
        t = team.get(arm, {})
        lines.append(
            f"| {arm} | {entry['games']} | {entry_text(entry)} | {entry_text(paired.get(arm), '+.2f')} | "
            f"{fixed((follows.get(arm) or {}).get('mean'), '.2f')} | {fixed(abstention.get(arm), '.2f')} | "
            f"{entry_text(t.get('team_cooperation'))} | {fixed((t.get('decided_cooperation') or {}).get('mean'), '.2f')} | "
            f"{entry_text(t.get('vote_arithmetic_null'))} | {entry_text(t.get('observed_minus_null'), '+.2f')} |"
        )
    between = result.get("untrained_cooperation_between_arms") or {}
    if between:
        pairs = [
            f"k={name.replace('_minus_', ' - k=').replace('_', ' ')} {entry_text(entry, '+.2f')} ({entry['games']} games)"
            for name, entry in between.items()
        ]
        lines += ["", f"Against the same seed count's plain arm, paired by game: {'; '.join(pairs)}."]
    said = result.get("seed_statements") or {}
    if said:
        lines += ["", "What the seats in the seed's place said (the choice each statement states, as the game read it) "
                  "and voted:", "", "| arm | statements | cooperative | selfish | neither | cooperative votes |",
                  "| --- | --- | --- | --- | --- | --- |"]  # fmt: skip
        lines += [f"| {arm} | {c['statements']} | {c['stated_black']} | {c['stated_red']} | {c['stated_none']} | "
                  f"{c['black_votes']} of {c['votes']} |" for arm, c in said.items()]  # fmt: skip
    if (result.get("yoao_incentives") or {}).get("argue_minus_vote_only"):
        lines += ["", audit_sentence(result["yoao_incentives"])]
    k0 = result.get("persuadability_k0")
    if k0:
        lines += ["", f"Persuadability at k = 0: {entry_text(k0)} ({k0['votes']} votes with a stated majority, "
                  f"{k0['games']} games); a vote independent of the discussion scores about 0.5."]  # fmt: skip
    warm = result.get("warmstarts") or {}
    for name in ("format_warmup", "seed"):
        w = warm.get(name)
        if not w:
            continue
        curve = ", ".join(f"{step}: {loss:.3f}" for step, loss in w.get("eval_curve", []))
        rates = ", ".join(f"{m} {fixed(w.get(m), '.2f')}" for m in IMITATION_METRICS if m in w)
        lines += ["", f"Warm-start `{name}` on {w.get('turns')} held-out turns: {rates}; held-out loss by step "
                  f"{curve} ({'plateaued' if w.get('plateaued') else 'still falling'})."]  # fmt: skip
    if warm:
        lines.append(f"The warm-start check {'passed' if warm.get('passed') else 'did not pass'}.")
    for key, sentence in (("listener_probe", listener_sentence), ("seed_audit", seed_audit_sentence)):
        if warm.get(key):
            lines += ["", sentence(warm[key])]
    sugarscape = result.get("sugarscape") or {}
    if "skipped" in sugarscape:
        lines += ["", f"Sugarscape: not run in this profile ({sugarscape['skipped']})."]
    elif sugarscape:
        lines += [
            "",
            "| Sugarscape seed share | trades | trade rate | survival | invalid actions |",
            "| --- | --- | --- | --- | --- |",
        ]
        for share, s in sugarscape.items():
            lines.append(
                f"| {share} | {s['trades']} | {fixed(s['trade_rate'], '.2f')} | {fixed(s['survival'], '.2f')} | "
                f"{fixed(s['invalid_rate'], '.2f')} |"
            )
    wall = result.get("wall_s")
    if isinstance(wall, Mapping) and wall:
        slowest = sorted(wall.items(), key=lambda kv: -kv[1])[:4]
        lines += ["", f"Asset time {sum(wall.values()) / 60:.1f} min in all; longest: "
                  + ", ".join(f"{name} {seconds / 60:.1f} min" for name, seconds in slowest) + "."]  # fmt: skip
    return "\n".join(lines) + "\n"
