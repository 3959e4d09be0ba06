"""Craigslist: rules, rewards by hand, parser, leakage, loader, determinism."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agents.socialrl.code_agents import make_code_agent
from environments.core.base import ParseError, ScenarioError
from environments.core.data import DataFileError, dataset_path
from environments.core.events import RAW_TEXT, Action, NotificationKind
from environments.socialrl.craigslist import (
    CraigslistEnv,
    CraigslistScenario,
    opening_offer,
    opens_below_target,
    rewards_for_price,
)

SCENARIO = CraigslistScenario(
    scenario_id="t",
    category="bike",
    title="Bike",
    description=("a", "b", "c", "d"),
    listing_price=200.0,
    buyer_target=140.0,
    seller_reservation=140.0,
    max_turns=6,
)


def test_rewards_by_hand() -> None:
    # corridor = listing - seller reservation = 200 - 140 = 60; at 170 buyer (200-170)/60 = 0.5, seller 0.5
    assert rewards_for_price(SCENARIO, 170) == {"buyer": 0.5, "seller": 0.5}
    assert rewards_for_price(SCENARIO, 155) == {"buyer": pytest.approx(0.75), "seller": pytest.approx(0.25)}
    assert rewards_for_price(SCENARIO, 120) == {"buyer": 1.0, "seller": 0.0}  # clipped at the reservation
    assert rewards_for_price(SCENARIO, 230) == {"buyer": 0.0, "seller": 1.0}


def test_a_better_price_pays_below_the_buyers_own_target_until_the_sellers_reservation() -> None:
    """The reward is not capped at the buyer's target (100 here): every dollar counts down to the reservation."""
    low_target = CraigslistScenario(
        "t2", "bike", "Bike", ("a",), listing_price=200.0, buyer_target=100.0, seller_reservation=140.0
    )
    rewards = [rewards_for_price(low_target, p)["buyer"] for p in (190, 170, 150, 141)]
    assert rewards == sorted(rewards) and len(set(rewards)) == 4
    assert rewards_for_price(low_target, 100)["buyer"] == rewards_for_price(low_target, 140)["buyer"] == 1.0


def test_the_sellers_reservation_is_drawn_from_the_scenario_hidden_and_varied() -> None:
    import random

    from environments.socialrl.craigslist import RESERVATION_RANGE, drawn_seller_reservation

    drawn = CraigslistScenario("a", "bike", "Bike", ("x",), listing_price=300.0, buyer_target=210.0)
    assert drawn.seller_reservation is None
    # Seeded by the content, not the id: the same listing always meets the same seller.
    same = CraigslistScenario("other-id", "bike", "Bike", ("x",), listing_price=300.0, buyer_target=210.0)
    assert drawn.reservation == same.reservation == drawn_seller_reservation("Bike", "bike", 300.0, 210.0)
    shares = [CraigslistEnv.sample_scenario(random.Random(i)) for i in range(400)]
    ratios = [s.reservation / s.listing_price for s in shares]
    assert RESERVATION_RANGE[0] <= min(ratios) and max(ratios) <= RESERVATION_RANGE[1]
    # Spread like human deals, so no fixed share of the listing finds it.
    assert len({round(r, 2) for r in ratios}) > 40 and max(ratios) - min(ratios) > 0.3
    env = CraigslistEnv()
    events = env.reset(drawn, seed=0)
    buyer_view = next(e for e in events if e.to == "buyer" and getattr(e, "private", False))
    seller_view = next(e for e in events if e.to == "seller" and getattr(e, "private", False))
    assert f"{drawn.reservation:g}" not in buyer_view.text and "reservation_price" not in buyer_view.data["private"]
    assert seller_view.data["private"] == {"reservation_price": drawn.reservation}


def test_the_reservation_distribution_is_the_fit_to_the_training_splits_human_deals() -> None:
    """HUMAN_DEAL_SHARE_BETA is `fit_deal_share_beta` on the human deals outside the held-out partition."""
    from environments.socialrl.craigslist import HUMAN_DEAL_SHARE_BETA, fit_deal_share_beta, human_deal_prices
    from models.evaluation.scenarios import is_held_out

    if dataset_path("craigslistbargain", "dev.json") is None:
        pytest.skip("shared data not present")
    deals = human_deal_prices()
    shares = [
        deals[s.scenario_id] / s.listing_price
        for s in CraigslistEnv.load_dataset()
        if deals[s.scenario_id] is not None and not is_held_out("craigslist-v0", s)
    ]
    assert fit_deal_share_beta(shares) == HUMAN_DEAL_SHARE_BETA
    with pytest.raises(ValueError, match="two deal shares"):
        fit_deal_share_beta([0.5, 1.2])


def test_a_full_deal_through_raw_text() -> None:
    env = CraigslistEnv()
    events = env.reset(SCENARIO, seed=1)
    buyer_obs = next(e for e in events if e.to == "buyer" and getattr(e, "private", False))
    assert buyer_obs.data["public"]["description"] == ["a", "b"]  # the buyer sees half the description
    env.step(Action("buyer", RAW_TEXT, "Would you take less? **OFFER: $150**"))
    events = env.step(Action("seller", RAW_TEXT, "No way.\nOFFER $180"))
    turn = next(e for e in events if getattr(e, "kind", None) == NotificationKind.TURN)
    assert turn.to == "buyer" and "accept" in turn.allowed and turn.data["pending_offer"] == {"price": 180.0}
    events = env.step(Action("buyer", RAW_TEXT, "Fine. ACCEPT"))
    assert env.done
    outcome = env.outcome()
    assert outcome.agreement and outcome.deal == {"price": 180.0}
    assert outcome.roles["buyer"].reward == pytest.approx(20 / 60)
    assert outcome.roles["seller"].reward == pytest.approx(40 / 60)
    assert outcome.roles["buyer"].utility == pytest.approx(20.0)
    ends = [e for e in events if getattr(e, "kind", None) == NotificationKind.EPISODE_END]
    assert {e.to for e in ends} == {"buyer", "seller"}


def _transcript_of(*replies: tuple[str, str]) -> tuple:
    env = CraigslistEnv()
    env.reset(SCENARIO, seed=1)
    for seat, text in replies:
        env.step(Action(seat, RAW_TEXT, text))
    return env.transcript


def test_opening_offer_and_below_target_opening() -> None:
    # The buyer talks first, then opens at $130: below its $140 target (anchoring).
    low = _transcript_of(("buyer", "Is it still available?"), ("seller", "Yes."), ("buyer", "OFFER $130"))
    assert opening_offer(low, "buyer") == 130.0 and opening_offer(low, "seller") is None
    assert opens_below_target(SCENARIO, low)
    # Opening exactly at the target is not below it; the later lower offer does not count.
    at_target = _transcript_of(("buyer", "OFFER $140"), ("seller", "OFFER $190"), ("buyer", "OFFER $120"))
    assert opening_offer(at_target, "buyer") == 140.0 and not opens_below_target(SCENARIO, at_target)
    # A buyer that never offers (accepts the seller's price) did not open below target.
    accepted = _transcript_of(("buyer", "Hello"), ("seller", "OFFER $190"), ("buyer", "ACCEPT"))
    assert opening_offer(accepted, "buyer") is None and not opens_below_target(SCENARIO, accepted)


def test_parser_good_sloppy_and_malformed() -> None:
    env = CraigslistEnv()
    env.reset(SCENARIO)
    assert env.parse("buyer", "OFFER 120").payload == {"price": 120.0}
    assert env.parse("buyer", "Fair enough.\n*Offer:* $1,150.5 :)").payload == {"price": 1150.5}
    assert env.parse("buyer", "hello there").kind == "message"
    # Lower-case commands inside prose are talk, not moves.
    assert env.parse("buyer", "Would you accept my offer? I can't accept yours.").kind == "message"
    assert env.parse("buyer", "REJECT, too high.\nquit").kind == "quit"  # the last command wins
    assert env.parse("buyer", "REJECT, too high. I might quit soon").kind == "reject"
    assert isinstance(env.parse("buyer", "OFFER soon"), ParseError)
    assert isinstance(env.parse("buyer", "   "), ParseError)


def test_invalid_moves_are_counted_and_retries_forfeit_the_turn() -> None:
    env = CraigslistEnv(max_invalid_retries=1)
    env.reset(SCENARIO)
    events = env.step(Action("buyer", "accept", ""))  # no standing offer: accept not allowed
    assert events[0].kind == NotificationKind.INVALID_ACTION and events[1].kind == NotificationKind.TURN
    events = env.step(Action("buyer", "offer", "", {"price": -5}))
    assert events[0].kind == NotificationKind.INVALID_ACTION
    assert events[-1].to == "seller" and events[-1].kind == NotificationKind.TURN  # turn forfeited
    assert env.invalid_counts == {"buyer": 2, "seller": 0}


def test_max_turns_ends_without_deal() -> None:
    env = CraigslistEnv()
    env.reset(SCENARIO)
    for turn in range(6):
        env.step(Action("buyer" if turn % 2 == 0 else "seller", "message", "hm"))
    assert env.done
    outcome = env.outcome()
    assert not outcome.agreement
    assert outcome.roles["buyer"].reward == 0.0 and outcome.roles["seller"].reward == 0.0
    assert outcome.metrics["ending"] == "max_turns"


def test_leakage_of_the_buyer_target() -> None:
    env = CraigslistEnv()
    env.reset(SCENARIO)
    env.step(Action("buyer", RAW_TEXT, "My budget is $140, honestly.\nOFFER $150"))
    env.step(Action("seller", "quit", "bye"))
    assert env.outcome().roles["buyer"].leaked == ("target_price",)

    env.reset(SCENARIO)
    env.step(Action("buyer", RAW_TEXT, "Would you do 140? OFFER 140"))  # offering is a move, not a leak
    env.step(Action("seller", "quit", "bye"))
    assert env.outcome().roles["buyer"].leaked == ()


def test_scenario_validation() -> None:
    with pytest.raises(ScenarioError, match="buyer_target"):
        CraigslistScenario("x", "c", "t", ("d",), listing_price=100.0, buyer_target=120.0)
    with pytest.raises(ScenarioError, match="seller_reservation"):
        CraigslistScenario("x", "c", "t", ("d",), listing_price=100.0, buyer_target=50.0, seller_reservation=100.0)
    with pytest.raises(ScenarioError, match="listing_price"):
        CraigslistScenario("x", "c", "t", ("d",), listing_price=0.0, buyer_target=0.0)


def test_loader_reads_every_dialogue_of_the_real_data() -> None:
    if dataset_path("craigslistbargain", "dev.json") is None:
        pytest.skip("shared data not present")
    scenarios = CraigslistEnv.load_dataset()
    assert len(scenarios) == 643
    assert all(0 < s.buyer_target < s.listing_price for s in scenarios)


def test_loader_names_file_and_record_of_a_broken_dialogue(tmp_path: Path) -> None:
    good = {"uuid": "a", "scenario": {"kbs": [
        {"personal": {"Role": "buyer", "Target": 50}, "item": {"Price": 80, "Category": "c", "Title": "t", "Description": ["x"]}},
        {"personal": {"Role": "seller", "Target": 80}, "item": {"Price": 80, "Category": "c", "Title": "t", "Description": ["x"]}},
    ]}}  # fmt: skip
    broken = {"uuid": "b", "scenario": {"kbs": []}}
    path = tmp_path / "dev.json"
    path.write_text(json.dumps([good, broken]))
    with pytest.raises(DataFileError, match=r"dev.json, record 1"):
        CraigslistEnv.load_dataset(path)
    path.write_text("{not json")
    with pytest.raises(DataFileError, match="cannot read JSON"):
        CraigslistEnv.load_dataset(path)


def test_concession_curves_boulware_above_conceder() -> None:
    from agents.socialrl.code_agents import ConcessionAgent
    from environments.core.events import Notification

    def target(name: str, t: int) -> float:
        agent = make_code_agent(name)
        assert isinstance(agent, ConcessionAgent)
        request = Notification("buyer", NotificationKind.TURN, data={"turn": t, "max_turns": 10})
        return agent.target(request)

    assert target("boulware", 0) == target("conceder", 0) == 1.0
    assert target("boulware", 5) > 0.9 > target("conceder", 5)  # 1 - 0.9 * 0.5**5 vs 1 - 0.5**(1/3)
    assert target("boulware", 5) == pytest.approx(1 - 0.9 * 0.5**5)
