"""The YOAO group's plots (PNG bytes, models/plots.py): team cooperation by seed count, the arms of an experiment,
the untrained players' outcome beside the team's and the vote-arithmetic null, and Sugarscape per seed share."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from models import plots
from models.evaluation.stats import Estimate
from models.yoao.experiments import ExperimentResult
from models.yoao.games import ArmSummary
from models.yoao.report import ArmOutcomes, YoaoResults
from models.yoao.sugarscape import SugarscapeResult


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


def untrained_outcome_plot(outcomes: Sequence[ArmOutcomes]) -> bytes:
    """The primary outcome per arm: the untrained players' cooperation beside the team's and the vote-arithmetic
    null (what the team would do if the seeds' votes were added to k = 0's untrained votes)."""

    def bar(e: Estimate | None) -> tuple[float, float, float] | None:
        return None if e is None or not math.isfinite(e.mean) else _bar(e)

    bars = {
        "untrained players": [bar(o.summary.untrained_cooperation) for o in outcomes],
        "team": [bar(o.summary.cooperation) for o in outcomes],
        "vote-arithmetic null": [bar(o.null) for o in outcomes],
    }
    title = "Cooperation of the untrained players (pooled)"
    return plots.grouped_bars([o.arm for o in outcomes], bars, title, "cooperative-vote rate", (0, 1))


def pooled_plots(results: YoaoResults, seed_counts: Sequence[ExperimentResult]) -> dict[str, bytes]:
    """The pooled plots logged with the results (file name -> PNG); an experiment the profile did not run (the
    cpu profile's prompting baseline, say) has no plot."""
    pngs: dict[str, bytes] = {}
    if results.outcomes:
        pngs["untrained_cooperation.png"] = untrained_outcome_plot(results.outcomes)
    if results.by_seed_count:
        pngs["cooperation_by_seed_count.png"] = seed_count_plot(seed_counts, results.by_seed_count)
    groups = {
        "mute.png": ("Mute test (pooled)", results.mute, None),
        "persistence.png": ("Persistence (pooled)", results.persistence, results.persistence_window),
        "prompting_baseline.png": ("Prompting baseline (pooled)", results.baseline, None),
    }
    for name, (title, arms, window) in groups.items():
        if arms:
            pngs[name] = arms_plot(title, arms, window)
    return pngs


def sugarscape_plot(result: SugarscapeResult) -> bytes:
    groups = [f"{f.fraction:.0%} seeds" for f in result.fractions]
    bars = {
        "trade success": [_bar(f.trade_success) for f in result.fractions],
        "survival": [_bar(f.survival) for f in result.fractions],
    }
    return plots.grouped_bars(groups, bars, "Zero-shot Sugarscape", "rate", (0, 1))
