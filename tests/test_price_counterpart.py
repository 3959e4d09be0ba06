"""Listening price counterparts (agents/socialrl/price_counterpart.py): each behaviour is one parameter, and each
is shown to change what the seller does, against the same seller without it, through `PriceListener` directly
and through real Craigslist episodes."""

from __future__ import annotations

import asyncio
import dataclasses
import random

import pytest

from agents.socialrl.code_agents import make_code_agent
from agents.socialrl.price_counterpart import LISTENING_TYPES, ListeningConfig, PriceListener
from agents.socialrl.scripted import BuyerScript, ScriptedBuyer
from environments.core.events import Notification, NotificationKind
from environments.core.runtime import run_episode
from environments.socialrl.bargaining import PriceDealSpace
from environments.socialrl.craigslist import CraigslistEnv, CraigslistScenario

BASE = ListeningConfig(
    exponent=(1.0, 1.0),
    slack=(0.5, 0.5),
    reciprocity=0.0,
    rejection_step=0.0,
    anchor_weight=0.0,
    insult_ratio=0.5,
    insult_walk=0.0,
    credibility=0.0,
    bluff_walk=0.0,
    patience_grace=100,
    patience_rate=0.0,
    information=False,
)
"""A seller that listens to nothing: each test switches on one behaviour."""


def seller(config: ListeningConfig = BASE, seed: int = 0) -> PriceListener:
    # Listing $200, reservation $100: planned final f0 = 100 + 0.5 x 100 = $150.
    return PriceListener(config, PriceDealSpace(best=200.0, worst=100.0), "seller", random.Random(seed))


def turn(t: int, max_turns: int = 20) -> Notification:
    allowed = ("message", "offer", "accept", "reject", "quit")
    return Notification("seller", NotificationKind.TURN, allowed=allowed, data={"turn": t, "max_turns": max_turns})


def offer(price: float, said: str = "", move: str = "offer") -> dict:
    return {"said": said, "move": move, "offer": {"price": price}}


def test_the_clock_alone_reaches_the_planned_final_never_the_reservation() -> None:
    s = seller()
    assert s.planned == 150.0 and s.aspiration(turn(0)) == 200.0
    assert s.aspiration(turn(10)) == pytest.approx(200 - 50 * 10 / 19) and s.aspiration(turn(19)) == 150.0
    s.hear(offer(120.0))
    assert s.decide(turn(19), 149.0).kind == "offer"  # below the planned final even at its deadline
    assert s.decide(turn(19), 150.0).kind == "accept"


def test_information_a_stated_limit_becomes_the_floor() -> None:
    told, untold = seller(dataclasses.replace(BASE, information=True)), seller()
    for s in (told, untold):
        s.hear(offer(120.0, "My budget is $190, but I'd like to pay less."))
    assert told.floor == 190.0 and untold.floor == 100.0
    assert told.aspiration(turn(20)) == 190.0 and untold.aspiration(turn(20)) == 150.0
    assert told.decide(turn(19), 180.0).kind == "offer" and untold.decide(turn(19), 180.0).kind == "accept"


def test_anchoring_a_credible_low_opening_pulls_the_planned_final_an_insult_may_end_the_talk() -> None:
    anchored = dataclasses.replace(BASE, anchor_weight=0.5)
    low, high = seller(anchored), seller(anchored)
    low.hear(offer(60.0))  # the insult line is 100 x 0.5 = 50: credible, and the lowest possible pull
    high.hear(offer(150.0))  # at the planned final: no pull
    assert low.final == pytest.approx(150 - 0.5 * (150 - 60) / (150 - 50) * 50)
    assert high.final == 150.0 and not low.walk_now
    insulted = seller(dataclasses.replace(anchored, insult_walk=1.0))
    insulted.hear(offer(40.0))
    assert insulted.final == 150.0 and insulted.walk_now
    assert insulted.decide(turn(1), 40.0).kind == "quit"


def test_concessions_are_answered_relative_to_the_opening_gap() -> None:
    mover, stayer = (
        seller(dataclasses.replace(BASE, reciprocity=1.0)),
        seller(dataclasses.replace(BASE, reciprocity=1.0)),
    )
    for s in (mover, stayer):
        s.hear(offer(100.0))
    mover.hear(offer(150.0))  # closed half of the 200 - 100 gap
    stayer.hear(offer(100.0))
    assert mover.aspiration(turn(2)) == pytest.approx(200 - 50 * (2 / 19 + 0.5))
    assert stayer.aspiration(turn(2)) == pytest.approx(200 - 50 * 2 / 19)
    assert stayer.stalls == 1 and mover.stalls == 0


def test_a_rejection_moves_the_seller_only_with_a_counter_price() -> None:
    config = dataclasses.replace(BASE, rejection_step=0.2)
    countered, bare, plain = seller(config), seller(config), seller(config)
    for s in (countered, bare, plain):
        s.hear(offer(120.0))
        s.decide(turn(1), 120.0)  # its own offer now stands
    countered.hear(offer(125.0, "That's too high for me."))
    bare.hear({"said": "No.", "move": "reject"})
    plain.hear(offer(125.0, "How about this?"))
    assert (countered.rejections, bare.rejections, plain.rejections) == (1, 0, 0)
    countered.hear(offer(126.0, "Still too high."))  # the same standing offer is rejected once
    assert countered.rejections == 1


def test_a_credible_final_offer_is_taken_once_a_broken_one_never_again() -> None:
    sure = dataclasses.replace(BASE, credibility=1.0)
    s = seller(sure)
    s.hear(offer(100.0))
    s.hear(offer(110.0, "This is my final offer: $110."))
    assert s.decide(turn(3), 110.0).kind == "accept"  # inside the reservation, believed
    opener = seller(sure)
    opener.hear(offer(110.0, "This is my final offer: $110."))  # an opening called final shows nothing
    assert opener.decide(turn(1), 110.0).kind == "offer"
    opener.hear(offer(115.0, "This is my final offer: $115."))  # ...and moving after it breaks its word
    assert opener.finals_broken and opener.decide(turn(3), 115.0).kind == "offer"
    doubted = seller(dataclasses.replace(BASE, credibility=0.0))
    doubted.hear(offer(100.0))
    doubted.hear(offer(110.0, "Final offer: $110."))
    assert doubted.decide(turn(3), 110.0).kind == "offer"
    doubted.hear(offer(110.0, "Final offer: $110, I mean it."))  # repeating the phrase re-rolls nothing
    assert doubted.decide(turn(5), 110.0).kind == "offer"
    bluff = seller(dataclasses.replace(BASE, credibility=1.0, bluff_walk=1.0))
    bluff.hear(offer(60.0))
    bluff.hear(offer(90.0, "This is my final offer."))  # beyond the $100 reservation
    assert bluff.decide(turn(3), 90.0).kind == "quit"


def test_patience_a_partner_who_stops_moving_is_left() -> None:
    impatient = seller(dataclasses.replace(BASE, patience_grace=2, patience_rate=1.0))
    impatient.hear(offer(120.0))
    impatient.hear(offer(120.0))
    impatient.hear(offer(120.0))
    assert impatient.stalls == 2 and impatient.decide(turn(5), 120.0).kind == "offer"
    impatient.hear({"said": "Hmm.", "move": "message"})
    assert impatient.stalls == 3 and impatient.decide(turn(7), 120.0).kind == "quit"


def test_never_accepts_beyond_its_reservation_and_never_takes_back_a_concession() -> None:
    s = seller(dataclasses.replace(BASE, credibility=1.0, reciprocity=5.0, rejection_step=1.0))
    s.hear(offer(10.0))
    s.hear(offer(99.0, "Too high. Final offer: $99."))
    assert s.decide(turn(19), 99.0).kind == "offer"
    prices = []
    for t in range(1, 20, 2):
        action = s.decide(turn(t), None)
        prices.append(action.payload["price"])
    assert prices == sorted(prices, reverse=True) and min(prices) >= 100.0


def test_a_type_draws_its_parameters_per_episode() -> None:
    drawn = {round(seller(LISTENING_TYPES["boulware"], seed).exponent, 4) for seed in range(6)}
    assert len(drawn) == 6 and all(0.15 <= e <= 0.4 for e in drawn)
    with pytest.raises(ValueError, match="credibility"):
        dataclasses.replace(BASE, credibility=1.5)
    with pytest.raises(ValueError, match="exponent"):
        dataclasses.replace(BASE, exponent=(2.0, 1.0))


SCENARIO = CraigslistScenario(
    "t", "bike", "Bike", ("a", "b"), listing_price=400.0, buyer_target=280.0, seller_reservation=300.0
)


def play(buyer, seed: int = 3) -> float:
    seller_agent = make_code_agent("boulware", seed=seed)
    result = asyncio.run(run_episode(CraigslistEnv(), {"buyer": buyer, "seller": seller_agent}, SCENARIO))
    return result.outcome.roles["buyer"].reward


def test_in_a_real_episode_a_buyer_who_states_its_maximum_never_gets_below_it() -> None:
    """Through the environment's relays: the seller hears what the buyer says, not only its offers."""
    quiet = [play(ScriptedBuyer(BuyerScript(), seed), seed) for seed in range(6)]
    loud = [play(ScriptedBuyer(BuyerScript(states_limit=True), seed), seed) for seed in range(6)]
    assert sum(loud) == 0.0 < sum(quiet)  # "my maximum is $400" makes the listing the floor: reward 0
