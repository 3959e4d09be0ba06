"""The incentive audit: does a price environment pay for the behaviours the SocialRL paper reports as learned?

An optimiser finds only what the reward pays for, so before anything is trained the audit plays scripted
buyers (agents/socialrl/scripted.py, no model) that differ in one behaviour, paired on the same held-out
episodes of a domain's plan (`evaluation_plan(domain, profile, seat="buyer")`), and compares them with the
scenario-clustered bootstrap of models/evaluation/stats.py:

| behaviour | minuend | subtrahend | must |
| --- | --- | --- | --- |
| `protect_information` | the base (never states its limit) | the base stating "My target is $T and my maximum is $R." every turn | pay |
| `anchor` | the base (opens at 0.8 x target, concedes to its hold price over 4 offers) | the base opening at its hold price | pay |
| `reject_with_counter` | the base with "That's too high for me." before each counter-offer to a standing seller offer | the base (counters without rejecting) | pay |
| `commit` | the base saying "This is my final offer" once, when it first reaches its hold price (then holds, as the base does), in the episodes where that price lies inside the counterpart's reservation (a credible commitment; the script is told the reservation, as the oracle is) | the base | pay |
| `commit_bluff` | the same final offer in the episodes where the hold price lies beyond the counterpart's reservation | the base | reported |
| `commit_uninformed` | the same final offer in every episode (a buyer that cannot tell whether its price is credible: the sum of the two above) | the base | reported |
| `commit_spam` | the base saying "This is my final offer" in every message | the base | not pay |

The base is run at each hold price of `IncentiveSettings.base_hold_shares` (a share of the way from the target
to the buyer's reservation: firm, midway, generous), and each behaviour's effect is pooled over them, so
that no single choice of base decides whether a behaviour pays (`by_base` keeps each base's own effect).
Beside them: the best fixed rule (hold max(target, f x listing) from the first offer, best f on a grid),
which must fall clearly below the teacher (no learnable constant); an oracle told the counterpart's
reservation (the headroom: anchors, rejects with counters, concedes to the reservation and commits there);
the trivial baselines (agents/socialrl/baselines.py); the strategic teacher. Craigslist is also calibrated
against people: the teacher's deals (price / listing) against the human deals of the held-out CoCoA dialogues
(median, deciles, two-sample Kolmogorov-Smirnov distance, agreement rates).

Results: `run_incentive_audit` returns an `IncentiveAudit`; `IncentiveAudit.as_json()` is the shape of
benchmarks/results/incentives_cpu.json (`python -m benchmarks.bench_incentives`), which the asset
`environment_incentives` also writes and checks. Code-only episodes: the audit takes seconds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats as scipy_stats

from agents.env_version import env_version
from agents.socialrl.baselines import BASELINES, make_baseline
from agents.socialrl.scripted import BuyerScript, ScriptedBuyer, view_key
from agents.socialrl.teacher import make_teacher
from environments.core.data import DataFileError
from environments.core.runtime import Agent
from environments.socialrl import craigslist
from models.evaluation.policy import EvaluationPlan, EvaluationResult, evaluate_policy
from models.evaluation.scenarios import is_held_out
from models.evaluation.stats import Estimate, mean_estimate, paired_difference

BEHAVIOURS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "protect_information": ({}, {"states_limit": True}),
    "anchor": ({}, {"opening": "hold"}),
    "reject_with_counter": ({"reject_words": True}, {}),
    "commit": ({"final": "once", "final_when": "inside_reservation"}, {}),
    "commit_bluff": ({"final": "once", "final_when": "beyond_reservation"}, {}),
    "commit_uninformed": ({"final": "once"}, {}),
    "commit_spam": ({"final": "every"}, {}),
}
"""Behaviour -> (minuend, subtrahend) as `BuyerScript` changes to the base (see the module table)."""
MUST_NOT_PAY = ("commit_spam",)
"""Behaviours that must not pay: a phrase repeated without meaning."""
REPORTED_ONLY = ("commit_bluff", "commit_uninformed")
"""Behaviours measured without a target: a commitment's value splits into the credible part (`commit`, which
must pay) and the bluff (which the counterparts may punish), and a buyer that cannot tell them apart gets their sum."""
PRICE_DOMAINS = ("craigslist-v0", "marketplace-v0")


def plays_price_buyer(plan: EvaluationPlan) -> bool:
    """Whether `plan` plays a price domain's buyer seat: where the scripted buyers, and so the audit and the
    best fixed rule, are defined."""
    return plan.env_id in PRICE_DOMAINS and plan.seat == "buyer"


@dataclass(frozen=True, kw_only=True)
class IncentiveSettings:
    """What the audit plays beside each domain's plan."""

    base_hold_shares: tuple[float, ...] = (0.25, 0.5, 0.75)
    """Hold prices of the base scripts, as shares of the way from the target to the buyer's reservation."""
    fixed_rule_grid: tuple[float, ...] = tuple(round(0.5 + 0.05 * i, 2) for i in range(10))
    """Shares f of the listing searched by the best fixed rule, hold max(target, f x listing)."""
    bootstrap_seed: int = 0
    """Seed of every bootstrap interval."""

    def __post_init__(self) -> None:
        if not self.base_hold_shares or not all(0.0 <= s <= 1.0 for s in self.base_hold_shares):
            raise ValueError(f"base_hold_shares must be shares in [0, 1], got {self.base_hold_shares}")
        if not self.fixed_rule_grid or not all(0.0 < f <= 1.5 for f in self.fixed_rule_grid):
            raise ValueError(f"fixed_rule_grid must be positive shares of the listing, got {self.fixed_rule_grid}")


@dataclass(frozen=True, kw_only=True)
class BehaviourEffect:
    """One behaviour's paired effect on the buyer's reward, pooled over the base scripts."""

    effect: Estimate
    """Mean per-episode reward difference (minuend - subtrahend), scenario-clustered bootstrap."""
    identical: int
    """Episode pairs whose rewards are equal."""
    by_base: dict[str, Estimate]
    """The same effect at each base hold share alone (key: the share)."""


@dataclass(frozen=True, kw_only=True)
class Calibration:
    """The teacher's deals against people's on held-out CoCoA listings."""

    deal_over_listing_median: float
    """Median price / listing of the teacher's deals."""
    deal_over_listing_deciles: tuple[float, ...]
    """Its 10th to 90th percentiles."""
    human_deal_over_listing_median: float
    """Median price / listing of the human deals in the held-out CoCoA dialogues."""
    human_deal_over_listing_deciles: tuple[float, ...]
    """Their 10th to 90th percentiles."""
    ks_distance: float
    """Two-sample Kolmogorov-Smirnov statistic between the two distributions."""
    agreement: float
    """The teacher's agreement rate."""
    human_agreement: float
    """The share of held-out human dialogues that ended in a deal."""
    teacher_deals: int
    """Deals behind the teacher's distribution."""
    human_deals: int
    """Deals behind the human distribution."""


@dataclass(frozen=True, kw_only=True)
class DomainAudit:
    """The audit of one price domain."""

    env_id: str
    """The domain."""
    n: int
    """Episodes of the plan (each policy plays all of them)."""
    clusters: int
    """Distinct scenario contents (the bootstrap's clusters; fewer than 8 makes every interval fragile)."""
    behaviours: dict[str, BehaviourEffect]
    """Each behaviour of `BEHAVIOURS`."""
    fixed_rules: dict[str, Estimate]
    """Mean reward of hold max(target, f x listing) per f."""
    best_fixed_rule: tuple[float, Estimate]
    """(f, its mean reward) of the best fixed rule."""
    teacher: Estimate
    """The strategic teacher's mean reward."""
    teacher_minus_best_fixed_rule: Estimate
    """Paired teacher - best fixed rule."""
    oracle: Estimate
    """The oracle told the counterpart's reservation."""
    baselines: dict[str, Estimate]
    """Each trivial baseline's mean reward."""
    base: dict[str, Estimate]
    """Each base script's own mean reward (key: its hold share)."""
    agreement: dict[str, float]
    """Agreement rate of the teacher, the oracle, the best fixed rule and each baseline."""
    calibration: Calibration | None
    """Craigslist only (None elsewhere or without the shared data)."""


@dataclass(frozen=True, kw_only=True)
class IncentiveAudit:
    """The audit of every price domain, with the environment version it measured."""

    env_version: str
    """`agents.env_version.env_version()` of the code that was audited."""
    domains: dict[str, DomainAudit]
    """Per domain."""
    settings: IncentiveSettings
    """What was played."""

    def failures(self) -> list[str]:
        """What the audit's targets refuse, in words (empty: every target holds)."""
        problems = []
        for env_id, d in self.domains.items():
            for name, b in d.behaviours.items():
                low = b.effect.ci_low
                if name in MUST_NOT_PAY and low > 0:
                    problems.append(f"{env_id}: {name} pays ({b.effect.text()}) though it must not")
                if name not in MUST_NOT_PAY + REPORTED_ONLY and not low > 0:
                    problems.append(f"{env_id}: {name} does not pay ({b.effect.text()})")
            if not d.teacher_minus_best_fixed_rule.ci_low > 0:
                problems.append(
                    f"{env_id}: the best fixed rule (f = {d.best_fixed_rule[0]:g}) is not clearly below the teacher "
                    f"({d.teacher_minus_best_fixed_rule.text()})"
                )
            if not d.oracle.mean > d.teacher.mean:
                problems.append(f"{env_id}: the oracle ({d.oracle.mean:.3f}) is not above the teacher")
            if d.calibration is not None and d.calibration.ks_distance > 0.15:
                problems.append(f"{env_id}: teacher deals differ from people's (KS {d.calibration.ks_distance:.3f})")
        return problems

    def as_json(self) -> dict[str, Any]:
        """The shape of benchmarks/results/incentives_cpu.json."""
        return {
            "env_version": self.env_version,
            "settings": dataclasses.asdict(self.settings),
            "domains": {env_id: _domain_json(d) for env_id, d in self.domains.items()},
            "failures": self.failures(),
        }


def _estimate_json(e: Estimate) -> dict[str, Any]:
    return {**e.as_dict(), "clusters": e.clusters}


def _domain_json(d: DomainAudit) -> dict[str, Any]:
    calibration = None
    if d.calibration is not None:
        calibration = {
            k: (list(v) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(d.calibration).items()
        }
    return {
        "n": d.n,
        "clusters": d.clusters,
        "behaviours": {
            name: {
                **_estimate_json(b.effect),
                "identical": b.identical,
                "by_base": {share: _estimate_json(e) for share, e in b.by_base.items()},
            }
            for name, b in d.behaviours.items()
        },
        "best_fixed_rule": {"fraction": d.best_fixed_rule[0], **_estimate_json(d.best_fixed_rule[1])},
        "fixed_rules": {f: _estimate_json(e) for f, e in d.fixed_rules.items()},
        "teacher_minus_best_fixed_rule": _estimate_json(d.teacher_minus_best_fixed_rule),
        "teacher": _estimate_json(d.teacher),
        "oracle": _estimate_json(d.oracle),
        "baselines": {name: _estimate_json(e) for name, e in d.baselines.items()},
        "base": {share: _estimate_json(e) for share, e in d.base.items()},
        "agreement": d.agreement,
        "calibration": calibration,
    }


# ------------------------------------------------------------------------------------------------ audit
def _rewards(result: EvaluationResult, tag: Hashable = None) -> dict[Hashable, float]:
    return {(tag, e.pair_key): e.reward for e in result.policy_episodes}


def _clusters(result: EvaluationResult, tag: Hashable = None) -> dict[Hashable, Hashable]:
    """Clusters by scenario *content*: a plan that cycles a small dataset (Marketplace's 11 held-out tasks fill
    32 slots) repeats a scenario, and its repeats are not independent draws."""
    return {(tag, e.pair_key): e.scenario_id for e in result.policy_episodes}


def _own_mean(result: EvaluationResult, seed: int) -> Estimate:
    views = result.policy_episodes
    return mean_estimate([e.reward for e in views], [e.scenario_id for e in views], (0.0, 1.0), seed=seed)


def _reservations(plan: EvaluationPlan) -> dict[tuple[Any, ...], float]:
    """The counterpart's (seller's) reservation of each scenario of the plan, keyed as the buyer sees it."""
    found: dict[tuple[Any, ...], float] = {}
    for scenario in plan.scenario_list():
        if plan.env_id == "craigslist-v0":
            view = {
                "public": {"title": scenario.title, "listing_price": scenario.listing_price},
                "private": {"target_price": scenario.buyer_target},
            }
            found[view_key(view)] = scenario.reservation
        else:
            view = {
                "public": {"product": scenario.product, "listed_price": scenario.listed_price},
                "private": {"reservation_price": scenario.buyer_reservation},
            }
            found[view_key(view)] = scenario.seller_reservation
    return found


def _calibration(plan: EvaluationPlan, teacher: EvaluationResult) -> Calibration | None:
    """The teacher's deals against the human deals of the held-out CoCoA dialogues (None without the data)."""
    try:
        human = craigslist.human_deal_prices()
        loaded = craigslist.CraigslistEnv.load_dataset(skip_bad=True)
    except DataFileError:
        return None
    held_out = [s for s in loaded if is_held_out(plan.env_id, s)]
    outcomes = [(human.get(s.scenario_id), s.listing_price) for s in held_out]
    human_shares = np.array([price / listing for price, listing in outcomes if price is not None])
    teacher_shares = np.array(
        [e.outcome.deal["price"] / e.scenario.listing_price for e in teacher.episodes if e.outcome.agreement]
    )
    if len(human_shares) < 2 or len(teacher_shares) < 2:
        return None
    deciles = (10, 20, 30, 40, 50, 60, 70, 80, 90)
    return Calibration(
        deal_over_listing_median=round(float(np.median(teacher_shares)), 4),
        deal_over_listing_deciles=tuple(round(float(x), 4) for x in np.percentile(teacher_shares, deciles)),
        human_deal_over_listing_median=round(float(np.median(human_shares)), 4),
        human_deal_over_listing_deciles=tuple(round(float(x), 4) for x in np.percentile(human_shares, deciles)),
        ks_distance=round(float(scipy_stats.ks_2samp(teacher_shares, human_shares).statistic), 4),
        agreement=round(teacher.summary.agreement_rate, 4),
        human_agreement=round(len(human_shares) / len(outcomes), 4),
        teacher_deals=len(teacher_shares),
        human_deals=len(human_shares),
    )


def audit_domain(
    plan: EvaluationPlan,
    settings: IncentiveSettings = IncentiveSettings(),
    play: Callable[[EvaluationPlan, Callable[[int], Agent]], EvaluationResult] = evaluate_policy,
) -> DomainAudit:
    """The audit of one price domain on `plan` (its buyer seat; see the module table)."""
    if not plays_price_buyer(plan):
        raise ValueError(f"the audit plays the buyer seat of {PRICE_DOMAINS}, got {plan.env_id} seat {plan.seat}")
    seed = settings.bootstrap_seed

    reservations = _reservations(plan)

    def scripted(**changes: Any) -> EvaluationResult:
        script = BuyerScript(**changes)
        return play(plan, lambda s: ScriptedBuyer(script, s, reservations))

    results: dict[tuple[str, float], EvaluationResult] = {}
    base_means: dict[str, Estimate] = {}
    variants = sorted({changes_key(c) for pair in BEHAVIOURS.values() for c in pair})
    for share in settings.base_hold_shares:
        for key in variants:
            results[(key, share)] = scripted(hold_share=share, **dict(key))
        base_means[f"{share:g}"] = _own_mean(results[((), share)], seed)

    behaviours = {}
    for name, (minuend, subtrahend) in BEHAVIOURS.items():
        a: dict[Hashable, float] = {}
        b: dict[Hashable, float] = {}
        clusters: dict[Hashable, Hashable] = {}
        by_base = {}
        for share in settings.base_hold_shares:
            ra, rb = results[(changes_key(minuend), share)], results[(changes_key(subtrahend), share)]
            a.update(_rewards(ra, share))
            b.update(_rewards(rb, share))
            clusters.update(_clusters(ra, share))
            by_base[f"{share:g}"] = paired_difference(_rewards(ra), _rewards(rb), _clusters(ra), seed=seed)
        effect = paired_difference(a, b, clusters, seed=seed)
        identical = sum(abs(a[k] - b[k]) < 1e-12 for k in a)
        behaviours[name] = BehaviourEffect(effect=effect, identical=identical, by_base=by_base)

    best_f, fixed = search_fixed_rule(plan, settings.fixed_rule_grid, play)
    fixed_means = {f: _own_mean(r, seed) for f, r in fixed.items()}
    teacher = play(plan, make_teacher)
    oracle_script = BuyerScript(hold="oracle", reject_words=True, final="once")
    oracle = play(plan, lambda s: ScriptedBuyer(oracle_script, s, reservations))
    baselines = {name: play(plan, lambda s, name=name: make_baseline(name, s)) for name in BASELINES}
    first = teacher.policy_episodes
    agreement = {
        "teacher": teacher.summary.agreement_rate,
        "oracle": oracle.summary.agreement_rate,
        "best_fixed_rule": fixed[best_f].summary.agreement_rate,
        **{name: r.summary.agreement_rate for name, r in baselines.items()},
    }
    return DomainAudit(
        env_id=plan.env_id,
        n=len(first),
        clusters=len({e.scenario_id for e in first}),
        behaviours=behaviours,
        fixed_rules={f"{f:g}": e for f, e in fixed_means.items()},
        best_fixed_rule=(best_f, fixed_means[best_f]),
        teacher=_own_mean(teacher, seed),
        teacher_minus_best_fixed_rule=paired_difference(
            _rewards(teacher), _rewards(fixed[best_f]), _clusters(teacher), seed=seed
        ),
        oracle=_own_mean(oracle, seed),
        baselines={name: _own_mean(r, seed) for name, r in baselines.items()},
        base=base_means,
        agreement={k: round(float(v), 4) for k, v in agreement.items()},
        calibration=_calibration(plan, teacher) if plan.env_id == "craigslist-v0" else None,
    )


def fixed_rule_script(fraction: float) -> BuyerScript:
    """The fixed rule: offer max(target, `fraction` x listing) from the first offer and hold it."""
    return BuyerScript(opening="hold", hold="listing", hold_share=fraction)


def search_fixed_rule(
    plan: EvaluationPlan,
    grid: Sequence[float] = IncentiveSettings().fixed_rule_grid,
    play: Callable[[EvaluationPlan, Callable[[int], Agent]], EvaluationResult] = evaluate_policy,
) -> tuple[float, dict[float, EvaluationResult]]:
    """The best fixed rule on `plan` (a price domain's buyer seat): the fraction of `grid` with the highest mean
    reward (ties: the smaller fraction), and every fraction's result. Chosen on the plan it is then compared
    on, so the rule is as strong as one constant can be there."""
    if not plays_price_buyer(plan):
        raise ValueError(f"the fixed rule plays the buyer seat of {PRICE_DOMAINS}, got {plan.env_id} seat {plan.seat}")
    results = {f: play(plan, lambda s, f=f: ScriptedBuyer(fixed_rule_script(f), s)) for f in grid}
    means = {f: float(np.mean([e.reward for e in r.policy_episodes])) for f, r in results.items()}
    return max(means, key=lambda f: (means[f], -f)), results


def changes_key(changes: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    """A hashable, ordered form of a `BuyerScript` change set."""
    return tuple(sorted(changes.items()))


def run_incentive_audit(
    plans: Sequence[EvaluationPlan], settings: IncentiveSettings = IncentiveSettings()
) -> IncentiveAudit:
    """The audit of every plan's domain (one plan per price domain, its buyer seat)."""
    return IncentiveAudit(
        env_version=env_version(),
        domains={plan.env_id: audit_domain(plan, settings) for plan in plans},
        settings=settings,
    )
