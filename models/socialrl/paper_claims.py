"""The SocialRL paper's claims for the papers' report (models/report/, docs/report.md): what the paper says,
where this project's value comes from (asset and key), and the measurers that read it from a `Snapshot` of an
instance (the file measurers, which read the committed result files: models/socialrl/paper_files.py).

The paper's values are those quoted in ../shared/ARCHITECTURE.md ("The two papers", the headline numbers) and
in docs/tom.md; where neither quotes one the value is "not stated here". Every stage-1 measurement is per
domain (one row each), with the best trivial baseline of the same held-out plan beside it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

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
from models.socialrl.paper_files import FILE_MEASURERS, FRONTIER, RESULT_FILES, TOM_PROMPT_DIFFERENCES
from models.socialrl.stage1 import evaluation_plot, learning_curve_plots

PAPER = "SocialRL"
HEADLINE = "the paper's headline, as quoted in ../shared/ARCHITECTURE.md"
NO_INTERVAL_RATE = "the behaviour report gives this rate without an interval (no paired difference either)"


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
    _claim("specialist_over_base", "Post-training (the stage-1 specialist: an SFT warm-start then PPO, or PPO alone) "
           "raises the held-out reward over the base model (this project: PPO - base, paired).", HIGHER,
           "specialist_eval", "paired.ppo_minus_base"),
    _claim("warm_start", "An SFT warm-start on the teacher's traces raises the held-out reward over the base model "
           "(this project: SFT - base, paired).", HIGHER, "specialist_eval", "paired.sft_minus_base"),
    _claim("ppo_over_warmstart", "PPO from the warm-start raises the held-out reward further (this project: PPO - SFT, "
           "paired).", HIGHER, "specialist_eval", "paired.ppo_minus_sft"),
    _claim("anchoring", "Trained buyers anchor: they open below their target (this project: Craigslist buyer, "
           "share of openings below target, PPO - base, paired).", HIGHER, "specialist_eval",
           "behaviour_paired.opening_below_target.ppo_minus_base", "buyer openings below target 3% -> 78% after "
           "training", HEADLINE),
    _claim("concession", "Trained policies concede selectively, not below their own reservation (this project: the "
           "over-conceding rate, specialist vs base).", LOWER, "behaviour_report", "summaries[].over_conceding_rate"),
    _claim("rejection_counter_offer", "Trained policies reject strategically, with a counter-offer (this project: "
           "rejecting turns and the share with a counter-offer, specialist vs base).", HIGHER, "behaviour_report",
           "summaries[].rejection_rate, counter_offer_share", "14-20% of turns reject",
           "the paper, as quoted in docs/tom.md"),
    _claim("commitment_language", "Trained policies use commitment language ('final offer', ...) (this project: "
           "turns with the lexicon, specialist vs base).", HIGHER, "behaviour_report", "summaries[].commitment_rate"),
    _claim("leakage", "Trained policies leak less private information (this project: leak indicator, PPO - base on "
           "the held-out plan, and specialist - base under the privacy red team, paired).", LOWER,
           "specialist_eval", "behaviour_paired.leak.ppo_minus_base; privacy_red_team leak_difference"),
    _claim("transfer_asymmetry", "Transfer between domains is asymmetric: some donors help other domains, some hurt "
           "(the cascade order is read from it).", HIGHER, "transfer_matrix", "matrix.cells[].difference"),
    _claim("cascade_order", "The cascade's domain order is read from the measured transfer matrix (this project: "
           "the order chosen from its matrix, beside the paper's order on the same domains).", HIGHER,
           "cascade_order", "order", "Calendar -> CaSiNo -> DnD -> Craigslist -> Marketplace -> Job Interview",
           "the paper's order, as quoted in ../shared/ARCHITECTURE.md"),
    _claim("cascade_best_unifier", "The transfer-aware cascade is the better way to one policy (this project: "
           "cascade - MOPD student, paired, over their common domains).", HIGHER, "cascade_policy",
           "cascade_policy.scores - mopd_student.scores (pooled)"),
    _claim("mopd_recovered_share", "MOPD recovers most of the specialists' advantage over the base (this project: "
           "the recovered share, ratio of summed advantages; null 0).", HIGHER, "mopd_student", "share.estimate",
           "92.6% in 60 steps", HEADLINE + " and docs/stage2.md"),
    _claim("unified_vs_specialists", "One unified policy keeps up with the per-domain specialists (this project: "
           "unified - specialists, paired, pooled over domains; tested above 0).", HIGHER, "cascade_policy",
           "cascade_policy / mopd_student scores - transfer_matrix specialist scores (pooled)"),
    _claim("unified_vs_frontier", "The unified 4B policy matches frontier models in mean utility (this project: the "
           "unified policies' mean utility over its domains; a frontier model on the same episodes is needed).",
           HIGHER, "unified_evaluation", "rows[cascade, mopd].mean", "unified 4B: 0.627 mean utility (GPT-4.1 "
           "0.625, GPT-5.1 0.619, GPT-5.2 0.613)", HEADLINE),
    _claim("tom_prompt", "The ToM prompt alone lowers the base model's reward (this project: base + ToM prompt - "
           "base, paired; and the same prompt on the warm-start, sft_act + ToM prompt - sft_act, where the base "
           "scores 0).", LOWER, "tom_analysis", "differences['base_tom_prompt - base']", "0.454 -> 0.353",
           HEADLINE + " and docs/tom.md"),
    _claim("tom_distillation", "Distilling INFER -> ACT -> ANTICIPATE beats ACT-only SFT (this project: sft_tom - "
           "sft_act, paired).", HIGHER, "tom_analysis", "differences['sft_tom - sft_act']"),
    _claim("skill_outcome_correlation", "ToM skills predict the outcome (this project: Pearson r of the per-episode "
           "INFER / ANTICIPATE score with the reward, scaffolded arms pooled).", HIGHER, "tom_analysis",
           "correlation[skill]"),
)  # fmt: skip


# ------------------------------------------------------------------------------------------------ helpers
def _measure(read: StageRead, key: str, scope: str, estimate: Any, **extra: Any) -> Measurement:
    if estimate is None:
        return Measurement(read, key, scope, missing=f"{read.name} has no `{key}`")
    return Measurement(read, key, scope, Interval.of(estimate), **extra)


def _nothing(snapshot: Snapshot, asset: str, why: str) -> list[Measurement]:
    """No row came out of materialised reads: one not-measured row saying why (or why the asset is absent)."""
    held = snapshot.values(asset)
    reason = (why or f"`{asset}` holds no value for this claim") if held else snapshot.why_absent(asset)
    return [Measurement(None, "", missing=reason)]


def _baseline(ev: Any) -> str:
    """The best trivial baseline of a domain's plan: its mean reward, and PPO against it (paired)."""
    best = ev.best_baseline
    if not best or best not in ev.policies:
        return ""
    policy = ev.policies[best]
    reward = Interval.of(policy.metrics.get("reward") or policy.summary.reward)
    text = f"{best}: mean reward {reward.text() if reward else '-'}"
    against = Interval.of(ev.paired.get("ppo_minus_best_baseline"))
    return text + (f"; PPO - {best} {against.text()} (paired)" if against else "")


def _unified_baseline(snapshot: Snapshot, policy: str) -> str:
    """The best trivial baseline of the unified evaluation's held-out episodes for a stage-2 `policy` ("cascade",
    "mopd"): its mean reward over the policy's domains, and the policy against it (paired); empty when the
    unified evaluation is absent or older than its baselines."""
    from models.socialrl.stage2 import BASELINE_PREFIX, MEAN

    for read in snapshot.values("unified_evaluation"):
        rows = {(r.policy, r.env_id): r for r in read.value.rows}
        mine = rows.get((policy, MEAN))
        if mine is None or mine.vs_best_baseline is None:  # (None also on rows stored before the field)
            continue
        rule = rows.get((mine.best_baseline, MEAN))
        reward = Interval.of(rule.estimate) if rule else None
        name = mine.best_baseline.removeprefix(BASELINE_PREFIX)
        return (
            f"{name}: mean reward {reward.text() if reward else '-'}; {policy} - {name} "
            f"{Interval.of(mine.vs_best_baseline).text()} (paired)"
        )
    return ""


# ------------------------------------------------------------------------------------------------ stage 1
def _stage1(pair: str, metric: str | None = None, why: str = "") -> Any:
    """A measurer of `paired[pair]` (or `behaviour_paired[metric][pair]`) in every domain that has it."""
    key = f"paired.{pair}" if metric is None else f"behaviour_paired.{metric}.{pair}"

    def measure(snapshot: Snapshot) -> list[Measurement]:
        out = []
        for read in snapshot.values("specialist_eval"):
            ev = read.value
            estimate = ev.paired.get(pair) if metric is None else (ev.behaviour_paired.get(metric) or {}).get(pair)
            if estimate is None and metric is not None:
                continue  # a metric of another domain (opening below target: the Craigslist buyer only)
            if estimate is None:
                out.append(Measurement(read, key, ev.env_id, missing=why or f"{read.name} has no `{key}`"))
                continue
            out.append(_measure(read, key, ev.env_id, estimate, baseline=_baseline(ev)))
        return out or _nothing(snapshot, "specialist_eval", f"no domain defines `{key}`")

    return measure


def _red_team_leaks(snapshot: Snapshot) -> list[Measurement]:
    out = []
    for read in snapshot.values("privacy_red_team"):
        for domain in read.value.domains:
            for name, estimate in domain.leak_difference.items():
                key = f"domains[{domain.env_id}].leak_difference['{name}']"
                out.append(_measure(read, key, f"red team, {domain.env_id}, {name}", estimate))
    return out


def _leakage(snapshot: Snapshot) -> list[Measurement]:
    held_out = [m for m in _stage1("ppo_minus_base", "leak")(snapshot) if m.read is not None]
    return held_out + _red_team_leaks(snapshot) or _nothing(snapshot, "specialist_eval", "no leak measured")


# ------------------------------------------------------------------------------------ behaviour report
def _rates(fields: tuple[str, ...]) -> Any:
    """A measurer of behaviour-report rates: per domain, the specialist (`<domain>:ppo`) beside the base."""

    def measure(snapshot: Snapshot) -> list[Measurement]:
        out = []
        for read in snapshot.values("behaviour_report"):
            by = {s.policy: s for s in read.value.summaries}
            for env_id in sorted({s.env_id for s in read.value.summaries}):
                ppo, base = by.get(f"{env_id}:ppo"), by.get(f"{env_id}:base")
                if ppo is None or base is None:
                    continue
                text = "; ".join(
                    f"{f}: specialist {_rate(getattr(ppo, f))} vs base {_rate(getattr(base, f))}" for f in fields
                )
                text += f" ({ppo.episodes} / {base.episodes} episodes)"
                key = f"summaries[{env_id}:ppo, {env_id}:base].{', '.join(fields)}"
                out.append(Measurement(read, key, env_id, value_text=text, no_interval=NO_INTERVAL_RATE))
        why = "the behaviour report holds no domain with both `<domain>:ppo` and `<domain>:base`"
        return out or _nothing(snapshot, "behaviour_report", why)

    return measure


def _rate(value: float) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.2f}"


# ----------------------------------------------------------------------------------------------- stage 2
def _transfer_asymmetry(snapshot: Snapshot) -> list[Measurement]:
    out = []
    for read in snapshot.values("transfer_matrix"):
        matrix = read.value.matrix
        effects = ", ".join(f"{d} {v:+.3f}" for d, v in matrix.donor_effects().items() if math.isfinite(v))
        cross = [c for c in matrix.cells if c.kind == "specialist" and c.donor != c.recipient]
        above = sum(1 for c in cross if c.difference.ci_low > 0)
        below = sum(1 for c in cross if c.difference.ci_high < 0)
        text = (
            f"donor effects (mean transfer to the other domains): {effects or '-'}; of {len(cross)} cross-domain "
            f"cells, {above} lie above 0 and {below} below (95% CI)"
        )
        why = "the matrix gives one interval per cell and none for a pair's asymmetry (every cell is listed below)"
        out.append(Measurement(read, "matrix.donor_effects(), matrix.cells", "all domains", None, text, why))
    return out or _nothing(snapshot, "transfer_matrix", "")


def _no_transfer(snapshot: Snapshot) -> str:
    """Why transfer cannot be read from the matrix: every cross-domain cell is exactly 0 (empty otherwise)."""
    for read in snapshot.values("transfer_matrix"):
        cross = [c.difference for c in read.value.matrix.cells if c.kind == "specialist" and c.donor != c.recipient]
        if cross and all(d.mean == d.ci_low == d.ci_high == 0.0 for d in cross):
            return f"every cross-domain cell of the transfer matrix is 0 [0, 0] ({len(cross)} cells): no transfer either way"
    return ""


def _cascade_order(snapshot: Snapshot) -> list[Measurement]:
    out = []
    for read in snapshot.values("cascade_order"):
        o = read.value
        text = (
            f"chosen {' -> '.join(o.order)} (score {o.chosen.score:+.4f}); the paper's order on these domains "
            f"{' -> '.join(o.paper.order)} ({o.paper.score:+.4f}); {o.orders_scored} orders scored"
        )
        why = "an order is chosen, not estimated: there is no interval"
        out.append(Measurement(read, "order", "all domains", None, text, why, cannot=_no_transfer(snapshot)))
    return out or _nothing(snapshot, "cascade_order", "")


def _unified_vs_frontier(snapshot: Snapshot) -> list[Measurement]:
    from models.socialrl.stage2 import CASCADE, MEAN, MOPD

    for read in snapshot.values("unified_evaluation"):
        rows = {r.policy: r for r in read.value.rows if r.env_id == MEAN}
        found = [(label, rows[p]) for p, label in ((CASCADE, "cascade"), (MOPD, "MOPD student")) if p in rows]
        text = "; ".join(f"{label} {Interval.of(r.estimate).text()}" for label, r in found)
        text = f"mean utility over the domains: {text}" if text else ""
        return [Measurement(read, "rows[cascade, mopd].mean", "", value_text=text, missing=FRONTIER)]
    return [Measurement(None, "", missing=FRONTIER)]


def _pooled_difference(a: list[Any], b: list[Any]) -> tuple[Any, list[str]]:
    """Paired difference a - b of two policies' scores pooled over their common domains (None: none)."""
    from models.socialrl.stage2 import pooled

    domains = sorted({s.env_id for s in a} & {s.env_id for s in b})
    if not domains:
        return None, domains

    def pick(scores: list[Any]) -> Any:
        return pooled([s for s in scores if s.env_id in domains])

    return pick(a).minus(pick(b)), domains


def _cascade_vs_mopd(snapshot: Snapshot) -> list[Measurement]:
    cascade, mopd = snapshot.values("cascade_policy"), snapshot.values("mopd_student")
    if not cascade or not mopd:
        return _nothing(snapshot, "cascade_policy" if not cascade else "mopd_student", "")
    estimate, domains = _pooled_difference(list(cascade[0].value.scores), list(mopd[0].value.scores))
    key = "cascade_policy.scores - mopd_student.scores, pooled"
    if estimate is None:
        return [Measurement(cascade[0], key, "", missing="the cascade and the MOPD student share no domain")]
    scope = f"mean over {', '.join(domains)}"
    return [_measure(cascade[0], key, scope, estimate, baseline=_unified_baseline(snapshot, "cascade"))]


def _recovered_share(snapshot: Snapshot) -> list[Measurement]:
    out = []
    for read in snapshot.values("mopd_student"):
        share = read.value.share
        if share is None:
            matrices = snapshot.values("transfer_matrix")
            if not matrices:
                out.append(Measurement(read, "share", missing="an older result without `share`, and no matrix"))
                continue
            share = read.value.share_of(matrices[0].value.matrix)
        scope = f"{read.value.steps} steps, {', '.join(read.value.domains)}"
        if share.reason is not None:
            out.append(Measurement(read, "share", scope, None, "undefined", f"undefined: {share.reason}"))
        else:
            out.append(
                _measure(read, "share.estimate", scope, share.estimate, baseline=_unified_baseline(snapshot, "mopd"))
            )
    return out or _nothing(snapshot, "mopd_student", "")


def _unified_vs_specialists(snapshot: Snapshot) -> list[Measurement]:
    from models.socialrl.stage2 import specialist_policy

    matrices = snapshot.values("transfer_matrix")
    if not matrices:
        return _nothing(snapshot, "transfer_matrix", "")
    matrix = matrices[0].value.matrix
    specialists = [s for s in matrix.scores if s.policy == specialist_policy(s.env_id)]
    out = []
    for asset, label, policy in (("cascade_policy", "cascade", "cascade"), ("mopd_student", "MOPD student", "mopd")):
        for read in snapshot.values(asset):
            estimate, domains = _pooled_difference(list(read.value.scores), specialists)
            key = f"{asset}.scores - transfer_matrix specialist scores, pooled"
            scope = f"{label}, mean over {', '.join(domains)}"
            rule = _unified_baseline(snapshot, policy)
            out.append(_measure(read, key, scope, estimate, baseline=rule) if domains else Measurement(read, key,
                       label, missing="no domain in common with the specialists"))  # fmt: skip
    return out or _nothing(snapshot, "cascade_policy", "")


# ---------------------------------------------------------------------------------------------------- ToM
def _tom(difference: str, on: str = "") -> Any:
    """The ToM study's paired `difference` per domain; `on`: what the row's scope adds to the domain."""

    def measure(snapshot: Snapshot) -> list[Measurement]:
        out = [
            _measure(
                read,
                f"differences['{difference}']",
                f"{read.value.env_id}, {on}" if on else read.value.env_id,
                read.value.differences.get(difference),
            )
            for read in snapshot.values("tom_analysis")
        ]
        return out or _nothing(snapshot, "tom_analysis", "")

    return measure


def _tom_prompt(snapshot: Snapshot) -> list[Measurement]:
    """The scaffold prompt on the base (the paper's test) and on the warm-start (room to fall where the base is 0)."""
    return [row for on, difference in TOM_PROMPT_DIFFERENCES.items() for row in _tom(difference, on)(snapshot)]


def _skill_correlation(snapshot: Snapshot) -> list[Measurement]:
    out = []
    for read in snapshot.values("tom_analysis"):
        for skill, estimate in read.value.correlation.items():
            out.append(_measure(read, f"correlation['{skill}']", f"{read.value.env_id}, {skill}", estimate))
    return out or _nothing(snapshot, "tom_analysis", "")


MEASURERS = {
    "specialist_over_base": _stage1("ppo_minus_base"),
    "warm_start": _stage1("sft_minus_base", why="no warm-start in this domain (PPO started from the base model)"),
    "ppo_over_warmstart": _stage1("ppo_minus_sft", why="no warm-start in this domain (PPO started from the base)"),
    "anchoring": _stage1("ppo_minus_base", "opening_below_target"),
    "concession": _rates(("over_conceding_rate",)),
    "rejection_counter_offer": _rates(("rejection_rate", "counter_offer_share")),
    "commitment_language": _rates(("commitment_rate",)),
    "leakage": _leakage,
    "transfer_asymmetry": _transfer_asymmetry,
    "cascade_order": _cascade_order,
    "cascade_best_unifier": _cascade_vs_mopd,
    "mopd_recovered_share": _recovered_share,
    "unified_vs_specialists": _unified_vs_specialists,
    "unified_vs_frontier": _unified_vs_frontier,
    "tom_prompt": _tom_prompt,
    "tom_distillation": _tom("sft_tom - sft_act"),
    "skill_outcome_correlation": _skill_correlation,
}


# ---------------------------------------------------------------------------------------------- figures
def _stage1_figures(read: StageRead) -> Mapping[str, bytes]:
    ev = read.value
    out = {"held-out rewards": evaluation_plot(ev)}
    if ev.specialist.curve:
        out["PPO learning curve"], out["PPO diagnostics"] = learning_curve_plots(ev.specialist.curve, ev.env_id)
    return out


def _behaviour_figures(read: StageRead) -> Mapping[str, bytes]:
    from models.socialrl.behaviour import behaviour_plots

    return behaviour_plots(read.value)


STAGES = (
    StageSpec("Stage 1: every policy on the held-out plan, paired differences of reward and behaviour",
              "specialist_eval", _stage1_figures, ("held-out rewards", "PPO learning curve", "PPO diagnostics"),
              "the stored result has no PPO learning curve (a domain trained without PPO iterations)"),
    StageSpec("Stage 1: the warm-start's imitation of its teacher", "warmstart_imitation"),
    StageSpec("Stage 2: transfer matrix", "transfer_matrix", expected=("heatmap_png",)),
    StageSpec("Stage 2: cascade order", "cascade_order"),
    StageSpec("Stage 2: cascade policy (forgetting / transfer curve)", "cascade_policy", expected=("curve_png",)),
    StageSpec("Stage 2: MOPD student (gap per domain)", "mopd_student", expected=("gap_png",)),
    StageSpec("Stage 2: unified evaluation", "unified_evaluation", expected=("bars_png",)),
    StageSpec("Theory of Mind: four paired arms, skills, skill-outcome correlations", "tom_analysis",
              expected=("reward by arm",), unavailable="drawn by the asset into its Dagster metadata and MLflow "
              "run (assets/tom.py), not kept in the stored output"),
    StageSpec("Behaviour of every evaluated policy (concession curves)", "behaviour_report", _behaviour_figures),
    StageSpec("Privacy red team (SRBench-style adversary)", "privacy_red_team"),
    StageSpec("Nightly re-evaluation of the champions", "champion_evaluations"),
    StageSpec("Endpoint leaderboard (six domains and Red-Black)", "endpoint_leaderboard"),
)  # fmt: skip

SPEC = PaperSpec(
    name=PAPER,
    title="From Passive Delegates to Strategic Negotiators (arXiv 2608.13787)",
    claims=CLAIMS,
    measurers=MEASURERS,
    file_measurers=FILE_MEASURERS,
    result_files=RESULT_FILES,
    stages=STAGES,
)
