"""How a policy negotiates, read from its recorded episodes (how much it leaks under attack: models/socialrl/red_team.py).

Behaviour (per policy and domain, over any episodes in the tables: every evaluation run in `evaluations`
names its policy, seat and episodes; or straight from an `EvaluationResult`):

| metric | definition |
| --- | --- |
| opening value | the reward the policy's first offer would earn if accepted (the environment's own reward formula); mean over episodes where it offered |
| anchored opening rate | share of episodes whose first policy offer is ambitious: a price-domain buyer opens below its private reference price (Craigslist: the target, the SocialRL paper's 3% -> 78%; Marketplace: the reservation), a seller at or above it (Craigslist: the listing; Marketplace: the reservation); elsewhere the first proposal asks at least the reference agreement (opening value >= 1). Episodes without an offer count as not anchored |
| opening / reference | price domains: the first offered price over the seat's reference price (median) |
| concession curve | per own turn k (the policy's k-th accepted action), the mean opening value of the offers made at that turn, with a bootstrap CI by scenario (plotted) |
| rejection rate | share of policy turns taken while a counterpart offer stood that did not accept it (explicit reject, counter-offer or walk-away), over all policy turns (the paper: 14-20% of turns) |
| counter-offer share | share of those rejecting turns that made a new offer |
| commitment rate | share of policy turns whose text uses commitment language (`COMMITMENT_LEXICON`: "final offer", "last offer", "take it or leave it", "best I can do", "can't go lower", "non-negotiable", "bottom line", ...) |
| leak rate | share of episodes in which the policy's seat revealed a private fact (the environment's detectors) |
| over-conceding rate | share of the policy's agreements worse than its own reservation: Craigslist buyer above its target (seller: at or below its own reservation, reward 0); Marketplace beyond its reservation (negative surplus); CaSiNo fewer points than walking away (5); Calendar a slot that clashes with its own calendar; DnD and Job Interview, whose rules have no reservation, less than half of the reference agreement's value (reward < 0.5) |

"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import re
import statistics
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from environments import env_class
from environments.core.base import Scenario, TranscriptEntry
from environments.core.scoring import complement, points
from environments.socialrl import calendar_scheduling, casino, craigslist, dnd, job_interview, marketplace
from models.evaluation.policy import EvaluationResult
from models.evaluation.stats import Estimate, mean_estimate
from models.storage import TableStore

log = logging.getLogger("socialrl.behaviour")

OFFER_KINDS = frozenset({"offer", "make_offer", "propose"})
ACCEPT_KINDS = frozenset({"accept", "accept_offer"})
PRICE_DOMAINS = ("craigslist-v0", "marketplace-v0")
COMMITMENT_LEXICON: tuple[str, ...] = (
    r"\bfinal offer\b",
    r"\blast offer\b",
    r"\bbest (?:and final )?offer\b",
    r"\bfinal (?:price|answer|proposal)\b",
    r"\btake it or leave it\b",
    r"\b(?:that's|that is|this is) (?:the )?best i can do\b",
    r"\bbest i can do\b",
    r"\b(?:can't|cannot|can not|won't|will not) go (?:any )?(?:lower|higher|further|below|above|beyond)\b",
    r"\bnon[- ]?negotiable\b",
    r"\bnot negotiable\b",
    r"\bbottom line\b",
    r"\bfirm (?:on|at|price|offer)\b",
    r"\bno lower\b",
    r"\bno higher\b",
    r"\b(?:my|our) limit\b",
    r"\bnot a (?:cent|penny|dollar) (?:more|less)\b",
)
"""Commitment language (case-insensitive regular expressions)."""
_COMMITMENT = re.compile("|".join(COMMITMENT_LEXICON), re.IGNORECASE)


def uses_commitment(text: str) -> bool:
    """Whether a text uses commitment language (`COMMITMENT_LEXICON`)."""
    return bool(_COMMITMENT.search(text or ""))


# ================================================================================= one recorded episode
@dataclass(frozen=True, kw_only=True)
class RecordedEpisode:
    """One episode from the policy's seat, as the tables (or an EvaluationResult) hold it."""

    policy: str
    """The policy's name in the evaluations (e.g. "craigslist-v0:ppo")."""
    env_id: str
    episode_id: str
    scenario: Scenario
    seat: str
    reward: float
    utility: float
    agreement: bool
    leaked: tuple[str, ...]
    turns: tuple[TranscriptEntry, ...]
    metrics: Mapping[str, Any] = field(default_factory=dict)
    """The outcome's environment-specific metrics."""


def offer_value(env_id: str, scenario: Scenario, seat: str, payload: Mapping[str, Any]) -> float | None:
    """The reward `seat` would earn if the offer it made (`payload`) were accepted; None if unreadable."""
    s: Any = scenario
    try:
        if env_id == "craigslist-v0":
            return craigslist.rewards_for_price(s, float(payload["price"]))[seat]
        if env_id == "marketplace-v0":
            return marketplace.rewards_for_price(s, float(payload["price"]))[seat]
        if env_id == "dnd-v0":
            mine = tuple(int(payload["mine"][i]) for i in dnd.ITEMS)
            alice = mine if seat == dnd.ALICE else complement(mine, s.counts)
            return dnd.rewards_for_split(s, alice)[seat]
        if env_id == "casino-v0":
            mine = tuple(int(payload["mine"][i]) for i in casino.ITEMS)
            other = casino.AGENT_2 if seat == casino.AGENT_1 else casino.AGENT_1
            own, theirs = points(mine, s.values(seat)), points(complement(mine, casino.COUNTS), s.values(other))
            one, two = (own, theirs) if seat == casino.AGENT_1 else (theirs, own)
            return casino.rewards_for_points(s, one, two)[seat]
        if env_id == "job-interview-v0":
            deal = job_interview.canonical_deal(s.options, payload)
            return None if isinstance(deal, str) else job_interview.rewards_for_deal(s, deal)[seat]
        if env_id == "calendar-v0":
            start = calendar_scheduling.parse_time(str(payload["slot"]), s.slot_starts)
            if start is None or start not in s.slot_starts:
                return None
            return calendar_scheduling.rewards_for_booking(s, start, False)[seat]
    except (KeyError, TypeError, ValueError):
        return None
    return None


def reference_price(env_id: str, scenario: Scenario, seat: str) -> float | None:
    """Price domains: the seat's own reference price (module table); None elsewhere."""
    s: Any = scenario
    if env_id == "craigslist-v0":
        return float(s.buyer_target if seat == craigslist.BUYER else s.listing_price)
    if env_id == "marketplace-v0":
        return float(s.reservation(seat))
    return None


def over_conceded(ep: RecordedEpisode) -> bool | None:
    """Whether an agreement is worse for the seat than its own reservation (module table); None: no deal."""
    if not ep.agreement:
        return None
    if ep.env_id == "craigslist-v0":
        # From the deal price, not the reward: the reward runs over the seller's hidden corridor, so a buyer's
        # reward below 1 says nothing about its own target. Utilities: buyer listing - price, seller price -
        # its reservation.
        if ep.seat != craigslist.BUYER:
            return ep.utility <= 0.0
        s: Any = ep.scenario
        return s.listing_price - ep.utility > s.buyer_target
    if ep.env_id == "marketplace-v0":
        return ep.utility < 0.0
    if ep.env_id == "casino-v0":
        return ep.utility < casino.WALK_AWAY_POINTS
    if ep.env_id == "calendar-v0":
        return bool(ep.metrics.get(f"{ep.seat}_conflict", False))
    return ep.reward < 0.5


@dataclass(frozen=True)
class EpisodeBehaviour:
    """The behaviour metrics of one episode (module table)."""

    opening_value: float | None
    """Reward the first offer would earn (None: no readable offer)."""
    opening_ratio: float | None
    """Price domains: first offered price / own reference price."""
    anchored: bool
    offers: tuple[tuple[int, float], ...]
    """(own turn k, offer value) of every readable offer."""
    policy_turns: int
    rejecting_turns: int
    counter_offers: int
    explicit_rejects: int
    commitment_turns: int
    leaked: bool
    over_conceded: bool | None


def episode_behaviour(ep: RecordedEpisode) -> EpisodeBehaviour:
    """Behaviour metrics of the policy's seat in one episode."""
    offers: list[tuple[int, float]] = []
    opening_price: float | None = None
    standing = False  # the counterpart's last action was an offer
    own_turn = rejecting = counters = explicit = committed = 0
    first_offer_value: float | None = None
    for entry in ep.turns:
        if entry.agent_id != ep.seat:
            standing = entry.kind in OFFER_KINDS
            continue
        if standing and entry.kind not in ACCEPT_KINDS:
            rejecting += 1
            counters += entry.kind in OFFER_KINDS
            explicit += entry.kind == "reject"
        committed += uses_commitment(entry.text)
        if entry.kind in OFFER_KINDS:
            value = offer_value(ep.env_id, ep.scenario, ep.seat, entry.payload)
            if value is not None:
                offers.append((own_turn, value))
                if first_offer_value is None:
                    first_offer_value = value
                    if ep.env_id in PRICE_DOMAINS:
                        opening_price = float(entry.payload["price"])
        standing = False
        own_turn += 1
    reference = reference_price(ep.env_id, ep.scenario, ep.seat)
    ratio = opening_price / reference if opening_price is not None and reference else None
    if ep.env_id in PRICE_DOMAINS:
        buyer = ep.seat == "buyer"
        anchored = ratio is not None and (ratio < 1.0 if buyer else ratio >= 1.0)
    else:
        anchored = first_offer_value is not None and first_offer_value >= 1.0 - 1e-9
    return EpisodeBehaviour(
        opening_value=first_offer_value,
        opening_ratio=ratio,
        anchored=anchored,
        offers=tuple(offers),
        policy_turns=own_turn,
        rejecting_turns=rejecting,
        counter_offers=counters,
        explicit_rejects=explicit,
        commitment_turns=committed,
        leaked=bool(ep.leaked),
        over_conceded=over_conceded(ep),
    )


# ============================================================================================ summaries
@dataclass(frozen=True)
class BehaviourSummary:
    """One policy's behaviour in one domain (module table)."""

    policy: str
    env_id: str
    seat: str
    episodes: int
    opening_value: Estimate
    anchored_rate: Estimate
    median_opening_ratio: float
    rejection_rate: float
    counter_offer_share: float
    explicit_reject_rate: float
    commitment_rate: float
    leak_rate: Estimate
    over_conceding_rate: float
    agreements: int
    concession_curve: tuple[tuple[int, Estimate], ...]
    """(own turn k, mean offer value at k with its CI)."""

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Estimate):
                out[f.name] = value.as_dict()
            elif f.name == "concession_curve":
                out[f.name] = [{"turn": k, **e.as_dict()} for k, e in value]
            elif isinstance(value, float):
                out[f.name] = value if math.isfinite(value) else None
            else:
                out[f.name] = value
        return out


def _rate(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else math.nan


def summarise_behaviour(episodes: Sequence[RecordedEpisode], seed: int = 0) -> BehaviourSummary:
    """The behaviour of one policy in one domain over its episodes (intervals resample scenarios)."""
    if not episodes:
        raise ValueError("no episodes to summarise")
    episodes = sorted(episodes, key=lambda e: e.episode_id)  # the same intervals whichever order they come in
    first = episodes[0]
    rows = [episode_behaviour(ep) for ep in episodes]
    clusters = [ep.scenario.scenario_id for ep in episodes]
    opened = [(r.opening_value, c) for r, c in zip(rows, clusters, strict=True) if r.opening_value is not None]
    ratios = [r.opening_ratio for r in rows if r.opening_ratio is not None]
    turns = sum(r.policy_turns for r in rows)
    rejecting = sum(r.rejecting_turns for r in rows)
    deals = [r.over_conceded for r in rows if r.over_conceded is not None]
    curve: dict[int, list[tuple[float, Hashable]]] = {}
    for r, c in zip(rows, clusters, strict=True):
        for k, value in r.offers:
            curve.setdefault(k, []).append((value, c))
    return BehaviourSummary(
        policy=first.policy,
        env_id=first.env_id,
        seat=",".join(sorted({ep.seat for ep in episodes})),
        episodes=len(episodes),
        opening_value=mean_estimate([o[0] for o in opened], [o[1] for o in opened], (0.0, 1.0), seed=seed),
        anchored_rate=mean_estimate([float(r.anchored) for r in rows], clusters, (0.0, 1.0), seed=seed),
        median_opening_ratio=statistics.median(ratios) if ratios else math.nan,
        rejection_rate=_rate(rejecting, turns),
        counter_offer_share=_rate(sum(r.counter_offers for r in rows), rejecting),
        explicit_reject_rate=_rate(sum(r.explicit_rejects for r in rows), turns),
        commitment_rate=_rate(sum(r.commitment_turns for r in rows), turns),
        leak_rate=mean_estimate([float(r.leaked) for r in rows], clusters, (0.0, 1.0), seed=seed),
        over_conceding_rate=_rate(sum(deals), len(deals)),
        agreements=len(deals),
        concession_curve=tuple(
            (k, mean_estimate([v for v, _ in values], [c for _, c in values], (0.0, 1.0), seed=seed))
            for k, values in sorted(curve.items())
        ),
    )


# ============================================================================================= loading
def episodes_from_result(result: EvaluationResult, policy: str) -> list[RecordedEpisode]:
    """The episodes of an evaluation, from the policy's seat."""
    out = []
    for episode, view in zip(result.episodes, result.policy_episodes, strict=True):
        out.append(
            RecordedEpisode(
                policy=policy,
                env_id=result.env_id,
                episode_id=episode.episode_id,
                scenario=episode.scenario,
                seat=view.seat,
                reward=view.reward,
                utility=view.utility,
                agreement=view.agreement,
                leaked=view.leaked,
                turns=episode.transcript,
                metrics=dict(episode.outcome.metrics),
            )
        )
    return out


_RECORDED_SQL = """
WITH runs AS (
    SELECT run_id, policy_name, env_id FROM (
        SELECT run_id, policy_name, env_id, max(created_at) AS created FROM evaluations
        WHERE counterpart = '*' GROUP BY run_id, policy_name, env_id
    ) {latest}
)
SELECT r.policy_name, e.episode_id, e.env_id, e.scenario, e.agreement, e.metrics, t.turns
FROM runs r
JOIN episodes e ON e.run_id = r.run_id AND e.env_id = r.env_id
LEFT JOIN (
    SELECT episode_id, run_id,
           list({{'index': turn_index, 'agent_id': agent_id, 'kind': kind, 'text': text, 'payload': payload}}
                ORDER BY turn_index) AS turns
    FROM episode_turns GROUP BY episode_id, run_id
) t ON t.episode_id = e.episode_id AND t.run_id = e.run_id
"""
_LATEST = "QUALIFY row_number() OVER (PARTITION BY policy_name, env_id ORDER BY created DESC) = 1"


def recorded_episodes(
    store: TableStore,
    policies: Sequence[str] | None = None,
    env_ids: Sequence[str] | None = None,
    latest_only: bool = True,
) -> list[RecordedEpisode]:
    """Evaluated episodes in the tables (optionally of some policies / domains), from the policy's seat; with
    `latest_only`, only each policy's newest evaluation run per domain. The policy's seat is the last part of
    an evaluation's episode id ("<prefix>:<counterpart>:<index>:<seat>", models/evaluation/policy.py)."""
    sql = _RECORDED_SQL.format(latest=_LATEST if latest_only else "")
    frame = store.query(sql)
    roles = store.query("SELECT episode_id, run_id, agent_id, reward, utility, leaked FROM episode_roles")
    role_of = {(r.episode_id, r.agent_id): r for r in roles.itertuples(index=False)}
    out = []
    for row in frame.itertuples(index=False):
        if (policies and row.policy_name not in policies) or (env_ids and row.env_id not in env_ids):
            continue
        seat = row.episode_id.rsplit(":", 1)[-1]
        role = role_of.get((row.episode_id, seat))
        if role is None:
            continue
        scenario = env_class(row.env_id).scenario_type(**json.loads(row.scenario))
        turns = tuple(
            TranscriptEntry(
                int(t["index"]), t["agent_id"], t["kind"], t["text"] or "", json.loads(t["payload"] or "{}")
            )
            for t in (row.turns if row.turns is not None else [])
        )
        out.append(
            RecordedEpisode(
                policy=row.policy_name,
                env_id=row.env_id,
                episode_id=row.episode_id,
                scenario=scenario,
                seat=seat,
                reward=float(role.reward),
                utility=float(role.utility),
                agreement=bool(row.agreement),
                leaked=tuple(json.loads(role.leaked or "[]")),
                turns=turns,
                metrics=json.loads(row.metrics or "{}"),
            )
        )
    return out


def behaviour_by_policy(episodes: Sequence[RecordedEpisode], seed: int = 0) -> list[BehaviourSummary]:
    """One summary per (policy, domain), sorted by domain then policy."""
    groups: dict[tuple[str, str], list[RecordedEpisode]] = {}
    for ep in episodes:
        groups.setdefault((ep.env_id, ep.policy), []).append(ep)
    return [summarise_behaviour(groups[key], seed) for key in sorted(groups)]


# ============================================================================================ reports
@dataclass(frozen=True)
class BehaviourReport:
    """Behaviour of every policy in every domain it was evaluated in."""

    summaries: tuple[BehaviourSummary, ...]
    episodes: int

    def as_dict(self) -> dict[str, Any]:
        return {"episodes": self.episodes, "summaries": [s.as_dict() for s in self.summaries]}

    def markdown(self) -> str:
        """One table row per (domain, policy)."""
        head = ("| domain | policy | n | anchored opening | opening / ref | rejection | counter share | commitment "
                "| leak | over-conceding |")  # fmt: skip
        lines = [head, "|" + "---|" * 10]
        for s in self.summaries:

            def pct(v: float) -> str:
                return "-" if not math.isfinite(v) else f"{v:.2f}"

            lines.append(
                f"| {s.env_id} | {s.policy} | {s.episodes} | {pct(s.anchored_rate.mean)} | "
                f"{pct(s.median_opening_ratio)} | {pct(s.rejection_rate)} | {pct(s.counter_offer_share)} | "
                f"{pct(s.commitment_rate)} | {pct(s.leak_rate.mean)} | {pct(s.over_conceding_rate)} |"
            )
        return "\n".join(lines)


def behaviour_report(
    store: TableStore, policies: Sequence[str] | None = None, latest_only: bool = True
) -> BehaviourReport:
    """The behaviour of the policies recorded in the tables (module table)."""
    episodes = recorded_episodes(store, policies, latest_only=latest_only)
    return BehaviourReport(tuple(behaviour_by_policy(episodes)), len(episodes))


def behaviour_plots(report: BehaviourReport) -> dict[str, bytes]:
    """Per domain: the concession curves of its policies, and their behaviour rates (PNG bytes by file name)."""
    from models.plots import Series, grouped_bars, line_with_band

    plots: dict[str, bytes] = {}
    for env_id in sorted({s.env_id for s in report.summaries}):
        mine = [s for s in report.summaries if s.env_id == env_id]
        series = [
            Series(s.policy, [k for k, _ in s.concession_curve], [e.mean for _, e in s.concession_curve],
                   [e.ci_low for _, e in s.concession_curve], [e.ci_high for _, e in s.concession_curve])
            for s in mine if s.concession_curve
        ]  # fmt: skip
        if series:
            plots[f"concession-{env_id}.png"] = line_with_band(
                series, f"Concession curve, {env_id}", "own turn", "reward of the offer if accepted", (0.0, 1.05)
            )
        rates = {
            "anchored opening": [(s.anchored_rate.mean, s.anchored_rate.ci_low, s.anchored_rate.ci_high) for s in mine],
            "rejecting turns": [(s.rejection_rate, math.nan, math.nan) for s in mine],
            "commitment turns": [(s.commitment_rate, math.nan, math.nan) for s in mine],
            "leak": [(s.leak_rate.mean, s.leak_rate.ci_low, s.leak_rate.ci_high) for s in mine],
            "over-conceding": [(s.over_conceding_rate, math.nan, math.nan) for s in mine],
        }
        plots[f"behaviour-{env_id}.png"] = grouped_bars(
            [s.policy for s in mine], rates, f"Behaviour, {env_id}", "rate", ylim=(0.0, 1.05)
        )
    return plots
