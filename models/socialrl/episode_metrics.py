"""What a policy does in each evaluation episode, beyond its reward, and paired comparisons of it.

Every metric is computed per episode of the policy's seat, so two policies evaluated on one plan are
compared episode by episode (scenario-clustered bootstrap, models/evaluation/stats.py), like reward.

| metric | per episode | where |
| --- | --- | --- |
| `reward` | the seat's normalised reward | every domain |
| `agreement` | 1 when the episode ended in a deal | every domain |
| `command_rate` | replies that end in a valid command line (an accepted move that is not plain talk) / replies (accepted moves + invalid attempts) | every domain |
| `invalid_per_turn` | invalid attempts / replies | every domain |
| `leak` | 1 when the seat revealed a private fact | every domain |
| `rounds` | accepted moves of both seats | every domain |
| `offer_rate` | 1 when the seat made at least one price offer | Craigslist, Marketplace |
| `first_offer_accepted` | 1 when the seat accepted the counterpart's opening offer (the deal closed at it) | Craigslist, Marketplace |
| `reject_with_counter` | seat turns that turn down the counterpart's standing offer while naming a counter-price (a `reject` move or rejection words, `is_rejection`, with an offer's price or a price in the text; an accept or walk-away never counts) / seat turns at which a counterpart offer stood (made, and neither rejected nor yet turned down with a counter by the seat); undefined without such a turn. As the listening counterparts count a rejection with a counter (agents/socialrl/price_counterpart.py) | Craigslist, Marketplace |
| `commitment` | 1 when the seat called a price final (`says_final`; the price: its offer's, else its last offer's, else the one it names) and never moved from it (no later offer or final at another price), else 0: the SocialRL paper's one credible final offer, judged as the listening counterparts judge it | Craigslist, Marketplace |
| `opening_below_target` | 1 when the seat's first offer is below its target (0 without an offer): the SocialRL paper's anchoring measure | Craigslist buyer |
| `opening_below_target_given_offer` | as above, among episodes with an offer (undefined without one) | Craigslist buyer |
| `opening_over_target` | first offer / target (undefined without an offer); summarised by its median | Craigslist buyer |
| `over_conceded` | 1 when the deal's price is above the seat's target, 0 at or below it; undefined without a deal: the SocialRL paper's concession past one's own limit, read as the behaviour report reads it (models/socialrl/behaviour.py `over_conceded`) | Craigslist buyer |

An undefined value is NaN; a paired difference uses the episodes where both policies define it (its `n`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from agents.socialrl.price_reading import is_rejection, mentioned_price, says_final
from environments.core.base import TranscriptEntry
from environments.core.runtime import EpisodeResult
from environments.socialrl.craigslist import BUYER, CraigslistEnv, opening_offer
from environments.socialrl.marketplace import MarketplaceEnv
from environments.socialrl.price_offers import PriceMoves
from models.evaluation.policy import EvaluationResult, PolicyEpisode
from models.evaluation.stats import Estimate, mean_estimate, paired_difference

MESSAGE_KINDS = frozenset({"message", "send_message"})
"""Action kinds that are plain talk (no move), across the SocialRL domains."""
PRICE_MOVES: dict[str, PriceMoves] = {env.env_id: env.moves for env in (CraigslistEnv, MarketplaceEnv)}
"""The price domains and their move kinds (offer, accept, reject, walk-away, ...)."""
METRICS = (
    "reward",
    "agreement",
    "command_rate",
    "invalid_per_turn",
    "leak",
    "rounds",
    "offer_rate",
    "first_offer_accepted",
    "reject_with_counter",
    "commitment",
    "opening_below_target",
    "opening_below_target_given_offer",
    "opening_over_target",
    "over_conceded",
)
"""Every per-episode metric, in report order (module table)."""
MEDIAN_METRICS = frozenset({"opening_over_target"})
"""Metrics summarised by their median (a ratio whose mean a few wild offers would dominate)."""
BOUNDED = frozenset(METRICS) - {"rounds", "opening_over_target"}
"""Metrics that lie in [0, 1] (their intervals are clipped to it)."""


def _opening(episode: EpisodeResult, seat: str, kind: str) -> float | None:
    for entry in episode.transcript:
        if entry.agent_id == seat and entry.kind == kind:
            return float(entry.payload["price"])
    return None


def _offered(entry: TranscriptEntry, moves: PriceMoves) -> float | None:
    return float(entry.payload["price"]) if entry.kind == moves.offer else None


def rejections_with_counter(episode: EpisodeResult, seat: str) -> tuple[int, int]:
    """(turns of `seat` that turned down the counterpart's standing offer with a counter-price, turns of `seat` at
    which a counterpart offer stood) in a price-domain episode (module table, `reject_with_counter`)."""
    moves = PRICE_MOVES[episode.env_id]
    rejections = turns = 0
    standing = False  # a counterpart offer stands that the seat has neither rejected nor turned down with a counter
    for entry in episode.transcript:
        if entry.agent_id != seat:
            standing = standing or entry.kind == moves.offer
            continue
        if standing:
            turns += 1
            offered = _offered(entry, moves)
            counter = offered if offered is not None else mentioned_price(entry.text)
            turned_down = entry.kind == moves.reject or is_rejection(entry.text)
            if counter is not None and turned_down and entry.kind not in (moves.accept, moves.walk_away):
                rejections += 1
                standing = False
        if entry.kind == moves.reject:
            standing = False
    return rejections, turns


def kept_final_price(episode: EpisodeResult, seat: str) -> float | None:
    """The one price `seat` called final in a price-domain episode and never moved from (module table,
    `commitment`); None when it called none, or called one and then offered or called final another price."""
    moves = PRICE_MOVES[episode.env_id]
    final: float | None = None
    last_offer: float | None = None
    for entry in episode.transcript:
        if entry.agent_id != seat:
            continue
        offered = _offered(entry, moves)
        if offered is not None:
            if final is not None and abs(offered - final) > 1e-9:
                return None  # moved after calling a price final
            last_offer = offered
        if says_final(entry.text):
            price = offered if offered is not None else last_offer
            price = price if price is not None else mentioned_price(entry.text)
            if price is not None:
                if final is not None and abs(price - final) > 1e-9:
                    return None  # a second final at another price
                final = price
    return final


def episode_metrics(episode: EpisodeResult, view: PolicyEpisode) -> dict[str, float]:
    """The module table's metrics of one episode, for the policy's seat."""
    seat = view.seat
    mine = [e for e in episode.transcript if e.agent_id == seat]
    replies = view.policy_turns
    commands = sum(1 for e in mine if e.kind not in MESSAGE_KINDS)
    metrics = {
        "reward": view.reward,
        "agreement": float(view.agreement),
        "command_rate": commands / replies if replies else math.nan,
        "invalid_per_turn": view.invalid_actions / replies if replies else math.nan,
        "leak": float(bool(view.leaked)),
        "rounds": float(view.rounds),
    }
    nan = dict.fromkeys(METRICS, math.nan)
    moves = PRICE_MOVES.get(episode.env_id)
    if moves is None:
        return {**nan, **metrics}
    offer_kind, accept_kind = moves.offer, moves.accept
    other = next((e.agent_id for e in episode.transcript if e.agent_id != seat), None)
    their_opening = _opening(episode, other, offer_kind) if other else None
    closing = next((e for e in reversed(episode.transcript) if e.kind == accept_kind), None)
    metrics["offer_rate"] = float(any(e.kind == offer_kind for e in mine))
    metrics["first_offer_accepted"] = float(
        closing is not None
        and closing.agent_id == seat
        and their_opening is not None
        and abs(float(closing.payload.get("price", math.nan)) - their_opening) < 1e-9
    )
    rejections, facing = rejections_with_counter(episode, seat)
    metrics["reject_with_counter"] = rejections / facing if facing else math.nan
    metrics["commitment"] = float(kept_final_price(episode, seat) is not None)
    if episode.env_id == "craigslist-v0" and seat == BUYER:
        target = episode.scenario.buyer_target
        price = opening_offer(episode.transcript, BUYER)
        below = price is not None and price < target
        metrics["opening_below_target"] = float(below)
        metrics["opening_below_target_given_offer"] = float(below) if price is not None else math.nan
        metrics["opening_over_target"] = price / target if price is not None else math.nan
        deal = episode.outcome.deal if episode.outcome.agreement else None
        if deal is not None and deal.get("price") is not None:
            metrics["over_conceded"] = float(float(deal["price"]) > target)
    return {**nan, **metrics}


@dataclass(frozen=True)
class EpisodeRecord:
    """One episode of a policy, reduced to what comparisons need (picklable, small)."""

    key: tuple[Hashable, ...]
    """The episode's pair key (models/evaluation/policy.py `PolicyEpisode.pair_key`)."""
    cluster: int
    """The scenario's position in the plan: the bootstrap's resampling unit."""
    counterpart: str
    metrics: Mapping[str, float]


def episode_records(result: EvaluationResult) -> tuple[EpisodeRecord, ...]:
    """Every episode of an evaluation as a record."""
    return tuple(
        EpisodeRecord(view.pair_key, view.scenario_index, view.counterpart, episode_metrics(episode, view))
        for episode, view in zip(result.episodes, result.policy_episodes, strict=True)
    )


def summarise_metric(records: Sequence[EpisodeRecord], metric: str, seed: int = 0) -> Estimate:
    """A policy's mean (median for MEDIAN_METRICS, with no interval) of `metric` over the episodes that
    define it, with a scenario-clustered bootstrap interval."""
    pairs = [(r.metrics[metric], r.cluster) for r in records if math.isfinite(r.metrics.get(metric, math.nan))]
    if metric in MEDIAN_METRICS:
        values = [v for v, _ in pairs]
        return Estimate(statistics.median(values) if values else math.nan, math.nan, math.nan, len(values))
    bounds = (0.0, 1.0) if metric in BOUNDED else None
    return mean_estimate([v for v, _ in pairs], [c for _, c in pairs], bounds, seed=seed)


def summary(records: Sequence[EpisodeRecord], seed: int = 0) -> dict[str, Estimate]:
    """Every metric some episode defines, summarised."""
    defined = [m for m in METRICS if any(math.isfinite(r.metrics.get(m, math.nan)) for r in records)]
    return {m: summarise_metric(records, m, seed) for m in defined}


def paired_metric(
    a: Sequence[EpisodeRecord], b: Sequence[EpisodeRecord], metric: str, seed: int = 0, common: bool = False
) -> Estimate:
    """Mean per-episode difference a - b of `metric` over the episodes both define, scenario-clustered.
    Both must come from one plan; `common=True` allows one to cover only part of it (a policy evaluated
    on fewer scenarios of the same plan) and compares the episodes they share."""
    values_a = {r.key: r.metrics.get(metric, math.nan) for r in a}
    values_b = {r.key: r.metrics.get(metric, math.nan) for r in b}
    if common:
        shared = set(values_a) & set(values_b)
        if not shared:
            raise ValueError("not paired: the two evaluations share no episode")
        values_a = {k: v for k, v in values_a.items() if k in shared}
        values_b = {k: v for k, v in values_b.items() if k in shared}
    elif set(values_a) != set(values_b):
        raise ValueError(f"not paired: {len(set(values_a) ^ set(values_b))} episodes are in only one evaluation")
    both = {k for k in values_a if math.isfinite(values_a[k]) and math.isfinite(values_b[k])}
    clusters = {r.key: r.cluster for r in a}
    return paired_difference(
        {k: values_a[k] for k in both}, {k: values_b[k] for k in both}, {k: clusters[k] for k in both}, seed=seed
    )


def paired_metrics(
    a: Sequence[EpisodeRecord], b: Sequence[EpisodeRecord], seed: int = 0, common: bool = False
) -> dict[str, Estimate]:
    """`paired_metric` for every metric both define somewhere. A median metric (the opening over target) is
    paired too, as the mean of its per-episode differences over the episodes where both define it."""
    out = {}
    for metric in METRICS:
        estimate = paired_metric(a, b, metric, seed, common)
        if estimate.n:
            out[metric] = estimate
    return out


def quantiles(
    records: Sequence[EpisodeRecord], metric: str, points: Sequence[float] = (0.1, 0.25, 0.5, 0.75, 0.9)
) -> dict[str, float]:
    """The distribution of `metric` over the episodes that define it: {"q10": ..., "q50": ..., "n": ...}."""
    values = [r.metrics[metric] for r in records if math.isfinite(r.metrics.get(metric, math.nan))]
    out: dict[str, float] = {"n": float(len(values))}
    if values:
        out.update({f"q{round(p * 100)}": float(np.quantile(values, p)) for p in points})
    return out
