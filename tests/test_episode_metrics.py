"""Per-episode behaviour metrics (models/socialrl/episode_metrics.py) read from real episodes: rejections with a
counter-price and commitment to one final offer, counted as the listening counterparts count them."""

from __future__ import annotations

import math

import pytest

from agents.socialrl.code_agents import make_code_agent
from agents.socialrl.scripted import BuyerScript, ScriptedBuyer
from environments.socialrl.craigslist import CraigslistScenario
from models.evaluation.policy import EvaluationPlan, EvaluationResult, evaluate_policy
from models.socialrl.episode_metrics import (
    BOUNDED,
    METRICS,
    episode_metrics,
    kept_final_price,
    rejections_with_counter,
)
from tests.test_baselines import ScriptedBuyer as TextSeat  # replies with given texts, as a model's

PLAN = EvaluationPlan("craigslist-v0", 4, seat="buyer")
SCENARIO = CraigslistScenario(
    scenario_id="t:1",
    category="bike",
    title="Road bike",
    description=("Light frame", "New tyres"),
    listing_price=200.0,
    buyer_target=150.0,
)


def play(make_policy, plan: EvaluationPlan = PLAN) -> tuple[EvaluationResult, list[dict[str, float]], list]:
    """The evaluation, each episode's metrics, and each episode's counterpart (the listening seller)."""
    counterparts = {}

    def counterpart(name: str, seed: int):
        agent = make_code_agent(name, seed)
        reset = agent.reset

        async def recorded(agent_id, env_id, spec, episode_id) -> None:
            counterparts[episode_id] = agent
            await reset(agent_id, env_id, spec, episode_id)

        agent.reset = recorded
        return agent

    result = evaluate_policy(plan, make_policy, counterpart)
    metrics = [episode_metrics(e, v) for e, v in zip(result.episodes, result.policy_episodes, strict=True)]
    sellers = [counterparts[e.episode_id] for e in result.episodes]
    return result, metrics, sellers


def scripted(script: BuyerScript, plan: EvaluationPlan = PLAN):
    return play(lambda seed: ScriptedBuyer(script, seed), plan)


def buyer_offers(episode) -> list[float]:
    return [float(e.payload["price"]) for e in episode.transcript if e.agent_id == "buyer" and e.kind == "offer"]


def test_the_new_metrics_are_bounded_and_listed_with_the_price_metrics() -> None:
    assert METRICS.index("first_offer_accepted") < METRICS.index("reject_with_counter")
    assert METRICS.index("reject_with_counter") < METRICS.index("commitment") < METRICS.index("opening_below_target")
    assert {"reject_with_counter", "commitment"} <= BOUNDED


def test_reject_with_counter_counts_counter_offers_with_rejection_words_as_the_counterpart_does() -> None:
    rejecting, rejecting_metrics, rejecting_sellers = scripted(BuyerScript(reject_words=True))
    plain, plain_metrics, plain_sellers = scripted(BuyerScript())
    assert len(rejecting.episodes) == len(plain.episodes) == 12  # 4 scenarios x 3 counterparts
    for episode, metrics, seller in zip(rejecting.episodes, rejecting_metrics, rejecting_sellers, strict=True):
        rejections, facing = rejections_with_counter(episode, "buyer")
        assert facing > 0  # the seller answers the buyer's opening with an offer
        # every buyer turn facing a fresh seller offer either accepts it or counters with "That's too high"
        accepts = sum(1 for e in episode.transcript if e.agent_id == "buyer" and e.kind == "accept")
        assert rejections == facing - accepts > 0
        assert metrics["reject_with_counter"] == pytest.approx((facing - accepts) / facing)
        assert rejections == seller.listener.rejections  # what the listening seller counted
    for episode, metrics, seller in zip(plain.episodes, plain_metrics, plain_sellers, strict=True):
        assert rejections_with_counter(episode, "buyer")[1] > 0
        assert metrics["reject_with_counter"] == 0.0  # counters without rejection words turn nothing down
        assert seller.listener.rejections == 0


def test_reject_with_counter_needs_a_counter_price_and_a_standing_offer() -> None:
    replies = [
        "OFFER $100",
        "I could do $120 instead.\nREJECT",  # a reject naming a counter-price: counted
        "REJECT",  # a reject without a counter: a turn, not counted (the offer no longer stands)
        "That's too high for me. How about $125?",  # rejection words naming a price in a message: counted
        "That's too high for me.\nOFFER $130",  # rejection words with an offer: counted
        "Sounds good to me.\nOFFER $135",  # a counter-offer without rejection words: not counted
        "No way, I'd pay $140 at most.\nQUIT",  # a walk-away never counts, whatever it says
    ]
    plan = EvaluationPlan("craigslist-v0", (SCENARIO,), seat="buyer", counterparts=("boulware",), seed=3)
    result, metrics, sellers = play(lambda seed: TextSeat(replies), plan)
    episode = result.episodes[0]
    kinds = [(e.agent_id, e.kind) for e in episode.transcript]
    assert [k for a, k in kinds if a == "buyer"] == ["offer", "reject", "reject", "message", "offer", "offer", "quit"]
    assert [k for a, k in kinds if a == "seller"] == ["offer"] * 6  # each buyer turn faced a fresh seller offer
    assert rejections_with_counter(episode, "buyer") == (3, 6)
    assert metrics[0]["reject_with_counter"] == pytest.approx(3 / 6)
    # the listening seller counts the same three, and the walk-away's words too (after which nothing is answered)
    assert sellers[0].listener.rejections == 3 + 1


def test_an_offer_turned_down_with_a_counter_or_rejected_stands_no_more() -> None:
    buyer = [
        "OFFER $100",
        "That's too high.\nOFFER $110",  # turns down the standing $190: counted
        "That's too high.\nOFFER $115",  # $190 still stands in the environment but was turned down: no turn
        "REJECT",  # turns down $185 without a counter: a turn, not counted; the offer stands no more
        "That's too high.\nOFFER $125",  # nothing stands: no turn
        "OK.\nOFFER $130",  # facing $180 without rejecting it: a turn, not counted
    ]
    seller = ["OFFER $190", "Let me think about it.", "OFFER $185", "Hmm.", "OFFER $180", "QUIT"]
    plan = EvaluationPlan("craigslist-v0", (SCENARIO,), seat="buyer", counterparts=("text",), seed=3)
    result = evaluate_policy(plan, lambda seed: TextSeat(buyer), lambda name, seed: TextSeat(seller))
    episode = result.episodes[0]
    assert [e.kind for e in episode.transcript] == [
        *("offer", "offer", "offer", "message", "offer", "offer", "reject", "message", "offer", "offer", "offer"),
        "quit",
    ]
    assert rejections_with_counter(episode, "buyer") == (1, 3)
    assert episode_metrics(episode, result.policy_episodes[0])["reject_with_counter"] == pytest.approx(1 / 3)


def test_commitment_is_one_final_offer_that_the_seat_never_moves_from() -> None:
    once, once_metrics, once_sellers = scripted(BuyerScript(final="once"))
    every, every_metrics, every_sellers = scripted(BuyerScript(final="every"))
    _, plain_metrics, _ = scripted(BuyerScript())
    reached = []
    for episode, metrics, seller in zip(once.episodes, once_metrics, once_sellers, strict=True):
        # the anchored buyer reaches its hold price with its fifth offer (concede_turns=4) and calls it final there
        offers = buyer_offers(episode)
        reached.append(len(offers) >= 5)
        assert metrics["commitment"] == float(reached[-1])
        if reached[-1]:
            assert kept_final_price(episode, "buyer") == offers[4] == max(offers)
        committed = seller.listener.partner_final is not None and not seller.listener.finals_broken
        assert metrics["commitment"] == float(committed)  # as the listening seller judged the final offer
    assert any(reached) and not all(reached)  # both cases occur in this sample
    for episode, metrics, seller in zip(every.episodes, every_metrics, every_sellers, strict=True):
        # "This is my final offer" at every (moving) price: no commitment once the price moved
        assert len(set(buyer_offers(episode))) > 1
        assert metrics["commitment"] == 0.0 and kept_final_price(episode, "buyer") is None
        assert seller.listener.finals_broken
    assert all(m["commitment"] == 0.0 for m in plain_metrics)


@pytest.mark.parametrize(
    ("replies", "expected"),
    [
        # the final called in a message is the last offer's price, and the seat holds it
        (["OFFER $120", "That is my final offer.", "OFFER $120", "QUIT"], 120.0),
        # a final named in a message before any offer is at the price it names
        (["Take it or leave it: $130.", "OFFER $130", "QUIT"], 130.0),
        # two finals at two named prices, before any offer
        (["Take it or leave it: $130.", "My final price is $140.", "QUIT"], None),
        # moved after calling a price final
        (["This is my final offer: $120.\nOFFER $120", "OFFER $125", "QUIT"], None),
        # two finals at two prices
        (["This is my final offer.\nOFFER $120", "My final offer is $125.\nOFFER $125", "QUIT"], None),
        # a negated final commits to nothing
        (["This is not my final offer.\nOFFER $120", "OFFER $125", "QUIT"], None),
    ],
)
def test_commitment_reads_the_price_each_final_is_called_at(replies: list[str], expected: float | None) -> None:
    plan = EvaluationPlan("craigslist-v0", (SCENARIO,), seat="buyer", counterparts=("boulware",), seed=3)
    result, metrics, sellers = play(lambda seed: TextSeat(replies), plan)
    episode = result.episodes[0]
    assert [e.kind for e in episode.transcript if e.agent_id == "buyer"][-1] == "quit"  # played to the end
    assert kept_final_price(episode, "buyer") == expected
    assert metrics[0]["commitment"] == float(expected is not None)
    listener = sellers[0].listener
    assert (listener.partner_final is not None and not listener.finals_broken) == (expected is not None)


def test_over_conceded_reads_the_deal_price_against_the_buyers_target() -> None:
    """Deals above the buyer's target count 1, at or below it 0 (both occur among a scripted buyer's deals); an
    episode without a deal leaves the metric undefined."""
    plan = EvaluationPlan("craigslist-v0", 8, seat="buyer")
    result, metrics, _ = scripted(BuyerScript(hold="listing", hold_share=0.9), plan)
    seen = set()
    for episode, values in zip(result.episodes, metrics, strict=True):
        if not episode.outcome.agreement:
            assert math.isnan(values["over_conceded"])
            continue
        price, target = float(episode.outcome.deal["price"]), episode.scenario.buyer_target
        assert values["over_conceded"] == float(price > target)
        seen.add(values["over_conceded"])
    assert seen == {0.0, 1.0} and "over_conceded" in BOUNDED


def test_undefined_without_a_standing_offer_or_outside_the_price_domains() -> None:
    plan = EvaluationPlan("craigslist-v0", (SCENARIO,), seat="buyer", counterparts=("boulware",), seed=3)
    _, metrics, _ = play(lambda seed: TextSeat(["QUIT"]), plan)
    assert math.isnan(metrics[0]["reject_with_counter"])  # it left before any seller offer stood
    assert metrics[0]["commitment"] == 0.0
    other = EvaluationPlan("casino-v0", 1, seat=None, counterparts=("boulware",), seed=0)
    result = evaluate_policy(other, lambda seed: make_code_agent("conceder", seed))
    for episode, view in zip(result.episodes, result.policy_episodes, strict=True):
        metrics = episode_metrics(episode, view)
        assert math.isnan(metrics["reject_with_counter"]) and math.isnan(metrics["commitment"])


@pytest.mark.parametrize(
    "script", [BuyerScript(reject_words=True), BuyerScript(final="once"), BuyerScript(final="every")]
)
def test_marketplace_counts_as_its_listening_seller_does(script: BuyerScript) -> None:
    result, metrics, sellers = scripted(script, EvaluationPlan("marketplace-v0", 4, seat="buyer"))
    for episode, values, seller in zip(result.episodes, metrics, sellers, strict=True):
        rejections, facing = rejections_with_counter(episode, "buyer")
        assert facing > 0 and rejections == seller.listener.rejections
        assert values["reject_with_counter"] == pytest.approx(rejections / facing)
        committed = seller.listener.partner_final is not None and not seller.listener.finals_broken
        assert values["commitment"] == float(committed)
    assert any(m["reject_with_counter"] > 0 for m in metrics) == script.reject_words
    assert any(m["commitment"] == 1.0 for m in metrics) == (script.final == "once")
