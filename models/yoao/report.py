"""The YOAO group's results: arms pooled over the held-out frames, the result file, plots and MLflow logging.

Pooling: an arm's games from every held-out frame are summarised together (`summarise_records`; intervals
resample games, every game its own cluster). Only results of the profile and of the current seed version are
pooled, so results left on disk by an earlier run or profile never mix in.

`benchmarks/results/yoao_<profile>.json` (written by pipelines/run_yoao.py) has exactly these keys:

| key | value |
| --- | --- |
| `cooperation_by_seed_count` | k -> {mean, ci_low, ci_high, games}: team cooperation rate with k seeds |
| `mute` | arm ("k=0", "k=1", "k=1 muted", ...) -> {mean, ci_low, ci_high, games} |
| `persistence` | arm ("k=0", "k=3", "k=3 removed") -> {mean, ci_low, ci_high, games}: cooperation in the rounds after the removal |
| `prompting_baseline` | arm ("k=0", "k=1" = the SFT seed, "k=1 teacher", "k=1 prompted") -> {mean, ci_low, ci_high, games} |
| `sugarscape` | seed share -> {trade_success, survival, mean_lifespan, leaning_shift_seed, leaning_shift_untrained} |
| `wall_s` | asset -> seconds (summed over partitions) |

The full report (`<data>/reports/yoao-<profile>.json`) adds every arm's decided cooperation, welfare,
influence, tie, abstention and invalid-vote rates, the paired differences, the teacher selection table, the
seed data counts, call counts and calls per second.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from models import plots
from models.evaluation.stats import Estimate, mean_estimate
from models.yoao.experiments import ExperimentResult
from models.yoao.games import Arm, ArmSummary, GameRecord, summarise_records
from models.yoao.sugarscape import SugarscapeResult

BENCHMARK_KEYS = (
    "cooperation_by_seed_count",
    "mute",
    "persistence",
    "prompting_baseline",
    "sugarscape",
    "wall_s",
)


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
    return [summarise_records(Arm(name, roles), games.get(name, [])) for name, roles in order.items()]


def _entry(estimate: Estimate, games: int) -> dict[str, Any]:
    d = estimate.as_dict()
    return {"mean": d["mean"], "ci_low": d["ci_low"], "ci_high": d["ci_high"], "games": games}


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

    def benchmark(self) -> dict[str, Any]:
        """The result file's content (exactly BENCHMARK_KEYS)."""
        return {
            "cooperation_by_seed_count": {
                a.arm.removeprefix("k="): _entry(a.cooperation, a.games) for a in self.by_seed_count
            },
            "mute": {a.arm: _entry(a.cooperation, a.games) for a in self.mute},
            "persistence": {
                a.arm: _entry(self.persistence_window.get(a.arm, a.cooperation), a.games) for a in self.persistence
            },
            "prompting_baseline": {a.arm: _entry(a.cooperation, a.games) for a in self.baseline},
            "sugarscape": {
                share: {
                    k: v[k]
                    for k in (
                        "trade_success",
                        "survival",
                        "mean_lifespan",
                        "leaning_shift_seed",
                        "leaning_shift_untrained",
                    )
                }
                for share, v in self.sugarscape.items()
            },
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
                + ", ".join(
                    f"{k} {_f(e.mean)} [{_f(e.ci_low)}, {_f(e.ci_high)}]" for k, e in self.persistence_window.items()
                )
            )
        lines += ["", "sugarscape:", "", json.dumps(self.benchmark()["sugarscape"], indent=1)]
        return "\n".join(lines)


def _f(value: float | None) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.2f}"


def arms_table(arms: Sequence[ArmSummary]) -> str:
    lines = [
        "| arm | games | cooperation [95% CI] | decided | welfare | influence | ties | abstain untrained / seed | invalid votes | calls |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for a in arms:
        c = a.cooperation
        lines.append(
            f"| {a.arm} | {a.games} | {_f(c.mean)} [{_f(c.ci_low)}, {_f(c.ci_high)}] | {_f(a.decided_cooperation.mean)} | "
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


# ------------------------------------------------------------------------------------------------ plots
def _bar(e: Estimate) -> tuple[float, float, float]:
    return (e.mean, e.ci_low, e.ci_high)


def seed_count_plot(results: Sequence[ExperimentResult], pooled: Sequence[ArmSummary] = ()) -> bytes:
    """Team cooperation vs seed count, per frame and pooled, with 95% bootstrap bands."""
    series = []
    for result in results:
        ks = [int(a.arm.removeprefix("k=")) for a in result.arms]
        series.append(
            plots.Series(
                result.frame,
                ks,
                [a.cooperation.mean for a in result.arms],
                [a.cooperation.ci_low for a in result.arms],
                [a.cooperation.ci_high for a in result.arms],
            )
        )
    if pooled:
        ks = [int(a.arm.removeprefix("k=")) for a in pooled]
        series.append(
            plots.Series(
                "pooled",
                ks,
                [a.cooperation.mean for a in pooled],
                [a.cooperation.ci_low for a in pooled],
                [a.cooperation.ci_high for a in pooled],
            )
        )
    return plots.line_with_band(
        series, "Team cooperation by seed count", "seeds in the team (k)", "cooperation rate", (0, 1)
    )


def arms_plot(title: str, arms: Sequence[ArmSummary], window: Mapping[str, Estimate] | None = None) -> bytes:
    """Cooperation (and decided cooperation) per arm with 95% intervals."""
    bars: dict[str, list[tuple[float, float, float] | None]] = {
        "cooperation": [_bar(a.cooperation) for a in arms],
        "decided cooperation": [_bar(a.decided_cooperation) for a in arms],
    }
    if window:
        bars["after removal"] = [_bar(window[a.arm]) if a.arm in window else None for a in arms]
    return plots.grouped_bars([a.arm for a in arms], bars, title, "rate", (0, 1))


def sugarscape_plot(result: SugarscapeResult) -> bytes:
    groups = [f"{f.fraction:.0%} seeds" for f in result.fractions]
    bars = {
        "trade success": [_bar(f.trade_success) for f in result.fractions],
        "survival": [_bar(f.survival) for f in result.fractions],
    }
    return plots.grouped_bars(groups, bars, "Zero-shot Sugarscape", "rate", (0, 1))


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
