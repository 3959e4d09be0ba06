"""Trivial code baselines and the per-episode behaviour metrics every trained policy is compared on."""

from __future__ import annotations

import math

import pytest

from agents.socialrl.baselines import BASELINES, make_baseline
from environments.core.events import RAW_TEXT, Action
from environments.socialrl.craigslist import CraigslistScenario
from models.evaluation.policy import EvaluationPlan, evaluate_policy
from models.socialrl.episode_metrics import episode_records, paired_metric, paired_metrics, summary

SCENARIO = CraigslistScenario(
    scenario_id="t:1",
    category="bike",
    title="Road bike",
    description=("Light frame", "New tyres"),
    listing_price=200.0,
    buyer_target=150.0,
)


def plan(counterparts: tuple[str, ...] = ("boulware",), scenarios: tuple = (SCENARIO,)) -> EvaluationPlan:
    return EvaluationPlan("craigslist-v0", scenarios, seat="buyer", counterparts=counterparts, seed=3)


def test_accept_first_takes_the_sellers_opening_offer() -> None:
    result = evaluate_policy(plan(), lambda seed: make_baseline("accept_first", seed))
    episode = result.episodes[0]
    buyer = [e for e in episode.transcript if e.agent_id == "buyer"]
    seller_offers = [e for e in episode.transcript if e.agent_id == "seller" and e.kind == "offer"]
    assert [e.kind for e in buyer] == ["message", "accept"]
    assert episode.outcome.deal == {"price": seller_offers[0].payload["price"]} == {"price": 200.0}
    record = episode_records(result)[0]
    assert record.metrics["first_offer_accepted"] == 1.0 and record.metrics["offer_rate"] == 0.0
    assert record.metrics["reward"] == 0.0  # the listing is the worst price for the buyer
    assert record.metrics["command_rate"] == 0.5  # one message, one accept
    assert math.isnan(record.metrics["opening_over_target"])  # no offer: undefined, not 0
    assert record.metrics["opening_below_target"] == 0.0


def test_hold_target_offers_the_target_every_turn_and_accepts_at_or_below_it() -> None:
    result = evaluate_policy(plan(("boulware", "conceder")), lambda seed: make_baseline("hold_target", seed))
    for episode in result.episodes:
        offers = [e.payload["price"] for e in episode.transcript if e.agent_id == "buyer" and e.kind == "offer"]
        assert offers and set(offers) == {150.0}
        if episode.outcome.deal:
            assert episode.outcome.deal["price"] <= 150.0
    records = episode_records(result)
    assert all(r.metrics["opening_over_target"] == 1.0 for r in records)
    assert all(r.metrics["opening_below_target"] == 0.0 for r in records)  # at the target is not below it


def test_split_difference_meets_the_counterpart_halfway() -> None:
    result = evaluate_policy(plan(("boulware",)), lambda seed: make_baseline("split_difference", seed))
    episode = result.episodes[0]
    offers = [e.payload["price"] for e in episode.transcript if e.kind == "offer"]
    # buyer opens at its best price (0.85 x target), the seller answers at the listing, then the midpoint.
    assert offers[0] == pytest.approx(127.5) and offers[1] == 200.0
    assert offers[2] == pytest.approx((127.5 + 200.0) / 2, abs=2.0)  # on the deal space's price grid


def test_unknown_baseline_is_refused() -> None:
    with pytest.raises(KeyError, match="unknown baseline 'nope'"):
        make_baseline("nope")
    assert set(BASELINES) == {"accept_first", "hold_target", "split_difference"}


class ScriptedBuyer:
    """Replies with the given texts in order (RAW_TEXT, parsed by the environment like a model's)."""

    def __init__(self, replies: list[str]) -> None:
        self.replies = list(replies)

    async def reset(self, agent_id, env_id, spec, episode_id) -> None:
        self.agent_id = agent_id

    async def observe(self, event) -> None:
        pass

    async def act(self, request) -> Action:
        return Action(self.agent_id, RAW_TEXT, self.replies.pop(0) if self.replies else "QUIT")


def test_command_rate_counts_invalid_attempts_and_plain_talk_as_replies_without_a_command() -> None:
    replies = ["Hello there!", "OFFER $-5", "I can pay a bit.\nOFFER $120", "QUIT"]
    result = evaluate_policy(plan(), lambda seed: ScriptedBuyer(replies))
    record = episode_records(result)[0]
    # four replies: a message, an invalid offer, a valid offer, a quit -> two carry a valid command line
    assert record.metrics["command_rate"] == pytest.approx(2 / 4)
    assert record.metrics["invalid_per_turn"] == pytest.approx(1 / 4)
    assert record.metrics["opening_over_target"] == pytest.approx(120 / 150)
    assert record.metrics["opening_below_target"] == 1.0 and record.metrics["offer_rate"] == 1.0


def test_paired_metrics_compare_the_same_episodes_and_only_where_both_define_a_metric() -> None:
    scenarios = (SCENARIO, CraigslistScenario("t:2", "bike", "City bike", ("Basket",), 100.0, 60.0))
    p = plan(("boulware", "conceder"), scenarios)
    accept = episode_records(evaluate_policy(p, lambda seed: make_baseline("accept_first", seed)))
    hold = episode_records(evaluate_policy(p, lambda seed: make_baseline("hold_target", seed)))
    offers = paired_metric(hold, accept, "offer_rate")
    assert offers.mean == 1.0 and offers.n == 4
    # accept_first never offers: the conditional metric is defined nowhere on its side, so nothing is paired
    assert paired_metric(hold, accept, "opening_below_target_given_offer").n == 0
    assert "opening_below_target_given_offer" not in paired_metrics(hold, accept)
    assert summary(hold)["opening_over_target"].mean == 1.0  # a median, without an interval
    # ... and paired as the mean per-episode difference where both open with an offer
    one = plan(("boulware", "conceder"))
    hold_one = episode_records(evaluate_policy(one, lambda seed: make_baseline("hold_target", seed)))
    low = episode_records(evaluate_policy(one, lambda seed: ScriptedBuyer(["OFFER $120", "QUIT"])))
    opening = paired_metrics(hold_one, low)["opening_over_target"]
    assert opening.mean == pytest.approx(1 - 120 / 150) and opening.n == 2
    with pytest.raises(ValueError, match="not paired"):
        paired_metric(hold, accept[:2], "reward")
    part = paired_metric(hold, accept[:2], "reward", common=True)
    assert part.n == 2
