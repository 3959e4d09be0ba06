"""Craigslist and Marketplace share one price haggle (environments/socialrl/price_offers.py): both read,
check and apply offers identically, so a bad price is rejected the same way by both."""

from __future__ import annotations

import math

import pytest

from environments.core.base import Environment, ParseError
from environments.core.events import RAW_TEXT, Action, Notification, NotificationKind
from environments.socialrl.craigslist import CraigslistEnv, CraigslistScenario
from environments.socialrl.marketplace import MarketplaceEnv, MarketplaceScenario
from environments.socialrl.price_offers import MAX_PRICE, PriceMoves, check_offer_price

CRAIGSLIST = CraigslistScenario(
    scenario_id="c",
    category="bike",
    title="Bike",
    description=("a", "b"),
    listing_price=200.0,
    buyer_target=140.0,
    max_turns=6,
)
MARKETPLACE = MarketplaceScenario(
    scenario_id="m",
    product="Pens",
    listed_price=200.0,
    buyer_reservation=180.0,
    seller_reservation=120.0,
    max_turns=6,
)


def fresh(env_type: type[Environment]) -> Environment:
    env = env_type(max_invalid_retries=3)
    env.reset(CRAIGSLIST if env_type is CraigslistEnv else MARKETPLACE)
    return env


def invalid_reason(env: Environment, action: Action) -> str | None:
    """The reason the environment gives for refusing `action`, or None when it accepts it."""
    events = env.step(action)
    notes = [e for e in events if isinstance(e, Notification) and e.kind == NotificationKind.INVALID_ACTION]
    return notes[0].data["reason"] if notes else None


BAD_PRICES = [
    (True, "must be a number"),
    (False, "must be a number"),
    ("120", "must be a number"),
    (None, "must be a number"),
    ([120], "must be a number"),
    (math.nan, "must be a finite number"),
    (math.inf, "must be a finite number"),
    (-math.inf, "must be a finite number"),
    (-5, "must be more than 0"),
    (0, "must be more than 0"),
    (0.0, "must be more than 0"),
    (MAX_PRICE * 1.5, "must be at most 1,000,000,000"),
    (1e308, "must be at most 1,000,000,000"),
]


@pytest.mark.parametrize(("price", "words"), BAD_PRICES, ids=[repr(p) for p, _ in BAD_PRICES])
def test_both_environments_reject_the_same_bad_offer_price_with_the_same_reason(price: object, words: str) -> None:
    reasons = {}
    for env_type in (CraigslistEnv, MarketplaceEnv):
        env = fresh(env_type)
        before = env.awaiting
        reasons[env_type.env_id] = invalid_reason(env, Action("buyer", env_type.moves.offer, "", {"price": price}))
        assert env.invalid_counts == {"buyer": 1, "seller": 0}
        assert env.awaiting == before  # the buyer is asked again; nothing else changed
        assert not env.done
    assert reasons["craigslist-v0"] == reasons["marketplace-v0"] == check_offer_price(price)
    assert words in reasons["craigslist-v0"]


@pytest.mark.parametrize("price", [0.01, 1, 150.0, MAX_PRICE])
def test_both_environments_accept_the_same_good_offer_price(price: float) -> None:
    for env_type in (CraigslistEnv, MarketplaceEnv):
        env = fresh(env_type)
        assert invalid_reason(env, Action("buyer", env_type.moves.offer, "", {"price": price})) is None
        assert env.invalid_counts == {"buyer": 0, "seller": 0}
        moves = env_type.moves
        assert env.awaiting["seller"] == (moves.message, moves.offer, moves.walk_away, moves.accept, moves.reject)


@pytest.mark.parametrize(
    "text", ["OFFER -5", "OFFER $0", "OFFER 1e308", "OFFER 1,50", "OFFER $2000000000", "OFFER nan", "OFFER"]
)
def test_both_parsers_refuse_the_same_offer_text_with_the_same_message(text: str) -> None:
    errors = [env_type().parse("buyer", text) for env_type in (CraigslistEnv, MarketplaceEnv)]
    assert all(isinstance(error, ParseError) for error in errors), errors
    assert errors[0] == errors[1]


def test_accepting_a_price_other_than_the_standing_one_is_refused_alike() -> None:
    for env_type in (CraigslistEnv, MarketplaceEnv):
        moves = env_type.moves
        env = fresh(env_type)
        env.step(Action("buyer", moves.offer, "", {"price": 150.0}))
        for wrong in (149.0, True, math.nan):
            reason = invalid_reason(env, Action("seller", moves.accept, "", {"price": wrong}))
            assert reason == f"the standing offer is $150, not ${wrong}"
        assert env.step(Action("seller", RAW_TEXT, "Deal.\nACCEPT"))[-1].kind == NotificationKind.EPISODE_END
        assert env.outcome().deal == {"price": 150.0} and env.outcome().metrics["ending"] == "deal"


def test_walking_away_ends_without_a_deal_in_each_environment_s_words() -> None:
    for env_type, ending in ((CraigslistEnv, "quit"), (MarketplaceEnv, "ended")):
        env = fresh(env_type)
        events = env.step(Action("buyer", env_type.moves.walk_away, "bye"))
        assert env.done and not env.outcome().agreement and env.outcome().metrics["ending"] == ending
        assert events[0].text == f"The buyer says: bye\n{env_type.moves.walk_away_note}"


@pytest.mark.parametrize(
    ("changes", "words"),
    [({"message": ""}, "message must be a non-empty"), ({"reject": "offer"}, "must be distinct")],
)
def test_price_moves_are_checked(changes: dict[str, str], words: str) -> None:
    names = {k: getattr(CraigslistEnv.moves, k) for k in CraigslistEnv.moves.__dataclass_fields__}
    with pytest.raises(ValueError, match=words):
        PriceMoves(**{**names, **changes})
