"""The YOAO paper's claims for the papers' report (models/report/, docs/report.md): what the paper says, where
this project's value comes from (asset and key), and the measurers that read it from a `Snapshot`.

The primary outcome of every propagation claim is the untrained players' cooperative-vote rate, paired game by
game against k = 0 or the arm compared (docs/yoao.md: at k >= 3 team cooperation is the seeds' vote
arithmetic). The paper's values are those quoted in ../shared/ARCHITECTURE.md; elsewhere "not stated here".
The file measurers, which read the committed result files, are in models/yoao/paper_files.py.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Protocol

from models.report import (
    HIGHER,
    LOWER,
    NOT_STATED,
    Claim,
    Interval,
    Measurement,
    PaperSpec,
    Snapshot,
    StageRead,
    StageSpec,
)
from models.yoao import plots as yoao_plots
from models.yoao.config import YoaoSettings
from models.yoao.paper_files import (
    FILE_MEASURERS,
    NO_BROADCAST_VS_PAIRWISE,
    NO_CROSS_ARCHITECTURE,
    RESULT_FILES,
    TWO_ESTIMATES,
)

PAPER = "YOAO"
HEADLINE = "the paper's headline, as quoted in ../shared/ARCHITECTURE.md"


def _claim(claim_id: str, text: str, direction: str, asset: str, key: str, value: str = NOT_STATED,
           source: str = NOT_STATED) -> Claim:  # fmt: skip
    return Claim(
        paper=PAPER,
        claim_id=claim_id,
        text=text,
        paper_value=value,
        paper_source=source,
        direction=direction,
        asset=asset,
        key=key,
    )


CLAIMS = (
    _claim("one_seed", "One seed among untrained teammates raises cooperation (this project: the untrained "
           "players' cooperation, k = 1 - k = 0, paired by game, frames pooled).", HIGHER, "yoao_results",
           "outcome('k=1').untrained_vs_k0", "24.8% -> 62.2% cooperation", HEADLINE),
    _claim("more_seeds", "More seeds raise cooperation further (this project: the largest seed count that leaves "
           "untrained players, k - k = 0, paired).", HIGHER, "yoao_results", "outcome('k=<largest>').untrained_vs_k0",
           "five seeds: 95.6% cooperation", HEADLINE),
    _claim("mute", "A muted seed (it votes, says only 'I vote BLACK.') loses the effect (this project: untrained "
           "cooperation, k muted - k, paired).", LOWER, "propagation_mute",
           "untrained_comparisons['k=<k> muted vs k=<k>']", "the mute test collapses the effect (no number quoted "
           "here)", HEADLINE),
    _claim("persistence", "Cooperation persists after the seeds leave (this project: untrained cooperation in the "
           "rounds after the removal, removed - never seeded, paired).", HIGHER, "propagation_persistence",
           "untrained_comparisons['removed vs never']"),
    _claim("prompting_baseline", "The trained seed beats a cooperatively prompted untrained model in its seat (this "
           "project: untrained cooperation, seed - prompted, paired).", HIGHER, "propagation_prompting_baseline",
           "untrained_comparisons['seed vs prompted']"),
    _claim("cross_architecture", "A seed raises cooperation among teammates of another architecture.", HIGHER,
           "yoao_results", "-"),
    _claim("sugarscape_trades", "Seeds raise trade success in zero-shot Sugarscape (this project: the largest seed "
           "share vs none).", HIGHER, "sugarscape_zero_shot", "fractions[].trade_success",
           "trade success 91.5% vs 21.6%", HEADLINE),
    _claim("survival", "Seeds raise survival in Sugarscape (the largest seed share vs none).", HIGHER,
           "sugarscape_zero_shot", "fractions[].survival", "85% vs 13%", HEADLINE),
    _claim("lifespan", "Seeds lengthen lifespans in Sugarscape (the largest seed share vs none).", HIGHER,
           "sugarscape_zero_shot", "fractions[].mean_lifespan"),
    _claim("identity_leaning", "Trading beside seeds moves the untrained traders' identity leaning towards good "
           "(this project: their mean leaning shift, end - start, in worlds with seeds).", HIGHER,
           "sugarscape_zero_shot", "fractions[].leaning_shift_untrained"),
    _claim("broadcast_vs_pairwise", "Fewer seeds suffice when they broadcast than when they talk pairwise.", LOWER,
           "yoao_results", "-", "~20% seeds when broadcast, ~50% when pairwise", HEADLINE),
)  # fmt: skip


def _measure(read: StageRead, key: str, scope: str, estimate: Any) -> Measurement:
    if estimate is None:
        return Measurement(read, key, scope, missing=f"{read.name} has no `{key}`")
    return Measurement(read, key, scope, Interval.of(estimate))


def _nothing(snapshot: Snapshot, asset: str, why: str = "") -> list[Measurement]:
    reason = (
        (why or f"`{asset}` holds no value for this claim") if snapshot.values(asset) else snapshot.why_absent(asset)
    )
    return [Measurement(None, "", missing=reason)]


def _seed_count(arm: str) -> int | None:
    match = re.fullmatch(r"k=(\d+)", arm)
    return int(match.group(1)) if match else None


def _vs_k0(largest: bool) -> Any:
    """k = 1 (or the largest plain seed count above 1 with untrained players) against k = 0, pooled."""

    def measure(snapshot: Snapshot) -> list[Measurement]:
        out = []
        for read in snapshot.values("yoao_results"):
            results = read.value
            arms = [o for o in results.outcomes if o.untrained_vs_k0 is not None and _seed_count(o.arm)]
            if largest:
                arms = [o for o in arms if _seed_count(o.arm) > 1 and o.summary.untrained_cooperation.n]
                arms = sorted(arms, key=lambda o: _seed_count(o.arm))[-1:]
            else:
                arms = [o for o in arms if o.arm == "k=1"]
            scope = f"frames {', '.join(results.frames) or '-'}"
            for o in arms:
                out.append(
                    _measure(read, f"outcome('{o.arm}').untrained_vs_k0", f"{o.arm}, {scope}", o.untrained_vs_k0)
                )
        why = "no seed count above 1 with untrained players was played" if largest else "k = 1 was not played"
        return out or _nothing(snapshot, "yoao_results", why)

    return measure


def _comparison(asset: str, pattern: str) -> Any:
    """Per frame, the experiment's untrained comparisons whose name matches `pattern` (skipped: not measured)."""

    def measure(snapshot: Snapshot) -> list[Measurement]:
        out = []
        for read in snapshot.values(asset):
            result = read.value
            if result.skipped:
                out.append(Measurement(read, "skipped", result.frame, missing=f"not played: {result.skipped}"))
                continue
            for name, estimate in result.untrained_comparisons.items():
                if re.fullmatch(pattern, name):
                    out.append(_measure(read, f"untrained_comparisons['{name}']", f"{result.frame}, {name}", estimate))
        return out or _nothing(snapshot, asset, f"no comparison named like {pattern!r}")

    return measure


def _not_measured(reason: str) -> Any:
    def measure(snapshot: Snapshot) -> list[Measurement]:
        return [Measurement(None, "-", missing=reason)]

    return measure


def _sugarscape(field: str, difference: bool = True) -> Any:
    """The largest seed share's `field` against the share without seeds (two estimates: no interval of their
    difference), or, with `difference` off, the largest share below 1's own estimate against 0."""

    def measure(snapshot: Snapshot) -> list[Measurement]:
        out = []
        for read in snapshot.values("sugarscape_zero_shot"):
            result = read.value
            if result.skipped:
                out.append(Measurement(read, "skipped", missing=f"left out by the profile: {result.skipped}"))
                continue
            by = {f.fraction: f for f in result.fractions}
            key = f"fractions[].{field}"
            if not difference:
                shares = [s for s in by if 0 < s < 1]
                if shares:
                    top = max(shares)
                    out.append(
                        _measure(read, f"fractions[{top:g}].{field}", f"{top:.0%} seeds", getattr(by[top], field))
                    )
                continue
            top = max(by, default=None)
            if top is None or 0.0 not in by or top == 0.0:
                out.append(Measurement(read, key, missing="no world with and without seeds"))
                continue
            seeded, none = Interval.of(getattr(by[top], field)), Interval.of(getattr(by[0.0], field))
            text = f"{top:.0%} seeds {seeded.text()} vs no seeds {none.text()}"
            out.append(Measurement(read, key, f"{top:.0%} vs 0% seeds", None, text, TWO_ESTIMATES))
        return out or _nothing(snapshot, "sugarscape_zero_shot", "no seed share between 0 and 1")

    return measure


MEASURERS = {
    "one_seed": _vs_k0(largest=False),
    "more_seeds": _vs_k0(largest=True),
    "mute": _comparison("propagation_mute", r"k=(\d+) muted vs k=\1"),  # muted k vs the same k unmuted
    "persistence": _comparison("propagation_persistence", r"removed vs never"),
    "prompting_baseline": _comparison("propagation_prompting_baseline", r"seed vs prompted"),
    "cross_architecture": _not_measured(NO_CROSS_ARCHITECTURE),
    "sugarscape_trades": _sugarscape("trade_success"),
    "survival": _sugarscape("survival"),
    "lifespan": _sugarscape("mean_lifespan"),
    "identity_leaning": _sugarscape("leaning_shift_untrained", difference=False),
    "broadcast_vs_pairwise": _not_measured(NO_BROADCAST_VS_PAIRWISE),
}  # fmt: skip


# ---------------------------------------------------------------------------------------------- figures
def _results_figures(read: StageRead) -> Mapping[str, bytes]:
    r = read.value
    out = {}
    if r.by_seed_count:
        out["cooperation by seed count"] = yoao_plots.seed_count_plot([], r.by_seed_count)
    for name, arms, window in (("mute", r.mute, None), ("persistence", r.persistence, r.persistence_window),
                               ("prompting baseline", r.baseline, None)):  # fmt: skip
        if arms:
            out[name] = yoao_plots.arms_plot(f"{name} (pooled)", arms, window)
    return out


def _seed_count_figure(read: StageRead) -> Mapping[str, bytes]:
    return {"cooperation by seed count": yoao_plots.seed_count_plot([read.value])} if read.value.arms else {}


def _sugarscape_figure(read: StageRead) -> Mapping[str, bytes]:
    return {} if read.value.skipped else {"trade success and survival": yoao_plots.sugarscape_plot(read.value)}


class YoaoProfile(Protocol):
    """What `yoao_model` reads of a profile (models/profiles.py `Profile`, which carries this package's settings:
    the package sits below the profiles and does not import them, tests/test_layers.py)."""

    @property
    def base_model(self) -> str: ...

    @property
    def yoao(self) -> YoaoSettings: ...


def yoao_model(profile: YoaoProfile) -> str:
    """The model the YOAO group trains its seeds on under `profile`."""
    return profile.yoao.resolved(profile.base_model).model or profile.base_model


STAGES = (
    StageSpec("Teacher selection", "yoao_teacher_selection"),
    StageSpec("Seed data (the filter's counts)", "yoao_seed_dataset"),
    StageSpec("Format warm-up of the untrained teammates", "yoao_format_warmup"),
    StageSpec("Seed agent (SFT)", "yoao_seed_agent"),
    StageSpec("Warm-starts replayed on held-out turns", "yoao_warmstart_imitation"),
    StageSpec("Propagation by seed count", "propagation_by_seed_count", _seed_count_figure,
              ("cooperation by seed count",)),
    StageSpec("Mute test", "propagation_mute"),
    StageSpec("Persistence", "propagation_persistence"),
    StageSpec("Prompting baseline", "propagation_prompting_baseline"),
    StageSpec("Zero-shot Sugarscape", "sugarscape_zero_shot", _sugarscape_figure),
    StageSpec("Results pooled over the held-out frames", "yoao_results", _results_figures,
              ("cooperation by seed count", "mute", "persistence"), "the stored result has no arm of it"),
)  # fmt: skip

SPEC = PaperSpec(
    name=PAPER,
    title="You Only Align Once (arXiv 2605.27586)",
    claims=CLAIMS,
    measurers=MEASURERS,
    file_measurers=FILE_MEASURERS,
    result_files=RESULT_FILES,
    stages=STAGES,
    model_of=yoao_model,
)
